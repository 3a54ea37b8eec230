// `libtorch-native`: LibTorch executing a whole graph itself (Deep500's native executors). The
// graph is translated once into a sequence of ATen calls on at::Tensors -- the functional
// operators a PyTorch model calls (conv2d, batch_norm, matmul, ...) -- and a
// training step is the framework's own: weights are leaf tensors requiring gradients, the loss's
// backward() runs LibTorch's autograd, gradients accumulate in .grad() over micro-batches. d500
// feeds inputs (at::from_blob on its buffers) and reads outputs and gradients, untimed. Its
// native optimizers are torch::optim's, over the same leaf tensors.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/version.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/blas/blas_backend.hpp"
#include "backends/conv_geom.hpp"
#include "backends/graph_ops.hpp"
#include "backends/libtorch/libtorch_backend.hpp"
#include "backends/libtorch/libtorch_native_ops.hpp"
#include "backends/optimizer.hpp"
#include "common/error.hpp"
#include "common/node_rank.hpp"
#include "common/random.hpp"
#ifdef D500_HAVE_CUDA
#include "backends/cuda/cuda_common.hpp"  // the device memory in use, measured as the cuda backend measures it
#endif

namespace d500 {
namespace {

using Tensors = std::vector<at::Tensor>;
using I = std::int64_t;

at::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::F32: return at::kFloat;
    case DType::I64: return at::kLong;
    case DType::I32: return at::kInt;
    case DType::Bool: return at::kBool;
    default: throw Error(std::string("libtorch-native: no ATen type for ") + dtype_name(t));
  }
}

// One node as ATen calls: inputs (undefined where absent) to outputs. `train`: the pass.
using Op = std::function<Tensors(const Node&, const Tensors&, const Graph&, bool train)>;

// The shape of node n's output j, as the graph knows it statically.
Shape out_shape(const Graph& g, const Node& n, std::size_t j = 0) { return g.info(n.out[j]).shape; }

// Elementwise: the unary operators, arithmetic, comparisons, Where, Cast.
void add_elementwise_ops(std::map<std::string, Op>& t) {
  auto unary = [&](const char* name, at::Tensor (*f)(const at::Tensor&)) {
    t[name] = [f](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{f(in[0])}; };
  };
  unary("Relu", at::relu);
  unary("Sigmoid", at::sigmoid);
  unary("Tanh", at::tanh);
  unary("HardSwish", at::hardswish);
  unary("Sqrt", at::sqrt);
  unary("Erf", at::erf);
  unary("Exp", at::exp);
  unary("Log", at::log);
  unary("Neg", at::neg);
  unary("Abs", at::abs);
  unary("Reciprocal", at::reciprocal);
  unary("Not", at::logical_not);
  t["LeakyRelu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::leaky_relu(in[0], n.attr_f("alpha", 0.01))};
  };
  t["HardSigmoid"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::clamp(in[0] * n.attr_f("alpha", 0.2) + n.attr_f("beta", 0.5), 0.0, 1.0)};
  };
  t["Clip"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    c10::optional<at::Scalar> lo, hi;
    if (g.opset < 11) {
      if (n.has("min")) lo = n.attr_f("min", 0);
      if (n.has("max")) hi = n.attr_f("max", 0);
    } else {
      if (in.size() > 1 && in[1].defined()) lo = in[1].item<float>();
      if (in.size() > 2 && in[2].defined()) hi = in[2].item<float>();
    }
    if (!lo && !hi) return Tensors{in[0]};
    return Tensors{at::clamp(in[0], lo, hi)};
  };
  t["Add"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::add(in[0], in[1])}; };
  t["Sub"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::sub(in[0], in[1])}; };
  t["Mul"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::mul(in[0], in[1])}; };
  t["Div"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    if (!at::isFloatingType(in[0].scalar_type())) return Tensors{at::div(in[0], in[1], "trunc")};
    return Tensors{at::div(in[0], in[1])};
  };
  t["Pow"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    return Tensors{at::pow(in[0], in[1].to(in[0].scalar_type()))};
  };
  t["Mod"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{n.attr_i("fmod", 0) ? at::fmod(in[0], in[1]) : at::remainder(in[0], in[1])};
  };
  t["Equal"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::eq(in[0], in[1])}; };
  t["Less"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::lt(in[0], in[1])}; };
  t["Greater"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::gt(in[0], in[1])}; };
  t["LessOrEqual"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::le(in[0], in[1])}; };
  t["GreaterOrEqual"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    return Tensors{at::ge(in[0], in[1])};
  };
  t["Where"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    return Tensors{at::where(in[0], in[1], in[2])};
  };
  t["Cast"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{in[0].to(scalar_type(static_cast<DType>(n.attr_i("to", 1))))};
  };
}

