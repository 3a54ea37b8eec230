// The descriptors of device_ops.hpp, made from a node whose attributes shape inference has
// normalised (positive axes, a full permutation).
#include "backends/device_ops.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include "backends/conv_geom.hpp"
#include "backends/graph.hpp"
#include "backends/graph_ops.hpp"

namespace d500::dev {
namespace {

bool all_f32(const std::vector<TensorView>& ts) {
  return std::all_of(ts.begin(), ts.end(), [](const TensorView& t) { return !t.present() || t.dtype == DType::F32; });
}

// Row-major strides of `shape` right-aligned to `rank` axes, 0 where the operand has size 1 (or no
// such axis): broadcast along the output.
void broadcast_strides(const Shape& shape, int rank, I* s) {
  I stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int k = d - (rank - static_cast<int>(shape.size()));
    const I size = k >= 0 ? shape[static_cast<std::size_t>(k)] : 1;
    s[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
}

// The index space of an output of shape y (rank <= kMaxRank), no operand strides yet.
Strides output_space(const Shape& y) {
  Strides s;
  s.rank = static_cast<int>(y.size());
  for (int d = 0; d < s.rank; ++d) s.dims[d] = y[static_cast<std::size_t>(d)];
  s.n = numel(y);
  return s;
}

}  // namespace

std::optional<Binary> binary_of(const NodeProblem& p) {
  const std::string& op = p.node->op;
  Binary k;
  if (op == "Where") {  // a bool condition picks between float32 branches
    if (p.in.size() != 3 || p.in[0].dtype != DType::Bool || p.in[1].dtype != DType::F32 ||
        p.in[2].dtype != DType::F32 || !all_f32(p.out))
      return std::nullopt;
    const Shape& y = *p.out[0].shape;
    if (y.size() > static_cast<std::size_t>(kMaxRank)) return std::nullopt;
    k.op = BinaryOp::Where;
    k.s = output_space(y);
    broadcast_strides(*p.in[1].shape, k.s.rank, k.s.sa);
    broadcast_strides(*p.in[2].shape, k.s.rank, k.s.sb);
    broadcast_strides(*p.in[0].shape, k.s.rank, k.s.sc);
    k.cond = static_cast<const std::uint8_t*>(p.in[0].data);
    return k;
  }
  if (op == "Add")
    k.op = BinaryOp::Add;
  else if (op == "Sub")
    k.op = BinaryOp::Sub;
  else if (op == "Mul")
    k.op = BinaryOp::Mul;
  else if (op == "Div")
    k.op = BinaryOp::Div;
  else if (op == "Pow")
    k.op = BinaryOp::Pow;
  else
    return std::nullopt;
  if (p.in.size() != 2 || !p.in[0].present() || !p.in[1].present() || p.in[0].dtype != DType::F32 || !all_f32(p.out))
    return std::nullopt;
  if (k.op == BinaryOp::Pow && p.in[1].dtype == DType::I64)
    k.b_elem = Elem::I64;
  else if (k.op == BinaryOp::Pow && p.in[1].dtype == DType::I32)
    k.b_elem = Elem::I32;
  else if (p.in[1].dtype != DType::F32)
    return std::nullopt;
  const Shape& y = *p.out[0].shape;
  if (y.size() > static_cast<std::size_t>(kMaxRank) || p.in[0].shape->size() > y.size() ||
      p.in[1].shape->size() > y.size())
    return std::nullopt;
  k.s = output_space(y);
  broadcast_strides(*p.in[0].shape, k.s.rank, k.s.sa);
  broadcast_strides(*p.in[1].shape, k.s.rank, k.s.sb);
  return k;
}

std::optional<Unary> unary_of(const NodeProblem& p) {
  static const std::pair<const char*, UnaryOp> kOps[] = {{"LeakyRelu", UnaryOp::LeakyRelu},
                                                         {"Sigmoid", UnaryOp::Sigmoid},
                                                         {"Tanh", UnaryOp::Tanh},
                                                         {"HardSigmoid", UnaryOp::HardSigmoid},
                                                         {"HardSwish", UnaryOp::HardSwish},
                                                         {"Sqrt", UnaryOp::Sqrt},
                                                         {"Erf", UnaryOp::Erf},
                                                         {"Exp", UnaryOp::Exp},
                                                         {"Log", UnaryOp::Log},
                                                         {"Neg", UnaryOp::Neg},
                                                         {"Abs", UnaryOp::Abs},
                                                         {"Reciprocal", UnaryOp::Reciprocal},
                                                         {"Clip", UnaryOp::Clip}};
  const auto* it = std::find_if(std::begin(kOps), std::end(kOps), [&](const auto& e) { return p.node->op == e.first; });
  if (it == std::end(kOps) || p.in.empty() || !p.in[0].present() || p.in[0].dtype != DType::F32 || !all_f32(p.out))
    return std::nullopt;
  Unary k;
  k.op = it->second;
  k.n = p.in[0].numel();
  // The reference's defaults (ONNX's): LeakyRelu alpha 0.01; HardSigmoid alpha 0.2, beta 0.5.
  if (k.op == UnaryOp::LeakyRelu) k.alpha = static_cast<float>(p.node->attr_f("alpha", 0.01));
  if (k.op == UnaryOp::HardSigmoid)
    k.alpha = static_cast<float>(p.node->attr_f("alpha", 0.2)),
    k.beta = static_cast<float>(p.node->attr_f("beta", 0.5));
  if (k.op == UnaryOp::Clip) {  // attributes before opset 11, constant inputs after
    k.alpha = -INFINITY, k.beta = INFINITY;
    if (p.opset < 11) {
      k.alpha = static_cast<float>(p.node->attr_f("min", -INFINITY)),
      k.beta = static_cast<float>(p.node->attr_f("max", INFINITY));
    } else {
      if (p.in.size() > 1 && p.in[1].present()) k.lo = p.in[1].as<const float>();
      if (p.in.size() > 2 && p.in[2].present()) k.hi = p.in[2].as<const float>();
    }
  }
  return k;
}

std::optional<Reduce> reduce_of(const NodeProblem& p) {
  const bool mean = p.node->op == "ReduceMean";
  if ((!mean && p.node->op != "ReduceSum") || !p.node->has("axes") || p.in[0].dtype != DType::F32 || !all_f32(p.out))
    return std::nullopt;
  const Shape& x = *p.in[0].shape;
  if (x.size() > static_cast<std::size_t>(kMaxRank)) return std::nullopt;
  const int rank = static_cast<int>(x.size());
  bool reduced[kMaxRank] = {};
  for (const I a : p.node->attrs.at("axes").ints) {  // positive, made so by inference
    if (a < 0 || a >= rank) return std::nullopt;
    reduced[a] = true;
  }
  I xs[kMaxRank] = {}, ys[kMaxRank] = {};  // row-major strides of x and of y (its keepdims layout)
  I sx = 1, sy = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[d] = sx, sx *= x[static_cast<std::size_t>(d)];
    ys[d] = reduced[d] ? 0 : sy;
    if (!reduced[d]) sy *= x[static_cast<std::size_t>(d)];
  }
  Reduce k;
  k.mean = mean;
  k.kept.rank = k.within.rank = k.back.rank = rank;
  k.kept.n = k.within.n = 1;
  for (int d = 0; d < rank; ++d) {
    const I size = x[static_cast<std::size_t>(d)];
    k.kept.dims[d] = reduced[d] ? 1 : size, k.kept.sa[d] = xs[d];
    k.within.dims[d] = reduced[d] ? size : 1, k.within.sa[d] = xs[d];
    k.back.dims[d] = size, k.back.sa[d] = ys[d];
    (reduced[d] ? k.within.n : k.kept.n) *= size;
  }
  k.back.n = numel(x);
  if (p.out[0].numel() != k.kept.n) return std::nullopt;
  k.count = static_cast<float>(k.within.n);
  return k;
}

std::optional<Strides> transpose_of(const NodeProblem& p, bool backward) {
  if (p.node->op != "Transpose" || !all_f32(p.in) || !all_f32(p.out)) return std::nullopt;
  const Shape& x = *p.in[0].shape;
  const std::vector<I> perm = p.node->attr_ints("perm");
  if (x.size() > static_cast<std::size_t>(kMaxRank) || perm.size() != x.size()) return std::nullopt;
  const int rank = static_cast<int>(x.size());
  I xs[kMaxRank] = {};  // the input's row-major strides
  I stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[d] = stride;
    stride *= x[static_cast<std::size_t>(d)];
  }
  Strides s;
  s.rank = rank;
  s.n = numel(x);
  if (!backward) {  // y[i0..] = x at axis perm[d] <- i_d
    for (int d = 0; d < rank; ++d) {
      const auto a = static_cast<std::size_t>(perm[static_cast<std::size_t>(d)]);
      s.dims[d] = x[a], s.sa[d] = xs[a];
    }
    return s;
  }
  // dx[j..] = dy at the output axis that came from input axis d: dy's strides along dx's axes.
  const Shape& y = *p.out[0].shape;
  I ys[kMaxRank] = {};
  stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    ys[d] = stride;
    stride *= y[static_cast<std::size_t>(d)];
  }
  for (int d = 0; d < rank; ++d) {
    s.dims[perm[static_cast<std::size_t>(d)]] = y[static_cast<std::size_t>(d)];
    s.sa[perm[static_cast<std::size_t>(d)]] = ys[d];
  }
  return s;
}

