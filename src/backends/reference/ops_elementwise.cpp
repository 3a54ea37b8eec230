// Element-wise operators: unary activations and math, binary arithmetic with numpy
// broadcasting, comparisons, Where, Cast and Clip. Work: one FLOP per output element forward,
// two backward (transcendentals count as one).
#include <limits>
#include <type_traits>

#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

constexpr std::uint32_t kX = 1, kY = 1;  // bit 0: input 0 / output 0

// ---- Unary ----------------------------------------------------------------------------------
// f: the forward; g(v, dy): the gradient, where v is the input x, or the output y when kUsesY
// (Relu's are in ops_common.hpp).
template <class T>
struct LeakyRelu {
  explicit LeakyRelu(const Node& n) : alpha(static_cast<T>(n.attr_f("alpha", 0.01))) {}
  static constexpr bool kUsesY = false;
  T alpha;
  T f(T x) const { return x >= T(0) ? x : alpha * x; }
  T g(T x, T dy) const { return x >= T(0) ? dy : alpha * dy; }
};
template <class T>
struct Sigmoid {
  explicit Sigmoid(const Node&) {}
  static constexpr bool kUsesY = true;
  T f(T x) const { return sigmoid(x); }
  T g(T y, T dy) const { return dy * y * (T(1) - y); }
};
template <class T>
struct Tanh {
  explicit Tanh(const Node&) {}
  static constexpr bool kUsesY = true;
  T f(T x) const { return std::tanh(x); }
  T g(T y, T dy) const { return dy * (T(1) - y * y); }
};
template <class T>
struct HardSigmoid {
  explicit HardSigmoid(const Node& n)
      : alpha(static_cast<T>(n.attr_f("alpha", 0.2))), beta(static_cast<T>(n.attr_f("beta", 0.5))) {}
  static constexpr bool kUsesY = false;
  T alpha, beta;
  T f(T x) const { return std::max(T(0), std::min(T(1), alpha * x + beta)); }
  T g(T x, T dy) const {
    const T v = alpha * x + beta;
    return v > T(0) && v < T(1) ? alpha * dy : T(0);
  }
};
template <class T>
struct HardSwish {  // x * HardSigmoid(x) with alpha 1/6, beta 1/2
  explicit HardSwish(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5))); }
  T g(T x, T dy) const { return x < T(-3) ? T(0) : x > T(3) ? dy : dy * (x / T(3) + T(0.5)); }
};
template <class T>
struct Sqrt {
  explicit Sqrt(const Node&) {}
  static constexpr bool kUsesY = true;
  T f(T x) const { return std::sqrt(x); }
  T g(T y, T dy) const { return dy / (T(2) * y); }
};
template <class T>
struct Erf {
  explicit Erf(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return std::erf(x); }
  T g(T x, T dy) const { return dy * T(1.1283791670955126) * std::exp(-x * x); }  // 2/sqrt(pi)
};
template <class T>
struct Exp {
  explicit Exp(const Node&) {}
  static constexpr bool kUsesY = true;
  T f(T x) const { return std::exp(x); }
  T g(T y, T dy) const { return dy * y; }
};
template <class T>
struct Log {
  explicit Log(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return std::log(x); }
  T g(T x, T dy) const { return dy / x; }
};
template <class T>
struct Neg {
  explicit Neg(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return -x; }
  T g(T, T dy) const { return -dy; }
};
template <class T>
struct Abs {
  explicit Abs(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return std::abs(x); }
  T g(T x, T dy) const { return x > T(0) ? dy : x < T(0) ? -dy : T(0); }
};
template <class T>
struct Reciprocal {
  explicit Reciprocal(const Node&) {}
  static constexpr bool kUsesY = true;
  T f(T x) const { return T(1) / x; }
  T g(T y, T dy) const { return -dy * y * y; }
};