// Convolutions, matrix products, pooling.
void add_product_and_pooling_ops(std::map<std::string, Op>& t) {
  t["Conv"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    if (in[0].dim() == 5) return native::window3d(n, in);
    const bool one_d = in[0].dim() == 3;
    const ConvGeom c = conv_geom(n, in[0].sizes().vec(), in[1].size(0));
    at::Tensor x = one_d ? in[0].unsqueeze(2) : in[0], w = one_d ? in[1].unsqueeze(2) : in[1];
    if (c.pt != c.pb || c.pl != c.pr) {  // ATen pads symmetrically: pad first
      x = at::constant_pad_nd(x, {c.pl, c.pr, c.pt, c.pb}, 0);
    }
    const bool sym = c.pt == c.pb && c.pl == c.pr;
    // at::conv2d, as nn.Conv2d calls it: on autocast's list on the CPU too (at::convolution is on
    // the GPU's only), so that math = "bf16" reaches it on either.
    at::Tensor y = at::conv2d(x, w, in.size() > 2 ? c10::optional<at::Tensor>(in[2]) : c10::nullopt, {c.sh, c.sw},
                              sym ? std::vector<I>{c.pt, c.pl} : std::vector<I>{0, 0}, {c.dh, c.dw}, c.groups);
    (void)g;
    return Tensors{one_d ? y.squeeze(2) : y};
  };
  t["ConvTranspose"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    if (in[0].dim() != 4)
      throw Error("libtorch-native: " + n.label() + ": only 2-D transposed convolutions are translated");
    const Shape ys = out_shape(g, n);
    const ConvGeom c = conv_geom(n, ys, in[0].size(1));
    if (c.pt != c.pb || c.pl != c.pr)
      throw Error("libtorch-native: " + n.label() + ": asymmetric padding is not translated");
    const I oh = ys[2] - ((in[0].size(2) - 1) * c.sh - 2 * c.pt + c.dh * (c.kh - 1) + 1);
    const I ow = ys[3] - ((in[0].size(3) - 1) * c.sw - 2 * c.pl + c.dw * (c.kw - 1) + 1);
    return Tensors{at::conv_transpose2d(in[0], in[1], in.size() > 2 ? c10::optional<at::Tensor>(in[2]) : c10::nullopt,
                                        {c.sh, c.sw}, {c.pt, c.pl}, {oh, ow}, c.groups, {c.dh, c.dw})};
  };
  t["Gemm"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const at::Tensor a = n.attr_i("transA", 0) ? in[0].t() : in[0], b = n.attr_i("transB", 0) ? in[1].t() : in[1];
    const double alpha = n.attr_f("alpha", 1.0), beta = n.attr_f("beta", 1.0);
    if (in.size() > 2 && in[2].defined()) return Tensors{at::addmm(in[2], a, b, beta, alpha)};
    return Tensors{alpha == 1.0 ? at::mm(a, b) : at::mm(a, b) * alpha};
  };
  t["MatMul"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::matmul(in[0], in[1])}; };
  t["MaxPool"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    if (in[0].dim() == 5) return native::window3d(n, in);
    const bool one_d = in[0].dim() == 3;
    at::Tensor x = one_d ? in[0].unsqueeze(2) : in[0];
    const ConvGeom c = conv_geom(n, in[0].sizes().vec(), in[0].size(1));
    // ATen pads symmetrically, by at most half the window: else pad first.
    const bool sym = c.pt == c.pb && c.pl == c.pr && 2 * c.pt <= c.kh && 2 * c.pl <= c.kw;
    if (!sym) x = at::constant_pad_nd(x, {c.pl, c.pr, c.pt, c.pb}, -std::numeric_limits<double>::infinity());
    at::Tensor y =
        at::max_pool2d(x, {c.kh, c.kw}, {c.sh, c.sw}, sym ? std::vector<I>{c.pt, c.pl} : std::vector<I>{0, 0},
                       {c.dh, c.dw}, n.attr_i("ceil_mode", 0) != 0);
    if (one_d) y = y.squeeze(2);
    if (y.sizes().vec() != out_shape(g, n))
      throw Error("libtorch-native: " + n.label() + ": ATen's ceil mode gives another size than ONNX's");
    return Tensors{y};
  };
  t["AveragePool"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    if (in[0].dim() == 5) return native::window3d(n, in);
    const bool one_d = in[0].dim() == 3;
    const ConvGeom c = conv_geom(n, in[0].sizes().vec(), in[0].size(1));
    const bool ceil = n.attr_i("ceil_mode", 0) != 0, include = n.attr_i("count_include_pad", 0) != 0;
    const at::Tensor x = one_d ? in[0].unsqueeze(2) : in[0];
    at::Tensor y;
    if (c.pt == c.pb && c.pl == c.pr && 2 * c.pt <= c.kh && 2 * c.pl <= c.kw) {
      y = at::avg_pool2d(x, {c.kh, c.kw}, {c.sh, c.sw}, {c.pt, c.pl}, ceil, include);
    } else {
      // ATen pads symmetrically, by at most half the window: pad with zeros first, then divide
      // the window sums by the taps that are real (or, counting padding, inside the padded
      // image: what ATen counts).
      const std::vector<I> pads{c.pl, c.pr, c.pt, c.pb};
      y = at::avg_pool2d(at::constant_pad_nd(x, pads, 0), {c.kh, c.kw}, {c.sh, c.sw}, {0, 0}, ceil, true);
      if (!include)
        y = y / at::avg_pool2d(at::constant_pad_nd(at::ones_like(x), pads, 0), {c.kh, c.kw}, {c.sh, c.sw}, {0, 0}, ceil,
                               true);
    }
    if (one_d) y = y.squeeze(2);
    if (y.sizes().vec() != out_shape(g, n))
      throw Error("libtorch-native: " + n.label() + ": ATen's ceil mode gives another size than ONNX's");
    return Tensors{y};
  };
  t["GlobalAveragePool"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    std::vector<I> dims;
    for (I d = 2; d < in[0].dim(); ++d) dims.push_back(d);
    return Tensors{in[0].mean(dims, true)};
  };
  t["GlobalMaxPool"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    std::vector<I> dims;
    for (I d = 2; d < in[0].dim(); ++d) dims.push_back(d);
    return Tensors{in[0].amax(dims, true)};
  };
}

// Normalisations and softmaxes.
void add_normalization_ops(std::map<std::string, Op>& t) {
  t["BatchNormalization"] = [](const Node& n, const Tensors& in, const Graph&, bool train) {
    const bool training = train || n.attr_i("training_mode", 0) != 0;
    // PyTorch's momentum weighs the new statistics; ONNX's the old ones.
    const double momentum = n.attr_f("momentum", 0.9), eps = n.attr_f("epsilon", 1e-5);
    if (!training) return Tensors{at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 1 - momentum, eps, false)};
    // Training: the batch's statistics; the model's running statistics stay untouched (as in
    // d500's executor). A training-mode model may ask for them updated, as ONNX defines it:
    // with the biased batch variance (PyTorch's own update uses the unbiased one).
    Tensors out{at::batch_norm(in[0], in[1], in[2], at::Tensor(), at::Tensor(), true, 1 - momentum, eps, false)};
    if (n.out.size() > 1) {
      std::vector<I> dims{0};
      for (I d = 2; d < in[0].dim(); ++d) dims.push_back(d);
      const auto [var, mean] = at::var_mean(in[0].detach(), dims, false);
      out.push_back(in[3] * momentum + mean * (1 - momentum));
      out.push_back(in[4] * momentum + var * (1 - momentum));
    }
    return out;
  };
  t["LayerNormalization"] = [](const Node& n, const Tensors& in, const Graph& g, bool train) {
    const auto axis = n.attr_i("axis", -1);
    const std::vector<I> norm(in[0].sizes().begin() + axis, in[0].sizes().end());
    const at::Tensor b = in.size() > 2 && in[2].defined() ? in[2].reshape(norm) : at::Tensor();
    if (n.out.size() == 1 || (n.out[1] < 0 && (n.out.size() < 3 || n.out[2] < 0)))
      return Tensors{at::layer_norm(in[0], norm, in[1].reshape(norm), b, n.attr_f("epsilon", 1e-5))};
    if (train) {
      // In training, Mean and InvStdDev differentiable (ATen's native_layer_norm returns them
      // without a gradient): computed again by autograd's ops, as d500's reference derives them.
      std::vector<I> dims;
      for (I d = axis; d < in[0].dim(); ++d) dims.push_back(d);
      const at::Tensor mean = in[0].mean(dims, true);
      const at::Tensor inv = ((in[0] - mean).pow(2).mean(dims, true) + n.attr_f("epsilon", 1e-5)).rsqrt();
      Tensors out{at::layer_norm(in[0], norm, in[1].reshape(norm), b, n.attr_f("epsilon", 1e-5))};
      for (std::size_t j = 1; j < n.out.size(); ++j)
        out.push_back(n.out[j] >= 0 ? (j == 1 ? mean : inv).reshape(out_shape(g, n, j)) : at::Tensor());
      return out;
    }
    // Mean and inverse standard deviation asked for too: the native op that returns them.
    auto r =
        at::native_layer_norm(in[0], norm, in[1].reshape(norm),
                              b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, n.attr_f("epsilon", 1e-5));
    Tensors out{std::get<0>(r)};
    for (std::size_t j = 1; j < n.out.size(); ++j)
      out.push_back(n.out[j] >= 0 ? (j == 1 ? std::get<1>(r) : std::get<2>(r)).reshape(out_shape(g, n, j))
                                  : at::Tensor());
    return out;
  };
  auto softmax = [](bool log) {
    return [log](const Node& n, const Tensors& in, const Graph&, bool) {
      const at::Tensor x = in[0].reshape({n.attr_i("_outer", 1), n.attr_i("_len", 1), n.attr_i("_inner", 1)});
      return Tensors{(log ? at::log_softmax(x, 1) : at::softmax(x, 1)).reshape(in[0].sizes())};
    };
  };
  t["Softmax"] = softmax(false);
  t["LogSoftmax"] = softmax(true);
}

