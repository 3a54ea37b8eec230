// libtorch-native's ATen translations of the ONNX breadth beyond the networks' core. Each is the
// call a PyTorch user would write (torch.nn.functional, torch.*), so autograd differentiates it
// in training as PyTorch does.
#include "backends/libtorch/libtorch_native_ops.hpp"

#include <ATen/core/Reduction.h>

#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace d500::native {
namespace {

using I = std::int64_t;

std::vector<I> axes_of(const Node& n) { return n.attrs.at("axes").ints; }
bool keep(const Node& n) { return n.attr_i("keepdims", 1) != 0; }

void add_unary(std::map<std::string, Op>& t) {
  auto unary = [&](const char* name, at::Tensor (*f)(const at::Tensor&)) {
    t[name] = [f](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{f(in[0])}; };
  };
  unary("Sin", at::sin);
  unary("Cos", at::cos);
  unary("Tan", at::tan);
  unary("Asin", at::asin);
  unary("Acos", at::acos);
  unary("Atan", at::atan);
  unary("Sinh", at::sinh);
  unary("Cosh", at::cosh);
  unary("Asinh", at::asinh);
  unary("Acosh", at::acosh);
  unary("Atanh", at::atanh);
  unary("Floor", at::floor);
  unary("Ceil", at::ceil);
  unary("Round", at::round);  // ties to even, as ONNX
  unary("Sign", at::sign);
  unary("Mish", at::mish);
  t["Elu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::elu(in[0], n.attr_f("alpha", 1.0))};
  };
  t["Celu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::celu(in[0], n.attr_f("alpha", 1.0))};
  };
  t["Selu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const double alpha = n.attr_f("alpha", 1.67326319217681884765625),
                 gamma = n.attr_f("gamma", 1.05070102214813232421875);
    return Tensors{at::elu(in[0], alpha, gamma)};  // gamma (x > 0 ? x : alpha (e^x - 1))
  };
  t["ThresholdedRelu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    return Tensors{at::threshold(in[0], n.attr_f("alpha", 1.0), 0.0)};
  };
  t["Softplus"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::softplus(in[0])}; };
  t["Softsign"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{in[0] / (in[0].abs() + 1)}; };
  t["Shrink"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const double l = n.attr_f("lambd", 0.5), b = n.attr_f("bias", 0);
    const at::Tensor& x = in[0];
    return Tensors{at::where(x < -l, x + b, at::where(x > l, x - b, at::zeros_like(x)))};
  };
  t["IsInf"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    at::Tensor inf = at::isinf(in[0]);
    if (!n.attr_i("detect_positive", 1)) inf = inf & (in[0] < 0);
    if (!n.attr_i("detect_negative", 1)) inf = inf & (in[0] > 0);
    return Tensors{inf};
  };
}

void add_many_and_logic(std::map<std::string, Op>& t) {
  auto fold = [](at::Tensor (*f)(const at::Tensor&, const at::Tensor&), bool mean) {
    return [f, mean](const Node&, const Tensors& in, const Graph&, bool) {
      at::Tensor y = in[0];
      for (std::size_t k = 1; k < in.size(); ++k) y = f(y, in[k]);
      return Tensors{mean ? y / static_cast<double>(in.size()) : y};
    };
  };
  t["Max"] = fold(at::maximum, false);
  t["Min"] = fold(at::minimum, false);
  t["Sum"] = fold([](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }, false);
  t["Mean"] = fold([](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }, true);
  t["PRelu"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    return Tensors{at::where(in[0] < 0, in[0] * in[1], in[0])};
  };
  t["And"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::logical_and(in[0], in[1])}; };
  t["Or"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::logical_or(in[0], in[1])}; };
  t["Xor"] = [](const Node&, const Tensors& in, const Graph&, bool) { return Tensors{at::logical_xor(in[0], in[1])}; };
}

