// Indexing and rearranging beyond Gather and Transpose (ops_shape.cpp): GatherElements and
// ScatterElements (per-element indices along an axis), Trilu (a triangle of the last two axes),
// Tile, DepthToSpace and SpaceToDepth, and the element-wise Hardmax and IsInf. Float
// tensors hold T; other types move as bytes where the op only moves data. Work: none (data
// movement) except Hardmax and IsInf, one FLOP per element.
#include <cstring>
#include <limits>

#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

double no_work(const NodeProblem&, bool) { return 0; }
double per_element(const NodeProblem& p, bool) { return elems(p); }

template <class T>
std::size_t bytes_of(const TensorView& t) {
  return t.dtype == DType::F32 ? sizeof(T) : dtype_size(t.dtype);
}

// The multi-index of position i of a shape, and the offset of a multi-index under strides.
void unravel(const Dims& d, I i, Dims& idx) {
  idx.n = d.n;
  for (std::size_t k = d.n; k-- > 0;) {
    idx[k] = i % d[k];
    i /= d[k];
  }
}
I ravel(const Dims& st, const Dims& idx) {
  I off = 0;
  for (std::size_t k = 0; k < idx.n; ++k) off += idx[k] * st[k];
  return off;
}

// ---- GatherElements (out[i] = data[i with axis -> indices[i]]) and ScatterElements -------------
I element_index(const NodeProblem& p, std::size_t slot, I at, I dim) {
  I k = int_at(p.in[slot], at);
  if (k < 0) k += dim;
  if (k < 0 || k >= dim)
    throw Error(p.node->label() + ": index " + std::to_string(int_at(p.in[slot], at)) + " is out of range [0, " +
                std::to_string(dim) + ")");
  return k;
}
template <class T>
void gather_elements_fwd(const NodeProblem& p, T*) {
  const Dims d(shape_in(p, 0)), is(shape_in(p, 1)), st(strides_of(shape_in(p, 0)));
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));
  const std::size_t es = bytes_of<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  Dims idx;
  for (I i = 0, n = is.count(); i < n; ++i) {
    unravel(is, i, idx);
    idx[axis] = element_index(p, 1, i, d[axis]);
    std::memcpy(y + static_cast<std::size_t>(i) * es, x + static_cast<std::size_t>(ravel(st, idx)) * es, es);
  }
}
template <class T>
void gather_elements_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const Dims d(shape_in(p, 0)), is(shape_in(p, 1)), st(strides_of(shape_in(p, 0)));
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  Dims idx;
  for (I i = 0, n = is.count(); i < n; ++i) {
    unravel(is, i, idx);
    idx[axis] = element_index(p, 1, i, d[axis]);
    dx[ravel(st, idx)] += dy[i];
  }
}
void infer_gather_elements(InferCtx& c) {
  const Shape& d = c.shape(0);
  if (d.empty()) c.fail("its data must have at least one axis");
  if (c.dtype(1) != DType::I64 && c.dtype(1) != DType::I32) c.fail("its indices must be int64 or int32");
  if (c.shape(1).size() != d.size()) c.fail("its indices must have the data's rank");
  c.node.attrs["axis"] = int_attr(c.axis(c.node.attr_i("axis", 0), d.size(), "axis"));
  c.set(0, c.dtype(0), c.shape(1));
}

// ScatterElements: data with updates written at the indices (reduction none, add or mul).
template <class T>
void scatter_elements_fwd(const NodeProblem& p, T*) {
  const Dims d(shape_in(p, 0)), is(shape_in(p, 1)), st(strides_of(shape_in(p, 0)));
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));
  const std::string red = p.node->attr_s("reduction", "none");
  const T* x = cin<T>(p, 0);
  const T* u = cin<T>(p, 2);
  T* y = out<T>(p, 0);
  std::copy(x, x + p.in[0].numel(), y);
  Dims idx;
  for (I i = 0, n = is.count(); i < n; ++i) {
    unravel(is, i, idx);
    idx[axis] = element_index(p, 1, i, d[axis]);
    T& e = y[ravel(st, idx)];
    e = red == "add" ? e + u[i] : red == "mul" ? e * u[i] : u[i];
  }
}
void infer_scatter_elements(InferCtx& c) {
  c.require_float();
  c.require_float(2);
  if (c.dtype(1) != DType::I64 && c.dtype(1) != DType::I32) c.fail("its indices must be int64 or int32");
  if (c.shape(1) != c.shape(2)) c.fail("its indices and updates must have the same shape");
  if (c.shape(1).size() != c.shape(0).size()) c.fail("its indices must have the data's rank");
  const std::string red = c.node.attr_s("reduction", "none");
  if (red != "none" && red != "add" && red != "mul") c.fail("reduction \"" + red + "\" is not none, add or mul");
  c.node.attrs["axis"] = int_attr(c.axis(c.node.attr_i("axis", 0), c.shape(0).size(), "axis"));
  c.set(0, DType::F32, c.shape(0));
}