// Views and the operators that move data (transpose, concat, split, slice, gather, pad, expand), reductions, the
// training loss.
void add_shape_and_loss_ops(std::map<std::string, Op>& t) {
  // Views: the output's shape is known statically.
  for (const char* v : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    t[v] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
      return Tensors{in[0].reshape(out_shape(g, n))};
    };
  for (const char* v : {"Identity", "Dropout"})
    t[v] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{in[0]}; };
  t["Transpose"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{in[0].permute(n.attrs.at("perm").ints)};
  };
  t["Concat"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::cat(in, n.attr_i("axis", 0))};
  };
  t["Split"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    auto parts = at::split_with_sizes(in[0], n.attrs.at("split").ints, n.attr_i("axis", 0));
    return Tensors(parts.begin(), parts.end());
  };
  t["Slice"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    at::Tensor x = in[0];
    const auto& starts = n.attrs.at("_starts").ints;
    const auto& steps = n.attrs.at("_steps").ints;
    const Shape ys = g.info(n.out[0]).shape;
    for (std::size_t a = 0; a < starts.size(); ++a) {
      const I dim = x.size(static_cast<I>(a));
      if (steps[a] > 0) {
        x = x.slice(static_cast<I>(a), starts[a], starts[a] + (ys[a] - 1) * steps[a] + 1, steps[a]);
      } else {  // a negative step: flipped, then a positive one
        x = x.flip(static_cast<I>(a))
                .slice(static_cast<I>(a), dim - 1 - starts[a], dim - 1 - starts[a] + (ys[a] - 1) * -steps[a] + 1,
                       -steps[a]);
      }
    }
    return Tensors{x};
  };
  t["Gather"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    const I axis = n.attr_i("axis", 0), dim = in[0].size(axis);
    const at::Tensor idx = in[1].to(at::kLong).flatten();
    const at::Tensor fixed = at::where(idx < 0, idx + dim, idx);
    return Tensors{at::index_select(in[0], axis, fixed).reshape(out_shape(g, n))};
  };
  t["Pad"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const auto& pads = n.attrs.at("_pads").ints;
    const std::size_t r = pads.size() / 2;
    std::vector<I> aten;  // ATen lists the last axis first: (begin, end) pairs
    for (std::size_t d = r; d-- > 0;) aten.push_back(pads[d]), aten.push_back(pads[r + d]);
    const std::string mode = n.attr_s("mode", "constant");
    if (mode == "constant") return Tensors{at::constant_pad_nd(in[0], aten, n.attr_f("_value", 0))};
    // reflect and replicate pad only the spatial axes (beyond batch and channels)
    while (aten.size() > 2 * (r - 2) && aten.size() >= 2 && aten[aten.size() - 1] == 0 && aten[aten.size() - 2] == 0)
      aten.resize(aten.size() - 2);
    return Tensors{at::pad(in[0], aten, mode == "edge" ? "replicate" : "reflect")};
  };
  t["Expand"] = [](const Node& n, const Tensors& in, const Graph& g, bool) {
    return Tensors{in[0].expand(out_shape(g, n))};
  };
  auto reduce = [](bool mean) {
    return [mean](const Node& n, const Tensors& in, const Graph&, bool) {
      const std::vector<I> axes = n.attrs.at("axes").ints;
      if (axes.empty()) return Tensors{in[0]};
      const bool keep = n.attr_i("keepdims", 1) != 0;
      return Tensors{mean ? in[0].mean(axes, keep) : in[0].sum(axes, keep)};
    };
  };
  t["ReduceMean"] = reduce(true);
  t["ReduceSum"] = reduce(false);
  t["SoftmaxCrossEntropyLoss"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const std::string red = n.attr_s("reduction", "mean");
    const I r = red == "mean" ? at::Reduction::Mean : red == "sum" ? at::Reduction::Sum : at::Reduction::None;
    const I ignore = n.has("ignore_index") ? n.attr_i("ignore_index", 0) : std::numeric_limits<I>::min();
    const at::Tensor lp = at::log_softmax(in[0], 1);
    const at::Tensor w = in.size() > 2 ? in[2] : at::Tensor();
    return Tensors{at::nll_loss_nd(lp, in[1].to(at::kLong), w, r, ignore), lp};
  };
}

// Every node's translation, by operator: the families above in one table.
const std::map<std::string, Op>& ops() {
  static const std::map<std::string, Op> table = [] {
    std::map<std::string, Op> t;
    add_elementwise_ops(t);
    add_product_and_pooling_ops(t);
    add_normalization_ops(t);
    add_shape_and_loss_ops(t);
    native::add_breadth_ops(t);
    return t;
  }();
  return table;
}

// What the translation cannot express, known from the shapes (so that plans refuse it).
std::string untranslatable(const Node& n, const Graph& g) {
  if (!ops().count(n.op)) return "it has no ATen translation";
  if ((n.op == "Conv" || n.op == "MaxPool" || n.op == "AveragePool") && g.info(n.in[0]).shape.size() == 5)
    return native::window3d_untranslatable(n);
  if (n.op == "Pad" && n.attr_s("mode", "constant") != "constant") {
    const auto& pads = n.attrs.at("_pads").ints;
    const std::size_t r = pads.size() / 2;
    for (std::size_t d = 0; d < std::min<std::size_t>(r, 2); ++d)
      if (pads[d] || pads[r + d]) return "ATen's reflect and replicate padding pad only the spatial axes";
    if (r < 3 || r > 5) return "ATen's reflect and replicate padding need 3-D to 5-D tensors";
  }
  if (n.op == "ConvTranspose") {
    const Shape& x = g.info(n.in[0]).shape;
    if (x.size() != 4) return "only 2-D transposed convolutions are translated";
    const ConvGeom c = conv_geom(n, g.info(n.out[0]).shape, x[1]);
    if (c.pt != c.pb || c.pl != c.pr) return "its padding is asymmetric";
  }
  if ((n.op == "MaxPool" || n.op == "AveragePool") && n.attr_i("ceil_mode", 0)) {
    // ATen drops a last window that would start in the trailing padding; ONNX keeps it.
    const Shape& x = g.info(n.in[0]).shape;
    const ConvGeom c = conv_geom(n, x, x[1]);
    const bool sym = c.pt == c.pb && c.pl == c.pr;
    auto aten = [&](I in, I k, I d, I s, I pb, I pe) {
      const I pad = sym ? pb : 0, len = sym ? in : in + pb + pe;
      const I span = len + 2 * pad - d * (k - 1) - 1;
      I out = (span + s - 1) / s + 1;
      if ((out - 1) * s >= len + pad) --out;
      return out;
    };
    if (aten(c.h, c.kh, c.dh, c.sh, c.pt, c.pb) != c.p || aten(c.w, c.kw, c.dw, c.sw, c.pl, c.pr) != c.q)
      return "ATen's ceil mode gives it another output size than ONNX's";
  }
  return "";
}