void add_reductions(std::map<std::string, Op>& t) {
  auto red = [&](const char* name, std::function<at::Tensor(const at::Tensor&, const std::vector<I>&, bool)> f) {
    t[name] = [f](const Node& n, const Tensors& in, const Graph&, bool) {
      return Tensors{f(in[0], axes_of(n), keep(n))};
    };
  };
  red("ReduceMax", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return at::amax(x, a, k); });
  red("ReduceMin", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return at::amin(x, a, k); });
  red("ReduceProd", [](const at::Tensor& x, const std::vector<I>& a, bool k) {
    at::Tensor y = x;
    std::vector<I> desc = a;
    std::sort(desc.rbegin(), desc.rend());  // the highest axis first, so that the others keep their numbers
    for (I d : desc) y = at::prod(y, d, k);
    return y;
  });
  red("ReduceL1", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return x.abs().sum(a, k); });
  red("ReduceL2", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return x.pow(2).sum(a, k).sqrt(); });
  red("ReduceLogSum", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return x.sum(a, k).log(); });
  red("ReduceLogSumExp", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return at::logsumexp(x, a, k); });
  red("ReduceSumSquare", [](const at::Tensor& x, const std::vector<I>& a, bool k) { return x.pow(2).sum(a, k); });
  auto arg = [](bool max) {
    return [max](const Node& n, const Tensors& in, const Graph&, bool) {
      const I axis = axes_of(n).at(0);
      if (!n.attr_i("select_last_index", 0))
        return Tensors{max ? at::argmax(in[0], axis, keep(n)) : at::argmin(in[0], axis, keep(n))};
      const at::Tensor f = in[0].flip(axis);  // the last extreme: the first of the flipped axis
      return Tensors{(in[0].size(axis) - 1) - (max ? at::argmax(f, axis, keep(n)) : at::argmin(f, axis, keep(n)))};
    };
  };
  t["ArgMax"] = arg(true);
  t["ArgMin"] = arg(false);
  t["Hardmax"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const I axis = n.attr_i("axis", -1);
    const at::Tensor idx = at::argmax(in[0], axis, true);
    return Tensors{at::zeros_like(in[0]).scatter(axis, idx, 1.0)};
  };
  t["NegativeLogLikelihoodLoss"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const std::string r = n.attr_s("reduction", "mean");
    const int64_t mode = r == "none" ? at::Reduction::None : r == "sum" ? at::Reduction::Sum : at::Reduction::Mean;
    // ATen ignores -100 by default; without ignore_index ONNX ignores nothing: a label ATen never meets.
    const I ignore = n.has("ignore_index") ? n.attr_i("ignore_index", 0) : std::numeric_limits<I>::min();
    const at::Tensor w = in.size() > 2 ? in[2] : at::Tensor();
    return Tensors{at::nll_loss_nd(in[0], in[1].to(at::kLong), w, mode, ignore)};
  };
}