template <class T>
T softplus(T x) {  // log(1 + exp(x)), without overflow
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
template <class T>
struct Elu {
  explicit Elu(const Node& n) : alpha(static_cast<T>(n.attr_f("alpha", 1.0))) {}
  static constexpr bool kUsesY = false;
  T alpha;
  T f(T x) const { return x >= T(0) ? x : alpha * std::expm1(x); }
  T g(T x, T dy) const { return x >= T(0) ? dy : dy * alpha * std::exp(x); }
};
template <class T>
struct Celu {  // max(0, x) + min(0, alpha (exp(x / alpha) - 1))
  explicit Celu(const Node& n) : alpha(static_cast<T>(n.attr_f("alpha", 1.0))) {}
  static constexpr bool kUsesY = false;
  T alpha;
  T f(T x) const { return x >= T(0) ? x : alpha * std::expm1(x / alpha); }
  T g(T x, T dy) const { return x >= T(0) ? dy : dy * std::exp(x / alpha); }
};
template <class T>
struct Selu {
  explicit Selu(const Node& n)
      : alpha(static_cast<T>(n.attr_f("alpha", 1.67326319217681884765625))),
        gamma(static_cast<T>(n.attr_f("gamma", 1.05070102214813232421875))) {}
  static constexpr bool kUsesY = false;
  T alpha, gamma;
  T f(T x) const { return x > T(0) ? gamma * x : gamma * alpha * std::expm1(x); }
  T g(T x, T dy) const { return x > T(0) ? gamma * dy : dy * gamma * alpha * std::exp(x); }
};
template <class T>
struct ThresholdedRelu {
  explicit ThresholdedRelu(const Node& n) : alpha(static_cast<T>(n.attr_f("alpha", 1.0))) {}
  static constexpr bool kUsesY = false;
  T alpha;
  T f(T x) const { return x > alpha ? x : T(0); }
  T g(T x, T dy) const { return x > alpha ? dy : T(0); }
};
template <class T>
struct Softplus {
  explicit Softplus(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return softplus(x); }
  T g(T x, T dy) const { return dy * sigmoid(x); }
};
template <class T>
struct Shrink {  // x + bias below -lambd, x - bias above lambd, 0 between
  explicit Shrink(const Node& n)
      : lambd(static_cast<T>(n.attr_f("lambd", 0.5))), bias(static_cast<T>(n.attr_f("bias", 0))) {}
  static constexpr bool kUsesY = false;
  T lambd, bias;
  T f(T x) const { return x < -lambd ? x + bias : x > lambd ? x - bias : T(0); }
  T g(T x, T dy) const { return x < -lambd || x > lambd ? dy : T(0); }
};
template <class T>
struct Softsign {
  explicit Softsign(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return x / (T(1) + std::abs(x)); }
  T g(T x, T dy) const { return dy / ((T(1) + std::abs(x)) * (T(1) + std::abs(x))); }
};
template <class T>
struct Mish {  // x tanh(softplus(x))
  explicit Mish(const Node&) {}
  static constexpr bool kUsesY = false;
  T f(T x) const { return x * std::tanh(softplus(x)); }
  T g(T x, T dy) const {
    const T t = std::tanh(softplus(x));
    return dy * (t + x * (T(1) - t * t) * sigmoid(x));
  }
};
// The trigonometric and hyperbolic functions, and their inverses.
#define D500_UNARY_MATH(Name, fx, gx)     \
  template <class T>                      \
  struct Name {                           \
    explicit Name(const Node&) {}         \
    static constexpr bool kUsesY = false; \
    T f(T x) const { return fx; }         \
    T g(T x, T dy) const {                \
      (void)x;                            \
      return dy * (gx);                   \
    }                                     \
  };
D500_UNARY_MATH(Sin, std::sin(x), std::cos(x))
D500_UNARY_MATH(Cos, std::cos(x), -std::sin(x))
D500_UNARY_MATH(Tan, std::tan(x), T(1) / (std::cos(x) * std::cos(x)))
D500_UNARY_MATH(Asin, std::asin(x), T(1) / std::sqrt(T(1) - x * x))
D500_UNARY_MATH(Acos, std::acos(x), -T(1) / std::sqrt(T(1) - x * x))
D500_UNARY_MATH(Atan, std::atan(x), T(1) / (T(1) + x * x))
D500_UNARY_MATH(Sinh, std::sinh(x), std::cosh(x))
D500_UNARY_MATH(Cosh, std::cosh(x), std::sinh(x))
D500_UNARY_MATH(Asinh, std::asinh(x), T(1) / std::sqrt(x * x + T(1)))
D500_UNARY_MATH(Acosh, std::acosh(x), T(1) / std::sqrt(x * x - T(1)))
D500_UNARY_MATH(Atanh, std::atanh(x), T(1) / (T(1) - x * x))
// Piecewise constant: zero gradient almost everywhere (as frameworks give it).
D500_UNARY_MATH(Floor, std::floor(x), T(0))
D500_UNARY_MATH(Ceil, std::ceil(x), T(0))
D500_UNARY_MATH(Round, std::nearbyint(x), T(0))  // ties to even, as ONNX (the default rounding mode)
D500_UNARY_MATH(Sign, x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0), T(0))
#undef D500_UNARY_MATH

template <template <class> class F, class T>
void unary_fwd(const NodeProblem& p, T*) {
  const F<T> f(*p.node);
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const I n = p.in[0].numel();
  for (I i = 0; i < n; ++i) y[i] = f.f(x[i]);
}

template <template <class> class F, class T>
void unary_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const F<T> f(*p.node);
  const T* v = F<T>::kUsesY ? p.out[0].as<const T>() : cin<T>(p, 0);
  const T* dy = dout<T>(p, 0);
  const I n = p.in[0].numel();
  if (!dy) {
    std::fill(dx, dx + n, T(0));
    return;
  }
  for (I i = 0; i < n; ++i) dx[i] = f.g(v[i], dy[i]);
}

void infer_same_float(InferCtx& c) {
  c.require_float();
  c.set(0, DType::F32, c.shape(0));
}

double unary_flops(const NodeProblem& p, bool backward) { return (backward ? 2.0 : 1.0) * elems(p); }