// LibTorch's arithmetic and cuDNN's choice on a GPU, as a PyTorch user sets them
// (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, cudnn.benchmark,
// cudnn.deterministic): process-wide switches, so set again before every pass of the runner
// that wants them (a job may run points of several settings one after another).
struct TorchMath {
  bool tf32 = false, bf16 = false, channels_last = false, benchmark = false, deterministic = true;
  static TorchMath of(const RunnerSpec& s) {
    TorchMath m;
    m.tf32 = s.math == "tf32";
    m.bf16 = s.math == "bf16";
    m.channels_last = s.memory_format == "channels_last";
    m.benchmark = s.cudnn_algorithms == "find";
    m.deterministic = s.cudnn_algorithms.empty() || s.cudnn_algorithms == "deterministic";
    return m;
  }
  void apply() const {
    at::globalContext().setAllowTF32CuDNN(tf32);  // LibTorch's own default is true: strict unless asked
    at::globalContext().setAllowTF32CuBLAS(tf32);
    at::globalContext().setBenchmarkCuDNN(benchmark);
    at::globalContext().setDeterministicCuDNN(deterministic);
  }
  std::string words(bool gpu) const {
    return std::string(bf16   ? "bf16 autocast (activations in bfloat16, weights float32)"
                       : tf32 ? "TF32 allowed in cuDNN and cuBLAS"
                       : gpu  ? "strict float32 (TF32 off)"
                              : "float32") +
           (channels_last ? ", channels_last" : ", NCHW") +
           (!gpu            ? ""
            : benchmark     ? ", cudnn.benchmark"
            : deterministic ? ", deterministic cuDNN"
                            : ", cuDNN's heuristic choice");
  }
};

// torch.autocast(device, dtype=torch.bfloat16) around a forward pass, on the GPU or the CPU: on at
// construction, off and its cast cache cleared at the end, as leaving PyTorch's outermost
// autocast region does.
class Bf16Autocast {
 public:
  Bf16Autocast(bool on, bool gpu) : on_(on), gpu_(gpu) {
    if (!on_) return;
    set(true);
    at::autocast::increment_nesting();
  }
  ~Bf16Autocast() {
    if (!on_) return;
    set(false);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  void set(bool enabled) const {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    const at::DeviceType d = gpu_ ? at::kCUDA : at::kCPU;
    if (enabled) at::autocast::set_autocast_dtype(d, at::kBFloat16);
    at::autocast::set_autocast_enabled(d, enabled);
#else
    if (gpu_) {
      if (enabled) at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(enabled);
    } else {
      if (enabled) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(enabled);
    }
#endif
  }
  bool on_, gpu_;
};

// Waits until the work queued on the device's current stream is done: a timed call on a GPU
// returns when its results are there, as on the CPU. Through c10's device interface, so that it
// compiles against a LibTorch without CUDA (where no device is ever CUDA).
void synchronize(const at::Device& d) {
  if (!d.is_cuda()) return;
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(d.type());
  impl->synchronizeStream(impl->getStream(d));
}

// PyTorch's torch.optim.SGD as it runs on a GPU by default (foreach: its _multi_tensor_sgd):
// each arithmetic step one multi-tensor call (at::_foreach_*) over every parameter, where
// torch::optim's C++ SGD launches a few kernels per parameter (ResNet-50: 161 of them). The same
// rule: d = g + weight_decay p; momentum's buffer b = g's first d, then momentum b + d; Nesterov
// d + momentum b, else b; p -= lr d.
class ForeachSgd {
 public:
  ForeachSgd(std::vector<at::Tensor> params, double momentum, double weight_decay, bool nesterov)
      : params_(std::move(params)), bufs_(params_.size()), m_(momentum), wd_(weight_decay), nesterov_(nesterov) {}
  void step(double lr) {
    c10::NoGradGuard no_grad;
    Tensors ps, d, bufs, bufs_d;
    std::vector<std::size_t> at;
    for (std::size_t k = 0; k < params_.size(); ++k) {
      const at::Tensor& g = params_[k].grad();
      if (!g.defined()) continue;
      ps.push_back(params_[k]);
      d.push_back(g);
      at.push_back(k);
    }
    if (ps.empty()) return;
    if (wd_ != 0) d = at::_foreach_add(d, ps, wd_);
    if (m_ != 0) {
      Tensors b(d.size());
      for (std::size_t i = 0; i < d.size(); ++i) {
        at::Tensor& buf = bufs_[at[i]];
        if (!buf.defined()) {
          buf = d[i].clone().detach();  // the first step's buffer: the step's own direction
        } else {
          bufs.push_back(buf);
          bufs_d.push_back(d[i]);
        }
        b[i] = buf;
      }
      if (!bufs.empty()) {
        at::_foreach_mul_(bufs, m_);
        at::_foreach_add_(bufs, bufs_d, 1.0);
      }
      d = nesterov_ ? at::_foreach_add(d, b, m_) : b;
    }
    at::_foreach_add_(ps, d, -lr);
  }
  // The momentum buffers, in a checkpoint of the optimizer's state (absent ones: no step yet).
  void save(torch::serialize::OutputArchive& a) const {
    for (std::size_t k = 0; k < bufs_.size(); ++k)
      if (bufs_[k].defined()) a.write("momentum_buffer_" + std::to_string(k), bufs_[k], /*is_buffer=*/true);
  }
  void load(torch::serialize::InputArchive& a) {
    for (std::size_t k = 0; k < bufs_.size(); ++k) {
      at::Tensor t;
      if (a.try_read("momentum_buffer_" + std::to_string(k), t, /*is_buffer=*/true))
        bufs_[k] = t.to(params_[k].device());
      else
        bufs_[k] = at::Tensor();
    }
  }

