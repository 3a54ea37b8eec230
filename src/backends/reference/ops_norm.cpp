// Normalisation and probabilities: BatchNormalization, LayerNormalization, Softmax, LogSoftmax
// and SoftmaxCrossEntropyLoss. Work counts: five FLOPs per element for a normalisation or
// softmax forward, eight backward. The statistics' sums (over a batch and its images: thousands
// of terms) accumulate in double also in the float reference: naive float sums over 8192 terms
// made ResNet-20's BatchNormalization gradients 1% wrong, far more than the frameworks' blocked
// sums do.
#include "backends/reference/ops_common.hpp"

namespace d500::ref {
namespace {

// ---- BatchNormalization ---------------------------------------------------------------------------
// X [N, C, ...]; scale, B, mean, var [C]. Training (the training pass, or training_mode = 1):
// normalised with the batch's own statistics (biased variance), as frameworks train; otherwise
// with the given mean and var.
bool bn_training(const NodeProblem& p) { return p.training || p.node->attr_i("training_mode", 0) != 0; }

struct BnDims {
  I n, c, plane;
};
BnDims bn_dims(const NodeProblem& p) {
  const Shape& x = shape_in(p, 0);
  I plane = 1;
  for (std::size_t i = 2; i < x.size(); ++i) plane *= x[i];
  return {x[0], x.size() > 1 ? x[1] : 1, plane};
}

template <class T>
void bn_batch_stats(const BnDims& d, const T* x, I c, T& mean, T& var) {
  double s = 0;
  for (I n = 0; n < d.n; ++n)
    for (I i = 0; i < d.plane; ++i) s += x[(n * d.c + c) * d.plane + i];
  const T m = static_cast<T>(d.n * d.plane);
  mean = static_cast<T>(s / m);
  double q = 0;
  for (I n = 0; n < d.n; ++n)
    for (I i = 0; i < d.plane; ++i) {
      const T e = x[(n * d.c + c) * d.plane + i] - mean;
      q += e * e;
    }
  var = static_cast<T>(q / m);
}

// kRelu: BatchNormRelu (internal: networks/fuse.hpp), the normalisation's output through Relu's
// own function before it is stored, and backward dy through Relu's gradient (which tests the
// stored y) wherever the normalisation's backward reads it: the values BatchNormalization and
// then Relu compute, bit for bit, without the normalisation's output in memory.
template <class T, bool kRelu = false>
void bn_fwd(const NodeProblem& p, T*) {
  const Relu<T> relu(*p.node);
  const BnDims d = bn_dims(p);
  const T eps = static_cast<T>(p.node->attr_f("epsilon", 1e-5));
  const T momentum = static_cast<T>(p.node->attr_f("momentum", 0.9));
  const T *x = cin<T>(p, 0), *scale = cin<T>(p, 1), *bias = cin<T>(p, 2), *rm = cin<T>(p, 3), *rv = cin<T>(p, 4);
  T* y = out<T>(p, 0);
  const bool training = bn_training(p);
  for (I c = 0; c < d.c; ++c) {
    T mean = rm[c], var = rv[c];
    if (training) {
      bn_batch_stats(d, x, c, mean, var);
      // Optional outputs: the updated running statistics (opset 14+: outputs 1, 2; before, 1
      // and 2 are the running and 3 and 4 the batch statistics).
      if (T* o = p.out.size() > 1 ? out<T>(p, 1) : nullptr) o[c] = rm[c] * momentum + mean * (T(1) - momentum);
      if (T* o = p.out.size() > 2 ? out<T>(p, 2) : nullptr) o[c] = rv[c] * momentum + var * (T(1) - momentum);
      if (T* o = p.out.size() > 3 ? out<T>(p, 3) : nullptr) o[c] = mean;
      if (T* o = p.out.size() > 4 ? out<T>(p, 4) : nullptr) o[c] = var;
    }
    const T inv = T(1) / std::sqrt(var + eps);
    for (I n = 0; n < d.n; ++n) {
      const I base = (n * d.c + c) * d.plane;
      for (I i = 0; i < d.plane; ++i) {
        const T v = scale[c] * (x[base + i] - mean) * inv + bias[c];
        y[base + i] = kRelu ? relu.f(v) : v;
      }
    }
  }
}

// Training: dx = scale inv / M (M dy - sum(dy) - xhat sum(dy xhat)), M = N * plane; inference:
// dx = scale inv dy. dscale = sum(dy xhat), dB = sum(dy).
template <class T, bool kRelu = false>
void bn_bwd(const NodeProblem& p, T*) {
  const BnDims d = bn_dims(p);
  const T eps = static_cast<T>(p.node->attr_f("epsilon", 1e-5));
  const T *x = cin<T>(p, 0), *scale = cin<T>(p, 1), *rm = cin<T>(p, 3), *rv = cin<T>(p, 4);
  const T* dy = dout<T>(p, 0);
  const Relu<T> relu(*p.node);
  const T* y = kRelu ? p.out[0].as<const T>() : nullptr;
  auto grad = [&](I at) { return kRelu ? relu.g(y[at], dy[at]) : dy[at]; };
  T *dx = din<T>(p, 0), *dscale = din<T>(p, 1), *dbias = din<T>(p, 2);
  const bool training = bn_training(p);
  const T m = static_cast<T>(d.n * d.plane);
  for (I c = 0; c < d.c; ++c) {
    T mean = rm[c], var = rv[c];
    if (training) bn_batch_stats(d, x, c, mean, var);
    const T inv = T(1) / std::sqrt(var + eps);
    double sdy_ = 0, sdyx_ = 0;
    for (I n = 0; n < d.n && dy; ++n)
      for (I i = 0; i < d.plane; ++i) {
        const I at = (n * d.c + c) * d.plane + i;
        const T g = grad(at);
        sdy_ += g;
        sdyx_ += g * (x[at] - mean) * inv;
      }
    const T sdy = static_cast<T>(sdy_), sdyx = static_cast<T>(sdyx_);
    if (dbias) dbias[c] = sdy;
    if (dscale) dscale[c] = sdyx;
    if (!dx) continue;
    for (I n = 0; n < d.n; ++n)
      for (I i = 0; i < d.plane; ++i) {
        const I at = (n * d.c + c) * d.plane + i;
        if (!dy)
          dx[at] = 0;
        else if (training)
          dx[at] = scale[c] * inv / m * (m * grad(at) - sdy - (x[at] - mean) * inv * sdyx);
        else
          dx[at] = scale[c] * inv * grad(at);
      }
  }
}

void infer_bn(InferCtx& c) {
  c.require_float(0, 5);
  const Shape& x = c.shape(0);
  if (x.size() < 2) c.fail("X " + shape_str(x) + " must be N C ...");
  if (c.node.attr_i("spatial", 1) != 1) c.fail("spatial = 0 is not supported");
  const Shape ch{x[1]};
  for (std::size_t i = 1; i < 5; ++i)
    if (!c.has_in(i) || c.shape(i) != ch) c.fail("scale, B, mean and var must have shape " + shape_str(ch));
  c.set(0, DType::F32, x);
  for (std::size_t j = 1; j < c.out.size(); ++j) c.set(j, DType::F32, ch);
}

double bn_flops(const NodeProblem& p, bool backward) {
  return (backward ? 8.0 : bn_training(p) ? 5.0 : 2.0) * elems(p);
}
// BatchNormalization's count and Relu's together, so that a joined graph's work is its model's.
double bn_relu_flops(const NodeProblem& p, bool backward) {
  return bn_flops(p, backward) + (backward ? 2.0 : 1.0) * elems(p);
}

// ---- LayerNormalization (opset 17) --------------------------------------------------------------------
// Normalises over the axes from `axis` on; Scale and B have those axes' shape.
struct LnDims {
  I outer, inner;
};
LnDims ln_dims(const NodeProblem& p) {
  const Shape& x = shape_in(p, 0);
  const auto axis = static_cast<std::size_t>(p.node->attr_i("axis", -1));  // made positive by infer
  I outer = 1, inner = 1;
  for (std::size_t i = 0; i < x.size(); ++i) (i < axis ? outer : inner) *= x[i];
  return {outer, inner};
}

// A row's mean and inverse standard deviation (biased variance), the sums in double.
template <class T>
void row_stats(const T* x, I n, T eps, T& mean, T& inv) {
  double s = 0;
  for (I i = 0; i < n; ++i) s += x[i];
  mean = static_cast<T>(s / static_cast<double>(n));
  double q = 0;
  for (I i = 0; i < n; ++i) q += (x[i] - mean) * (x[i] - mean);
  inv = T(1) / std::sqrt(static_cast<T>(q / static_cast<double>(n)) + eps);
}

template <class T>
void ln_fwd(const NodeProblem& p, T*) {
  const LnDims d = ln_dims(p);
  const T eps = static_cast<T>(p.node->attr_f("epsilon", 1e-5));
  const T *x = cin<T>(p, 0), *scale = cin<T>(p, 1);
  const T* bias = p.in.size() > 2 && p.in[2].present() ? cin<T>(p, 2) : nullptr;
  T* y = out<T>(p, 0);
  T* mean_out = p.out.size() > 1 ? out<T>(p, 1) : nullptr;
  T* inv_out = p.out.size() > 2 ? out<T>(p, 2) : nullptr;
  for (I o = 0; o < d.outer; ++o) {
    const T* xo = x + o * d.inner;
    T mean, inv;
    row_stats(xo, d.inner, eps, mean, inv);
    for (I i = 0; i < d.inner; ++i) y[o * d.inner + i] = (xo[i] - mean) * inv * scale[i] + (bias ? bias[i] : T(0));
    if (mean_out) mean_out[o] = mean;
    if (inv_out) inv_out[o] = inv;
  }
}

template <class T>
void ln_bwd(const NodeProblem& p, T*) {
  const LnDims d = ln_dims(p);
  const T eps = static_cast<T>(p.node->attr_f("epsilon", 1e-5));
  const T *x = cin<T>(p, 0), *scale = cin<T>(p, 1), *dy = dout<T>(p, 0);
  // The Mean and InvStdDev outputs' gradients, where a graph reads them: d mean / dx_i = 1 / n,
  // d inv / dx_i = -inv^3 (x_i - mean) / n.
  const T *dmean = dout<T>(p, 1), *dinv = dout<T>(p, 2);
  T *dx = din<T>(p, 0), *dscale = din<T>(p, 1), *dbias = din<T>(p, 2);
  if (dscale) std::fill(dscale, dscale + d.inner, T(0));
  if (dbias) std::fill(dbias, dbias + d.inner, T(0));
  const T n = static_cast<T>(d.inner);
  for (I o = 0; o < d.outer; ++o) {
    const T* xo = x + o * d.inner;
    T mean, inv;
    row_stats(xo, d.inner, eps, mean, inv);
    double sg_ = 0, sgx_ = 0;  // sums of g = dy * scale and of g * xhat
    for (I i = 0; i < d.inner && dy; ++i) {
      const T xhat = (xo[i] - mean) * inv, g = dy[o * d.inner + i] * scale[i];
      sg_ += g;
      sgx_ += g * xhat;
      if (dscale) dscale[i] += dy[o * d.inner + i] * xhat;
      if (dbias) dbias[i] += dy[o * d.inner + i];
    }
    const T sg = static_cast<T>(sg_), sgx = static_cast<T>(sgx_);
    if (!dx) continue;
    for (I i = 0; i < d.inner; ++i) {
      T v = 0;
      if (dy) {
        const T xhat = (xo[i] - mean) * inv, g = dy[o * d.inner + i] * scale[i];
        v = inv / n * (n * g - sg - xhat * sgx);
      }
      if (dmean) v += dmean[o] / n;
      if (dinv) v -= dinv[o] * inv * inv * inv * (xo[i] - mean) / n;
      dx[o * d.inner + i] = v;
    }
  }
}

void infer_ln(InferCtx& c) {
  c.require_float(0, c.n_in());
  const Shape& x = c.shape(0);
  const std::int64_t axis = c.axis(c.node.attr_i("axis", -1), x.size(), "axis");
  c.node.attrs["axis"] = int_attr(axis);
  const Shape norm(x.begin() + axis, x.end());
  for (std::size_t i = 1; i < 3; ++i)
    if (c.has_in(i) && numel(c.shape(i)) != numel(norm))
      c.fail("Scale and B must have the normalised axes' shape " + shape_str(norm) + " (got " + shape_str(c.shape(i)) +
             ")");
  c.set(0, DType::F32, x);
  Shape stat = x;
  for (std::size_t i = static_cast<std::size_t>(axis); i < stat.size(); ++i) stat[i] = 1;
  for (std::size_t j = 1; j < c.out.size(); ++j) c.set(j, DType::F32, stat);
}

double norm_flops(const NodeProblem& p, bool backward) { return (backward ? 8.0 : 5.0) * elems(p); }

// ---- Softmax and LogSoftmax ------------------------------------------------------------------------
// Opset 13+: over one axis. Before: over every axis from `axis` on (the input coerced to 2-D).
// Infer writes the decomposition into attributes _outer, _len, _inner.
void infer_softmax(InferCtx& c) {
  c.require_float();
  const Shape& x = c.shape(0);
  const bool old = c.opset < 13;
  const std::int64_t axis = c.axis(c.node.attr_i("axis", old ? 1 : -1), x.size(), "axis");
  I outer = 1, len = 1, inner = 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto a = static_cast<std::int64_t>(i);
    if (a < axis)
      outer *= x[i];
    else if (a == axis || old)
      len *= x[i];
    else
      inner *= x[i];
  }
  c.node.attrs["axis"] = int_attr(axis);
  c.node.attrs["_outer"] = int_attr(outer);
  c.node.attrs["_len"] = int_attr(len);
  c.node.attrs["_inner"] = int_attr(inner);
  c.set(0, DType::F32, x);
}

struct Rows {
  I outer, len, inner;
};
Rows rows(const Node& n) { return {n.attr_i("_outer", 1), n.attr_i("_len", 1), n.attr_i("_inner", 1)}; }

template <bool Log, class T>
void softmax_fwd(const NodeProblem& p, T*) {
  const Rows r = rows(*p.node);
  const T* x = cin<T>(p, 0);
  T* y = out<T>(p, 0);
  for (I o = 0; o < r.outer; ++o)
    for (I in = 0; in < r.inner; ++in) {
      const I base = o * r.len * r.inner + in;
      T mx = -std::numeric_limits<T>::infinity();
      for (I i = 0; i < r.len; ++i) mx = std::max(mx, x[base + i * r.inner]);
      T s = 0;
      for (I i = 0; i < r.len; ++i) s += std::exp(x[base + i * r.inner] - mx);
      const T ls = std::log(s);
      for (I i = 0; i < r.len; ++i) {
        const I at = base + i * r.inner;
        y[at] = Log ? x[at] - mx - ls : std::exp(x[at] - mx) / s;
      }
    }
}

// Softmax: dx = y (dy - sum(dy y)); LogSoftmax: dx = dy - exp(y) sum(dy).
template <bool Log, class T>
void softmax_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const Rows r = rows(*p.node);
  const T* y = p.out[0].as<const T>();
  const T* dy = dout<T>(p, 0);
  if (!dy) {
    std::fill(dx, dx + p.in[0].numel(), T(0));
    return;
  }
  for (I o = 0; o < r.outer; ++o)
    for (I in = 0; in < r.inner; ++in) {
      const I base = o * r.len * r.inner + in;
      T s = 0;
      for (I i = 0; i < r.len; ++i) s += Log ? dy[base + i * r.inner] : dy[base + i * r.inner] * y[base + i * r.inner];
      for (I i = 0; i < r.len; ++i) {
        const I at = base + i * r.inner;
        dx[at] = Log ? dy[at] - std::exp(y[at]) * s : y[at] * (dy[at] - s);
      }
    }
}

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------------
// scores [N, C, d...], labels [N, d...] (int64 or int32), optional weights [C]; reduction mean
// (weighted: sum(w_l loss) / sum(w_l)), sum or none; labels equal to ignore_index count nowhere.
struct SceDims {
  I n, c, inner;
};
SceDims sce_dims(const NodeProblem& p) {
  const Shape& s = shape_in(p, 0);
  I inner = 1;
  for (std::size_t i = 2; i < s.size(); ++i) inner *= s[i];
  return {s[0], s[1], inner};
}