std::optional<LayerNorm> layer_norm_of(const NodeProblem& p) {
  if (p.node->op != "LayerNormalization" || p.in.size() < 2 || !all_f32(p.in) || !all_f32(p.out)) return std::nullopt;
  const Shape& x = *p.in[0].shape;
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", -1));  // made positive by inference
  if (axis >= x.size()) return std::nullopt;
  LayerNorm k;
  k.rows = 1, k.inner = 1;
  for (std::size_t i = 0; i < x.size(); ++i) (i < axis ? k.rows : k.inner) *= x[i];
  if (p.in[1].numel() != k.inner || (p.in.size() > 2 && p.in[2].present() && p.in[2].numel() != k.inner))
    return std::nullopt;
  k.eps = static_cast<float>(p.node->attr_f("epsilon", 1e-5));
  return k;
}

std::optional<Gather> gather_of(const NodeProblem& p) {
  if (p.node->op != "Gather" || p.in.size() != 2 || p.in[0].dtype != DType::F32) return std::nullopt;
  if (p.in[1].dtype != DType::I64 && p.in[1].dtype != DType::I32) return std::nullopt;
  const Shape& x = *p.in[0].shape;
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));  // made positive by inference
  if (axis >= x.size()) return std::nullopt;
  Gather k;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (i < axis)
      k.outer *= x[i];
    else if (i > axis)
      k.inner *= x[i];
  k.axis_dim = x[axis];
  k.count = p.in[1].numel();
  k.idx64 = p.in[1].dtype == DType::I64;
  // The gradient's sort keys and positions are int32.
  if (k.count < 1 || k.axis_dim < 1 || k.count > 0x7fffffff || k.axis_dim >= 0x7fffffff) return std::nullopt;
  return k;
}