 private:
  Tensors params_, bufs_;
  double m_, wd_;
  bool nesterov_;
};

// torch::optim's optimizer for an OptimizerSpec (d500's names mapped to LibTorch's options); on
// a GPU, SGD's family as PyTorch's torch.optim runs it there (ForeachSgd). `deferred`: the
// runner's defer_waits, under which step() returns without waiting for the device.
class TorchOptimizer final : public Optimizer {
 public:
  TorchOptimizer(const OptimizerSpec& s, std::vector<at::Tensor> params, at::Device device,
                 std::shared_ptr<const bool> deferred)
      : s_(s), device_(device), deferred_(std::move(deferred)) {
    if (const std::string why = check_optimizer(s); !why.empty()) throw Error(why);
    namespace o = torch::optim;
    const std::string& n = s.name;
    const bool sgd_family = n == "sgd" || n == "momentum" || n == "nesterov";
    if (sgd_family && device_.is_cuda())
      foreach_ = std::make_unique<ForeachSgd>(params, n == "sgd" ? 0.0 : s.momentum, s.weight_decay, n == "nesterov");
    else if (sgd_family)
      opt_ = std::make_unique<o::SGD>(params, o::SGDOptions(s.lr)
                                                  .momentum(n == "sgd" ? 0.0 : s.momentum)
                                                  .nesterov(n == "nesterov")
                                                  .weight_decay(s.weight_decay));
    else if (n == "adam")
      opt_ = std::make_unique<o::Adam>(
          params, o::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
    else if (n == "adamw")
      opt_ = std::make_unique<o::AdamW>(
          params, o::AdamWOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
    else if (n == "adagrad")
      opt_ = std::make_unique<o::Adagrad>(params, o::AdagradOptions(s.lr).eps(s.eps).weight_decay(s.weight_decay));
    else
      opt_ = std::make_unique<o::RMSprop>(
          params, o::RMSpropOptions(s.lr).alpha(s.alpha).eps(s.eps).weight_decay(s.weight_decay).momentum(s.momentum));
  }
  void step(double lr) override {
    if (foreach_) {
      foreach_->step(lr);
    } else {
      for (auto& group : opt_->param_groups()) group.options().set_lr(lr);
      opt_->step();
    }
    if (!*deferred_) synchronize(device_);
  }
  std::string describe() const override {
    if (foreach_)
      return "PyTorch's SGD as torch.optim runs it on a GPU (foreach: multi-tensor at::_foreach_* calls over every "
             "parameter): " +
             describe_optimizer(s_);
    return "LibTorch's torch::optim: " + describe_optimizer(s_);
  }
  std::vector<std::byte> save() const override {
    std::ostringstream out;
    torch::serialize::OutputArchive archive;
    if (foreach_)
      foreach_->save(archive);
    else
      opt_->save(archive);
    archive.save_to(out);
    const std::string b = out.str();
    const auto* p = reinterpret_cast<const std::byte*>(b.data());
    return {p, p + b.size()};
  }
  void load(const std::vector<std::byte>& state) override {
    std::istringstream in(std::string(reinterpret_cast<const char*>(state.data()), state.size()));
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(in);
      if (foreach_)
        foreach_->load(archive);
      else
        opt_->load(archive);
    } catch (const c10::Error& e) {
      throw Error(std::string("LibTorch cannot load the optimizer state (") + std::to_string(state.size()) +
                  " bytes): " + e.what_without_backtrace());
    }
  }

 private:
  OptimizerSpec s_;
  at::Device device_;
  std::shared_ptr<const bool> deferred_;
  std::unique_ptr<ForeachSgd> foreach_;  // on a GPU, SGD's family; else opt_
  std::unique_ptr<torch::optim::Optimizer> opt_;
};

// On a GPU (libtorch-cuda) the graph's constants and the weights live on the device, the inputs
// are copied there when d500 writes them (construction, inputs_changed(): untimed, or the data
// phase of a training step), and forward(), backward() and the native optimizer's step end with
// a wait for the device. d500's side of the weights and gradients (parameter(),
// parameter_gradient(): checkpoints, hashes, d500's own optimizers) are host copies, made when
// asked for; parameters_changed() copies back those handed out since the last forward pass.
class NativeRunner final : public GraphRunner {
 public:
  NativeRunner(const RunnerSpec& s, at::Device device) : s_(s), g_(*s.graph), device_(device), math_(TorchMath::of(s)) {
    if (!device_.is_cuda() && (math_.tf32 || !s.cudnn_algorithms.empty()))
      throw Error("libtorch-native: math = \"tf32\" and cudnn_algorithms are for libtorch-cuda (a GPU's arithmetic)");
    if (device_.is_cuda()) math_.apply();
    at::set_num_threads(s.threads);
    openblas_threads(s.threads);
    if (const std::string why = libtorch_native_check(g_); !why.empty()) throw Error(why);
#ifdef D500_HAVE_CUDA
    // The baseline of its device memory: this device's use before anything of the runner's is
    // there (LibTorch's caching allocator keeps what it reserved, so the use after the run is its peak).
    if (device_.is_cuda()) {
      cuda::check(cudaSetDevice(device_.index()), "cudaSetDevice (LibTorch's device)");
      memory_ = std::make_unique<cuda::DeviceMemoryUse>();
    }
#endif
    // The runner's own copies of the constants; the weights are leaves requiring gradients.
    values_.resize(g_.tensors.size());
    for (const auto& [t, bytes] : g_.constants) {
      const TensorInfo& info = g_.info(t);
      at::Tensor c = at::empty(info.shape, at::TensorOptions().dtype(scalar_type(info.dtype)));
      if (!bytes.empty()) std::memcpy(c.data_ptr(), bytes.data(), bytes.size());
      values_[static_cast<std::size_t>(t)] = device_.is_cuda() ? c.to(device_) : c;
      if (math_.channels_last && c.dim() == 4 && c.is_floating_point())
        values_[static_cast<std::size_t>(t)] =
            values_[static_cast<std::size_t>(t)].contiguous(at::MemoryFormat::ChannelsLast);
    }
    for (int p : s.params) values_[static_cast<std::size_t>(p)].requires_grad_(true);
    const std::set<int> buffers(s.buffers.begin(), s.buffers.end());
    for (const auto& n : g_.nodes)
      running_.push_back(s.training && n.op == "BatchNormalization" && n.in.size() >= 5 && n.out.size() == 1 &&
                         buffers.count(n.in[3]) && buffers.count(n.in[4]));
    for (std::size_t k = 0; k < g_.inputs.size(); ++k) {
      const TensorInfo& info = g_.info(g_.inputs[k]);
      const std::size_t bytes = static_cast<std::size_t>(numel(info.shape)) * dtype_size(info.dtype);
      for (int m = 0; m < std::max(1, s.micro_batches); ++m)
        slices_.push_back(at::from_blob(
            const_cast<std::byte*>(static_cast<const std::byte*>(s.inputs[k])) + static_cast<std::size_t>(m) * bytes,
            info.shape, at::TensorOptions().dtype(scalar_type(info.dtype))));
    }
    // On the CPU with channels_last: each input's channels-last copy, made again whenever d500
    // writes the inputs (a training step's data phase), as a PyTorch loop turns each batch.
    if (!device_.is_cuda() && math_.channels_last)
      for (const auto& h : slices_)
        device_slices_.push_back(h.dim() == 4 ? h.contiguous(at::MemoryFormat::ChannelsLast) : h);
    if (device_.is_cuda()) {
      for (const auto& h : slices_)
        device_slices_.push_back(math_.channels_last && h.dim() == 4
                                     ? h.to(device_).contiguous(at::MemoryFormat::ChannelsLast)
                                     : h.to(device_));
      for (int p : s.params) {
        host_params_.push_back(at::empty(g_.info(p).shape, at::TensorOptions().dtype(at::kFloat)));
        host_grads_.push_back(at::empty(g_.info(p).shape, at::TensorOptions().dtype(at::kFloat)));
      }
      handed_out_.assign(s.params.size(), false);
#ifdef D500_HAVE_CUDA
      // The inputs' host memory page-locked, as d500's executor pins a large one (DeviceMemory::pin):
      // each step's copy goes straight across instead of through the driver's staging buffers,
      // and it may run beside the computation (stage_inputs()).
      for (std::size_t k = 0; k < g_.inputs.size(); ++k) {
        const std::size_t bytes = static_cast<std::size_t>(numel(g_.info(g_.inputs[k]).shape)) *
                                  dtype_size(g_.info(g_.inputs[k]).dtype) *
                                  static_cast<std::size_t>(std::max(1, s.micro_batches));
        if (cudaHostRegister(const_cast<void*>(s.inputs[k]), bytes, cudaHostRegisterPortable) == cudaSuccess)
          pinned_.push_back(s.inputs[k]);
        else
          cudaGetLastError();  // already registered, or no memory to lock: copied as before
      }
#endif
      synchronize(device_);
    }
  }
  ~NativeRunner() override {
#ifdef D500_HAVE_CUDA
    if (device_.is_cuda()) {
      try {
        synchronize(device_);
      } catch (...) {}
      if (beside_) cudaStreamSynchronize(beside_);
      if (beside_done_) cudaEventDestroy(beside_done_);
      if (staged_read_) cudaEventDestroy(staged_read_);
      if (beside_) cudaStreamDestroy(beside_);
      for (cudaEvent_t e : marks_) cudaEventDestroy(e);
      for (const void* h : pinned_) cudaHostUnregister(const_cast<void*>(h));
    }
#endif
  }
  NativeRunner(const NativeRunner&) = delete;
  NativeRunner& operator=(const NativeRunner&) = delete;

