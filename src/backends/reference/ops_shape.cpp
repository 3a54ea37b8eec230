// Shapes and data movement: the views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
// Transpose, Concat, Split, Slice, Gather, Expand, ReduceMean and ReduceSum, and the ops that only
// run at load time on constants (Shape, Constant, ConstantOfShape, Range). The movement ops are
// type-agnostic: they move elements of any supported type. Work: none for views and movement
// (0 FLOPs), one FLOP per input element for reductions.
#include "backends/reference/ops_common.hpp"
#include "common/random.hpp"

namespace d500::ref {
namespace {

// Bytes of one element as stored: float tensors hold T.
template <class T>
std::size_t esize(const TensorView& t) {
  return t.dtype == DType::F32 ? sizeof(T) : dtype_size(t.dtype);
}

double no_flops(const NodeProblem&, bool) { return 0; }

// ---- Views ---------------------------------------------------------------------------------------
// The executor gives a view's output its input's storage; when it cannot (a view of a graph
// input it must not alias), these copy.
template <class T>
void view_fwd(const NodeProblem& p, T*) {
  if (p.out[0].data != p.in[0].data)
    std::memcpy(p.out[0].data, p.in[0].data, static_cast<std::size_t>(p.in[0].numel()) * esize<T>(p.in[0]));
}
template <class T>
void view_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  const I n = p.in[0].numel();
  if (!dy)
    std::fill(dx, dx + n, T(0));
  else if (dx != dy)
    std::copy(dy, dy + n, dx);
}

void set_view(InferCtx& c, Shape s) {
  if (numel(s) != numel(c.shape(0))) c.fail("cannot view " + shape_str(c.shape(0)) + " as " + shape_str(s));
  c.set(0, c.dtype(0), std::move(s));
}

void infer_reshape(InferCtx& c) {
  const Shape& x = c.shape(0);
  const std::vector<I> want = c.ints(1, "shape");
  const bool allowzero = c.node.attr_i("allowzero", 0) != 0;
  Shape s(want.size());
  I known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1) {
      if (infer_at >= 0) c.fail("its shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (want[i] == 0 && !allowzero) {
      if (i >= x.size()) c.fail("its shape copies axis " + std::to_string(i) + " (a 0), which the input lacks");
      s[i] = x[i];
    } else if (want[i] < 0) {
      c.fail("its shape has a negative size " + std::to_string(want[i]));
    } else {
      s[i] = want[i];
    }
    known *= s[i];
  }
  if (infer_at >= 0) {
    if (known == 0 || numel(x) % known) c.fail("cannot infer the -1 of shape for input " + shape_str(x));
    s[static_cast<std::size_t>(infer_at)] = numel(x) / known;
  }
  set_view(c, s);
}

void infer_flatten(InferCtx& c) {
  const Shape& x = c.shape(0);
  const I r = static_cast<I>(x.size());
  I axis = c.node.attr_i("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r)
    c.fail("axis " + std::to_string(c.node.attr_i("axis", 1)) + " is out of range for rank " + std::to_string(r));
  I a = 1, b = 1;
  for (I i = 0; i < r; ++i) (i < axis ? a : b) *= x[static_cast<std::size_t>(i)];
  set_view(c, {a, b});
}

// Squeeze and Unsqueeze take axes as an attribute before opset 13 and as an input from it on.
std::vector<I> axes_of(InferCtx& c, bool required) {
  if (c.opset < 13 || c.node.has("axes")) return c.node.attr_ints("axes");
  if (c.has_in(1)) return c.ints(1, "axes");
  if (required) c.fail("its axes are required");
  return {};
}

void infer_squeeze(InferCtx& c) {
  const Shape& x = c.shape(0);
  std::vector<I> axes = axes_of(c, false);
  std::vector<bool> drop(x.size(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  }
  for (I a : axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, x.size(), "axes"));
    if (x[ax] != 1) c.fail("axis " + std::to_string(a) + " of " + shape_str(x) + " is not 1");
    drop[ax] = true;
  }
  Shape s;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!drop[i]) s.push_back(x[i]);
  set_view(c, s);
}

void infer_unsqueeze(InferCtx& c) {
  const Shape& x = c.shape(0);
  const std::vector<I> axes = axes_of(c, true);
  const std::size_t r = x.size() + axes.size();
  std::vector<bool> added(r, false);
  for (I a : axes) {
    const auto ax = static_cast<std::size_t>(c.axis(a, r, "axes"));
    if (added[ax]) c.fail("axis " + std::to_string(a) + " appears twice");
    added[ax] = true;
  }
  Shape s;
  std::size_t k = 0;
  for (std::size_t i = 0; i < r; ++i) s.push_back(added[i] ? 1 : x[k++]);
  set_view(c, s);
}