std::optional<std::vector<Blocks>> blocks_of(const NodeProblem& p) {
  const bool concat = p.node->op == "Concat";
  if (!concat && p.node->op != "Split") return std::nullopt;
  const std::vector<TensorView>& parts = concat ? p.in : p.out;
  const TensorView& whole = concat ? p.out[0] : p.in[0];
  if (whole.dtype != DType::F32) return std::nullopt;
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));  // made positive by inference
  const Shape& w = *whole.shape;
  if (axis >= w.size()) return std::nullopt;
  I outer = 1, inner = 1;
  for (std::size_t d = 0; d < w.size(); ++d)
    if (d < axis)
      outer *= w[d];
    else if (d > axis)
      inner *= w[d];
  const I whole_block = w[axis] * inner;
  std::vector<Blocks> v;
  I at = 0;
  for (const TensorView& t : parts) {
    if (t.dtype != DType::F32 || t.shape->size() != w.size()) return std::nullopt;
    const I b = (*t.shape)[axis] * inner;
    Blocks k;
    k.outer = outer, k.width = b;
    // Concat: the part into the whole at `at`; Split: the whole at `at` into the part.
    if (concat)
      k.src_block = b, k.src_at = 0, k.dst_block = whole_block, k.dst_at = at;
    else
      k.src_block = whole_block, k.src_at = at, k.dst_block = b, k.dst_at = 0;
    v.push_back(k);
    at += b;
  }
  if (at != whole_block) return std::nullopt;
  return v;
}

Blocks swap_blocks(const Blocks& b) {
  Blocks s = b;
  s.src_block = b.dst_block, s.src_at = b.dst_at, s.dst_block = b.src_block, s.dst_at = b.src_at;
  return s;
}