// What the two losses read alike: the labels (ignore_index counts nowhere), the class weights
// (1 without them), the reduction, and mean's denominator, the weight of the labels counted.
template <class T>
struct Labels {
  const NodeProblem& p;
  SceDims d;
  const T* w;
  std::string red;
  bool has_ignore;
  I ignore;
  explicit Labels(const NodeProblem& node)
      : p(node),
        d(sce_dims(node)),
        w(node.in.size() > 2 && node.in[2].present() ? cin<T>(node, 2) : nullptr),
        red(node.node->attr_s("reduction", "mean")),
        has_ignore(node.node->has("ignore_index")),
        ignore(node.node->attr_i("ignore_index", 0)) {}
  I label(I n, I in) const { return int_at(p.in[1], n * d.inner + in); }
  bool ignored(I l) const { return has_ignore && l == ignore; }
  T weight(I l) const { return w ? w[l] : T(1); }
  T weight_sum() const {
    T sum = 0;
    for (I n = 0; n < d.n; ++n)
      for (I in = 0; in < d.inner; ++in)
        if (const I l = label(n, in); !ignored(l)) sum += weight(l);
    return sum;
  }
  // The loss output from per-position values v(n, in).
  template <class F>
  void reduce(T* loss, F&& v) const {
    T total = 0;
    for (I n = 0; n < d.n; ++n)
      for (I in = 0; in < d.inner; ++in) {
        const T x = v(n, in);
        if (red == "none")
          loss[n * d.inner + in] = x;
        else
          total += x;
      }
    if (red == "sum") loss[0] = total;
    if (red == "mean") loss[0] = total / weight_sum();
  }
  // The gradient reaching position (n, in) of a loss output's gradient dl (nullptr: none).
  T upstream(const T* dl, I n, I in, T norm) const {
    if (!dl) return T(0);
    return red == "none" ? dl[n * d.inner + in] : dl[0] / norm;
  }
};