void infer_identity(InferCtx& c) {
  if (c.node.op == "Dropout" && c.out.size() > 1 && c.out[1])
    c.fail("its mask output is not supported (d500 runs Dropout as the identity, in both passes)");
  // Opset 12+: a training_mode input that is (or may be) true would drop values at random.
  if (c.node.op == "Dropout" && c.has_in(2)) {
    if (!c.is_const(2)) c.fail("its training_mode input must be a constant false: d500 runs Dropout as the identity");
    if (c.value[2][0] != std::byte{0})
      c.fail("training_mode is true: d500 runs Dropout as the identity, never at random");
  }
  c.set(0, c.dtype(0), c.shape(0));
}

// ---- Dropout in a training pass: each element kept with probability 1 - ratio and scaled by
// 1 / (1 - ratio), as frameworks train (in inference it is the view above). The mask is drawn
// from the node's seed (its `seed` attribute, else its name), the step and the pass's number
// within the step (a micro-batch's), kept in the kernel's scratch for the backward pass.
template <class T>
double dropout_ratio(const NodeProblem& p) {
  if (p.opset >= 12) return p.in.size() > 1 && p.in[1].present() ? static_cast<double>(cin<T>(p, 1)[0]) : 0.5;
  return p.node->attr_f("ratio", 0.5);
}
// The mask's key: (seed, step, pass within the step); the scratch's last 16 bytes keep the step
// and the passes run in it.
template <class T>
std::uint64_t dropout_key(const NodeProblem& p, T* scratch) {
  if (!p.step) return dropout_key(*p.node, 0, 0);
  std::int64_t kept[2];  // the step, the passes run in it
  auto* at = reinterpret_cast<std::byte*>(scratch + p.in[0].numel());
  std::memcpy(kept, at, sizeof kept);
  if (kept[0] != *p.step || kept[1] < 0) kept[0] = *p.step, kept[1] = 0;
  const std::uint64_t key = dropout_key(*p.node, kept[0], kept[1]);
  ++kept[1];
  std::memcpy(at, kept, sizeof kept);
  return key;
}

template <class T>
void dropout_fwd(const NodeProblem& p, T* scale) {
  const double r = dropout_ratio<T>(p);
  const std::uint64_t key = dropout_key(p, scale);
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const T keep = r < 1 ? static_cast<T>(1.0 / (1.0 - r)) : T(0);
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) {
    scale[i] = keep_element(key, static_cast<std::uint64_t>(i), r) ? keep : T(0);
    y[i] = x[i] * scale[i];
  }
}
template <class T>
void dropout_bwd(const NodeProblem& p, T* scale) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) dx[i] = dy ? dy[i] * scale[i] : T(0);
}
// The scale per element, then 16 bytes for the step and the pass count (in whole elements of T).
std::int64_t dropout_scratch(const NodeProblem& p) { return p.in[0].numel() + 4; }

OpSchema view(const char* name, int since, void (*infer)(InferCtx&)) {
  return OpSchema{.op = name,
                  .since = since,
                  .infer = infer,
                  D500_FWD(view_fwd),
                  .bwd_f = view_bwd<float>,
                  .bwd_d = view_bwd<double>,
                  .flops = no_flops,
                  .diff_in = 1,
                  .view = true};
}

// ---- Transpose ----------------------------------------------------------------------------------------
// The strides of the input read along the output's axes.
Dims transpose_strides(const NodeProblem& p) {
  const Shape& x = shape_in(p, 0);
  const Dims own = bstrides(x, x);
  const auto& perm = p.node->attrs.at("perm").ints;  // made explicit by infer
  Dims st;
  for (I a : perm) st.push_back(own[static_cast<std::size_t>(a)]);
  return st;
}

template <class T>
void transpose_fwd(const NodeProblem& p, T*) {
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  for_each_broadcast<1>(shape_out(p, 0), {transpose_strides(p)},
                        [&](I pos, const std::array<I, 1>& o) { std::memcpy(y + pos * es, x + o[0] * es, es); });
}
template <class T>
void transpose_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  if (!dy) {
    std::fill(dx, dx + p.in[0].numel(), T(0));
    return;
  }
  for_each_broadcast<1>(shape_out(p, 0), {transpose_strides(p)},
                        [&](I pos, const std::array<I, 1>& o) { dx[o[0]] = dy[pos]; });
}
void infer_transpose(InferCtx& c) {
  const Shape& x = c.shape(0);
  std::vector<I> perm = c.node.attr_ints("perm");
  if (perm.empty())
    for (std::size_t i = x.size(); i-- > 0;) perm.push_back(static_cast<I>(i));
  if (perm.size() != x.size())
    c.fail("perm has " + std::to_string(perm.size()) + " axes, the input " + std::to_string(x.size()));
  std::vector<bool> seen(x.size(), false);
  Shape s;
  for (I& a : perm) {
    a = c.axis(a, x.size(), "perm");
    if (seen[static_cast<std::size_t>(a)]) c.fail("perm repeats axis " + std::to_string(a));
    seen[static_cast<std::size_t>(a)] = true;
    s.push_back(x[static_cast<std::size_t>(a)]);
  }
  c.node.attrs["perm"] = ints_attr(perm);
  c.set(0, c.dtype(0), s);
}

