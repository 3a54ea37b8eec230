// Reductions over axes beyond ReduceSum and ReduceMean (ops_shape.cpp): ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and the index
// reductions ArgMax and ArgMin. Each output element folds its reduced elements in order
// (accumulating in double, then stored as T). Gradients: ReduceMax and ReduceMin send the
// output's gradient to every element equal to the extreme (ties each get all of it); ReduceProd
// divides the product by the element (an element that is zero gets none). Work: one FLOP per
// input element forward, two backward.
#include <limits>

#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

// The kept and the reduced axes of x: output o's elements are base(o) + rest(r), r < reduced.
struct Plan {
  Dims kept, kept_st, red, red_st;
  I outputs = 1, reduced = 1;
  Plan(const Shape& x, const std::vector<I>& axes) {
    const Dims st(strides_of(x));
    std::vector<bool> r(x.size(), false);
    for (I a : axes) r[static_cast<std::size_t>(a)] = true;
    for (std::size_t i = 0; i < x.size(); ++i) {
      (r[i] ? red : kept).push_back(x[i]);
      (r[i] ? red_st : kept_st).push_back(st[i]);
    }
    outputs = kept.count();
    reduced = red.count();
  }
  static I offset(const Dims& d, const Dims& st, I i) {
    I off = 0;
    for (std::size_t k = d.size(); k-- > 0;) {
      off += (i % d[k]) * st[k];
      i /= d[k];
    }
    return off;
  }
  I base(I o) const { return offset(kept, kept_st, o); }
  I rest(I r) const { return offset(red, red_st, r); }
};

std::vector<I> axes_of(const NodeProblem& p) { return p.node->attrs.at("axes").ints; }

enum class Red { Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

template <Red R, class T>
void reduce_fwd(const NodeProblem& p, T*) {
  const Plan pl(shape_in(p, 0), axes_of(p));
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I o = 0; o < pl.outputs; ++o) {
    const I b = pl.base(o);
    double acc = R == Red::Max    ? -std::numeric_limits<double>::infinity()
                 : R == Red::Min  ? std::numeric_limits<double>::infinity()
                 : R == Red::Prod ? 1.0
                                  : 0.0;
    double shift = 0;  // LogSumExp: the largest element, subtracted before exp
    if (R == Red::LogSumExp) {
      shift = -std::numeric_limits<double>::infinity();
      for (I r = 0; r < pl.reduced; ++r) shift = std::max(shift, static_cast<double>(x[b + pl.rest(r)]));
      if (!std::isfinite(shift)) shift = 0;
    }
    for (I r = 0; r < pl.reduced; ++r) {
      const double v = x[b + pl.rest(r)];
      switch (R) {
        case Red::Max: acc = std::max(acc, v); break;
        case Red::Min: acc = std::min(acc, v); break;
        case Red::Prod: acc *= v; break;
        case Red::L1: acc += std::abs(v); break;
        case Red::L2:
        case Red::SumSquare: acc += v * v; break;
        case Red::LogSum: acc += v; break;
        case Red::LogSumExp: acc += std::exp(v - shift); break;
      }
    }
    if (R == Red::L2) acc = std::sqrt(acc);
    if (R == Red::LogSum) acc = std::log(acc);
    if (R == Red::LogSumExp) acc = std::log(acc) + shift;
    y[o] = static_cast<T>(acc);
  }
}

template <Red R, class T>
void reduce_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const Plan pl(shape_in(p, 0), axes_of(p));
  const T* x = cin<T>(p, 0);
  const T* y = p.out[0].as<const T>();
  const T* dy = dout<T>(p, 0);
  for (I o = 0; o < pl.outputs; ++o) {
    const I b = pl.base(o);
    const T g = dy ? dy[o] : T(0), yo = y[o];
    for (I r = 0; r < pl.reduced; ++r) {
      const I at = b + pl.rest(r);
      const T v = x[at];
      T d = 0;
      switch (R) {
        case Red::Max:
        case Red::Min: d = v == yo ? g : T(0); break;
        case Red::Prod: d = v != T(0) ? g * yo / v : T(0); break;
        case Red::L1: d = v > T(0) ? g : v < T(0) ? -g : T(0); break;
        case Red::L2: d = yo != T(0) ? g * v / yo : T(0); break;
        case Red::SumSquare: d = T(2) * g * v; break;
        case Red::LogSum: d = g / std::exp(yo); break;
        case Red::LogSumExp: d = g * std::exp(v - yo); break;
      }
      dx[at] = d;
    }
  }
}