  void inputs_changed() override {
    for (std::size_t i = 0; i < device_slices_.size(); ++i)
      if (!device_slices_[i].is_same(slices_[i])) device_slices_[i].copy_(slices_[i]);
    synchronize(device_);
  }

  // On a GPU: a training step's passes and optimizer without waits (GraphRunner::defer_waits),
  // its marks CUDA events on LibTorch's current stream (the default stream, which d500 never
  // changes: on another, the marks say -1).
  bool defer_waits(bool on) override {
    if (!device_.is_cuda()) return false;
    if (!on) synchronize(device_);
    *deferred_ = on;
#ifdef D500_HAVE_CUDA
    if (on && staged_.empty() && s_.training)  // stage_inputs()' device copies, untimed here, as the host slices
      for (const auto& h : slices_) staged_.push_back(at::empty_like(h, h.options().device(device_)));
    if (on && marks_.empty()) {
      marks_.assign(kStepMarks, nullptr);
      for (cudaEvent_t& e : marks_) cuda::check(cudaEventCreate(&e), "cudaEventCreate (libtorch-cuda's step marks)");
    }
#endif
    return true;
  }
  void step_mark(std::size_t i) override {
#ifdef D500_HAVE_CUDA
    if (!*deferred_ || i >= marks_.size()) return;
    if (!on_default_stream()) {
      marks_valid_ = false;
      return;
    }
    if (i == 0) marks_valid_ = true;
    cuda::check(cudaEventRecord(marks_[i], nullptr), "cudaEventRecord (libtorch-cuda's step marks)");
#else
    (void)i;
#endif
  }
  void finish() override { synchronize(device_); }
  // The next batch's host data to a device copy of the runner's own (staged_), on a stream of the
  // runner's beside LibTorch's, from page-locked memory, once LibTorch's stream has taken the last
  // one; inputs_from_stage() waits for it and copies it into the inputs on LibTorch's stream (into
  // channels-last there, as inputs_changed()). Only on LibTorch's default stream, which the event
  // that orders the two is recorded on.
  bool stage_inputs() override {
#ifdef D500_HAVE_CUDA
    if (!*deferred_ || pinned_.size() != g_.inputs.size() || slices_.size() != g_.inputs.size() || !on_default_stream())
      return false;
    if (!beside_) {
      cuda::check(cudaStreamCreateWithFlags(&beside_, cudaStreamNonBlocking),
                  "cudaStreamCreate (libtorch-cuda's copies)");
      cuda::check(cudaEventCreateWithFlags(&beside_done_, cudaEventDisableTiming), "cudaEventCreate");
      cuda::check(cudaEventCreateWithFlags(&staged_read_, cudaEventDisableTiming), "cudaEventCreate");
    }
    if (staged_read_recorded_)
      cuda::check(cudaStreamWaitEvent(beside_, staged_read_, 0), "cudaStreamWaitEvent (libtorch-cuda's next batch)");
    for (std::size_t k = 0; k < slices_.size(); ++k)
      cuda::check(cudaMemcpyAsync(staged_[k].data_ptr(), slices_[k].data_ptr(), slices_[k].nbytes(),
                                  cudaMemcpyHostToDevice, beside_),
                  "cudaMemcpyAsync (libtorch-cuda's next batch)");
    cuda::check(cudaEventRecord(beside_done_, beside_), "cudaEventRecord (libtorch-cuda's next batch)");
    return true;
#else
    return false;
#endif
  }
  void inputs_from_stage() override {
#ifdef D500_HAVE_CUDA
    if (beside_done_) {
      cuda::check(cudaEventSynchronize(beside_done_), "cudaEventSynchronize (libtorch-cuda's next batch)");
      for (std::size_t i = 0; i < device_slices_.size(); ++i) device_slices_[i].copy_(staged_[i]);
      cuda::check(cudaEventRecord(staged_read_, nullptr), "cudaEventRecord (libtorch-cuda's next batch, taken)");
      staged_read_recorded_ = true;
      return;
    }
#endif
    inputs_changed();
  }
  std::int64_t step_mark_ns(std::size_t i, std::size_t j) override {
#ifdef D500_HAVE_CUDA
    if (!*deferred_ || !marks_valid_ || i >= marks_.size() || j >= marks_.size()) return -1;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, marks_[i], marks_[j]) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
#else
    (void)i, (void)j;
    return -1;
#endif
  }