// ---- Concat and Split ---------------------------------------------------------------------------------
// outer: product of the axes before `axis`; per tensor, a block of dims[axis] * inner elements.
I outer_of(const Shape& s, I axis) {
  I o = 1;
  for (I i = 0; i < axis; ++i) o *= s[static_cast<std::size_t>(i)];
  return o;
}
I block_of(const Shape& s, I axis) {
  I b = 1;
  for (std::size_t i = static_cast<std::size_t>(axis); i < s.size(); ++i) b *= s[i];
  return b;
}

template <class T>
void concat_fwd(const NodeProblem& p, T*) {
  const I axis = p.node->attr_i("axis", 0);
  const I outer = outer_of(shape_out(p, 0), axis), yblock = block_of(shape_out(p, 0), axis);
  const std::size_t es = esize<T>(p.out[0]);
  auto* y = p.out[0].as<std::byte>();
  I at = 0;
  for (const auto& t : p.in) {
    const I b = block_of(*t.shape, axis);
    const auto* x = t.as<const std::byte>();
    for (I o = 0; o < outer; ++o)
      std::memcpy(y + (o * yblock + at) * static_cast<I>(es), x + o * b * static_cast<I>(es),
                  static_cast<std::size_t>(b) * es);
    at += b;
  }
}
template <class T>
void concat_bwd(const NodeProblem& p, T*) {
  const I axis = p.node->attr_i("axis", 0);
  const I outer = outer_of(shape_out(p, 0), axis), yblock = block_of(shape_out(p, 0), axis);
  const T* dy = dout<T>(p, 0);
  I at = 0;
  for (std::size_t i = 0; i < p.in.size(); ++i) {
    const I b = block_of(shape_in(p, i), axis);
    if (T* dx = din<T>(p, i))
      for (I o = 0; o < outer; ++o)
        for (I j = 0; j < b; ++j) dx[o * b + j] = dy ? dy[o * yblock + at + j] : T(0);
    at += b;
  }
}
void infer_concat(InferCtx& c) {
  const Shape& first = c.shape(0);
  const I axis = c.axis(c.node.attr_i("axis", 0), first.size(), "axis");
  c.node.attrs["axis"] = int_attr(axis);
  Shape s = first;
  s[static_cast<std::size_t>(axis)] = 0;
  for (std::size_t i = 0; i < c.n_in(); ++i) {
    if (!c.has_in(i)) c.fail("an input is missing");
    const Shape& x = c.shape(i);
    if (c.dtype(i) != c.dtype(0)) c.fail("its inputs have different types");
    if (x.size() != first.size()) c.fail("its inputs have different ranks");
    for (std::size_t d = 0; d < x.size(); ++d)
      if (static_cast<I>(d) != axis && x[d] != first[d])
        c.fail("input " + std::to_string(i) + " " + shape_str(x) + " does not match " + shape_str(first) +
               " off the axis");
    s[static_cast<std::size_t>(axis)] += x[static_cast<std::size_t>(axis)];
  }
  c.set(0, c.dtype(0), s);
}

template <class T>
void split_fwd(const NodeProblem& p, T*) {
  const I axis = p.node->attr_i("axis", 0);
  const I outer = outer_of(shape_in(p, 0), axis), xblock = block_of(shape_in(p, 0), axis);
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  I at = 0;
  for (const auto& t : p.out) {
    const I b = block_of(*t.shape, axis);
    if (auto* y = t.as<std::byte>())
      for (I o = 0; o < outer; ++o)
        std::memcpy(y + o * b * static_cast<I>(es), x + (o * xblock + at) * static_cast<I>(es),
                    static_cast<std::size_t>(b) * es);
    at += b;
  }
}
template <class T>
void split_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const I axis = p.node->attr_i("axis", 0);
  const I outer = outer_of(shape_in(p, 0), axis), xblock = block_of(shape_in(p, 0), axis);
  I at = 0;
  for (std::size_t j = 0; j < p.out.size(); ++j) {
    const I b = block_of(*p.out[j].shape, axis);
    const T* dy = dout<T>(p, j);
    for (I o = 0; o < outer; ++o)
      for (I k = 0; k < b; ++k) dx[o * xblock + at + k] = dy ? dy[o * b + k] : T(0);
    at += b;
  }
}
void infer_split(InferCtx& c) {
  const Shape& x = c.shape(0);
  const I axis = c.axis(c.node.attr_i("axis", 0), x.size(), "axis");
  c.node.attrs["axis"] = int_attr(axis);
  std::vector<I> split;
  if (c.opset < 13 || c.node.has("split"))
    split = c.node.attr_ints("split");
  else if (c.has_in(1))
    split = c.ints(1, "split");
  const I dim = x[static_cast<std::size_t>(axis)];
  const I parts = static_cast<I>(c.out.size());
  if (split.empty()) {
    if (dim % parts)
      c.fail("axis " + std::to_string(axis) + " (" + std::to_string(dim) + ") does not split into " +
             std::to_string(parts) + " equal parts");
    split.assign(static_cast<std::size_t>(parts), dim / parts);
  }
  I sum = 0;
  for (I v : split) sum += v;
  if (static_cast<I>(split.size()) != parts || sum != dim)
    c.fail("split sizes do not add up to the axis or match the outputs");
  c.node.attrs["split"] = ints_attr(split);
  for (std::size_t j = 0; j < c.out.size(); ++j) {
    Shape s = x;
    s[static_cast<std::size_t>(axis)] = split[j];
    c.set(j, c.dtype(0), s);
  }
}

