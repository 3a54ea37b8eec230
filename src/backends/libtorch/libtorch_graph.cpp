// The `libtorch` backend's level-1 node kernels: d500's executor running a network node by node
// on ATen's operators (Deep500's "reference executor on the framework's kernels"). Tensors wrap
// the executor's buffers (at::from_blob, no copy); a forward call writes through the operator's
// out= variant where ATen has one, else the result ATen allocates is copied into the executor's
// buffer (inside the timed call, as the price of running a framework's operators outside it).
// Backward passes call ATen's own backward functions (convolution_backward,
// native_batch_norm_backward, ...), never its autograd. The framework executing the whole graph
// itself is libtorch_native.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <array>
#include <functional>

#include "backends/blas/blas_backend.hpp"
#include "backends/conv_geom.hpp"
#include "backends/libtorch/libtorch_backend.hpp"
#include "common/error.hpp"

namespace d500 {
namespace {

at::Tensor wrap(const TensorView& v) { return at::from_blob(v.data, at::IntArrayRef(*v.shape), at::kFloat); }
at::Tensor wrap_as(const TensorView& v, const std::vector<std::int64_t>& shape) {
  return at::from_blob(v.data, shape, at::kFloat);
}

// A node's forward and backward as ATen calls over wrapped buffers; `what` names the ATen path.
class TorchNode final : public NodeKernel {
 public:
  std::function<void()> fwd, bwd;
  std::string what;
  void forward() override {
    c10::NoGradGuard no_grad;
    fwd();
  }
  void backward() override {
    c10::NoGradGuard no_grad;
    if (!bwd) throw Error("libtorch: " + what + " has no backward pass");
    bwd();
  }
  std::string impl() const override { return "libtorch " + what; }
};

// Writes `v` into a wrapped output (the result ATen allocated).
void put(at::Tensor& out, const at::Tensor& v) { out.copy_(v.reshape(out.sizes())); }

bool symmetric(const ConvGeom& g) { return g.pt == g.pb && g.pl == g.pr; }

// What every node's kernel starts from: its tensors wrapped as ATen views of d500's buffers.
struct Wrapped {
  explicit Wrapped(const NodeProblem& problem) : p(problem) {}
  const NodeProblem& p;
  std::unique_ptr<TorchNode> k = std::make_unique<TorchNode>();
  std::vector<at::Tensor> in, din;
  at::Tensor y, dy;
};

// Convolutions and transposed convolutions (4-D, symmetric pads). nullptr: not one ATen's calls here can run.
std::unique_ptr<NodeKernel> conv_kernel(Wrapped& w) {
  auto& [p, k, in, din, y, dy] = w;
  const Node& n = *p.node;
  const std::string& op = n.op;
  auto want = [&](std::size_t i) { return i < din.size() && din[i].defined(); };
  if (op == "Conv" || op == "ConvTranspose") {
    const bool transposed = op == "ConvTranspose";
    if (p.in[0].shape->size() > 4) return nullptr;
    const ConvGeom g = transposed ? conv_geom(n, *p.out[0].shape, (*p.in[0].shape)[1])
                                  : conv_geom(n, *p.in[0].shape, (*p.in[1].shape)[0]);
    if (!symmetric(g)) return nullptr;  // ATen pads symmetrically
    // 1-D as 2-D: views with height 1.
    const bool one_d = p.in[0].shape->size() == 3;
    auto view4 = [&](const TensorView& v) {
      Shape s = *v.shape;
      if (one_d) s.insert(s.begin() + 2, 1);
      return wrap_as(v, s);
    };
    at::Tensor x = view4(p.in[0]), w = view4(p.in[1]), yy = view4(p.out[0]);
    at::Tensor b = p.in.size() > 2 && p.in[2].present() ? in[2] : at::Tensor();
    const std::vector<std::int64_t> st{g.sh, g.sw}, pad{g.pt, g.pl}, dil{g.dh, g.dw};
    std::vector<std::int64_t> opad{0, 0};
    if (transposed) {
      // The output padding that makes ATen's size ONNX's.
      const Shape& ys = *p.out[0].shape;
      const std::int64_t H = one_d ? 1 : ys[2], W = ys.back();
      const std::int64_t h = one_d ? 1 : (*p.in[0].shape)[2], wd = p.in[0].shape->back();
      opad = {H - ((h - 1) * g.sh - 2 * g.pt + g.dh * (g.kh - 1) + 1),
              W - ((wd - 1) * g.sw - 2 * g.pl + g.dw * (g.kw - 1) + 1)};
      if (opad[0] < 0 || opad[1] < 0) return nullptr;
    }
    const std::int64_t groups = g.groups;
    k->what = transposed ? "convolution (transposed)" : "convolution";
    k->fwd = [=]() mutable {
      put(yy, at::convolution(x, w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, st, pad, dil, transposed,
                              opad, groups));
    };
    if (p.training) {
      at::Tensor dyy = view4(p.dout[0]);
      at::Tensor dx = want(0) ? view4(p.din[0]) : at::Tensor(), dw = want(1) ? view4(p.din[1]) : at::Tensor();
      at::Tensor db = want(2) ? din[2] : at::Tensor();
      const std::array<bool, 3> mask{dx.defined(), dw.defined(), db.defined()};
      const std::vector<std::int64_t> bias_sizes =
          b.defined() ? std::vector<std::int64_t>{b.size(0)} : std::vector<std::int64_t>{};
      k->bwd = [=]() mutable {
        auto r =
            at::convolution_backward(dyy, x, w, b.defined() ? c10::optional<at::IntArrayRef>(bias_sizes) : c10::nullopt,
                                     st, pad, dil, transposed, opad, groups, mask);
        if (mask[0]) dx.copy_(std::get<0>(r));
        if (mask[1]) dw.copy_(std::get<1>(r));
        if (mask[2]) db.copy_(std::get<2>(r));
      };
    }
    return std::move(k);
  }
  return nullptr;
}

// Gemm and MatMul. nullptr: not one ATen's calls here can run.
std::unique_ptr<NodeKernel> product_kernel(Wrapped& w) {
  auto& [p, k, in, din, y, dy] = w;
  const Node& n = *p.node;
  const std::string& op = n.op;
  auto want = [&](std::size_t i) { return i < din.size() && din[i].defined(); };
  if (op == "Gemm") {
    const bool ta = n.attr_i("transA", 0) != 0, tb = n.attr_i("transB", 0) != 0;
    const double alpha = n.attr_f("alpha", 1.0), beta = n.attr_f("beta", 1.0);
    at::Tensor a = ta ? in[0].t() : in[0], b = tb ? in[1].t() : in[1];
    const bool bias = p.in.size() > 2 && p.in[2].present();
    at::Tensor c = bias ? in[2].expand(y.sizes()) : at::Tensor();
    k->what = bias ? "addmm" : "mm";
    k->fwd = [=]() mutable {
      if (bias)
        at::addmm_out(y, c, a, b, beta, alpha);
      else {
        at::mm_out(y, a, b);
        if (alpha != 1.0) y.mul_(alpha);
      }
    };
    if (p.training) {
      at::Tensor da = want(0) ? din[0] : at::Tensor(), db = want(1) ? din[1] : at::Tensor(),
                 dc = want(2) ? din[2] : at::Tensor();
      k->bwd = [=]() mutable {
        // d op(A) = alpha dY op(B)^T, d op(B) = alpha op(A)^T dY, each written in its operand's layout.
        if (da.defined()) {
          const at::Tensor g = at::mm(dy, b.t()).mul_(alpha);
          da.copy_(ta ? g.t() : g);
        }
        if (db.defined()) {
          const at::Tensor g = at::mm(a.t(), dy).mul_(alpha);
          db.copy_(tb ? g.t() : g);
        }
        if (dc.defined()) put(dc, dy.sum_to_size(dc.sizes()) * beta);
      };
    }
    return std::move(k);
  }
  if (op == "MatMul") {
    at::Tensor a = in[0], b = in[1];
    k->what = "matmul";
    k->fwd = [=]() mutable { at::matmul_out(y, a, b); };
    if (p.training) {
      at::Tensor da = want(0) ? din[0] : at::Tensor(), db = want(1) ? din[1] : at::Tensor();
      k->bwd = [=]() mutable {
        // Through ATen's matmul on the promoted operands; broadcast batch axes summed away.
        at::Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a, b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
        at::Tensor g = dy;
        if (a.dim() == 1) g = g.unsqueeze(-2);
        if (b.dim() == 1) g = g.unsqueeze(-1);
        if (da.defined()) put(da, at::matmul(g, b2.transpose(-1, -2)).sum_to_size(a2.sizes()));
        if (db.defined()) put(db, at::matmul(a2.transpose(-1, -2), g).sum_to_size(b2.sizes()));
      };
    }
    return std::move(k);
  }
  return nullptr;
}

// Pooling: windowed and global. nullptr: not one ATen's calls here can run.
std::unique_ptr<NodeKernel> pool_kernel(Wrapped& w) {
  auto& [p, k, in, din, y, dy] = w;
  const Node& n = *p.node;
  const std::string& op = n.op;
  auto want = [&](std::size_t i) { return i < din.size() && din[i].defined(); };
  if (op == "MaxPool" || op == "AveragePool") {
    if (p.in[0].shape->size() > 4) return nullptr;
    const ConvGeom g = conv_geom(n, *p.in[0].shape, (*p.in[0].shape)[1]);
    // ATen pads symmetrically and by at most half the window: else the reference.
    if (!symmetric(g) || 2 * g.pt > g.kh || 2 * g.pl > g.kw) return nullptr;
    const bool ceil = n.attr_i("ceil_mode", 0) != 0;
    const bool include_pad = n.attr_i("count_include_pad", 0) != 0;
    // ATen drops a last window that starts in the padding; ONNX does not: then the reference.
    auto aten_size = [&](std::int64_t in, std::int64_t k_, std::int64_t d, std::int64_t s, std::int64_t pad) {
      std::int64_t span = in + 2 * pad - d * (k_ - 1) - 1;
      std::int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
      if (ceil && (out - 1) * s >= in + pad) --out;
      return out;
    };
    if (aten_size(g.h, g.kh, g.dh, g.sh, g.pt) != g.p || aten_size(g.w, g.kw, g.dw, g.sw, g.pl) != g.q) return nullptr;
    const bool one_d = p.in[0].shape->size() == 3;
    auto view4 = [&](const TensorView& v) {
      Shape s = *v.shape;
      if (one_d) s.insert(s.begin() + 2, 1);
      return wrap_as(v, s);
    };
    at::Tensor x = view4(p.in[0]), yy = view4(p.out[0]);
    const std::vector<std::int64_t> ks{g.kh, g.kw}, st{g.sh, g.sw}, pad{g.pt, g.pl}, dil{g.dh, g.dw};
    if (op == "MaxPool") {
      at::Tensor idx = at::empty(yy.sizes(), at::kLong);
      k->what = "max_pool2d_with_indices";
      k->fwd = [=]() mutable { at::max_pool2d_with_indices_out(yy, idx, x, ks, st, pad, dil, ceil); };
      if (p.training && want(0)) {
        at::Tensor dx = view4(p.din[0]), dyy = view4(p.dout[0]);
        k->bwd = [=]() mutable { at::max_pool2d_with_indices_backward_out(dx, dyy, x, ks, st, pad, dil, ceil, idx); };
      }
    } else {
      if (g.dh != 1 || g.dw != 1) return nullptr;
      k->what = "avg_pool2d";
      k->fwd = [=]() mutable { at::avg_pool2d_out(yy, x, ks, st, pad, ceil, include_pad, c10::nullopt); };
      if (p.training && want(0)) {
        at::Tensor dx = view4(p.din[0]), dyy = view4(p.dout[0]);
        k->bwd = [=]() mutable {
          at::avg_pool2d_backward_out(dx, dyy, x, ks, st, pad, ceil, include_pad, c10::nullopt);
        };
      }
    }
    return std::move(k);
  }
  if (op == "GlobalAveragePool") {
    at::Tensor x = in[0];
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    k->what = "mean";
    k->fwd = [=]() mutable { at::mean_out(y, x, dims, true); };
    if (p.training && want(0)) {
      at::Tensor dx = din[0];
      const double count = static_cast<double>(x.numel() / (x.size(0) * x.size(1)));
      k->bwd = [=]() mutable { put(dx, (dy / count).expand(dx.sizes())); };
    }
    return std::move(k);
  }
  return nullptr;
}

// Batch and layer normalisation, softmaxes. nullptr: not one ATen's calls here can run.
std::unique_ptr<NodeKernel> normalization_kernel(Wrapped& w) {
  auto& [p, k, in, din, y, dy] = w;
  const Node& n = *p.node;
  const std::string& op = n.op;
  auto want = [&](std::size_t i) { return i < din.size() && din[i].defined(); };
  if (op == "BatchNormalization") {
    const bool bn_training = p.training || n.attr_i("training_mode", 0) != 0;
    const double eps = n.attr_f("epsilon", 1e-5), momentum = n.attr_f("momentum", 0.9);
    at::Tensor x = in[0], w = in[1], b = in[2], rm = in[3], rv = in[4];
    auto saved = std::make_shared<std::pair<at::Tensor, at::Tensor>>();  // the batch mean and inverse std
    k->what = "native_batch_norm";
    // Optional outputs 1 to 4 (training): the running statistics updated by ONNX's momentum from
    // the batch's mean and biased variance (ATen's own update would use the unbiased one), and
    // before opset 14 those; an output may be the running statistic itself (kept in place).
    std::array<at::Tensor, 4> outs;
    for (std::size_t j = 1; j < p.out.size() && j < 5; ++j)
      if (p.out[j].present()) outs[j - 1] = wrap(p.out[j]);
    k->fwd = [=]() mutable {
      if (bn_training) {
        auto r = at::native_batch_norm(x, w, b, c10::nullopt, c10::nullopt, true, 1 - momentum, eps);
        put(y, std::get<0>(r));
        saved->first = std::get<1>(r);
        saved->second = std::get<2>(r);
        if (std::any_of(outs.begin(), outs.end(), [](const at::Tensor& o) { return o.defined(); })) {
          const at::Tensor mean = saved->first, var = saved->second.pow(-2) - eps;
          if (outs[0].defined()) outs[0].copy_(rm * momentum + mean * (1 - momentum));
          if (outs[1].defined()) outs[1].copy_(rv * momentum + var * (1 - momentum));
          if (outs[2].defined()) outs[2].copy_(mean);
          if (outs[3].defined()) outs[3].copy_(var);
        }
      } else {
        put(y, std::get<0>(at::native_batch_norm(x, w, b, rm, rv, false, 1 - momentum, eps)));
      }
    };
    if (p.training) {
      at::Tensor dx = want(0) ? din[0] : at::Tensor(), dw = want(1) ? din[1] : at::Tensor(),
                 db = want(2) ? din[2] : at::Tensor();
      const std::array<bool, 3> mask{dx.defined(), dw.defined(), db.defined()};
      k->bwd = [=]() mutable {
        auto r = at::native_batch_norm_backward(dy, x, w, c10::nullopt, c10::nullopt, saved->first, saved->second, true,
                                                eps, mask);
        if (mask[0]) dx.copy_(std::get<0>(r));
        if (mask[1]) dw.copy_(std::get<1>(r));
        if (mask[2]) db.copy_(std::get<2>(r));
      };
    }
    return std::move(k);
  }
  if (op == "LayerNormalization") {
    const auto axis = static_cast<std::size_t>(n.attr_i("axis", -1));
    const Shape& xs = *p.in[0].shape;
    const std::vector<std::int64_t> norm(xs.begin() + static_cast<long>(axis), xs.end());
    const double eps = n.attr_f("epsilon", 1e-5);
    at::Tensor x = in[0], w = in[1].reshape(norm);
    at::Tensor b = p.in.size() > 2 && p.in[2].present() ? in[2].reshape(norm) : at::Tensor();
    auto saved = std::make_shared<std::pair<at::Tensor, at::Tensor>>();
    k->what = "native_layer_norm";
    k->fwd = [=]() mutable {
      auto r = at::native_layer_norm(x, norm, w, b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, eps);
      put(y, std::get<0>(r));
      saved->first = std::get<1>(r);
      saved->second = std::get<2>(r);
    };
    if (p.training) {
      at::Tensor dx = want(0) ? din[0] : at::Tensor(), dw = want(1) ? din[1] : at::Tensor(),
                 db = want(2) ? din[2] : at::Tensor();
      const std::array<bool, 3> mask{dx.defined(), dw.defined(), db.defined()};
      k->bwd = [=]() mutable {
        auto r = at::native_layer_norm_backward(dy, x, norm, saved->first, saved->second, w,
                                                b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt, mask);
        if (mask[0]) dx.copy_(std::get<0>(r));
        if (mask[1]) put(dw, std::get<1>(r));
        if (mask[2]) put(db, std::get<2>(r));
      };
    }
    return std::move(k);
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    const std::vector<std::int64_t> v{n.attr_i("_outer", 1), n.attr_i("_len", 1), n.attr_i("_inner", 1)};
    at::Tensor x = wrap_as(p.in[0], v), yy = wrap_as(p.out[0], v);
    const bool log = op == "LogSoftmax";
    k->what = log ? "_log_softmax" : "_softmax";
    k->fwd = [=]() mutable {
      if (log)
        at::_log_softmax_out(yy, x, 1, false);
      else
        at::_softmax_out(yy, x, 1, false);
    };
    if (p.training && want(0)) {
      at::Tensor dx = wrap_as(p.din[0], v), dyy = wrap_as(p.dout[0], v);
      k->bwd = [=]() mutable {
        if (log)
          at::_log_softmax_backward_data_out(dx, dyy, yy, 1, at::kFloat);
        else
          at::_softmax_backward_data_out(dx, dyy, yy, 1, at::kFloat);
      };
    }
    return std::move(k);
  }
  return nullptr;
}

// Element-wise operators, and Transpose. nullptr: not one ATen's calls here can run.
std::unique_ptr<NodeKernel> elementwise_kernel(Wrapped& w) {
  auto& [p, k, in, din, y, dy] = w;
  const Node& n = *p.node;
  const std::string& op = n.op;
  auto want = [&](std::size_t i) { return i < din.size() && din[i].defined(); };
  // Element-wise: the forward through its out= variant, the backward through ATen's *_backward
  // function or its formula in ATen operations. Flat views.
  at::Tensor x = in[0];
  at::Tensor dx = p.training && want(0) ? din[0] : at::Tensor();
  auto unary = [&](const char* what, std::function<void()> f, std::function<void()> b) {
    k->what = what;
    k->fwd = std::move(f);
    if (dx.defined()) k->bwd = std::move(b);
    return std::move(k);
  };
  if (op == "Relu")
    return unary(
        "threshold", [=]() mutable { at::threshold_out(y, x, 0, 0); },
        [=]() mutable { at::threshold_backward_out(dx, dy, x, 0); });
  if (op == "LeakyRelu") {
    const double a = n.attr_f("alpha", 0.01);
    return unary(
        "leaky_relu", [=]() mutable { at::leaky_relu_out(y, x, a); },
        [=]() mutable { at::leaky_relu_backward_out(dx, dy, x, a, false); });
  }
  if (op == "Sigmoid")
    return unary(
        "sigmoid", [=]() mutable { at::sigmoid_out(y, x); }, [=]() mutable { at::sigmoid_backward_out(dx, dy, y); });
  if (op == "Tanh")
    return unary(
        "tanh", [=]() mutable { at::tanh_out(y, x); }, [=]() mutable { at::tanh_backward_out(dx, dy, y); });
  if (op == "HardSigmoid") {
    // ATen's hardsigmoid is ONNX's with alpha 1/6, beta 1/2 (what PyTorch exports).
    if (std::abs(n.attr_f("alpha", 0.2) - 1.0 / 6) > 1e-6 || std::abs(n.attr_f("beta", 0.5) - 0.5) > 1e-6)
      return nullptr;
    return unary(
        "hardsigmoid", [=]() mutable { at::hardsigmoid_out(y, x); },
        [=]() mutable { at::hardsigmoid_backward_out(dx, dy, x); });
  }
  if (op == "HardSwish")
    return unary(
        "hardswish", [=]() mutable { at::hardswish_out(y, x); },
        [=]() mutable { put(dx, at::hardswish_backward(dy, x)); });
  if (op == "Erf")
    return unary(
        "erf", [=]() mutable { at::erf_out(y, x); },
        [=]() mutable { at::mul_out(dx, dy, at::exp(-x * x) * 1.1283791670955126); });
  if (op == "Sqrt")
    return unary(
        "sqrt", [=]() mutable { at::sqrt_out(y, x); }, [=]() mutable { at::div_out(dx, dy, y * 2); });
  if (op == "Exp")
    return unary(
        "exp", [=]() mutable { at::exp_out(y, x); }, [=]() mutable { at::mul_out(dx, dy, y); });
  if (op == "Log")
    return unary(
        "log", [=]() mutable { at::log_out(y, x); }, [=]() mutable { at::div_out(dx, dy, x); });
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    at::Tensor a = in[0], b = in[1];
    at::Tensor da = p.training && want(0) ? din[0] : at::Tensor(), db = p.training && want(1) ? din[1] : at::Tensor();
    k->what = op == "Add" ? "add" : op == "Sub" ? "sub" : op == "Mul" ? "mul" : "div";
    if (op == "Add") k->fwd = [=]() mutable { at::add_out(y, a, b); };
    if (op == "Sub") k->fwd = [=]() mutable { at::sub_out(y, a, b); };
    if (op == "Mul") k->fwd = [=]() mutable { at::mul_out(y, a, b); };
    if (op == "Div") k->fwd = [=]() mutable { at::div_out(y, a, b); };
    if (p.training) {
      const std::string o = op;
      k->bwd = [=]() mutable {
        if (da.defined()) put(da, (o == "Mul" ? dy * b : o == "Div" ? dy / b : dy).sum_to_size(da.sizes()));
        if (db.defined())
          put(db, (o == "Mul"   ? dy * a
                   : o == "Div" ? -dy * a / (b * b)
                   : o == "Sub" ? -dy
                                : dy)
                      .sum_to_size(db.sizes()));
      };
    }
    return std::move(k);
  }
  if (op == "Transpose") {
    const std::vector<std::int64_t> perm = n.attrs.at("perm").ints;
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i)
      inverse[static_cast<std::size_t>(perm[i])] = static_cast<std::int64_t>(i);
    k->what = "permute + copy";
    k->fwd = [=]() mutable { y.copy_(x.permute(perm)); };
    if (dx.defined()) k->bwd = [=]() mutable { dx.copy_(dy.permute(inverse)); };
    return std::move(k);
  }
  return nullptr;
}