template <template <class> class F>
OpSchema unary(const char* name, int since) {
  return OpSchema{.op = name,
                  .since = since,
                  .infer = infer_same_float,
                  .fwd_f = unary_fwd<F, float>,
                  .fwd_d = unary_fwd<F, double>,
                  .bwd_f = unary_bwd<F, float>,
                  .bwd_d = unary_bwd<F, double>,
                  .flops = unary_flops,
                  .diff_in = kX,
                  .saved_in = F<float>::kUsesY ? 0u : kX,
                  .saved_out = F<float>::kUsesY ? kY : 0u};
}

// ---- Clip: min and max as inputs (opset 11+) or attributes (before) --------------------------
template <class T>
void clip_bounds(const NodeProblem& p, T& lo, T& hi) {
  lo = -std::numeric_limits<T>::infinity();
  hi = std::numeric_limits<T>::infinity();
  if (p.opset < 11) {
    lo = static_cast<T>(p.node->attr_f("min", -std::numeric_limits<double>::infinity()));
    hi = static_cast<T>(p.node->attr_f("max", std::numeric_limits<double>::infinity()));
    return;
  }
  if (p.in.size() > 1 && p.in[1].present()) lo = p.in[1].as<const T>()[0];
  if (p.in.size() > 2 && p.in[2].present()) hi = p.in[2].as<const T>()[0];
}
template <class T>
void clip_fwd(const NodeProblem& p, T*) {
  T lo, hi;
  clip_bounds(p, lo, hi);
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}
template <class T>
void clip_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  T lo, hi;
  clip_bounds(p, lo, hi);
  const T* x = cin<T>(p, 0);
  const T* dy = dout<T>(p, 0);
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) dx[i] = dy && x[i] > lo && x[i] < hi ? dy[i] : T(0);
}
void infer_clip(InferCtx& c) {
  c.require_float();
  for (std::size_t i = 1; i < c.n_in(); ++i)
    if (c.has_in(i)) {
      if (!c.is_const(i)) c.fail("its bound (input " + std::to_string(i) + ") must be a constant");
      if (numel(c.shape(i)) != 1) c.fail("its bounds must be scalars");
    }
  c.set(0, DType::F32, c.shape(0));
}