// ---- Slice ------------------------------------------------------------------------------------------------
// Infer makes starts and steps explicit for every axis (_starts, _steps); the output shape holds
// the counts.
Dims slice_strides(const NodeProblem& p, I& base) {
  const Shape& x = shape_in(p, 0);
  const Dims own = bstrides(x, x);
  const auto& starts = p.node->attrs.at("_starts").ints;
  const auto& steps = p.node->attrs.at("_steps").ints;
  Dims st;
  base = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    base += starts[i] * own[i];
    st.push_back(steps[i] * own[i]);
  }
  return st;
}
template <class T>
void slice_fwd(const NodeProblem& p, T*) {
  I base = 0;
  const Dims st = slice_strides(p, base);
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  for_each_broadcast<1>(shape_out(p, 0), {st}, [&](I pos, const std::array<I, 1>& o) {
    std::memcpy(y + pos * es, x + (base + o[0]) * es, es);
  });
}
template <class T>
void slice_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  std::fill(dx, dx + p.in[0].numel(), T(0));
  const T* dy = dout<T>(p, 0);
  if (!dy) return;
  I base = 0;
  const Dims st = slice_strides(p, base);
  for_each_broadcast<1>(shape_out(p, 0), {st}, [&](I pos, const std::array<I, 1>& o) { dx[base + o[0]] = dy[pos]; });
}
void infer_slice(InferCtx& c) {
  const Shape& x = c.shape(0);
  std::vector<I> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.node.attr_ints("starts");
    ends = c.node.attr_ints("ends");
    axes = c.node.attr_ints("axes");
  } else {
    starts = c.ints(1, "starts");
    ends = c.ints(2, "ends");
    if (c.has_in(3)) axes = c.ints(3, "axes");
    if (c.has_in(4)) steps = c.ints(4, "steps");
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<I>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps have different lengths");
  std::vector<I> s0(x.size(), 0), st(x.size(), 1);
  Shape out = x;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto a = static_cast<std::size_t>(c.axis(axes[i], x.size(), "axes"));
    const I dim = x[a], step = steps[i];
    if (step == 0) c.fail("a step is 0");
    I b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      b = std::clamp<I>(b, 0, dim);
      e = std::clamp<I>(e, 0, dim);
      out[a] = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = std::clamp<I>(b, 0, dim - 1);
      e = std::clamp<I>(e, -1, dim - 1);
      out[a] = b > e ? (b - e - step - 1) / -step : 0;
    }
    s0[a] = b;
    st[a] = step;
  }
  c.node.attrs["_starts"] = ints_attr(s0);
  c.node.attrs["_steps"] = ints_attr(st);
  c.set(0, c.dtype(0), out);
}

// ---- Gather -------------------------------------------------------------------------------------------------
struct GatherDims {
  I outer, axis_dim, inner, count;
};
GatherDims gather_dims(const NodeProblem& p) {
  const Shape& d = shape_in(p, 0);
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", 0));
  I outer = 1, inner = 1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i < axis) outer *= d[i];
    if (i > axis) inner *= d[i];
  }
  return {outer, d[axis], inner, p.in[1].numel()};
}
I gather_index(const NodeProblem& p, const GatherDims& g, I j) {
  I k = int_at(p.in[1], j);
  if (k < 0) k += g.axis_dim;
  if (k < 0 || k >= g.axis_dim)
    throw Error(p.node->label() + ": index " + std::to_string(int_at(p.in[1], j)) + " is out of range [0, " +
                std::to_string(g.axis_dim) + ")");
  return k;
}
template <class T>
void gather_fwd(const NodeProblem& p, T*) {
  const GatherDims g = gather_dims(p);
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  const std::size_t row = static_cast<std::size_t>(g.inner) * es;
  for (I o = 0; o < g.outer; ++o)
    for (I j = 0; j < g.count; ++j) {
      const I k = gather_index(p, g, j);
      std::memcpy(y + static_cast<std::size_t>(o * g.count + j) * row,
                  x + static_cast<std::size_t>(o * g.axis_dim + k) * row, row);
    }
}
template <class T>
void gather_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const GatherDims g = gather_dims(p);
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  for (I o = 0; o < g.outer; ++o)
    for (I j = 0; j < g.count; ++j) {
      const I k = gather_index(p, g, j);
      for (I i = 0; i < g.inner; ++i) dx[(o * g.axis_dim + k) * g.inner + i] += dy[(o * g.count + j) * g.inner + i];
    }
}
void infer_gather(InferCtx& c) {
  const Shape& d = c.shape(0);
  if (d.empty()) c.fail("its data must have at least one axis");
  if (c.dtype(1) != DType::I64 && c.dtype(1) != DType::I32) c.fail("its indices must be int64 or int32");
  const I axis = c.axis(c.node.attr_i("axis", 0), d.size(), "axis");
  c.node.attrs["axis"] = int_attr(axis);
  if (c.is_const(1)) {
    const I dim = d[static_cast<std::size_t>(axis)];
    for (I k : c.ints(1, "indices"))
      if (k < -dim || k >= dim)
        c.fail("index " + std::to_string(k) + " is out of range for axis size " + std::to_string(dim));
  }
  Shape s(d.begin(), d.begin() + axis);
  s.insert(s.end(), c.shape(1).begin(), c.shape(1).end());
  s.insert(s.end(), d.begin() + axis + 1, d.end());
  c.set(0, c.dtype(0), s);
}