template <class T>
void sce_fwd(const NodeProblem& p, T*) {
  const Labels<T> lb(p);
  const SceDims d = lb.d;
  const T* s = cin<T>(p, 0);
  T* logp = p.out.size() > 1 ? out<T>(p, 1) : nullptr;
  lb.reduce(out<T>(p, 0), [&](I n, I in) {
    const I base = n * d.c * d.inner + in;
    T mx = -std::numeric_limits<T>::infinity();
    for (I c = 0; c < d.c; ++c) mx = std::max(mx, s[base + c * d.inner]);
    T sum = 0;
    for (I c = 0; c < d.c; ++c) sum += std::exp(s[base + c * d.inner] - mx);
    const T lse = mx + std::log(sum);
    if (logp)
      for (I c = 0; c < d.c; ++c) logp[base + c * d.inner] = s[base + c * d.inner] - lse;
    const I l = lb.label(n, in);
    return lb.ignored(l) ? T(0) : -(s[base + l * d.inner] - lse) * lb.weight(l);
  });
}

// The scores' gradient: the loss's, g w_l (softmax - onehot(l)), plus where log_prob is read, its
// gradient through log-softmax, dlp - softmax * (the row's sum of dlp).
template <class T>
void sce_bwd(const NodeProblem& p, T*) {
  T* ds = din<T>(p, 0);
  if (!ds) return;
  const Labels<T> lb(p);
  const SceDims d = lb.d;
  const T* s = cin<T>(p, 0);
  const T* dl = dout<T>(p, 0);
  const T* dlp = dout<T>(p, 1);
  const T norm = lb.red == "mean" ? lb.weight_sum() : T(1);
  for (I n = 0; n < d.n; ++n)
    for (I in = 0; in < d.inner; ++in) {
      const I base = n * d.c * d.inner + in;
      const I l = lb.label(n, in);
      const T g = lb.ignored(l) ? T(0) : lb.upstream(dl, n, in, norm) * lb.weight(l);
      T mx = -std::numeric_limits<T>::infinity();
      for (I c = 0; c < d.c; ++c) mx = std::max(mx, s[base + c * d.inner]);
      T sum = 0;
      for (I c = 0; c < d.c; ++c) sum += std::exp(s[base + c * d.inner] - mx);
      double dlp_sum = 0;
      for (I c = 0; dlp && c < d.c; ++c) dlp_sum += dlp[base + c * d.inner];
      for (I c = 0; c < d.c; ++c) {
        const T prob = std::exp(s[base + c * d.inner] - mx) / sum;
        ds[base + c * d.inner] = g * (prob - (c == l ? T(1) : T(0)));
        if (dlp) ds[base + c * d.inner] += dlp[base + c * d.inner] - prob * static_cast<T>(dlp_sum);
      }
    }
}