std::optional<Window> window_of(const NodeProblem& p) {
  const bool slice = p.node->op == "Slice";
  if ((!slice && p.node->op != "Pad") || p.in[0].dtype != DType::F32 || p.out[0].dtype != DType::F32)
    return std::nullopt;
  const Shape& x = *p.in[0].shape;
  const Shape& y = *p.out[0].shape;
  if (x.size() != y.size() || x.size() > static_cast<std::size_t>(kMaxRank)) return std::nullopt;
  const int rank = static_cast<int>(x.size());
  Window k;
  k.rank = rank;
  if (slice) {
    const auto& starts = p.node->attrs.at("_starts").ints;  // every axis's, made explicit by inference
    const auto& steps = p.node->attrs.at("_steps").ints;
    if (starts.size() != x.size() || steps.size() != x.size()) return std::nullopt;
    for (int d = 0; d < rank; ++d)
      k.start[d] = starts[static_cast<std::size_t>(d)], k.step[d] = steps[static_cast<std::size_t>(d)];
  } else {
    const std::string mode = p.node->attr_s("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge") return std::nullopt;
    k.mode = mode == "reflect" ? PadMode::Reflect : mode == "edge" ? PadMode::Edge : PadMode::Constant;
    const auto& pads = p.node->attrs.at("_pads").ints;  // begins, then ends
    if (pads.size() != 2 * x.size()) return std::nullopt;
    for (int d = 0; d < rank; ++d) {
      const I begin = pads[static_cast<std::size_t>(d)], end = pads[x.size() + static_cast<std::size_t>(d)];
      // One reflection reaches every padded position (inference refuses longer pads), and an
      // edge needs an input to repeat.
      if (k.mode == PadMode::Reflect &&
          (begin >= x[static_cast<std::size_t>(d)] || end >= x[static_cast<std::size_t>(d)]) && (begin > 0 || end > 0))
        return std::nullopt;
      if (k.mode != PadMode::Constant && x[static_cast<std::size_t>(d)] < 1) return std::nullopt;
      k.start[d] = -begin, k.step[d] = 1;
    }
    k.value = static_cast<float>(p.node->attr_f("_value", 0));
  }
  I sx = 1, sy = 1;
  for (int d = rank - 1; d >= 0; --d) {
    k.xdims[d] = x[static_cast<std::size_t>(d)], k.ydims[d] = y[static_cast<std::size_t>(d)];
    if (k.step[d] == 0) return std::nullopt;
    k.xs[d] = sx, k.ys[d] = sy;
    sx *= k.xdims[d], sy *= k.ydims[d];
  }
  k.nx = sx, k.ny = sy;
  return k;
}

std::optional<Binary> expand_of(const NodeProblem& p) {
  if (p.node->op != "Expand" || p.in[0].dtype != DType::F32 || p.out[0].dtype != DType::F32) return std::nullopt;
  const Shape& y = *p.out[0].shape;
  if (y.size() > static_cast<std::size_t>(kMaxRank) || p.in[0].shape->size() > y.size()) return std::nullopt;
  Binary k;
  k.op = BinaryOp::Add;
  k.s = output_space(y);
  broadcast_strides(*p.in[0].shape, k.s.rank, k.s.sa);
  broadcast_strides(*p.in[0].shape, k.s.rank, k.s.sb);
  return k;
}

std::optional<Cast> cast_of(const NodeProblem& p) {
  if (p.node->op != "Cast") return std::nullopt;
  auto elem = [](DType t) -> std::optional<Elem> {
    switch (t) {
      case DType::F32: return Elem::F32;
      case DType::I64: return Elem::I64;
      case DType::I32: return Elem::I32;
      case DType::Bool: return Elem::Bool;
      default: return std::nullopt;
    }
  };
  const auto from = elem(p.in[0].dtype), to = elem(p.out[0].dtype);
  if (!from || !to) return std::nullopt;
  return Cast{*from, *to, p.in[0].numel()};
}

std::optional<BatchNorm> batch_norm_of(const NodeProblem& p) {
  if (!is_batch_norm(p.node->op) || p.in.size() < 5 || !all_f32(p.in) || !all_f32(p.out)) return std::nullopt;
  const Shape& x = *p.in[0].shape;
  if (x.size() < 2) return std::nullopt;
  BatchNorm k;
  k.n = x[0], k.c = x[1];
  for (std::size_t i = 2; i < x.size(); ++i) k.plane *= x[i];
  k.eps = static_cast<float>(p.node->attr_f("epsilon", 1e-5));
  k.momentum = static_cast<float>(p.node->attr_f("momentum", 0.9));
  k.training = p.training || p.node->attr_i("training_mode", 0) != 0;  // the reference's bn_training
  k.nhwc = p.in[0].channels_last;
  k.bf16 = p.in[0].bf16;
  k.relu = p.node->op == "BatchNormRelu";
  return k;
}