  void forward(int micro) override {
    c10::AutoGradMode grad(s_.training);
    run_nodes(micro, false);
    if (!*deferred_) synchronize(device_);
  }
  // PyTorch's model.eval() under torch.no_grad(): BatchNormalization with its running statistics
  // (a training runner keeping none: with the batch's, as its training passes).
  void infer() override {
    c10::NoGradGuard no_grad;
    run_nodes(0, true);
    synchronize(device_);
  }
  std::vector<float> buffer(std::size_t k) override {
    const at::Tensor b = values_[static_cast<std::size_t>(s_.buffers.at(k))].detach().to(at::kCPU).contiguous();
    return std::vector<float>(b.data_ptr<float>(), b.data_ptr<float>() + b.numel());
  }
  void set_buffer(std::size_t k, std::span<const float> v) override {
    at::Tensor& b = values_[static_cast<std::size_t>(s_.buffers.at(k))];
    if (static_cast<std::int64_t>(v.size()) != b.numel())
      throw Error("libtorch: " + std::to_string(v.size()) + " values for a running statistic of " +
                  std::to_string(b.numel()));
    c10::NoGradGuard no_grad;
    b.copy_(at::from_blob(const_cast<float*>(v.data()), b.sizes(), at::kFloat));
    synchronize(device_);
  }

  void backward(int micro) override {
    if (device_.is_cuda()) math_.apply();
    const int micros = std::max(1, s_.micro_batches);
    if (micro == 0)
      for (int p : s_.params) values_[static_cast<std::size_t>(p)].mutable_grad().reset();
    at::Tensor& loss = values_[static_cast<std::size_t>(s_.loss)];
    armed_ = micro == micros - 1;  // a gradient is final only in the step's last micro-batch
    loss.backward(at::full({}, 1.0 / micros, loss.options()));
    armed_ = false;
    if (!*deferred_) synchronize(device_);
  }

  // Level 3's overlap: a hook after each weight's gradient accumulator (as PyTorch's DDP
  // registers), which runs once autograd has written that weight's .grad for this pass. On the
  // CPU, LibTorch's engine runs a CPU graph's backward on the calling thread, so the scheme's MPI
  // calls stay on it. Not on a GPU: the engine's device threads would call MPI.
  bool on_gradients_ready(GradientsReady f) override {
    if (device_.is_cuda() || !s_.training) return false;
    ready_ = std::move(f);
    if (accumulators_.empty())
      for (std::size_t k = 0; k < s_.params.size(); ++k) {
        // The variable keeps only a weak reference: held here, or the hook goes with it.
        accumulators_.push_back(
            torch::autograd::impl::grad_accumulator(values_[static_cast<std::size_t>(s_.params[k])]));
        accumulators_.back()->add_post_hook(std::make_unique<GradientFinal>(*this, k));
      }
    return true;
  }

  std::vector<double> output(std::size_t i) override {
    return to_doubles(values_[static_cast<std::size_t>(g_.outputs.at(i))]);
  }
  std::vector<double> gradient(std::size_t k) override {
    const at::Tensor& g = values_[static_cast<std::size_t>(s_.params.at(k))].grad();
    if (!g.defined()) return std::vector<double>(static_cast<std::size_t>(numel(g_.info(s_.params[k]).shape)), 0.0);
    return to_doubles(g);
  }
  float* parameter(std::size_t k) override {
    at::Tensor& p = values_[static_cast<std::size_t>(s_.params.at(k))];
    if (!device_.is_cuda()) return p.data_ptr<float>();
    host_params_[k].copy_(p.detach());
    handed_out_[k] = true;
    return host_params_[k].data_ptr<float>();
  }
#ifdef D500_HAVE_CUDA
  std::int64_t device_peak_bytes() const override {
    if (!memory_) return -1;
    cuda::check(cudaSetDevice(device_.index()), "cudaSetDevice (LibTorch's device)");
    return memory_->peak();
  }
#endif
  const float* parameter_value(std::size_t k) override {
    at::Tensor& p = values_[static_cast<std::size_t>(s_.params.at(k))];
    if (!device_.is_cuda()) return p.data_ptr<float>();
    if (!handed_out_[k]) host_params_[k].copy_(p.detach());  // a copy handed out is the newer
    return host_params_[k].data_ptr<float>();
  }
  const float* parameter_gradient(std::size_t k) override {
    const at::Tensor& g = values_[static_cast<std::size_t>(s_.params.at(k))].grad();
    if (!g.defined()) return nullptr;
    if (!device_.is_cuda()) return g.data_ptr<float>();
    host_grads_[k].copy_(g);
    return host_grads_[k].data_ptr<float>();
  }
  void parameters_changed() override {
    if (!device_.is_cuda()) return;
    c10::NoGradGuard no_grad;
    for (std::size_t k = 0; k < handed_out_.size(); ++k)
      if (handed_out_[k]) values_[static_cast<std::size_t>(s_.params[k])].copy_(host_params_[k]);
    std::fill(handed_out_.begin(), handed_out_.end(), false);
    synchronize(device_);
  }
  std::unique_ptr<Optimizer> native_optimizer(const OptimizerSpec& spec) override {
    std::vector<at::Tensor> params;
    for (int p : s_.params) params.push_back(values_[static_cast<std::size_t>(p)]);
    try {
      return std::make_unique<TorchOptimizer>(spec, std::move(params), device_, deferred_);
    } catch (const c10::Error& e) {
      throw Error(std::string("LibTorch: ") + e.what_without_backtrace());
    }
  }
  std::string describe() const override {
    return "LibTorch's own executor: " + std::to_string(g_.nodes.size()) + " ATen calls per pass" +
           (s_.training ? ", autograd for the backward pass" : "") +
           (device_.is_cuda() ? "; on " + device_.str() +
                                    (*deferred_ ? ", a training step's passes and optimizer without waits between "
                                                  "them, one wait at the step's end; "
                                                : ", each pass ending with a wait for the device; ") +
                                    math_.words(true)
            : math_.bf16 || math_.channels_last ? "; " + math_.words(false)
                                                : "");
  }