// NegativeLogLikelihoodLoss: SoftmaxCrossEntropyLoss's loss on given log-probabilities x [N, C,
// d...]: -w_l x[n, l, d...], reduced as it is; the gradient -g w_l at the label, zero elsewhere.
template <class T>
void nll_fwd(const NodeProblem& p, T*) {
  const Labels<T> lb(p);
  const T* x = cin<T>(p, 0);
  lb.reduce(out<T>(p, 0), [&](I n, I in) {
    const I l = lb.label(n, in);
    return lb.ignored(l) ? T(0) : -x[(n * lb.d.c + l) * lb.d.inner + in] * lb.weight(l);
  });
}
template <class T>
void nll_bwd(const NodeProblem& p, T*) {
  T* dx = din<T>(p, 0);
  if (!dx) return;
  const Labels<T> lb(p);
  const T* dl = dout<T>(p, 0);
  const T norm = lb.red == "mean" ? lb.weight_sum() : T(1);
  std::fill(dx, dx + p.in[0].numel(), T(0));
  for (I n = 0; n < lb.d.n; ++n)
    for (I in = 0; in < lb.d.inner; ++in)
      if (const I l = lb.label(n, in); !lb.ignored(l))
        dx[(n * lb.d.c + l) * lb.d.inner + in] = -lb.upstream(dl, n, in, norm) * lb.weight(l);
}