std::unique_ptr<NodeKernel> make(const NodeProblem& p) {
  for (const auto& t : p.in)
    if (t.present() && t.dtype != DType::F32) return nullptr;
  for (std::size_t j = 1; j < p.out.size(); ++j)
    if (p.out[j].present() && p.node->op != "BatchNormalization") return nullptr;
  Wrapped w(p);
  for (const auto& t : p.in) w.in.push_back(t.present() ? wrap(t) : at::Tensor());
  for (const auto& t : p.din) w.din.push_back(t.present() ? wrap(t) : at::Tensor());
  w.y = wrap(p.out[0]);
  w.dy = p.training && p.dout[0].present() ? wrap(p.dout[0]) : at::Tensor();
  const std::string& op = p.node->op;
  if (op == "Conv" || op == "ConvTranspose") return conv_kernel(w);
  if (op == "Gemm" || op == "MatMul") return product_kernel(w);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") return pool_kernel(w);
  if (op == "BatchNormalization" || op == "LayerNormalization" || op == "Softmax" || op == "LogSoftmax")
    return normalization_kernel(w);
  return elementwise_kernel(w);
  return nullptr;
}

}  // namespace

std::unique_ptr<NodeKernel> make_libtorch_node_kernel(const NodeProblem& p, int threads) {
  at::set_num_threads(threads);
  openblas_threads(threads);
  try {
    return make(p);
  } catch (const c10::Error& e) {
    throw Error("LibTorch " + p.node->label() + ": " + e.what_without_backtrace());
  }
}

}  // namespace d500