// ---- Expand -----------------------------------------------------------------------------------------------
template <class T>
void expand_fwd(const NodeProblem& p, T*) {
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  for_each_broadcast<1>(shape_out(p, 0), {bstrides(shape_in(p, 0), shape_out(p, 0))},
                        [&](I pos, const std::array<I, 1>& o) { std::memcpy(y + pos * es, x + o[0] * es, es); });
}
template <class T>
void expand_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  if (!dy)
    std::fill(dx, dx + p.in[0].numel(), T(0));
  else
    reduce_to(dy, shape_out(p, 0), dx, shape_in(p, 0));
}
void infer_expand(InferCtx& c) {
  const std::vector<I> s = c.ints(1, "shape");
  c.set(0, c.dtype(0), broadcast_shapes(c.shape(0), Shape(s.begin(), s.end()), c.node.label()));
}

// ---- Pad: constant (negative pads crop), reflect, edge -----------------------------------------------------------
// Infer makes the pads explicit (`_pads`: begin of every axis, then end) and the constant
// (`_value`). Each output position reads the input position it maps to, or the constant.
enum class PadMode { Constant, Reflect, Edge };
PadMode pad_mode(const Node& n) {
  const std::string m = n.attr_s("mode", "constant");
  return m == "reflect" ? PadMode::Reflect : m == "edge" ? PadMode::Edge : PadMode::Constant;
}
// The input position an output coordinate reads along one axis, or -1 for the constant.
I pad_source(I o, I begin, I n, PadMode mode) {
  I i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Edge) return i < 0 ? 0 : n - 1;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect (no edge repeat)
  return i;
}
// Calls f(output offset, input offset or -1) for every output position.
template <class F>
void each_padded(const NodeProblem& p, F&& f) {
  const Dims x(shape_in(p, 0)), y(shape_out(p, 0));
  const auto& pads = p.node->attrs.at("_pads").ints;
  const PadMode mode = pad_mode(*p.node);
  const Dims xs = bstrides(x, x);
  const std::size_t r = y.size();
  std::array<I, kMaxRank> idx{};
  for (I pos = 0, total = y.count(); pos < total; ++pos) {
    I src = 0;
    for (std::size_t d = 0; d < r && src >= 0; ++d) {
      const I i = pad_source(idx[d], pads[d], x[d], mode);
      src = i < 0 ? -1 : src + i * xs[d];
    }
    f(pos, src);
    for (std::size_t d = r; d-- > 0;) {
      if (++idx[d] < y[d]) break;
      idx[d] = 0;
    }
  }
}
template <class T>
void pad_fwd(const NodeProblem& p, T*) {
  const std::size_t es = esize<T>(p.in[0]);
  const auto* x = p.in[0].as<const std::byte>();
  auto* y = p.out[0].as<std::byte>();
  // The constant in the tensor's own type.
  std::byte fill[8] = {};
  const double v = p.node->attr_f("_value", 0);
  if (p.in[0].dtype == DType::F32) {
    const T t = static_cast<T>(v);
    std::memcpy(fill, &t, sizeof(T));
  } else if (p.in[0].dtype == DType::I64) {
    const auto t = static_cast<std::int64_t>(v);
    std::memcpy(fill, &t, 8);
  } else if (p.in[0].dtype == DType::I32) {
    const auto t = static_cast<std::int32_t>(v);
    std::memcpy(fill, &t, 4);
  } else {
    fill[0] = std::byte{static_cast<unsigned char>(v != 0)};
  }
  each_padded(p, [&](I pos, I src) {
    std::memcpy(y + pos * static_cast<I>(es), src < 0 ? fill : x + src * static_cast<I>(es), es);
  });
}
template <class T>
void pad_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  if (!dy) return;
  each_padded(p, [&](I pos, I src) {
    if (src >= 0) dx[src] += dy[pos];
  });
}
void infer_pad(InferCtx& c) {
  const Shape& x = c.shape(0);
  const std::size_t r = x.size();
  std::vector<I> pads;
  double value = 0;
  if (c.opset < 11) {
    pads = c.node.attr_ints("pads");
    value = c.node.attr_f("value", 0);
  } else {
    pads = c.ints(1, "pads");
    if (c.has_in(2)) {
      if (!c.is_const(2)) c.fail("its constant_value must be known at load time");
      const DType t = c.dtype(2);
      if (t == DType::F32)
        value = *reinterpret_cast<const float*>(c.value[2]);
      else if (t == DType::I64)
        value = static_cast<double>(*reinterpret_cast<const std::int64_t*>(c.value[2]));
      else if (t == DType::I32)
        value = *reinterpret_cast<const std::int32_t*>(c.value[2]);
      else if (t == DType::Bool)
        value = c.value[2][0] != std::byte{0};
    }
    if (c.has_in(3)) c.fail("its axes input (opset 18) is not supported");
  }
  if (pads.size() != 2 * r)
    c.fail("pads has " + std::to_string(pads.size()) + " values; the input's " + std::to_string(r) + " axes need " +
           std::to_string(2 * r));
  const std::string mode = c.node.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.fail("mode \"" + mode + "\" is not one of constant, reflect, edge");
  Shape y = x;
  for (std::size_t d = 0; d < r; ++d) {
    y[d] = x[d] + pads[d] + pads[r + d];
    if (y[d] < 0) c.fail("its pads remove more than axis " + std::to_string(d) + " holds");
    if (mode != "constant" && (pads[d] < 0 || pads[r + d] < 0)) c.fail("negative pads crop only in constant mode");
    if (mode == "reflect" && (pads[d] >= x[d] || pads[r + d] >= x[d]) && (pads[d] || pads[r + d]))
      c.fail("reflect padding must be smaller than the axis it pads");
  }
  c.node.attrs["_pads"] = ints_attr(pads);
  c.node.attrs["_value"] = float_attr(value);
  c.set(0, c.dtype(0), y);
}