// ---- Binary, with broadcasting ----------------------------------------------------------------
// kSaved: bit 0 a, bit 1 b, bit 2 the output y, as the gradients read them.
template <class T>
struct Add {
  explicit Add(const Node&) {}
  static constexpr unsigned kSaved = 0;
  T f(T a, T b) const { return a + b; }
  T ga(T, T, T, T dy) const { return dy; }
  T gb(T, T, T, T dy) const { return dy; }
};
template <class T>
struct Sub {
  explicit Sub(const Node&) {}
  static constexpr unsigned kSaved = 0;
  T f(T a, T b) const { return a - b; }
  T ga(T, T, T, T dy) const { return dy; }
  T gb(T, T, T, T dy) const { return -dy; }
};
template <class T>
struct Mul {
  explicit Mul(const Node&) {}
  static constexpr unsigned kSaved = 3;
  T f(T a, T b) const { return a * b; }
  T ga(T, T b, T, T dy) const { return dy * b; }
  T gb(T a, T, T, T dy) const { return dy * a; }
};
template <class T>
struct Div {
  explicit Div(const Node&) {}
  static constexpr unsigned kSaved = 3;
  T f(T a, T b) const { return a / b; }
  T ga(T, T b, T, T dy) const { return dy / b; }
  T gb(T a, T b, T, T dy) const { return -dy * a / (b * b); }
};
// PRelu: the slope broadcast to x (unidirectionally, as ONNX has it).
template <class T>
struct PRelu {
  explicit PRelu(const Node&) {}
  static constexpr unsigned kSaved = 3;
  T f(T a, T b) const { return a < T(0) ? a * b : a; }
  T ga(T a, T b, T, T dy) const { return a < T(0) ? dy * b : dy; }
  T gb(T a, T, T, T dy) const { return a < T(0) ? dy * a : T(0); }
};
// Mod: fmod = 1 is C's fmod (the dividend's sign); fmod = 0 (integers only) Python's, the
// divisor's sign.
template <class T>
struct Mod {
  explicit Mod(const Node& n) : fmod(n.attr_i("fmod", 0) != 0) {}
  static constexpr unsigned kSaved = 0;
  bool fmod;
  T f(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      if (b == 0) return 0;
      T r = a % b;
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
  T ga(T, T, T, T dy) const { return dy; }
  T gb(T, T, T, T) const { return T(0); }
};

// Pow's exponent may be an integer tensor (ONNX's T1): read as the base's type.
template <class T>
T exponent_at(const TensorView& e, I i) {
  return e.dtype == DType::F32 ? e.as<const T>()[i] : static_cast<T>(int_at(e, i));
}
template <class T>
void pow_fwd(const NodeProblem& p, T*) {
  const T* a = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  const Shape& ys = shape_out(p, 0);
  for_each_broadcast<2>(
      ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
      [&](I pos, const std::array<I, 2>& o) { y[pos] = std::pow(a[o[0]], exponent_at<T>(p.in[1], o[1])); });
}
template <class T>
void pow_bwd(const NodeProblem& p, T*) {
  const T* a = cin<T>(p, 0);
  const T* y = p.out[0].as<const T>();
  const T* dy = dout<T>(p, 0);
  T* da = din<T>(p, 0);
  T* db = p.in[1].dtype == DType::F32 ? din<T>(p, 1) : nullptr;
  if (da) std::fill(da, da + p.in[0].numel(), T(0));
  if (db) std::fill(db, db + p.in[1].numel(), T(0));
  if (!dy) return;
  const Shape& ys = shape_out(p, 0);
  for_each_broadcast<2>(ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
                        [&](I pos, const std::array<I, 2>& o) {
                          const T av = a[o[0]], bv = exponent_at<T>(p.in[1], o[1]);
                          if (da && bv != T(0)) da[o[0]] += dy[pos] * bv * std::pow(av, bv - T(1));
                          if (db && av > T(0)) db[o[1]] += dy[pos] * y[pos] * std::log(av);
                        });
}
void infer_pow(InferCtx& c) {
  if (c.dtype(0) != DType::F32) c.fail("its base must be float32");
  if (c.dtype(1) != DType::F32 && c.dtype(1) != DType::I64 && c.dtype(1) != DType::I32)
    c.fail("its exponent must be float32, int64 or int32");
  c.set(0, DType::F32, broadcast_shapes(c.shape(0), c.shape(1), c.node.label()));
}

template <template <class> class F, class V>
void binary_typed(const NodeProblem& p) {
  const F<V> f(*p.node);
  const V* a = p.in[0].as<const V>();
  const V* b = p.in[1].as<const V>();
  V* y = p.out[0].as<V>();
  const Shape& ys = shape_out(p, 0);
  if (shape_in(p, 0) == ys && shape_in(p, 1) == ys) {
    for (I i = 0, n = numel(ys); i < n; ++i) y[i] = f.f(a[i], b[i]);
    return;
  }
  if (shape_in(p, 0) == ys && p.in[1].numel() == 1) {
    const V bv = b[0];
    for (I i = 0, n = numel(ys); i < n; ++i) y[i] = f.f(a[i], bv);
    return;
  }
  for_each_broadcast<2>(ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
                        [&](I pos, const std::array<I, 2>& o) { y[pos] = f.f(a[o[0]], b[o[1]]); });
}

template <template <class> class F, class T>
void binary_fwd(const NodeProblem& p, T*) {
  switch (p.in[0].dtype) {
    case DType::I64: return binary_typed<F, std::int64_t>(p);
    case DType::I32: return binary_typed<F, std::int32_t>(p);
    default: return binary_typed<F, T>(p);
  }
}

template <template <class> class F, class T>
void binary_bwd(const NodeProblem& p, T*) {
  const F<T> f(*p.node);
  constexpr unsigned s = F<T>::kSaved;
  const T* a = s & 1 ? cin<T>(p, 0) : nullptr;
  const T* b = s & 2 ? cin<T>(p, 1) : nullptr;
  const T* y = s & 4 ? p.out[0].as<const T>() : nullptr;
  const T* dy = dout<T>(p, 0);
  T* da = din<T>(p, 0);
  T* db = din<T>(p, 1);
  if (da) std::fill(da, da + p.in[0].numel(), T(0));
  if (db) std::fill(db, db + p.in[1].numel(), T(0));
  if (!dy || (!da && !db)) return;
  const Shape& ys = shape_out(p, 0);
  for_each_broadcast<2>(ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
                        [&](I pos, const std::array<I, 2>& o) {
                          const T av = a ? a[o[0]] : T(0), bv = b ? b[o[1]] : T(0), yv = y ? y[pos] : T(0);
                          if (da) da[o[0]] += f.ga(av, bv, yv, dy[pos]);
                          if (db) db[o[1]] += f.gb(av, bv, yv, dy[pos]);
                        });
}

// AddRelu (internal: networks/fuse.hpp): y = Relu(a + b) over two float32 operands of one shape, the
// pair a residual network joins its branches with, in one pass; backward, dy where y > 0 into both
// gradients. Each value is the one Add and then Relu compute: a + b rounded once, then Relu's own
// functions (its gradient tests y, which is positive where the sum is).
template <class T>
void add_relu_fwd(const NodeProblem& p, T*) {
  const Relu<T> relu(*p.node);
  const T* a = cin<T>(p, 0);
  const T* b = cin<T>(p, 1);
  T* y = out<T>(p, 0);
  for (I i = 0, n = p.out[0].numel(); i < n; ++i) y[i] = relu.f(a[i] + b[i]);
}
template <class T>
void add_relu_bwd(const NodeProblem& p, T*) {
  if (zero_without_upstream<T>(p)) return;
  const Relu<T> relu(*p.node);
  const T* y = p.out[0].as<const T>();
  const T* dy = dout<T>(p, 0);
  T* da = din<T>(p, 0);
  T* db = din<T>(p, 1);
  const I n = p.out[0].numel();
  // dy passed by value whatever y is (a load under the condition would keep the loop from
  // vectorising), and the tests of which gradients are wanted hoisted out of the loops.
  if (da && db) {
    for (I i = 0; i < n; ++i) da[i] = db[i] = relu.g(y[i], dy[i]);
    return;
  }
  if (T* d = da ? da : db)
    for (I i = 0; i < n; ++i) d[i] = relu.g(y[i], dy[i]);
}
void infer_add_relu(InferCtx& c) {
  c.require_float(0, 2);
  if (c.shape(0) != c.shape(1)) c.fail("its two inputs must have one shape");
  c.set(0, DType::F32, c.shape(0));
}
// Add's and Relu's counts together, so that a fused graph's work is the graph's it was made from.
double add_relu_flops(const NodeProblem& p, bool backward) { return (backward ? 4.0 : 2.0) * elems(p); }

void infer_binary(InferCtx& c) {
  const DType t = c.dtype(0);
  if (t != c.dtype(1))
    c.fail(std::string("its inputs have different types (") + dtype_name(t) + " and " + dtype_name(c.dtype(1)) + ")");
  if (t != DType::F32 && t != DType::I64 && t != DType::I32)
    c.fail(std::string("type ") + dtype_name(t) + " is not supported (float32, int64, int32)");
  const std::string& op = c.node.op;
  if (op == "Mod" && t == DType::F32 && c.node.attr_i("fmod", 0) == 0)
    c.fail("floating-point Mod needs fmod = 1 (as ONNX requires)");
  c.set(0, t, broadcast_shapes(c.shape(0), c.shape(1), c.node.label()));
}

double binary_flops(const NodeProblem& p, bool backward) { return (backward ? 2.0 : 1.0) * elems(p); }

template <template <class> class F>
OpSchema binary(const char* name, int since, std::uint32_t diff = 3) {
  constexpr unsigned s = F<float>::kSaved;
  return OpSchema{.op = name,
                  .since = since,
                  .infer = infer_binary,
                  .fwd_f = binary_fwd<F, float>,
                  .fwd_d = binary_fwd<F, double>,
                  .bwd_f = binary_bwd<F, float>,
                  .bwd_d = binary_bwd<F, double>,
                  .flops = binary_flops,
                  .diff_in = diff,
                  .saved_in = s & 3u,
                  .saved_out = (s & 4u) ? 1u : 0u};
}

// ---- Comparisons and logic: bool outputs, no gradients ---------------------------------------
enum class Cmp { Eq, Lt, Gt, Le, Ge };
template <Cmp C, class V>
void compare_typed(const NodeProblem& p) {
  const V* a = p.in[0].as<const V>();
  const V* b = p.in[1].as<const V>();
  auto* y = p.out[0].as<std::uint8_t>();
  const Shape& ys = shape_out(p, 0);
  for_each_broadcast<2>(ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
                        [&](I pos, const std::array<I, 2>& o) {
                          const V x = a[o[0]], z = b[o[1]];
                          bool r = false;
                          switch (C) {
                            case Cmp::Eq: r = x == z; break;
                            case Cmp::Lt: r = x < z; break;
                            case Cmp::Gt: r = x > z; break;
                            case Cmp::Le: r = x <= z; break;
                            case Cmp::Ge: r = x >= z; break;
                          }
                          y[pos] = r ? 1 : 0;
                        });
}
template <Cmp C, class T>
void compare_fwd(const NodeProblem& p, T*) {
  switch (p.in[0].dtype) {
    case DType::I64: return compare_typed<C, std::int64_t>(p);
    case DType::I32: return compare_typed<C, std::int32_t>(p);
    case DType::Bool: return compare_typed<C, std::uint8_t>(p);
    default: return compare_typed<C, T>(p);
  }
}
void infer_compare(InferCtx& c) {
  if (c.dtype(0) != c.dtype(1)) c.fail("its inputs have different types");
  if (!dtype_supported(c.dtype(0))) c.fail(std::string("type ") + dtype_name(c.dtype(0)) + " is not supported");
  c.set(0, DType::Bool, broadcast_shapes(c.shape(0), c.shape(1), c.node.label()));
}
template <Cmp C>
OpSchema compare(const char* name, int since) {
  return OpSchema{.op = name,
                  .since = since,
                  .infer = infer_compare,
                  .fwd_f = compare_fwd<C, float>,
                  .fwd_d = compare_fwd<C, double>,
                  .flops = binary_flops};
}

template <class T>
void not_fwd(const NodeProblem& p, T*) {
  const auto* x = cin<std::uint8_t>(p, 0);
  auto* y = out<std::uint8_t>(p, 0);
  for (I i = 0, n = p.in[0].numel(); i < n; ++i) y[i] = x[i] ? 0 : 1;
}
void infer_not(InferCtx& c) {
  if (c.dtype(0) != DType::Bool) c.fail("its input must be bool");
  c.set(0, DType::Bool, c.shape(0));
}

// ---- And, Or, Xor: bool inputs broadcast, a bool output ----------------------------------------
enum class Logic { And, Or, Xor };
template <Logic L, class T>
void logic_fwd(const NodeProblem& p, T*) {
  const auto* a = cin<std::uint8_t>(p, 0);
  const auto* b = cin<std::uint8_t>(p, 1);
  auto* y = out<std::uint8_t>(p, 0);
  const Shape& ys = shape_out(p, 0);
  for_each_broadcast<2>(ys, {bstrides(shape_in(p, 0), ys), bstrides(shape_in(p, 1), ys)},
                        [&](I pos, const std::array<I, 2>& o) {
                          const bool x = a[o[0]] != 0, z = b[o[1]] != 0;
                          y[pos] = (L == Logic::And ? x && z : L == Logic::Or ? x || z : x != z) ? 1 : 0;
                        });
}
void infer_logic(InferCtx& c) {
  if (c.dtype(0) != DType::Bool || c.dtype(1) != DType::Bool) c.fail("its inputs must be bool");
  c.set(0, DType::Bool, broadcast_shapes(c.shape(0), c.shape(1), c.node.label()));
}

// ---- Max, Min, Sum, Mean: any number of inputs, broadcast together ------------------------------
// Gradients: Sum each input's broadcast share of dy, Mean the same over the count, Max and Min
// dy to the inputs holding the extreme at each position (ties each get all of it).
enum class Many { Max, Min, Sum, Mean };
template <Many M, class V>
void many_typed(const NodeProblem& p) {
  V* y = p.out[0].as<V>();
  const Shape& ys = shape_out(p, 0);
  for (std::size_t k = 0; k < p.in.size(); ++k) {
    const V* x = p.in[k].as<const V>();
    for_each_broadcast<1>(ys, {bstrides(shape_in(p, k), ys)}, [&](I pos, const std::array<I, 1>& o) {
      const V v = x[o[0]];
      if (k == 0)
        y[pos] = v;
      else if (M == Many::Max)
        y[pos] = std::max(y[pos], v);
      else if (M == Many::Min)
        y[pos] = std::min(y[pos], v);
      else
        y[pos] += v;
    });
  }
  if constexpr (M == Many::Mean)
    for (I i = 0, n = numel(ys); i < n; ++i) y[i] /= static_cast<V>(p.in.size());
}
template <Many M, class T>
void many_fwd(const NodeProblem& p, T*) {
  switch (p.in[0].dtype) {
    case DType::I64: return many_typed<M, std::int64_t>(p);
    case DType::I32: return many_typed<M, std::int32_t>(p);
    default: return many_typed<M, T>(p);
  }
}
template <Many M, class T>
void many_bwd(const NodeProblem& p, T*) {
  const T* dy = dout<T>(p, 0);
  const T* y = p.out[0].as<const T>();
  const Shape& ys = shape_out(p, 0);
  for (std::size_t k = 0; k < p.in.size(); ++k) {
    T* dx = din<T>(p, k);
    if (!dx) continue;
    std::fill(dx, dx + p.in[k].numel(), T(0));
    if (!dy) continue;
    const T* x = cin<T>(p, k);
    const T scale = M == Many::Mean ? T(1) / static_cast<T>(p.in.size()) : T(1);
    for_each_broadcast<1>(ys, {bstrides(shape_in(p, k), ys)}, [&](I pos, const std::array<I, 1>& o) {
      if (M == Many::Sum || M == Many::Mean || x[o[0]] == y[pos]) dx[o[0]] += dy[pos] * scale;
    });
  }
}
void infer_many(InferCtx& c) {
  if (c.n_in() == 0) c.fail("it needs at least one input");
  const DType t = c.dtype(0);
  if (t != DType::F32 && !((c.node.op == "Max" || c.node.op == "Min") && (t == DType::I64 || t == DType::I32)))
    c.fail(std::string("type ") + dtype_name(t) + " is not supported (float32; Max and Min also int64, int32)");
  Shape s = c.shape(0);
  for (std::size_t i = 1; i < c.n_in(); ++i) {
    if (c.dtype(i) != t) c.fail("its inputs have different types");
    s = broadcast_shapes(s, c.shape(i), c.node.label());
  }
  c.set(0, t, s);
}
template <Many M>
OpSchema many(const char* name, int since) {
  return OpSchema{.op = name,
                  .since = since,
                  .infer = infer_many,
                  .fwd_f = many_fwd<M, float>,
                  .fwd_d = many_fwd<M, double>,
                  .bwd_f = many_bwd<M, float>,
                  .bwd_d = many_bwd<M, double>,
                  .flops = binary_flops,
                  .diff_in = 0xffffffffu,
                  .saved_in = M == Many::Max || M == Many::Min ? 0xffffffffu : 0u,
                  .saved_out = M == Many::Max || M == Many::Min ? 1u : 0u};
}

// ---- Where(condition, x, y) -------------------------------------------------------------------
template <class V>
void where_typed(const NodeProblem& p) {
  const auto* c = p.in[0].as<const std::uint8_t>();
  const V* x = p.in[1].as<const V>();
  const V* y = p.in[2].as<const V>();
  V* o = p.out[0].as<V>();
  const Shape& os = shape_out(p, 0);
  for_each_broadcast<3>(os, {bstrides(shape_in(p, 0), os), bstrides(shape_in(p, 1), os), bstrides(shape_in(p, 2), os)},
                        [&](I pos, const std::array<I, 3>& k) { o[pos] = c[k[0]] ? x[k[1]] : y[k[2]]; });
}
template <class T>
void where_fwd(const NodeProblem& p, T*) {
  switch (p.in[1].dtype) {
    case DType::I64: return where_typed<std::int64_t>(p);
    case DType::I32: return where_typed<std::int32_t>(p);
    case DType::Bool: return where_typed<std::uint8_t>(p);
    default: return where_typed<T>(p);
  }
}
template <class T>
void where_bwd(const NodeProblem& p, T*) {
  const auto* c = p.in[0].as<const std::uint8_t>();
  const T* dy = dout<T>(p, 0);
  T* dx = din<T>(p, 1);
  T* dz = din<T>(p, 2);
  if (dx) std::fill(dx, dx + p.in[1].numel(), T(0));
  if (dz) std::fill(dz, dz + p.in[2].numel(), T(0));
  if (!dy) return;
  const Shape& os = shape_out(p, 0);
  for_each_broadcast<3>(os, {bstrides(shape_in(p, 0), os), bstrides(shape_in(p, 1), os), bstrides(shape_in(p, 2), os)},
                        [&](I pos, const std::array<I, 3>& k) {
                          if (c[k[0]]) {
                            if (dx) dx[k[1]] += dy[pos];
                          } else if (dz) {
                            dz[k[2]] += dy[pos];
                          }
                        });
}
void infer_where(InferCtx& c) {
  if (c.dtype(0) != DType::Bool) c.fail("its condition must be bool");
  if (c.dtype(1) != c.dtype(2)) c.fail("its two branches have different types");
  if (!dtype_supported(c.dtype(1))) c.fail(std::string("type ") + dtype_name(c.dtype(1)) + " is not supported");
  const Shape s =
      broadcast_shapes(broadcast_shapes(c.shape(0), c.shape(1), c.node.label()), c.shape(2), c.node.label());
  c.set(0, c.dtype(1), s);
}

// ---- Cast ---------------------------------------------------------------------------------------
template <class From, class To>
void cast_typed(const void* src, void* dst, I n) {
  const From* s = static_cast<const From*>(src);
  To* d = static_cast<To*>(dst);
  for (I i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, std::uint8_t>)
      d[i] = s[i] != From(0) ? 1 : 0;
    else
      d[i] = static_cast<To>(s[i]);
  }
}
template <class T, class From>
void cast_from(const void* src, DType to, void* dst, I n) {
  switch (to) {
    case DType::I64: return cast_typed<From, std::int64_t>(src, dst, n);
    case DType::I32: return cast_typed<From, std::int32_t>(src, dst, n);
    case DType::Bool: return cast_typed<From, std::uint8_t>(src, dst, n);
    default: return cast_typed<From, T>(src, dst, n);
  }
}
template <class T>
void cast_fwd(const NodeProblem& p, T*) {
  const I n = p.in[0].numel();
  const DType to = p.out[0].dtype;
  switch (p.in[0].dtype) {
    case DType::I64: return cast_from<T, std::int64_t>(p.in[0].data, to, p.out[0].data, n);
    case DType::I32: return cast_from<T, std::int32_t>(p.in[0].data, to, p.out[0].data, n);
    case DType::Bool: return cast_from<T, std::uint8_t>(p.in[0].data, to, p.out[0].data, n);
    default: return cast_from<T, T>(p.in[0].data, to, p.out[0].data, n);
  }
}
template <class T>
void cast_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const T* dy = dout<T>(p, 0);
  const I n = p.in[0].numel();
  if (dy && p.out[0].dtype == DType::F32)
    std::copy(dy, dy + n, dx);
  else
    std::fill(dx, dx + n, T(0));
}
void infer_cast(InferCtx& c) {
  const auto to = static_cast<DType>(c.node.attr_i("to", 0));
  if (!dtype_supported(to)) c.fail(std::string("casting to ") + dtype_name(to) + " is not supported");
  if (!dtype_supported(c.dtype(0))) c.fail(std::string("casting from ") + dtype_name(c.dtype(0)) + " is not supported");
  c.set(0, to, c.shape(0));
}