std::optional<Sce> sce_of(const NodeProblem& p) {
  if (p.node->op != "SoftmaxCrossEntropyLoss" || p.in[0].dtype != DType::F32 || !all_f32(p.out)) return std::nullopt;
  if (p.in[1].dtype != DType::I64 && p.in[1].dtype != DType::I32) return std::nullopt;
  const Shape& s = *p.in[0].shape;
  if (s.size() < 2) return std::nullopt;
  Sce k;
  k.c = s[1];
  for (std::size_t i = 2; i < s.size(); ++i) k.inner *= s[i];
  k.rows = s[0] * k.inner;
  k.labels64 = p.in[1].dtype == DType::I64;
  const std::string reduction = p.node->attr_s("reduction", "mean");
  k.reduction = reduction == "sum" ? Sce::Sum : reduction == "none" ? Sce::None : Sce::Mean;
  k.has_ignore = p.node->has("ignore_index"), k.ignore = p.node->attr_i("ignore_index", 0);
  if (p.in.size() > 2 && p.in[2].present()) {
    if (p.in[2].dtype != DType::F32) return std::nullopt;
    k.weight = p.in[2].as<const float>();
  }
  return k;
}

Takes channels_last_of(const NodeProblem& p) {
  const std::string& op = p.node->op;
  if (p.in.empty() || p.in[0].dtype != DType::F32 || p.in[0].shape->size() != 4) return Takes::Never;
  const Shape& x = *p.in[0].shape;
  if (op == "Conv" && p.in.size() >= 2 && p.in[1].shape->size() == 4) {
    const ConvGeom g = conv_geom(*p.node, x, (*p.in[1].shape)[0]);
    return g.pt == g.pb && g.pl == g.pr ? Takes::Each : Takes::Never;
  }
  if (is_batch_norm(op)) return p.in.size() >= 5 ? Takes::Same : Takes::Never;
  if (op == "Relu" || op == "AddRelu") return Takes::Same;  // AddRelu: operands of one shape
  if (op == "Add")
    return p.in.size() == 2 && p.in[1].dtype == DType::F32 && *p.in[1].shape == x ? Takes::Same : Takes::Never;
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return Takes::Same;
  if (op == "MaxPool" || op == "AveragePool") {
    if (p.out.size() != 1 || p.node->attr_i("ceil_mode", 0) != 0) return Takes::Never;
    const ConvGeom g = conv_geom(*p.node, x, x[1]);
    const bool fits = g.pt == g.pb && g.pl == g.pr && g.dh == 1 && g.dw == 1 &&
                      g.p == (g.h + g.pt + g.pb - g.kh) / g.sh + 1 && g.q == (g.w + g.pl + g.pr - g.kw) / g.sw + 1;
    return fits ? Takes::Same : Takes::Never;
  }
  return Takes::Never;
}

Takes bf16_storage_of(const NodeProblem& p) {
  const Takes how = channels_last_of(p);
  const std::string& op = p.node->op;
  if (how == Takes::Never || op == "GlobalMaxPool") return Takes::Never;
  // An input or output the node has (its shape is known at planning, before its data is).
  auto has = [](const std::vector<TensorView>& side, std::size_t i) { return i < side.size() && side[i].shape; };
  if ((op == "MaxPool" || op == "AveragePool") && has(p.out, 0) &&
      numel(*p.out[0].shape) == (*p.out[0].shape)[0] * (*p.out[0].shape)[1])
    return Takes::Never;  // an output of one value a channel stays float32, and cuDNN's pooling takes one type
  if (is_batch_norm(op))
    for (std::size_t j = 1; j < p.out.size(); ++j)
      if (has(p.out, j)) return Takes::Never;
  return how;
}

std::optional<GlobalPool> global_pool_of(const NodeProblem& p) {
  if (p.node->op != "GlobalAveragePool" || !p.in[0].bf16 || p.out[0].bf16) return std::nullopt;
  const Shape& x = *p.in[0].shape;
  if (x.size() != 4) return std::nullopt;
  return GlobalPool{x[0], x[1], x[2] * x[3], p.in[0].channels_last};
}

}  // namespace d500::dev