// Axes from the `axes` attribute (opsets up to 17), all when none are given.
void infer_reduce(InferCtx& c) {
  c.require_float();
  c.set(0, DType::F32, reduced_shape(c, c.node.attr_ints("axes"), true));
}

double reduce_flops(const NodeProblem& p, bool backward) {
  return (backward ? 2.0 : 1.0) * static_cast<double>(p.in[0].numel());
}

template <Red R>
OpSchema reduction(const char* name, std::uint32_t saved_out) {
  return OpSchema{.op = name,
                  .since = 1,
                  .infer = infer_reduce,
                  .fwd_f = reduce_fwd<R, float>,
                  .fwd_d = reduce_fwd<R, double>,
                  .bwd_f = reduce_bwd<R, float>,
                  .bwd_d = reduce_bwd<R, double>,
                  .flops = reduce_flops,
                  .diff_in = 1,
                  .saved_in = 1,
                  .saved_out = saved_out};
}

// ---- ArgMax, ArgMin: int64 indices along one axis (the first extreme, or the last with
// select_last_index) ----
template <bool Max, class V>
void arg_typed(const NodeProblem& p) {
  const Plan pl(shape_in(p, 0), axes_of(p));
  const V* x = p.in[0].as<const V>();
  auto* y = out<std::int64_t>(p, 0);
  const bool last = p.node->attr_i("select_last_index", 0) != 0;
  for (I o = 0; o < pl.outputs; ++o) {
    const I b = pl.base(o);
    I best = 0;
    for (I r = 1; r < pl.reduced; ++r) {
      const V v = x[b + pl.rest(r)], w = x[b + pl.rest(best)];
      if (Max ? (v > w || (last && v == w)) : (v < w || (last && v == w))) best = r;
    }
    y[o] = best;
  }
}
template <bool Max, class T>
void arg_fwd(const NodeProblem& p, T*) {
  switch (p.in[0].dtype) {
    case DType::I64: return arg_typed<Max, std::int64_t>(p);
    case DType::I32: return arg_typed<Max, std::int32_t>(p);
    default: return arg_typed<Max, T>(p);
  }
}
void infer_arg(InferCtx& c) {
  const DType t = c.dtype(0);
  if (t != DType::F32 && t != DType::I64 && t != DType::I32)
    c.fail(std::string("type ") + dtype_name(t) + " is not supported (float32, int64, int32)");
  c.set(0, DType::I64, reduced_shape(c, {c.node.attr_i("axis", 0)}, false));
}

}  // namespace

Shape reduced_shape(InferCtx& c, std::vector<I> axes, bool all_when_empty) {
  const Shape& x = c.shape(0);
  if (axes.empty() && all_when_empty)
    for (std::size_t i = 0; i < x.size(); ++i) axes.push_back(static_cast<I>(i));
  std::vector<bool> red(x.size(), false);
  for (I& a : axes) {
    a = c.axis(a, x.size(), "axes");
    if (red[static_cast<std::size_t>(a)]) c.fail("axis " + std::to_string(a) + " is reduced twice");
    red[static_cast<std::size_t>(a)] = true;
  }
  c.node.attrs["axes"] = ints_attr(axes);
  const bool keep = c.node.attr_i("keepdims", 1) != 0;
  Shape s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!red[i])
      s.push_back(x[i]);
    else if (keep)
      s.push_back(1);
  }
  return s;
}

void add_reduce_ops(std::vector<OpSchema>& t) {
  t.push_back(reduction<Red::Max>("ReduceMax", 1));
  t.push_back(reduction<Red::Min>("ReduceMin", 1));
  t.push_back(reduction<Red::Prod>("ReduceProd", 1));
  t.push_back(reduction<Red::L1>("ReduceL1", 0));
  t.push_back(reduction<Red::L2>("ReduceL2", 1));
  t.push_back(reduction<Red::LogSum>("ReduceLogSum", 1));
  t.push_back(reduction<Red::LogSumExp>("ReduceLogSumExp", 1));
  t.push_back(reduction<Red::SumSquare>("ReduceSumSquare", 0));
  for (bool mx : {true, false})
    t.push_back(OpSchema{.op = mx ? "ArgMax" : "ArgMin",
                         .since = 1,
                         .infer = infer_arg,
                         .fwd_f = mx ? arg_fwd<true, float> : arg_fwd<false, float>,
                         .fwd_d = mx ? arg_fwd<true, double> : arg_fwd<false, double>,
                         .flops = reduce_flops});
}

}  // namespace d500::ref