// ---- Trilu: the upper (upper = 1) or lower triangle of the last two axes, from diagonal k ----
bool trilu_keeps(const NodeProblem& p, I i, I r, I c) {
  const I k = p.in.size() > 1 && p.in[1].present() ? int_at(p.in[1], 0) : 0;
  (void)i;
  return p.node->attr_i("upper", 1) != 0 ? c - r >= k : c - r <= k;
}
template <class T>
void trilu_fwd(const NodeProblem& p, T*) {
  const Shape& s = shape_in(p, 0);
  const I rows = s[s.size() - 2], cols = s.back(), n = p.in[0].numel();
  const std::size_t es = bytes_of<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  for (I i = 0; i < n; ++i) {
    const I c = i % cols, r = i / cols % rows;
    if (trilu_keeps(p, i, r, c))
      std::memcpy(y + static_cast<std::size_t>(i) * es, x + static_cast<std::size_t>(i) * es, es);
    else
      std::memset(y + static_cast<std::size_t>(i) * es, 0, es);
  }
}
template <class T>
void trilu_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  const Shape& s = shape_in(p, 0);
  const I rows = s[s.size() - 2], cols = s.back(), n = p.in[0].numel();
  for (I i = 0; i < n; ++i) dx[i] = dy && trilu_keeps(p, i, i / cols % rows, i % cols) ? dy[i] : T(0);
}
void infer_trilu(InferCtx& c) {
  if (c.shape(0).size() < 2) c.fail("its input needs at least two axes");
  if (c.has_in(1) && !c.is_const(1)) c.fail("its k must be a constant");
  c.set(0, c.dtype(0), c.shape(0));
}

// ---- Tile: the input repeated `repeats` times along each axis ----------------------------------
template <class T>
void tile_fwd(const NodeProblem& p, T*) {
  const Dims x(shape_in(p, 0)), y(shape_out(p, 0)), st(strides_of(shape_in(p, 0)));
  const std::size_t es = bytes_of<T>(p.in[0]);
  const auto* src = p.in[0].as<const std::byte>();
  auto* dst = p.out[0].as<std::byte>();
  Dims idx;
  for (I i = 0, n = y.count(); i < n; ++i) {
    unravel(y, i, idx);
    for (std::size_t k = 0; k < idx.n; ++k) idx[k] %= x[k];
    std::memcpy(dst + static_cast<std::size_t>(i) * es, src + static_cast<std::size_t>(ravel(st, idx)) * es, es);
  }
}
template <class T>
void tile_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const Dims x(shape_in(p, 0)), y(shape_out(p, 0)), st(strides_of(shape_in(p, 0)));
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  Dims idx;
  for (I i = 0, n = y.count(); i < n; ++i) {
    unravel(y, i, idx);
    for (std::size_t k = 0; k < idx.n; ++k) idx[k] %= x[k];
    dx[ravel(st, idx)] += dy[i];
  }
}
void infer_tile(InferCtx& c) {
  const Shape& x = c.shape(0);
  const std::vector<I> r = c.ints(1, "repeats");
  if (r.size() != x.size()) c.fail("its repeats must have one value per axis of the input");
  Shape s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (r[i] < 0) c.fail("a repeat count is negative");
    s.push_back(x[i] * r[i]);
  }
  c.set(0, c.dtype(0), s);
}

// ---- DepthToSpace (DCR or CRD) and SpaceToDepth: [N, C, H, W] rearranged by blocksize b --------
// The source position in x of output element i.
I d2s_source(const NodeProblem& p, I i, bool to_space) {
  const Shape& xs = shape_in(p, 0);
  const Shape& ys = shape_out(p, 0);
  const I b = p.node->attr_i("blocksize", 1);
  const I C = ys[1], H = ys[2], W = ys[3];
  const I w = i % W, h = i / W % H, c = i / (W * H) % C, n = i / (W * H * C);
  if (to_space) {  // y [N, C, H b, W b] from x [N, C b b, H, W]
    const I bh = h % b, bw = w % b, xh = h / b, xw = w / b;
    const I xc = p.node->attr_s("mode", "DCR") == "CRD" ? (c * b + bh) * b + bw : (bh * b + bw) * C + c;
    return ((n * xs[1] + xc) * xs[2] + xh) * xs[3] + xw;
  }
  // y [N, C b b, H / b, W / b] from x [N, C, H, W]: channel c = (bh b + bw) Cx + cx.
  const I cx = c % xs[1], blk = c / xs[1], bh = blk / b, bw = blk % b;
  return ((n * xs[1] + cx) * xs[2] + h * b + bh) * xs[3] + w * b + bw;
}
template <bool ToSpace, class T>
void d2s_fwd(const NodeProblem& p, T*) {
  const std::size_t es = bytes_of<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  for (I i = 0, n = p.out[0].numel(); i < n; ++i)
    std::memcpy(y + static_cast<std::size_t>(i) * es, x + static_cast<std::size_t>(d2s_source(p, i, ToSpace)) * es, es);
}
template <bool ToSpace, class T>
void d2s_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  for (I i = 0, n = p.out[0].numel(); i < n; ++i) dx[d2s_source(p, i, ToSpace)] = dy[i];
}
void infer_d2s(InferCtx& c) {
  const Shape& x = c.shape(0);
  const I b = c.node.attr_i("blocksize", 0);
  if (x.size() != 4) c.fail("its input must be [N, C, H, W]");
  if (b < 1) c.fail("blocksize must be positive");
  const std::string mode = c.node.attr_s("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("mode \"" + mode + "\" is not DCR or CRD");
  if (c.node.op == "DepthToSpace") {
    if (x[1] % (b * b)) c.fail("its channels are not a multiple of blocksize squared");
    c.set(0, c.dtype(0), {x[0], x[1] / (b * b), x[2] * b, x[3] * b});
  } else {
    if (x[2] % b || x[3] % b) c.fail("its height and width are not multiples of blocksize");
    c.set(0, c.dtype(0), {x[0], x[1] * b * b, x[2] / b, x[3] / b});
  }
}