void infer_sce(InferCtx& c) {
  c.require_float();
  const Shape& s = c.shape(0);
  const Shape& l = c.shape(1);
  if (c.dtype(1) != DType::I64 && c.dtype(1) != DType::I32) c.fail("labels must be int64 or int32");
  if (s.size() < 2) c.fail("scores " + shape_str(s) + " must be N C ...");
  Shape want{s[0]};
  want.insert(want.end(), s.begin() + 2, s.end());
  if (l != want) c.fail("labels " + shape_str(l) + " must have shape " + shape_str(want));
  if (c.has_in(2) && (c.dtype(2) != DType::F32 || c.shape(2) != Shape{s[1]})) c.fail("weights must be float32 [C]");
  // A label outside [0, C) (other than ignore_index) would read outside the row: refused where
  // the labels are known at load time; input labels are checked by whoever feeds them.
  if (c.is_const(1))
    for (I v : c.ints(1, "labels"))
      if ((v < 0 || v >= s[1]) && !(c.node.has("ignore_index") && v == c.node.attr_i("ignore_index", 0)))
        c.fail("label " + std::to_string(v) + " is outside [0, " + std::to_string(s[1]) + ")");
  const std::string red = c.node.attr_s("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") c.fail("reduction \"" + red + "\" is not one of mean, sum, none");
  c.set(0, DType::F32, red == "none" ? want : Shape{});
  if (c.out.size() > 1) c.set(1, DType::F32, s);
}

}  // namespace