// ---- ReduceMean and ReduceSum ---------------------------------------------------------------------------------
// Infer makes the reduced axes explicit (`axes`, positive; all when none are given). The output
// is read through its keepdims shape, whatever keepdims says (the layout is the same).
Dims kept_shape(const NodeProblem& p) {
  const Shape& x = shape_in(p, 0);
  Dims k(x);
  for (I a : p.node->attrs.at("axes").ints) k[static_cast<std::size_t>(a)] = 1;
  return k;
}
template <bool Mean, class T>
void reduce_fwd(const NodeProblem& p, T*) {
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const Dims k = kept_shape(p);
  const I n = k.count();
  std::fill(y, y + n, T(0));
  for_each_broadcast<1>(shape_in(p, 0), {bstrides(k, Dims(shape_in(p, 0)))},
                        [&](I pos, const std::array<I, 1>& o) { y[o[0]] += x[pos]; });
  if (Mean) {
    const T count = static_cast<T>(p.in[0].numel() / std::max<I>(n, 1));
    for (I i = 0; i < n; ++i) y[i] /= count;
  }
}
template <bool Mean, class T>
void reduce_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  const Dims k = kept_shape(p);
  const T scale = Mean ? T(1) / static_cast<T>(p.in[0].numel() / std::max<I>(k.count(), 1)) : T(1);
  if (!dy) {
    std::fill(dx, dx + p.in[0].numel(), T(0));
    return;
  }
  for_each_broadcast<1>(shape_in(p, 0), {bstrides(k, Dims(shape_in(p, 0)))},
                        [&](I pos, const std::array<I, 1>& o) { dx[pos] = dy[o[0]] * scale; });
}
void infer_reduce_mean_sum(InferCtx& c) {
  c.require_float();
  std::vector<I> axes;
  const bool axes_input = c.node.op == "ReduceSum" && c.opset >= 13;
  if (axes_input) {
    if (c.has_in(1)) axes = c.ints(1, "axes");
  } else {
    axes = c.node.attr_ints("axes");
  }
  c.set(0, DType::F32, reduced_shape(c, axes, !(axes_input && c.node.attr_i("noop_with_empty_axes", 0))));
}
double reduce_mean_sum_flops(const NodeProblem& p, bool) { return static_cast<double>(p.in[0].numel()); }