 private:
  // LibTorch's current stream is its default one, stream 0 (d500 never sets another): the one
  // the step's marks and the staged batch's ordering are recorded on.
  bool on_default_stream() const { return c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_).id() == 0; }
  static std::vector<double> to_doubles(const at::Tensor& t) {
    const at::Tensor d = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  }
  // The graph's nodes on micro-batch `micro`'s inputs (eval: infer()'s pass). In training a BatchNormalization whose
  // running statistics the runner keeps (s_.buffers) updates them in place as PyTorch's
  // BatchNorm layers do (at::batch_norm: momentum 1 - ONNX's, the unbiased batch variance).
  void run_nodes(int micro, bool eval) {
    const bool training = s_.training && !eval;
    if (device_.is_cuda()) math_.apply();
    const Bf16Autocast autocast(math_.bf16, device_.is_cuda());
    std::fill(handed_out_.begin(), handed_out_.end(), false);  // host copies handed out earlier are stale from here on
    const int micros = std::max(1, s_.micro_batches);
    const Tensors& inputs = device_slices_.empty() ? slices_ : device_slices_;
    for (std::size_t k = 0; k < g_.inputs.size(); ++k)
      values_[static_cast<std::size_t>(g_.inputs[k])] =
          inputs[k * static_cast<std::size_t>(micros) + static_cast<std::size_t>(micro)];
    Tensors in;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      in.clear();
      for (int t : n.in) in.push_back(t >= 0 ? values_[static_cast<std::size_t>(t)] : at::Tensor());
      Tensors out;
      if (training && n.op == "Dropout")
        out.push_back(dropout(i, n, in));
      else if (training && running_[i])
        out.push_back(at::batch_norm(in[0], in[1], in[2], in[3], in[4], true, 1 - n.attr_f("momentum", 0.9),
                                     n.attr_f("epsilon", 1e-5), false));
      else
        out = ops().at(n.op)(n, in, g_,
                             training || (eval && s_.training && n.op == "BatchNormalization" && !running_[i]));
      for (std::size_t j = 0; j < n.out.size() && j < out.size(); ++j)
        if (n.out[j] >= 0) values_[static_cast<std::size_t>(n.out[j])] = out[j];
    }
  }

  // Dropout in training, with d500's masks (graph_ops.hpp's dropout_key): the elements every
  // executor drops, scaled by 1 / (1 - ratio); autograd carries the mask into the backward pass.
  at::Tensor dropout(std::size_t node, const Node& n, const Tensors& in) {
    const double r =
        g_.opset >= 12 ? (in.size() > 1 && in[1].defined() ? in[1].item<double>() : 0.5) : n.attr_f("ratio", 0.5);
    std::int64_t call = 0;
    if (s_.step) {
      auto& [step, calls] = dropout_calls_[node];
      if (step != *s_.step) step = *s_.step, calls = 0;
      call = calls++;
    }
    const std::uint64_t key = dropout_key(n, s_.step ? *s_.step : 0, call);
    at::Tensor scale = at::empty(in[0].sizes(), at::TensorOptions().dtype(at::kFloat));
    float* v = scale.data_ptr<float>();
    const float keep = r < 1 ? static_cast<float>(1.0 / (1.0 - r)) : 0.0f;
    for (std::int64_t i = 0; i < scale.numel(); ++i)
      v[i] = keep_element(key, static_cast<std::uint64_t>(i), r) ? keep : 0.0f;
    return in[0] * (device_.is_cuda() ? scale.to(device_) : scale);
  }

  struct GradientFinal final : torch::autograd::FunctionPostHook {
    GradientFinal(NativeRunner& r, std::size_t k) : r(r), k(k) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      if (r.armed_ && r.ready_) {
        const std::size_t one[1] = {k};
        r.ready_(std::span<const std::size_t>(one, 1));
      }
      return outputs;
    }
    NativeRunner& r;
    std::size_t k;
  };

  RunnerSpec s_;
  const Graph& g_;
  at::Device device_;
  TorchMath math_;
  GradientsReady ready_;
  bool armed_ = false;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  // slices_: each input's micro-batches, views of d500's buffers; device_slices_: what the passes
  // read instead where set -- their copies on the GPU, or on the CPU their channels-last copies.
  Tensors values_, slices_, device_slices_;
  Tensors host_params_, host_grads_;  // d500's host copies on a GPU
  std::vector<bool> handed_out_;
  std::vector<bool> running_;  // per node: a BatchNormalization updating running statistics of s_.buffers
  std::map<std::size_t, std::pair<std::int64_t, std::int64_t>> dropout_calls_;  // per Dropout node: step, passes in it
  std::shared_ptr<bool> deferred_ = std::make_shared<bool>(false);  // defer_waits; its optimizer reads it too
#ifdef D500_HAVE_CUDA
  std::unique_ptr<cuda::DeviceMemoryUse> memory_;  // on a GPU
  std::vector<cudaEvent_t> marks_;                 // the step's marks, once defer_waits(true)
  bool marks_valid_ = false;
  std::vector<const void*> pinned_;  // the inputs' host memory, page-locked while the runner lives
  Tensors staged_;                   // stage_inputs()' device copies of the inputs
  cudaStream_t beside_ = nullptr;    // their copies, beside LibTorch's stream
  cudaEvent_t beside_done_ = nullptr;
  cudaEvent_t staged_read_ = nullptr;  // on LibTorch's stream: staged_ taken into the inputs
  bool staged_read_recorded_ = false;
#endif
};

}  // namespace

std::unique_ptr<GraphRunner> make_libtorch_native_runner(const RunnerSpec& s) {
  try {
    return std::make_unique<NativeRunner>(s, at::Device(at::kCPU));
  } catch (const c10::Error& e) {
    throw Error(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

namespace {
// The CUDA devices LibTorch sees (0 without CUDA in this LibTorch), and this rank's among them
// (its local rank modulo their count; n > 0).
int cuda_devices() {
  return at::hasCUDA() ? static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->deviceCount()) : 0;
}
int rank_cuda_index(int n) { return node_local_rank() % n; }
}  // namespace

std::string libtorch_cuda_no_device() {
  if (!at::hasCUDA())
    return "this LibTorch was built without CUDA (Debian's is CPU-only; docs/codebase.md (Libraries) says how to build against PyTorch's)";
  return cuda_devices() > 0 ? "" : "LibTorch sees no CUDA device";
}

std::string libtorch_cuda_rank_device() {
  if (const std::string why = libtorch_cuda_no_device(); !why.empty()) return "none: " + why;
  const int n = cuda_devices();
  return "cuda:" + std::to_string(rank_cuda_index(n)) + " of " + std::to_string(n) + " (as LibTorch numbers them)";
}

std::unique_ptr<GraphRunner> make_libtorch_cuda_runner(const RunnerSpec& s) {
  if (const std::string why = libtorch_cuda_no_device(); !why.empty()) throw Error("libtorch-cuda: " + why);
  const int n = cuda_devices();
  try {
    return std::make_unique<NativeRunner>(s, at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank_cuda_index(n))));
  } catch (const c10::Error& e) {
    throw Error(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

std::string libtorch_native_check(const Graph& g) {
  for (const auto& n : g.nodes) {
    const std::string why = untranslatable(n, g);
    if (!why.empty())
      return "libtorch-native cannot run " + n.label() + ": " + why +
             " (d500's executor on LibTorch's kernels can: backend = \"libtorch\")";
  }
  return "";
}

}  // namespace d500