void add_norm_ops(std::vector<OpSchema>& t) {
  const OpSchema bn{.op = "BatchNormalization",
                    .since = 7,
                    .infer = infer_bn,
                    D500_FWD(bn_fwd),
                    .bwd_f = bn_bwd<float>,
                    .bwd_d = bn_bwd<double>,
                    .flops = bn_flops,
                    .diff_in = 7,
                    .saved_in = 0x1B,
                    .batch_coupled_in_training = true};
  t.push_back(bn);
  // BatchNormalization's shapes, gradients and inputs kept, with its output (y) kept too, for
  // Relu's gradient.
  OpSchema bn_relu = bn;
  bn_relu.op = "BatchNormRelu";
  bn_relu.since = 1;
  bn_relu.fwd_f = bn_fwd<float, true>;
  bn_relu.fwd_d = bn_fwd<double, true>;
  bn_relu.bwd_f = bn_bwd<float, true>;
  bn_relu.bwd_d = bn_bwd<double, true>;
  bn_relu.flops = bn_relu_flops;
  bn_relu.saved_out = 1;
  bn_relu.internal = true;
  t.push_back(bn_relu);
  t.push_back(OpSchema{.op = "LayerNormalization",
                       .since = 17,
                       .infer = infer_ln,
                       D500_FWD(ln_fwd),
                       .bwd_f = ln_bwd<float>,
                       .bwd_d = ln_bwd<double>,
                       .flops = norm_flops,
                       .diff_in = 7,
                       .saved_in = 3});
  t.push_back(OpSchema{.op = "Softmax",
                       .since = 1,
                       .infer = infer_softmax,
                       .fwd_f = softmax_fwd<false, float>,
                       .fwd_d = softmax_fwd<false, double>,
                       .bwd_f = softmax_bwd<false, float>,
                       .bwd_d = softmax_bwd<false, double>,
                       .flops = norm_flops,
                       .diff_in = 1,
                       .saved_out = 1});
  t.push_back(OpSchema{.op = "LogSoftmax",
                       .since = 1,
                       .infer = infer_softmax,
                       .fwd_f = softmax_fwd<true, float>,
                       .fwd_d = softmax_fwd<true, double>,
                       .bwd_f = softmax_bwd<true, float>,
                       .bwd_d = softmax_bwd<true, double>,
                       .flops = norm_flops,
                       .diff_in = 1,
                       .saved_out = 1});
  t.push_back(OpSchema{.op = "NegativeLogLikelihoodLoss",
                       .since = 12,
                       .infer = infer_sce,
                       D500_FWD(nll_fwd),
                       .bwd_f = nll_bwd<float>,
                       .bwd_d = nll_bwd<double>,
                       .flops = norm_flops,
                       .diff_in = 1,
                       .saved_in = 6});
  t.push_back(OpSchema{.op = "SoftmaxCrossEntropyLoss",
                       .since = 12,
                       .infer = infer_sce,
                       D500_FWD(sce_fwd),
                       .bwd_f = sce_bwd<float>,
                       .bwd_d = sce_bwd<double>,
                       .flops = norm_flops,
                       .diff_in = 1,
                       .saved_in = 7});
}

}  // namespace d500::ref