OpSchema add_relu_schema() {
  return OpSchema{.op = "AddRelu",
                  .since = 1,
                  .infer = infer_add_relu,
                  D500_FWD(add_relu_fwd),
                  .bwd_f = add_relu_bwd<float>,
                  .bwd_d = add_relu_bwd<double>,
                  .flops = add_relu_flops,
                  .diff_in = 3,
                  .saved_out = kY,
                  .internal = true};
}

}  // namespace

void add_elementwise_ops(std::vector<OpSchema>& t) {
  t.push_back(unary<Relu>("Relu", 6));
  t.push_back(unary<LeakyRelu>("LeakyRelu", 6));
  t.push_back(unary<Sigmoid>("Sigmoid", 6));
  t.push_back(unary<Tanh>("Tanh", 6));
  t.push_back(unary<HardSigmoid>("HardSigmoid", 6));
  t.push_back(unary<HardSwish>("HardSwish", 14));
  t.push_back(unary<Sqrt>("Sqrt", 6));
  t.push_back(unary<Erf>("Erf", 9));
  t.push_back(unary<Exp>("Exp", 6));
  t.push_back(unary<Log>("Log", 6));
  t.push_back(unary<Neg>("Neg", 6));
  t.push_back(unary<Abs>("Abs", 6));
  t.push_back(unary<Reciprocal>("Reciprocal", 6));
  t.push_back(unary<Elu>("Elu", 6));
  t.push_back(unary<Celu>("Celu", 12));
  t.push_back(unary<Selu>("Selu", 6));
  t.push_back(unary<ThresholdedRelu>("ThresholdedRelu", 10));
  t.push_back(unary<Softplus>("Softplus", 1));
  t.push_back(unary<Softsign>("Softsign", 1));
  t.push_back(unary<Shrink>("Shrink", 9));
  t.push_back(unary<Mish>("Mish", 18));
  t.push_back(unary<Sin>("Sin", 7));
  t.push_back(unary<Cos>("Cos", 7));
  t.push_back(unary<Tan>("Tan", 7));
  t.push_back(unary<Asin>("Asin", 7));
  t.push_back(unary<Acos>("Acos", 7));
  t.push_back(unary<Atan>("Atan", 7));
  t.push_back(unary<Sinh>("Sinh", 9));
  t.push_back(unary<Cosh>("Cosh", 9));
  t.push_back(unary<Asinh>("Asinh", 9));
  t.push_back(unary<Acosh>("Acosh", 9));
  t.push_back(unary<Atanh>("Atanh", 9));
  // Piecewise constant: not differentiable (ONNX), as frameworks treat them.
  for (OpSchema o :
       {unary<Floor>("Floor", 6), unary<Ceil>("Ceil", 6), unary<Round>("Round", 11), unary<Sign>("Sign", 9)}) {
    o.bwd_f = nullptr;
    o.bwd_d = nullptr;
    o.diff_in = 0;
    o.saved_in = 0;
    t.push_back(o);
  }
  t.push_back(OpSchema{.op = "Clip",
                       .since = 6,
                       .infer = infer_clip,
                       D500_FWD(clip_fwd),
                       .bwd_f = clip_bwd<float>,
                       .bwd_d = clip_bwd<double>,
                       .flops = unary_flops,
                       .diff_in = kX,
                       .saved_in = kX});
  t.push_back(binary<Add>("Add", 7));
  t.push_back(add_relu_schema());
  t.push_back(binary<Sub>("Sub", 7));
  t.push_back(binary<Mul>("Mul", 7));
  t.push_back(binary<Div>("Div", 7));
  t.push_back(binary<PRelu>("PRelu", 9));
  t.push_back(OpSchema{.op = "Pow",
                       .since = 7,
                       .infer = infer_pow,
                       D500_FWD(pow_fwd),
                       .bwd_f = pow_bwd<float>,
                       .bwd_d = pow_bwd<double>,
                       .flops = binary_flops,
                       .diff_in = 3,
                       .saved_in = 3,
                       .saved_out = 1});
  t.push_back(binary<Mod>("Mod", 10, 0));  // shape arithmetic: no gradient
  t.push_back(compare<Cmp::Eq>("Equal", 7));
  t.push_back(compare<Cmp::Lt>("Less", 7));
  t.push_back(compare<Cmp::Gt>("Greater", 7));
  t.push_back(compare<Cmp::Le>("LessOrEqual", 12));
  t.push_back(compare<Cmp::Ge>("GreaterOrEqual", 12));
  t.push_back(OpSchema{.op = "Not", .since = 1, .infer = infer_not, D500_FWD(not_fwd), .flops = unary_flops});
  t.push_back(OpSchema{.op = "And",
                       .since = 7,
                       .infer = infer_logic,
                       .fwd_f = logic_fwd<Logic::And, float>,
                       .fwd_d = logic_fwd<Logic::And, double>,
                       .flops = binary_flops});
  t.push_back(OpSchema{.op = "Or",
                       .since = 7,
                       .infer = infer_logic,
                       .fwd_f = logic_fwd<Logic::Or, float>,
                       .fwd_d = logic_fwd<Logic::Or, double>,
                       .flops = binary_flops});
  t.push_back(OpSchema{.op = "Xor",
                       .since = 7,
                       .infer = infer_logic,
                       .fwd_f = logic_fwd<Logic::Xor, float>,
                       .fwd_d = logic_fwd<Logic::Xor, double>,
                       .flops = binary_flops});
  t.push_back(many<Many::Max>("Max", 8));
  t.push_back(many<Many::Min>("Min", 8));
  t.push_back(many<Many::Sum>("Sum", 8));
  t.push_back(many<Many::Mean>("Mean", 8));
  t.push_back(OpSchema{.op = "Where",
                       .since = 9,
                       .infer = infer_where,
                       D500_FWD(where_fwd),
                       .bwd_f = where_bwd<float>,
                       .bwd_d = where_bwd<double>,
                       .flops = unary_flops,
                       .diff_in = 6,
                       .saved_in = 1});
  t.push_back(OpSchema{.op = "Cast",
                       .since = 6,
                       .infer = infer_cast,
                       D500_FWD(cast_fwd),
                       .bwd_f = cast_bwd<float>,
                       .bwd_d = cast_bwd<double>,
                       .flops = unary_flops,
                       .diff_in = kX});
}

}  // namespace d500::ref