// ---- Hardmax: 1 at the first maximum along the axis, 0 elsewhere ---------------------------------
template <class T>
void hardmax_fwd(const NodeProblem& p, T*) {
  const Shape& s = shape_in(p, 0);
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", -1));
  I outer = 1, inner = 1;
  for (std::size_t i = 0; i < s.size(); ++i) (i < axis ? outer : i > axis ? inner : outer) *= i == axis ? 1 : s[i];
  const I dim = s[axis];
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I o = 0; o < outer; ++o)
    for (I in = 0; in < inner; ++in) {
      const I base = o * dim * inner + in;
      I best = 0;
      for (I k = 1; k < dim; ++k)
        if (x[base + k * inner] > x[base + best * inner]) best = k;
      for (I k = 0; k < dim; ++k) y[base + k * inner] = k == best ? T(1) : T(0);
    }
}
void infer_hardmax(InferCtx& c) {
  c.require_float();
  if (c.opset < 13) c.fail("Hardmax before opset 13 (a flattened 2-D view) is not supported");
  c.node.attrs["axis"] = int_attr(c.axis(c.node.attr_i("axis", -1), c.shape(0).size(), "axis"));
  c.set(0, DType::F32, c.shape(0));
}

// ---- IsInf (detect_positive, detect_negative) ----------------------------------------------
template <class T>
void isinf_fwd(const NodeProblem& p, T*) {
  const T* x = cin<T>(p, 0);
  auto* y = out<std::uint8_t>(p, 0);
  const bool pos = p.node->attr_i("detect_positive", 1) != 0, neg = p.node->attr_i("detect_negative", 1) != 0;
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) y[i] = std::isinf(x[i]) && (x[i] > 0 ? pos : neg) ? 1 : 0;
}
void infer_isinf(InferCtx& c) {
  c.require_float();
  c.set(0, DType::Bool, c.shape(0));
}
}  // namespace

void add_index_ops(std::vector<OpSchema>& t) {
  t.push_back(OpSchema{.op = "GatherElements",
                       .since = 11,
                       .infer = infer_gather_elements,
                       D500_FWD(gather_elements_fwd),
                       .bwd_f = gather_elements_bwd<float>,
                       .bwd_d = gather_elements_bwd<double>,
                       .flops = no_work,
                       .diff_in = 1,
                       .saved_in = 2});
  t.push_back(OpSchema{.op = "ScatterElements",
                       .since = 11,
                       .infer = infer_scatter_elements,
                       D500_FWD(scatter_elements_fwd),
                       .flops = no_work});
  t.push_back(OpSchema{.op = "Trilu",
                       .since = 14,
                       .infer = infer_trilu,
                       D500_FWD(trilu_fwd),
                       .bwd_f = trilu_bwd<float>,
                       .bwd_d = trilu_bwd<double>,
                       .flops = no_work,
                       .diff_in = 1,
                       .saved_in = 2});
  t.push_back(OpSchema{.op = "Tile",
                       .since = 6,
                       .infer = infer_tile,
                       D500_FWD(tile_fwd),
                       .bwd_f = tile_bwd<float>,
                       .bwd_d = tile_bwd<double>,
                       .flops = no_work,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "DepthToSpace",
                       .since = 11,
                       .infer = infer_d2s,
                       .fwd_f = d2s_fwd<true, float>,
                       .fwd_d = d2s_fwd<true, double>,
                       .bwd_f = d2s_bwd<true, float>,
                       .bwd_d = d2s_bwd<true, double>,
                       .flops = no_work,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "SpaceToDepth",
                       .since = 1,
                       .infer = infer_d2s,
                       .fwd_f = d2s_fwd<false, float>,
                       .fwd_d = d2s_fwd<false, double>,
                       .bwd_f = d2s_bwd<false, float>,
                       .bwd_d = d2s_bwd<false, double>,
                       .flops = no_work,
                       .diff_in = 1});
  t.push_back(
      OpSchema{.op = "Hardmax", .since = 13, .infer = infer_hardmax, D500_FWD(hardmax_fwd), .flops = per_element});
  t.push_back(OpSchema{.op = "IsInf", .since = 10, .infer = infer_isinf, D500_FWD(isinf_fwd), .flops = per_element});
}

}  // namespace d500::ref