void add_indexing(std::map<std::string, Op>& t) {
  auto fixed = [](const at::Tensor& idx, I dim) {
    const at::Tensor l = idx.to(at::kLong);
    return at::where(l < 0, l + dim, l);
  };
  t["GatherElements"] = [fixed](const Node& n, const Tensors& in, const Graph&, bool) {
    const I axis = n.attr_i("axis", 0);
    return Tensors{at::gather(in[0], axis, fixed(in[1], in[0].size(axis)))};
  };
  t["ScatterElements"] = [fixed](const Node& n, const Tensors& in, const Graph&, bool) {
    const I axis = n.attr_i("axis", 0);
    const at::Tensor idx = fixed(in[1], in[0].size(axis));
    const std::string r = n.attr_s("reduction", "none");
    if (r == "add") return Tensors{in[0].scatter_add(axis, idx, in[2])};
    if (r == "mul") return Tensors{in[0].scatter(axis, idx, in[2], "multiply")};
    return Tensors{in[0].scatter(axis, idx, in[2])};
  };
  t["Trilu"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const I k = in.size() > 1 && in[1].defined() ? in[1].item<I>() : 0;
    return Tensors{n.attr_i("upper", 1) ? at::triu(in[0], k) : at::tril(in[0], k)};
  };
  t["Tile"] = [](const Node&, const Tensors& in, const Graph&, bool) {
    const at::Tensor r = in[1].to(at::kLong).contiguous();
    return Tensors{in[0].repeat(std::vector<I>(r.data_ptr<I>(), r.data_ptr<I>() + r.numel()))};
  };
  t["DepthToSpace"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const I b = n.attr_i("blocksize", 1), N = in[0].size(0), C = in[0].size(1), H = in[0].size(2), W = in[0].size(3);
    const I c = C / (b * b);
    const at::Tensor y = n.attr_s("mode", "DCR") == "CRD"
                             ? in[0].reshape({N, c, b, b, H, W}).permute({0, 1, 4, 2, 5, 3})
                             : in[0].reshape({N, b, b, c, H, W}).permute({0, 3, 4, 1, 5, 2});
    return Tensors{y.reshape({N, c, H * b, W * b})};
  };
  t["SpaceToDepth"] = [](const Node& n, const Tensors& in, const Graph&, bool) {
    const I b = n.attr_i("blocksize", 1), N = in[0].size(0), C = in[0].size(1), H = in[0].size(2), W = in[0].size(3);
    return Tensors{
        in[0].reshape({N, C, H / b, b, W / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({N, C * b * b, H / b, W / b})};
  };
}

// RNN, GRU, LSTM as the time loop of ATen calls a PyTorch user writes for a cell (ONNX's gate
// orders and GRU's linear_before_reset either way, which torch.nn.GRU's fused kernel does not
// offer), so that autograd differentiates through time. X [T, B, I] (layout 1: [B, T, I]).
Tensors recurrent(const Node& n, const Tensors& in) {
  const bool bf = n.attr_i("layout", 0) != 0;
  const std::string direction = n.attr_s("direction", "forward");
  const I h_size = n.attr_i("hidden_size", 0), dirs = direction == "bidirectional" ? 2 : 1;
  auto given = [&](std::size_t i) { return i < in.size() && in[i].defined(); };
  const at::Tensor x = bf ? in[0].transpose(0, 1) : in[0];
  auto state = [&](std::size_t i) { return given(i) ? (bf ? in[i].transpose(0, 1) : in[i]) : at::Tensor(); };
  const at::Tensor h0 = state(5), c0 = state(6);
  const I steps = x.size(0), batch = x.size(1);
  Tensors ys, hs, cs;
  for (I d = 0; d < dirs; ++d) {
    const at::Tensor w = in[1][d], r = in[2][d];
    const at::Tensor wb = given(3) ? in[3][d].narrow(0, 0, w.size(0)) : at::zeros({w.size(0)}, w.options());
    const at::Tensor rb = given(3) ? in[3][d].narrow(0, w.size(0), w.size(0)) : at::zeros({w.size(0)}, w.options());
    at::Tensor h = h0.defined() ? h0[d] : at::zeros({batch, h_size}, x.options());
    at::Tensor c = c0.defined() ? c0[d] : at::zeros({batch, h_size}, x.options());
    const bool reverse = d == 1 || direction == "reverse";
    Tensors out(static_cast<std::size_t>(steps));
    for (I k = 0; k < steps; ++k) {
      const I step = reverse ? steps - 1 - k : k;
      const at::Tensor xw = at::matmul(x[step], w.t()) + wb;
      if (n.op == "RNN") {
        h = at::tanh(xw + at::matmul(h, r.t()) + rb);
      } else if (n.op == "LSTM") {  // gates i, o, f, c; peepholes i, o, f
        const auto g = (xw + at::matmul(h, r.t()) + rb).chunk(4, 1);
        const auto p = given(7) ? in[7][d].chunk(3, 0) : std::vector<at::Tensor>{};
        const at::Tensor i = at::sigmoid(p.empty() ? g[0] : g[0] + p[0] * c);
        const at::Tensor f = at::sigmoid(p.empty() ? g[2] : g[2] + p[2] * c);
        c = f * c + i * at::tanh(g[3]);
        const at::Tensor o = at::sigmoid(p.empty() ? g[1] : g[1] + p[1] * c);
        h = o * at::tanh(c);
      } else {  // GRU: gates z, r, h
        const auto xg = xw.chunk(3, 1), rw = r.chunk(3, 0), rbs = rb.chunk(3, 0);
        const at::Tensor z = at::sigmoid(xg[0] + at::matmul(h, rw[0].t()) + rbs[0]);
        const at::Tensor reset = at::sigmoid(xg[1] + at::matmul(h, rw[1].t()) + rbs[1]);
        const at::Tensor hh = n.attr_i("linear_before_reset", 0)
                                  ? at::tanh(xg[2] + reset * (at::matmul(h, rw[2].t()) + rbs[2]))
                                  : at::tanh(xg[2] + at::matmul(reset * h, rw[2].t()) + rbs[2]);
        h = (1 - z) * hh + z * h;
      }
      out[static_cast<std::size_t>(step)] = h;
    }
    ys.push_back(at::stack(out, 0));  // [T, B, H]
    hs.push_back(h);
    cs.push_back(c);
  }
  at::Tensor y = at::stack(ys, 1), yh = at::stack(hs, 0), yc = at::stack(cs, 0);  // [T, D, B, H], [D, B, H]
  if (bf) y = y.permute({2, 0, 1, 3}), yh = yh.transpose(0, 1), yc = yc.transpose(0, 1);
  return n.op == "LSTM" ? Tensors{y, yh, yc} : Tensors{y, yh};
}

}  // namespace

Tensors window3d(const Node& n, const Tensors& in) {
  const auto ks = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"), dl = n.attr_ints("dilations"),
             pd = n.attr_ints("pads");
  const bool sym = pd[0] == pd[3] && pd[1] == pd[4] && pd[2] == pd[5];
  const std::vector<I> pads = sym ? std::vector<I>{pd[0], pd[1], pd[2]} : std::vector<I>{0, 0, 0};
  const std::vector<I> aten_pads{pd[2], pd[5], pd[1], pd[4], pd[0], pd[3]};  // the last axis first
  if (n.op == "Conv") {
    const at::Tensor x = sym ? in[0] : at::constant_pad_nd(in[0], aten_pads, 0);
    return Tensors{at::convolution(x, in[1], in.size() > 2 ? c10::optional<at::Tensor>(in[2]) : c10::nullopt, st, pads,
                                   dl, false, {0, 0, 0}, n.attr_i("group", 1))};
  }
  const bool ceil = n.attr_i("ceil_mode", 0) != 0;
  if (n.op == "MaxPool") {
    const at::Tensor x = sym ? in[0] : at::constant_pad_nd(in[0], aten_pads, -std::numeric_limits<double>::infinity());
    return Tensors{at::max_pool3d(x, ks, st, pads, dl, ceil)};
  }
  const bool include = n.attr_i("count_include_pad", 0) != 0;
  if (sym && 2 * pd[0] <= ks[0] && 2 * pd[1] <= ks[1] && 2 * pd[2] <= ks[2])
    return Tensors{at::avg_pool3d(in[0], ks, st, pads, ceil, include)};
  // ATen pads symmetrically, by at most half the window: pad with zeros first, then divide the
  // window sums by the taps that are real (or, counting padding, inside the padded volume).
  at::Tensor y = at::avg_pool3d(at::constant_pad_nd(in[0], aten_pads, 0), ks, st, {0, 0, 0}, ceil, true);
  if (!include)
    y = y / at::avg_pool3d(at::constant_pad_nd(at::ones_like(in[0]), aten_pads, 0), ks, st, {0, 0, 0}, ceil, true);
  return Tensors{y};
}

std::string window3d_untranslatable(const Node& n) {
  // ATen's ceil mode drops a last window that would start in the trailing padding; ONNX keeps it.
  return n.attr_i("ceil_mode", 0) ? "a 3-D window in ceil mode is not translated" : "";
}

void add_breadth_ops(std::map<std::string, Op>& t) {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    t[op] = [](const Node& n, const Tensors& in, const Graph&, bool) { return recurrent(n, in); };
  add_unary(t);
  add_many_and_logic(t);
  add_reductions(t);
  add_indexing(t);
}

}  // namespace d500::native