// ---- Load-time ops: Shape, Constant, ConstantOfShape, Range ------------------------------------------------------
template <class T>
void shape_fwd(const NodeProblem& p, T*) {
  const Shape& x = shape_in(p, 0);
  auto* y = out<std::int64_t>(p, 0);
  const I r = static_cast<I>(x.size());
  I b = p.node->attr_i("start", 0), e = p.node->attr_i("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<I>(b, 0, r);
  e = std::clamp<I>(e, 0, r);
  for (I i = b; i < e; ++i) y[i - b] = x[static_cast<std::size_t>(i)];
}
// Size: the element count, an int64 scalar known at load time.
template <class T>
void size_fwd(const NodeProblem& p, T*) {
  *out<std::int64_t>(p, 0) = numel(shape_in(p, 0));
}
void infer_size(InferCtx& c) {
  (void)c.shape(0);
  c.set(0, DType::I64, {});
}
void infer_shape(InferCtx& c) {
  const I r = static_cast<I>(c.shape(0).size());
  I b = c.node.attr_i("start", 0), e = c.node.attr_i("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<I>(b, 0, r);
  e = std::clamp<I>(e, 0, r);
  c.set(0, DType::I64, {std::max<I>(0, e - b)});
}

// Constant's value, from whichever attribute holds it, as (type, shape, bytes); float values
// are stored as float32 here and widened by the caller that needs T.
void constant_value(const Node& n, DType& t, Shape& s, std::vector<std::byte>& bytes) {
  auto put = [&](const void* src, std::size_t len) {
    bytes.resize(len);
    if (len) std::memcpy(bytes.data(), src, len);
  };
  if (n.has("value")) {
    const Attr& a = n.attrs.at("value");
    t = a.tensor_type;
    s = a.tensor_shape;
    bytes = a.tensor_data;
  } else if (n.has("value_float")) {
    const float v = static_cast<float>(n.attr_f("value_float", 0));
    t = DType::F32, s = {};
    put(&v, 4);
  } else if (n.has("value_floats")) {
    std::vector<float> v;
    for (double f : n.attrs.at("value_floats").floats) v.push_back(static_cast<float>(f));
    t = DType::F32, s = {static_cast<I>(v.size())};
    put(v.data(), v.size() * 4);
  } else if (n.has("value_int")) {
    const std::int64_t v = n.attr_i("value_int", 0);
    t = DType::I64, s = {};
    put(&v, 8);
  } else if (n.has("value_ints")) {
    const auto& v = n.attrs.at("value_ints").ints;
    t = DType::I64, s = {static_cast<I>(v.size())};
    put(v.data(), v.size() * 8);
  } else {
    throw Error(n.label() + ": only value, value_float(s) and value_int(s) are supported");
  }
}
// Writes float32 source values into a tensor of T (the executor's float type).
template <class T>
void store_as(DType t, const std::vector<std::byte>& src, void* dst) {
  if (t == DType::F32 && sizeof(T) != 4) {
    const auto* f = reinterpret_cast<const float*>(src.data());
    T* d = static_cast<T*>(dst);
    for (std::size_t i = 0; i < src.size() / 4; ++i) d[i] = static_cast<T>(f[i]);
  } else if (!src.empty()) {
    std::memcpy(dst, src.data(), src.size());
  }
}
template <class T>
void constant_fwd(const NodeProblem& p, T*) {
  DType t;
  Shape s;
  std::vector<std::byte> b;
  constant_value(*p.node, t, s, b);
  store_as<T>(t, b, p.out[0].data);
}
void infer_constant(InferCtx& c) {
  DType t;
  Shape s;
  std::vector<std::byte> b;
  try {
    constant_value(c.node, t, s, b);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  if (!dtype_supported(t)) c.fail(std::string("its value's type ") + dtype_name(t) + " is not supported");
  if (static_cast<I>(b.size()) != numel(s) * static_cast<I>(dtype_size(t))) c.fail("its value has the wrong size");
  c.set(0, t, s);
}

template <class T>
void constant_of_shape_fwd(const NodeProblem& p, T*) {
  DType t = DType::F32;
  std::vector<std::byte> one(4, std::byte{0});
  if (p.node->has("value")) {
    t = p.node->attrs.at("value").tensor_type;
    one = p.node->attrs.at("value").tensor_data;
  }
  const I n = p.out[0].numel();
  const std::size_t es = t == DType::F32 ? sizeof(T) : dtype_size(t);
  std::vector<std::byte> v(es);
  store_as<T>(t, one, v.data());
  auto* y = p.out[0].as<std::byte>();
  for (I i = 0; i < n; ++i) std::memcpy(y + static_cast<std::size_t>(i) * es, v.data(), es);
}
void infer_constant_of_shape(InferCtx& c) {
  const std::vector<I> s = c.ints(0, "shape");
  DType t = DType::F32;
  if (c.node.has("value")) {
    const Attr& a = c.node.attrs.at("value");
    t = a.tensor_type;
    if (numel(a.tensor_shape) != 1) c.fail("its value must hold one element");
  }
  if (!dtype_supported(t)) c.fail(std::string("type ") + dtype_name(t) + " is not supported");
  c.set(0, t, Shape(s.begin(), s.end()));
}

template <class V>
void range_typed(const NodeProblem& p) {
  const V start = p.in[0].as<const V>()[0], delta = p.in[2].as<const V>()[0];
  V* y = p.out[0].as<V>();
  for (I i = 0, n = p.out[0].numel(); i < n; ++i) y[i] = start + static_cast<V>(i) * delta;
}
template <class T>
void range_fwd(const NodeProblem& p, T*) {
  switch (p.in[0].dtype) {
    case DType::I64: return range_typed<std::int64_t>(p);
    case DType::I32: return range_typed<std::int32_t>(p);
    default: return range_typed<T>(p);
  }
}
void infer_range(InferCtx& c) {
  const DType t = c.dtype(0);
  for (std::size_t i = 0; i < 3; ++i)
    if (!c.is_const(i) || numel(c.shape(i)) != 1 || c.dtype(i) != t)
      c.fail("start, limit and delta must be known at load time, as scalars of one type");
  double v[3];
  for (std::size_t i = 0; i < 3; ++i) {
    if (t == DType::F32)
      v[i] = *reinterpret_cast<const float*>(c.value[i]);
    else if (t == DType::I64)
      v[i] = static_cast<double>(*reinterpret_cast<const std::int64_t*>(c.value[i]));
    else if (t == DType::I32)
      v[i] = *reinterpret_cast<const std::int32_t*>(c.value[i]);
    else
      c.fail(std::string("type ") + dtype_name(t) + " is not supported");
  }
  if (v[2] == 0) c.fail("delta is 0");
  c.set(0, t, {std::max<I>(0, static_cast<I>(std::ceil((v[1] - v[0]) / v[2])))});
}

}  // namespace

void add_shape_ops(std::vector<OpSchema>& t) {
  t.push_back(view("Reshape", 5, infer_reshape));
  t.push_back(view("Flatten", 1, infer_flatten));
  t.push_back(view("Squeeze", 1, infer_squeeze));
  t.push_back(view("Unsqueeze", 1, infer_unsqueeze));
  t.push_back(view("Identity", 1, infer_identity));
  // Dropout: a view in inference; in a training pass it drops (its own table entry).
  static const OpSchema dropout_training{.op = "Dropout",
                                         .since = 7,
                                         .infer = infer_identity,
                                         D500_FWD(dropout_fwd),
                                         .bwd_f = dropout_bwd<float>,
                                         .bwd_d = dropout_bwd<double>,
                                         .scratch = dropout_scratch,
                                         .flops = no_flops,
                                         .diff_in = 1};
  OpSchema dropout = view("Dropout", 7, infer_identity);
  dropout.training = &dropout_training;
  t.push_back(dropout);
  t.push_back(OpSchema{.op = "Transpose",
                       .since = 1,
                       .infer = infer_transpose,
                       D500_FWD(transpose_fwd),
                       .bwd_f = transpose_bwd<float>,
                       .bwd_d = transpose_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "Concat",
                       .since = 4,
                       .infer = infer_concat,
                       D500_FWD(concat_fwd),
                       .bwd_f = concat_bwd<float>,
                       .bwd_d = concat_bwd<double>,
                       .flops = no_flops,
                       .diff_in = ~0u});
  t.push_back(OpSchema{.op = "Split",
                       .since = 2,
                       .infer = infer_split,
                       D500_FWD(split_fwd),
                       .bwd_f = split_bwd<float>,
                       .bwd_d = split_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "Slice",
                       .since = 1,
                       .infer = infer_slice,
                       D500_FWD(slice_fwd),
                       .bwd_f = slice_bwd<float>,
                       .bwd_d = slice_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "Gather",
                       .since = 1,
                       .infer = infer_gather,
                       D500_FWD(gather_fwd),
                       .bwd_f = gather_bwd<float>,
                       .bwd_d = gather_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1,
                       .saved_in = 2});
  t.push_back(OpSchema{.op = "Pad",
                       .since = 2,
                       .infer = infer_pad,
                       D500_FWD(pad_fwd),
                       .bwd_f = pad_bwd<float>,
                       .bwd_d = pad_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "Expand",
                       .since = 8,
                       .infer = infer_expand,
                       D500_FWD(expand_fwd),
                       .bwd_f = expand_bwd<float>,
                       .bwd_d = expand_bwd<double>,
                       .flops = no_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "ReduceMean",
                       .since = 1,
                       .infer = infer_reduce_mean_sum,
                       .fwd_f = reduce_fwd<true, float>,
                       .fwd_d = reduce_fwd<true, double>,
                       .bwd_f = reduce_bwd<true, float>,
                       .bwd_d = reduce_bwd<true, double>,
                       .flops = reduce_mean_sum_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{.op = "ReduceSum",
                       .since = 1,
                       .infer = infer_reduce_mean_sum,
                       .fwd_f = reduce_fwd<false, float>,
                       .fwd_d = reduce_fwd<false, double>,
                       .bwd_f = reduce_bwd<false, float>,
                       .bwd_d = reduce_bwd<false, double>,
                       .flops = reduce_mean_sum_flops,
                       .diff_in = 1});
  t.push_back(OpSchema{
      .op = "Shape", .since = 1, .infer = infer_shape, D500_FWD(shape_fwd), .flops = no_flops, .fold_only = true});
  t.push_back(OpSchema{
      .op = "Size", .since = 1, .infer = infer_size, D500_FWD(size_fwd), .flops = no_flops, .fold_only = true});
  t.push_back(OpSchema{.op = "Constant",
                       .since = 1,
                       .infer = infer_constant,
                       D500_FWD(constant_fwd),
                       .flops = no_flops,
                       .fold_only = true});
  t.push_back(OpSchema{.op = "ConstantOfShape",
                       .since = 9,
                       .infer = infer_constant_of_shape,
                       D500_FWD(constant_of_shape_fwd),
                       .flops = no_flops,
                       .fold_only = true});
  t.push_back(OpSchema{
      .op = "Range", .since = 11, .infer = infer_range, D500_FWD(range_fwd), .flops = no_flops, .fold_only = true});
}

}  // namespace d500::ref
