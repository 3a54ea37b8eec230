#pragma once
// Level 1's operators on a device, one output element (or one row) at a time, written once for
// the host and the device: the cuda backend's kernels (cuda/cuda_kernels.cu, one thread per
// element in a grid-stride loop, built by nvcc with --fmad=false) call these functions, and the
// executor's test device (networks/executor_test.cpp) calls the same ones in a host loop, so that
// the index arithmetic the GPU runs is what the host's tests check against d500's reference.
// Float32 data; every reduction (a broadcast operand's gradient, a row's statistics, an
// embedding's gradient) is a loop in a fixed order with a double accumulator, a long one split in
// parts fixed by the shapes (Parts): no atomics, the same bits at every run. The descriptors are plain structs passed
// by value to a kernel; device_ops.cpp makes them from a node (nullopt: the node is outside what they cover). This
// header is read by nvcc: nothing here but plain arithmetic.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "backends/optimizer_rule.hpp"  // D500_HOST_DEVICE

namespace d500 {

struct NodeProblem;
enum class Takes : std::uint8_t;  // backends/graph.hpp

namespace dev {

constexpr int kMaxRank = 8;
using I = std::int64_t;

// An output index space (row-major over dims) and the element strides of up to two operands
// along its axes (0 where an operand is broadcast, or has no such axis).
struct Strides {
  int rank = 0;
  I dims[kMaxRank] = {};
  I sa[kMaxRank] = {};
  I sb[kMaxRank] = {};
  I sc[kMaxRank] = {};  // a third operand's (Where's condition)
  I n = 0;              // elements of the output
};

// The offsets in a and b of output element i.
D500_HOST_DEVICE inline void offsets(const Strides& s, I i, I& oa, I& ob) {
  oa = 0, ob = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const I c = i % s.dims[d];
    i /= s.dims[d];
    oa += c * s.sa[d];
    ob += c * s.sb[d];
  }
}

// The offset in the third operand of output element i.
D500_HOST_DEVICE inline I offset_c(const Strides& s, I i) {
  I oc = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    oc += i % s.dims[d] * s.sc[d];
    i /= s.dims[d];
  }
  return oc;
}

// ---- Long sums in fixed parts -----------------------------------------------------------------
// A gradient element that sums many terms (a broadcast operand's, over the elements it was
// broadcast to; LayerNorm's scale and bias, over the rows) is summed in `chunks` consecutive
// parts, each by a thread of its own into a double, and then the parts in order by one thread per
// element (sum_parts): the parts depend on the shapes alone, so the sum is the same bits at every
// run, and a gradient of few elements still gets enough threads to fill a GPU.
struct Parts {
  I outputs = 0;          // the gradient's elements
  I count = 0;            // the terms of each
  I chunks = 1, len = 0;  // parts per element; terms per part (the last may be shorter)
};

D500_HOST_DEVICE inline Parts parts_of(I outputs, I count) {
  constexpr I kThreads = I{1} << 16, kMinLen = 64;  // enough threads for a large GPU; a part's fewest terms
  Parts s;
  s.outputs = outputs, s.count = count, s.len = count;
  if (outputs <= 0 || count < 2 * kMinLen || outputs >= kThreads) return s;
  const I by_len = count / kMinLen, by_threads = (kThreads + outputs - 1) / outputs;
  const I chunks = by_len < by_threads ? by_len : by_threads;
  s.len = (count + chunks - 1) / chunks;
  s.chunks = (count + s.len - 1) / s.len;
  return s;
}

// Part e of the first stage: element e % outputs, terms [c len, (c + 1) len) of chunk c = e / outputs.
D500_HOST_DEVICE inline void part_range(const Parts& s, I e, I& j, I& t0, I& t1) {
  const I c = e / s.outputs;
  j = e % s.outputs;
  t0 = c * s.len;
  t1 = t0 + s.len < s.count ? t0 + s.len : s.count;
}

// Element j's sum of its parts (part[c * outputs + j]), in chunk order.
D500_HOST_DEVICE inline double sum_parts(const Parts& s, const double* part, I j) {
  double acc = 0;
  for (I c = 0; c < s.chunks; ++c) acc += part[c * s.outputs + j];
  return acc;
}

// ---- Relu's value and gradient, and AddRelu (networks/fuse.hpp) --------------------------------
// relu_grad: dy where y > 0 (where Relu's input is, which Relu's gradient tests). AddRelu:
// y = max(a + b, 0), a + b rounded once, as Add writes it; backward relu_grad into both operands'
// gradients.
D500_HOST_DEVICE inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
D500_HOST_DEVICE inline float add_relu(float a, float b) { return relu(a + b); }
D500_HOST_DEVICE inline float relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

// ---- Tensors stored in bfloat16 (math = "bf16": TensorView::bf16) ------------------------------
// A float's bfloat16 bits, rounded to nearest even (a NaN stays a NaN), and back (exact): the
// bits half.hpp's to_bf16 and from_bf16 give, on the host and the device alike. The element
// kernels below read their operands exactly, compute in float32 and round what they write, as
// the onednn kernels and the yardstick's simulation of the stores (ExecutorSpec::reduced_mantissa)
// do.
D500_HOST_DEVICE inline std::uint32_t bits_of(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
D500_HOST_DEVICE inline std::uint16_t bf16_bits(float f) {
  std::uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
D500_HOST_DEVICE inline float bf16_value(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
// Add, AddRelu and Relu over bfloat16 storage (their gradients are dy copied or masked: exact).
D500_HOST_DEVICE inline std::uint16_t add_bf16(std::uint16_t a, std::uint16_t b) {
  return bf16_bits(bf16_value(a) + bf16_value(b));
}
D500_HOST_DEVICE inline std::uint16_t add_relu_bf16(std::uint16_t a, std::uint16_t b) {
  return bf16_bits(add_relu(bf16_value(a), bf16_value(b)));
}
D500_HOST_DEVICE inline std::uint16_t relu_bf16(std::uint16_t x) { return bf16_value(x) > 0.0f ? x : 0; }
D500_HOST_DEVICE inline std::uint16_t relu_grad_bf16(std::uint16_t y, std::uint16_t dy) {
  return bf16_value(y) > 0.0f ? dy : 0;
}

// GlobalAveragePool of an N C H W tensor stored in bfloat16 (NCHW, or channels-last: N H W C)
// into its float32 N C output, which the executor keeps float32 (its H W is 1): one thread per
// output, its plane summed in order in double; backward, dy / plane rounded into each element.
struct GlobalPool {
  I n = 0, c = 0, plane = 1;
  bool nhwc = false;
};
D500_HOST_DEVICE inline float global_pool_at(const GlobalPool& k, const std::uint16_t* x, I o) {
  const I image = o / k.c, ch = o % k.c;
  double acc = 0;
  for (I t = 0; t < k.plane; ++t) acc += bf16_value(x[k.nhwc ? (image * k.plane + t) * k.c + ch : o * k.plane + t]);
  return static_cast<float>(acc / static_cast<double>(k.plane));
}
D500_HOST_DEVICE inline std::uint16_t global_pool_grad_at(const GlobalPool& k, const float* dy, I i) {
  const I o = k.nhwc ? i / (k.plane * k.c) * k.c + i % k.c : i / k.plane;
  return bf16_bits(dy[o] / static_cast<float>(k.plane));
}

// ---- Add, Sub, Mul, Div with numpy broadcasting ----------------------------------------------
enum class BinaryOp : std::int32_t { Add, Sub, Mul, Div, Pow, Where };
enum class Elem : std::int32_t { F32, I64, I32, Bool };  // a tensor's element type
struct Binary {
  BinaryOp op = BinaryOp::Add;
  Strides s;  // sa: a's strides, sb: b's (Where: a the true branch, b the false, sc the condition's)
  const std::uint8_t* cond = nullptr;  // Where's condition (a bool tensor on the device)
  // Pow's exponent as the node has it: float32, or int64 or int32, which the node casts to float32
  // (cast_at) before the kernels read it as b, as the reference reads it in the base's type.
  Elem b_elem = Elem::F32;
};

D500_HOST_DEVICE inline float binary_apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return powf(a, b);
    case BinaryOp::Where: break;  // binary_forward_at's: it reads the condition
  }
  return 0;
}

D500_HOST_DEVICE inline float binary_forward_at(const Binary& k, const float* a, const float* b, I i) {
  I oa = 0, ob = 0;
  offsets(k.s, i, oa, ob);
  if (k.op == BinaryOp::Where) return k.cond[offset_c(k.s, i)] ? a[oa] : b[ob];
  return binary_apply(k.op, a[oa], b[ob]);
}

// The count of terms in operand `which`'s gradient elements: the output elements each was
// broadcast to.
D500_HOST_DEVICE inline I binary_grad_count(const Binary& k, int which) {
  const I* mine = which == 0 ? k.s.sa : k.s.sb;
  I count = 1;
  for (int d = 0; d < k.s.rank; ++d)
    if (mine[d] == 0) count *= k.s.dims[d];
  return count;
}

// d(loss)/d(operand)[j], operand `which` (0: a, 1: b), j in its own row-major layout, terms
// [t0, t1): the sum, over the output elements it was broadcast to (in index order), of dy times
// the op's partial.
D500_HOST_DEVICE inline double binary_grad_part(const Binary& k, int which, const float* a, const float* b,
                                                const float* dy, I j, I t0, I t1) {
  const Strides& s = k.s;
  const I* mine = which == 0 ? s.sa : s.sb;
  I c[kMaxRank] = {};
  I rest = j;
  for (int d = s.rank - 1; d >= 0; --d)
    if (mine[d] != 0) {  // an axis of the operand's own
      c[d] = rest % s.dims[d];
      rest /= s.dims[d];
    }
  double acc = 0;
  for (I t = t0; t < t1; ++t) {
    I r = t;
    for (int d = s.rank - 1; d >= 0; --d)
      if (mine[d] == 0) {
        c[d] = r % s.dims[d];
        r /= s.dims[d];
      }
    I i = 0, oa = 0, ob = 0, oc = 0;
    for (int d = 0; d < s.rank; ++d) {
      i = i * s.dims[d] + c[d];
      oa += c[d] * s.sa[d];
      ob += c[d] * s.sb[d];
      oc += c[d] * s.sc[d];
    }
    float partial = 1;
    switch (k.op) {
      case BinaryOp::Add: break;
      case BinaryOp::Sub: partial = which == 0 ? 1.0f : -1.0f; break;
      case BinaryOp::Mul: partial = which == 0 ? b[ob] : a[oa]; break;
      case BinaryOp::Div: partial = which == 0 ? 1.0f / b[ob] : -a[oa] / (b[ob] * b[ob]); break;
      case BinaryOp::Where: partial = (k.cond[oc] != 0) == (which == 0) ? 1.0f : 0.0f; break;
      case BinaryOp::Pow:  // the reference's: no term where the exponent is 0 (a) or the base not positive (b)
        if (which == 0)
          partial = b[ob] != 0.0f ? b[ob] * powf(a[oa], b[ob] - 1.0f) : 0.0f;
        else
          partial = a[oa] > 0.0f ? powf(a[oa], b[ob]) * logf(a[oa]) : 0.0f;
        break;
    }
    acc += static_cast<double>(dy[i] * partial);
  }
  return acc;
}

// Operand `which`'s gradient in two stages (s = parts_of(its elements, binary_grad_count)): part e
// of the first, then element j's sum of its parts. With one chunk, binary_grad_part over all
// terms is element j's gradient at once.
D500_HOST_DEVICE inline void binary_grad_stage(const Binary& k, int which, const Parts& s, const float* a,
                                               const float* b, const float* dy, double* part, I e) {
  I j = 0, t0 = 0, t1 = 0;
  part_range(s, e, j, t0, t1);
  part[e] = binary_grad_part(k, which, a, b, dy, j, t0, t1);
}

// ---- Unary activations and arithmetic, each element on its own ------------------------------
// The reference's formulas (reference/ops_elementwise.cpp), term for term. Relu is cuDNN's.
enum class UnaryOp : std::int32_t {
  LeakyRelu,
  Sigmoid,
  Tanh,
  HardSigmoid,
  HardSwish,
  Sqrt,
  Erf,
  Exp,
  Log,
  Neg,
  Abs,
  Reciprocal,
  Clip
};
struct Unary {
  UnaryOp op = UnaryOp::Erf;
  float alpha = 0, beta = 0;  // LeakyRelu's alpha; HardSigmoid's alpha and beta; Clip's bounds
  // Clip (opset 11 on): its bounds as constant inputs, read on the device (nullptr: alpha, beta).
  const float* lo = nullptr;
  const float* hi = nullptr;
  I n = 0;
};

// Whether the backward pass reads the output (else the input): the tensor the reference keeps.
D500_HOST_DEVICE inline bool unary_uses_y(UnaryOp op) {
  return op == UnaryOp::Sigmoid || op == UnaryOp::Tanh || op == UnaryOp::Sqrt || op == UnaryOp::Exp ||
         op == UnaryOp::Reciprocal;
}

// std::max(0, std::min(1, v)) as the reference computes it (a NaN becomes 1).
D500_HOST_DEVICE inline float clamp01(float v) {
  const float m = v < 1.0f ? v : 1.0f;
  return 0.0f < m ? m : 0.0f;
}

D500_HOST_DEVICE inline float unary_forward(const Unary& k, float x) {
  switch (k.op) {
    case UnaryOp::LeakyRelu: return x >= 0.0f ? x : k.alpha * x;
    case UnaryOp::Sigmoid: return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case UnaryOp::Tanh: return tanhf(x);
    case UnaryOp::HardSigmoid: return clamp01(k.alpha * x + k.beta);
    case UnaryOp::HardSwish: return x * clamp01(x / 6.0f + 0.5f);
    case UnaryOp::Sqrt: return sqrtf(x);
    case UnaryOp::Erf: return erff(x);
    case UnaryOp::Exp: return expf(x);
    case UnaryOp::Log: return logf(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return fabsf(x);
    case UnaryOp::Reciprocal: return 1.0f / x;
    case UnaryOp::Clip: {  // std::min(std::max(x, lo), hi), as the reference
      const float lo = k.lo ? *k.lo : k.alpha, hi = k.hi ? *k.hi : k.beta;
      const float m = x < lo ? lo : x;
      return hi < m ? hi : m;
    }
  }
  return 0;
}

// dx from dy and v: the output where unary_uses_y, else the input.
D500_HOST_DEVICE inline float unary_backward(const Unary& k, float v, float dy) {
  switch (k.op) {
    case UnaryOp::LeakyRelu: return v >= 0.0f ? dy : k.alpha * dy;
    case UnaryOp::Sigmoid: return dy * v * (1.0f - v);
    case UnaryOp::Tanh: return dy * (1.0f - v * v);
    case UnaryOp::HardSigmoid: {
      const float t = k.alpha * v + k.beta;
      return t > 0.0f && t < 1.0f ? k.alpha * dy : 0.0f;
    }
    case UnaryOp::HardSwish: return v < -3.0f ? 0.0f : v > 3.0f ? dy : dy * (v / 3.0f + 0.5f);
    case UnaryOp::Sqrt: return dy / (2.0f * v);
    case UnaryOp::Erf: return dy * 1.1283791670955126f * expf(-v * v);  // 2 / sqrt(pi)
    case UnaryOp::Exp: return dy * v;
    case UnaryOp::Log: return dy / v;
    case UnaryOp::Neg: return -dy;
    case UnaryOp::Abs: return v > 0.0f ? dy : v < 0.0f ? -dy : 0.0f;
    case UnaryOp::Reciprocal: return -dy * v * v;
    case UnaryOp::Clip: {
      const float lo = k.lo ? *k.lo : k.alpha, hi = k.hi ? *k.hi : k.beta;
      return v > lo && v < hi ? dy : 0.0f;
    }
  }
  return 0;
}

// ---- Transpose: output element i is the input's at the permuted offset -----------------------
// (s.sa: the input's strides along the output's axes; the backward pass is the same with the
// inverse permutation, transpose_backward in device_ops.cpp.)
D500_HOST_DEVICE inline float strided_at(const Strides& s, const float* x, I i) {
  I o = 0, unused = 0;
  offsets(s, i, o, unused);
  return x[o];
}

// ---- Channels-last layouts (TensorView::channels_last) --------------------------------------
// The strides that copy a 4-D float32 tensor of shape N C H W between its layouts with
// strided_at: to NHWC (output element i in N H W C order read from the NCHW tensor), or back.
D500_HOST_DEVICE inline Strides layout_copy(I n, I c, I h, I w, bool to_nhwc) {
  Strides s;
  s.rank = 4;
  s.n = n * c * h * w;
  const I out[4] = {n, to_nhwc ? h : c, to_nhwc ? w : h, to_nhwc ? c : w};
  const I nchw_along_nhwc[4] = {c * h * w, w, 1, h * w};  // the NCHW tensor's strides along n h w c
  const I nhwc_along_nchw[4] = {h * w * c, 1, w * c, c};  // the NHWC tensor's strides along n c h w
  for (int d = 0; d < 4; ++d) s.dims[d] = out[d], s.sa[d] = to_nhwc ? nchw_along_nhwc[d] : nhwc_along_nchw[d];
  return s;
}

// ---- LayerNormalization over the axes from `axis` on ----------------------------------------
struct LayerNorm {
  I rows = 0, inner = 0;  // rows: the product of the axes before `axis`; inner: of the others
  float eps = 1e-5f;
};

// A row's mean and 1 / sqrt(biased variance + eps), the sums in double (as the reference's).
D500_HOST_DEVICE inline void ln_row_stats(const float* x, I n, float eps, float& mean, float& inv) {
  double s = 0;
  for (I i = 0; i < n; ++i) s += x[i];
  mean = static_cast<float>(s / static_cast<double>(n));
  double q = 0;
  for (I i = 0; i < n; ++i) q += static_cast<double>((x[i] - mean) * (x[i] - mean));
  inv = 1.0f / sqrtf(static_cast<float>(q / static_cast<double>(n)) + eps);
}

// Row r: y = (x - mean) * inv * scale + bias (bias may be nullptr); mean and inv into mean_out,
// inv_out where given.
D500_HOST_DEVICE inline void ln_forward_row(const LayerNorm& k, const float* x, const float* scale, const float* bias,
                                            float* y, float* mean_out, float* inv_out, I r) {
  const float* xr = x + r * k.inner;
  float mean = 0, inv = 0;
  ln_row_stats(xr, k.inner, k.eps, mean, inv);
  for (I i = 0; i < k.inner; ++i) y[r * k.inner + i] = (xr[i] - mean) * inv * scale[i] + (bias ? bias[i] : 0.0f);
  if (mean_out) mean_out[r] = mean;
  if (inv_out) inv_out[r] = inv;
}

// Row r of the backward pass: its statistics into mean[r], inv[r] (for ln_param_grad_at), and dx
// where given: inv / n * (n g - sum g - xhat sum(g xhat)), g = dy * scale.
// Where the Mean and InvStdDev outputs are read, their gradients (dmean, dinv: nullptr where not;
// dy too, where only they are read) add dmean / n - dinv inv^3 (x - mean) / n, as the reference's.
D500_HOST_DEVICE inline void ln_backward_row(const LayerNorm& k, const float* x, const float* scale, const float* dy,
                                             const float* dmean, const float* dinv, float* dx, float* mean, float* inv,
                                             I r) {
  const float* xr = x + r * k.inner;
  ln_row_stats(xr, k.inner, k.eps, mean[r], inv[r]);
  if (!dx) return;
  const float m = mean[r], v = inv[r];
  double sg = 0, sgx = 0;
  for (I i = 0; dy && i < k.inner; ++i) {
    const float xhat = (xr[i] - m) * v, g = dy[r * k.inner + i] * scale[i];
    sg += g;
    sgx += static_cast<double>(g * xhat);
  }
  const float n = static_cast<float>(k.inner), fsg = static_cast<float>(sg), fsgx = static_cast<float>(sgx);
  for (I i = 0; i < k.inner; ++i) {
    float d = 0.0f;
    if (dy) {
      const float xhat = (xr[i] - m) * v, g = dy[r * k.inner + i] * scale[i];
      d = v / n * (n * g - fsg - xhat * fsgx);
    }
    if (dmean) d += dmean[r] / n;
    if (dinv) d -= dinv[r] * v * v * v * (xr[i] - m) / n;
    dx[r * k.inner + i] = d;
  }
}

// Column i over rows [r0, r1): the sums of dy * xhat (d(scale)[i]) and of dy (d(bias)[i]), from the
// statistics ln_backward_row left.
D500_HOST_DEVICE inline void ln_param_grad_part(const LayerNorm& k, const float* x, const float* dy, const float* mean,
                                                const float* inv, I i, I r0, I r1, double& ss, double& sb) {
  ss = 0, sb = 0;
  for (I r = r0; r < r1; ++r) {
    const float g = dy[r * k.inner + i];
    ss += static_cast<double>(g * ((x[r * k.inner + i] - mean[r]) * inv[r]));
    sb += g;
  }
}

// The scale's and bias's gradients in two stages (s = parts_of(inner, rows)): part e of the
// first, into part[e] (scale) and part[chunks * inner + e] (bias); then column i's sums of its
// parts (dscale, dbias where given).
D500_HOST_DEVICE inline void ln_param_grad_stage(const LayerNorm& k, const Parts& s, const float* x, const float* dy,
                                                 const float* mean, const float* inv, double* part, I e) {
  I i = 0, r0 = 0, r1 = 0;
  part_range(s, e, i, r0, r1);
  ln_param_grad_part(k, x, dy, mean, inv, i, r0, r1, part[e], part[s.chunks * s.outputs + e]);
}
D500_HOST_DEVICE inline void ln_param_grad_finish(const Parts& s, const double* part, float* dscale, float* dbias,
                                                  I i) {
  if (dscale) dscale[i] = static_cast<float>(sum_parts(s, part, i));
  if (dbias) dbias[i] = static_cast<float>(sum_parts(s, part + s.chunks * s.outputs, i));
}

// ---- BatchNormalization: x [n, c, plane...], per channel -------------------------------------
// The channel's statistics (batch ones in training, the running inputs else) in two passes of
// parts over its n plane elements (ps = parts_of(c, n plane)): the mean, then the biased
// variance, each sum in double, as the reference's; then the running-statistics outputs and the
// elements. Backward: the channel's sums of dy and of dy xhat in parts, then dx per element.
// Channels-last (TensorView::channels_last) x is stored [n, plane, c]: the same sums in the same
// order, only the addresses differ.
struct BatchNorm {
  I n = 0, c = 0, plane = 1;
  float eps = 1e-5f, momentum = 0.9f;
  bool training = true;  // batch statistics; else the running ones (inputs 3 and 4) normalise
  bool nhwc = false;     // x, y and their gradients stored channels-last
  bool bf16 = false;     // x, y and their gradients stored in bfloat16 (math = "bf16"; the rest float32)
  bool relu = false;     // BatchNormRelu (networks/fuse.hpp): y = max(., 0); the gradient passes where y > 0
};
// Element i of x, y or a gradient of theirs, as float; and a value stored there (rounded to
// bfloat16 where they are stored so).
D500_HOST_DEVICE inline float bn_value(const BatchNorm& k, const void* p, I i) {
  return k.bf16 ? bf16_value(static_cast<const std::uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
D500_HOST_DEVICE inline void bn_store(const BatchNorm& k, void* p, I i, float v) {
  if (k.bf16)
    static_cast<std::uint16_t*>(p)[i] = bf16_bits(v);
  else
    static_cast<float*>(p)[i] = v;
}
// Element t (< n plane, in n then plane order) of channel ch.
D500_HOST_DEVICE inline I bn_element(const BatchNorm& k, I ch, I t) {
  return k.nhwc ? t * k.c + ch : (t / k.plane * k.c + ch) * k.plane + t % k.plane;
}
// The channel of the element stored at i.
D500_HOST_DEVICE inline I bn_channel(const BatchNorm& k, I i) { return k.nhwc ? i % k.c : i / k.plane % k.c; }

// A convolution's bias added to its output stored in bfloat16 (math = "bf16"; the channels
// addressed as a normalisation's): y[i] read exactly, the float32 bias added, the sum rounded -- a
// second rounding after the convolution's own, as autocast's separate add makes one.
D500_HOST_DEVICE inline void bias_add_bf16_at(const BatchNorm& k, void* y, const float* bias, I i) {
  auto* w = static_cast<std::uint16_t*>(y);
  w[i] = bf16_bits(bf16_value(w[i]) + bias[bn_channel(k, i)]);
}
// Channel ch's sum from the parts bn_stats_stage summed without a mean (a bias's gradient: dy's).
D500_HOST_DEVICE inline void channel_sum_finish(const Parts& s, const double* part, float* sum, I ch) {
  sum[ch] = static_cast<float>(sum_parts(s, part, ch));
}

// Part e: the sum of x (mean nullptr) or of (x - mean)^2 over its elements.
D500_HOST_DEVICE inline void bn_stats_stage(const BatchNorm& k, const Parts& s, const void* x, const float* mean,
                                            double* part, I e) {
  I ch = 0, t0 = 0, t1 = 0;
  part_range(s, e, ch, t0, t1);
  double acc = 0;
  for (I t = t0; t < t1; ++t) {
    const float v = bn_value(k, x, bn_element(k, ch, t));
    if (mean) {
      const float d = v - mean[ch];
      acc += d * d;
    } else {
      acc += v;
    }
  }
  part[e] = acc;
}
// Channel ch's mean or variance from the parts.
D500_HOST_DEVICE inline void bn_stats_finish(const Parts& s, const double* part, float* stat, I ch) {
  stat[ch] = static_cast<float>(sum_parts(s, part, ch) / static_cast<double>(s.count));
}
// Channel ch's optional outputs, the reference's: the running statistics updated (momentum times
// the input plus 1 - momentum times the batch's), and (before opset 14) the batch's.
D500_HOST_DEVICE inline void bn_running_outputs(const BatchNorm& k, const float* rm, const float* rv, const float* mean,
                                                const float* var, float* out_rm, float* out_rv, float* out_mean,
                                                float* out_var, I ch) {
  if (out_rm) out_rm[ch] = rm[ch] * k.momentum + mean[ch] * (1.0f - k.momentum);
  if (out_rv) out_rv[ch] = rv[ch] * k.momentum + var[ch] * (1.0f - k.momentum);
  if (out_mean) out_mean[ch] = mean[ch];
  if (out_var) out_var[ch] = var[ch];
}
// The same from the batch's mean and inverse deviation 1 / sqrt(var + eps) (what cuDNN saves in
// a training pass): the biased variance recovered from it, in double.
D500_HOST_DEVICE inline void bn_running_from_inv(const BatchNorm& k, const float* rm, const float* rv,
                                                 const float* mean, const float* inv, float* out_rm, float* out_rv,
                                                 I ch) {
  const double i = inv[ch], var = 1.0 / (i * i) - static_cast<double>(k.eps);
  const float m = rm[ch], v = rv[ch];  // read before written: an output may be the statistic itself
  if (out_rm) out_rm[ch] = m * k.momentum + mean[ch] * (1.0f - k.momentum);
  if (out_rv) out_rv[ch] = static_cast<float>(v * static_cast<double>(k.momentum) + var * (1.0 - k.momentum));
}
// y[i], through the ReLU for BatchNormRelu.
D500_HOST_DEVICE inline float bn_forward_at(const BatchNorm& k, const void* x, const float* scale, const float* bias,
                                            const float* mean, const float* var, I i) {
  const I ch = bn_channel(k, i);
  const float inv = 1.0f / sqrtf(var[ch] + k.eps);
  const float v = scale[ch] * (bn_value(k, x, i) - mean[ch]) * inv + bias[ch];
  return k.relu ? relu(v) : v;
}
// The gradient reaching the normalisation at i: dy, or for BatchNormRelu dy where its output y
// (stored, as the next node reads it) is positive -- where the normalised value is, which Relu's
// gradient tests; y is unread otherwise.
D500_HOST_DEVICE inline float bn_dy_at(const BatchNorm& k, const void* y, const void* dy, I i) {
  const float g = bn_value(k, dy, i);
  return k.relu ? relu_grad(bn_value(k, y, i), g) : g;
}
// Part e of the backward sums: of dy (bn_dy_at) into part[e], of dy xhat into part[chunks c + e].
D500_HOST_DEVICE inline void bn_grad_stage(const BatchNorm& k, const Parts& s, const void* x, const void* y,
                                           const void* dy, const float* mean, const float* var, double* part, I e) {
  I ch = 0, t0 = 0, t1 = 0;
  part_range(s, e, ch, t0, t1);
  const float inv = 1.0f / sqrtf(var[ch] + k.eps);
  double sdy = 0, sdyx = 0;
  for (I t = t0; t < t1; ++t) {
    const I at = bn_element(k, ch, t);
    const float g = bn_dy_at(k, y, dy, at);
    sdy += g;
    sdyx += g * (bn_value(k, x, at) - mean[ch]) * inv;
  }
  part[e] = sdy, part[s.chunks * s.outputs + e] = sdyx;
}
// Channel ch's sums (into sdy, sdyx for the elements' pass) and the scale's and bias's gradients.
D500_HOST_DEVICE inline void bn_grad_finish(const Parts& s, const double* part, float* sdy, float* sdyx, float* dscale,
                                            float* dbias, I ch) {
  sdy[ch] = static_cast<float>(sum_parts(s, part, ch));
  sdyx[ch] = static_cast<float>(sum_parts(s, part + s.chunks * s.outputs, ch));
  if (dbias) dbias[ch] = sdy[ch];
  if (dscale) dscale[ch] = sdyx[ch];
}
// dx[i]: scale inv / M (M dy - sum dy - xhat sum(dy xhat)) in training (M = n plane), else
// scale inv dy.
D500_HOST_DEVICE inline float bn_dx_at(const BatchNorm& k, const void* x, const void* y, const float* scale,
                                       const void* dy, const float* mean, const float* var, const float* sdy,
                                       const float* sdyx, I i) {
  const I ch = bn_channel(k, i);
  const float inv = 1.0f / sqrtf(var[ch] + k.eps);
  const float g = bn_dy_at(k, y, dy, i);
  if (!k.training) return scale[ch] * inv * g;
  const auto m = static_cast<float>(k.n * k.plane);
  return scale[ch] * inv / m * (m * g - sdy[ch] - (bn_value(k, x, i) - mean[ch]) * inv * sdyx[ch]);
}

// ---- Gather along one axis: data [outer, axis_dim, inner], indices [count] (int64 or int32) ----
struct Gather {
  I outer = 1, axis_dim = 0, count = 0, inner = 1;
  bool idx64 = true;
};

// An index made positive (ONNX allows -axis_dim..axis_dim-1); -1 when outside.
D500_HOST_DEVICE inline I gather_index(const Gather& k, const void* idx, I t) {
  I v = k.idx64 ? static_cast<const std::int64_t*>(idx)[t] : static_cast<I>(static_cast<const std::int32_t*>(idx)[t]);
  if (v < 0) v += k.axis_dim;
  return v >= 0 && v < k.axis_dim ? v : -1;
}

// Output element i ([outer, count, inner]); NaN for an index outside the axis.
D500_HOST_DEVICE inline float gather_at(const Gather& k, const float* data, const void* idx, I i) {
  const I e = i % k.inner, t = i / k.inner % k.count, o = i / (k.inner * k.count);
  const I v = gather_index(k, idx, t);
  return v < 0 ? NAN : data[(o * k.axis_dim + v) * k.inner + e];
}

// d(loss)/d(data) from the indices sorted by the row they name, stably (in index order within a
// row): `order` the index positions so sorted, `first[v]` where row v's run starts (first[axis_dim]
// where the indices outside the axis start, sorted last). Element j ([outer, axis_dim, inner]) is
// the sum of dy over its row's run, in index order: O(rows + indices) work, no atomics.
// The sort key of index t: its row, or axis_dim for one outside the axis.
D500_HOST_DEVICE inline std::int32_t gather_key(const Gather& k, const void* idx, I t) {
  const I v = gather_index(k, idx, t);
  return static_cast<std::int32_t>(v < 0 ? k.axis_dim : v);
}
// The first position of `keys` (sorted, count of them) whose key is >= v.
D500_HOST_DEVICE inline std::int32_t gather_first(const std::int32_t* keys, I count, I v) {
  I lo = 0, hi = count;
  while (lo < hi) {
    const I mid = lo + (hi - lo) / 2;
    if (keys[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return static_cast<std::int32_t>(lo);
}
D500_HOST_DEVICE inline float gather_grad_sorted_at(const Gather& k, const std::int32_t* order,
                                                    const std::int32_t* first, const float* dy, I j) {
  const I e = j % k.inner, v = j / k.inner % k.axis_dim, o = j / (k.inner * k.axis_dim);
  double acc = 0;
  for (I s = first[v]; s < first[v + 1]; ++s) acc += dy[(o * k.count + order[s]) * k.inner + e];
  return static_cast<float>(acc);
}

// ---- ReduceSum and ReduceMean over any set of axes ------------------------------------------
struct Reduce {
  Strides kept;    // y's elements (x's shape with the reduced axes 1): sa, x's strides
  Strides within;  // one output's elements (the reduced axes, 1 elsewhere): sa, x's strides
  Strides back;    // x's elements: sa, y's strides (0 along the reduced axes)
  bool mean = false;
  float count = 1;  // elements per output, as a float (the mean's divisor)
};

// Output element o: the sum of its elements in x's row-major order (in double), over count for a
// mean.
D500_HOST_DEVICE inline float reduce_at(const Reduce& k, const float* x, I o) {
  I base = 0, unused = 0;
  offsets(k.kept, o, base, unused);
  double acc = 0;
  for (I t = 0; t < k.within.n; ++t) {
    I off = 0;
    offsets(k.within, t, off, unused);
    acc += x[base + off];
  }
  const auto s = static_cast<float>(acc);
  return k.mean ? s / k.count : s;
}

// d(loss)/dx[i]: dy at i's output, times 1 / count for a mean.
D500_HOST_DEVICE inline float reduce_grad_at(const Reduce& k, const float* dy, I i) {
  const float scale = k.mean ? 1.0f / k.count : 1.0f;
  return strided_at(k.back, dy, i) * scale;
}

// ---- Copies of data: Concat, Split, Slice, Pad (constant), Expand ------------------------------
// Block copies (Concat, Split, each way): element i of [0, outer width) copies
// src[o src_block + src_at + j] to dst[o dst_block + dst_at + j], o = i / width, j = i % width.
struct Blocks {
  I outer = 1, width = 0;
  I src_block = 0, src_at = 0, dst_block = 0, dst_at = 0;
};
D500_HOST_DEVICE inline void block_copy_at(const Blocks& k, const float* src, float* dst, I i) {
  const I o = i / k.width, j = i % k.width;
  dst[o * k.dst_block + k.dst_at + j] = src[o * k.src_block + k.src_at + j];
}

// A window of an input of the same rank: output coordinate c reads the input at start + c step
// on each axis (Slice: every read inside; Pad: begin = -start, step 1, the constant outside).
enum class PadMode : std::int32_t { Constant, Reflect, Edge };
struct Window {
  int rank = 0;
  I ydims[kMaxRank] = {}, xdims[kMaxRank] = {};
  I start[kMaxRank] = {}, step[kMaxRank] = {};
  I xs[kMaxRank] = {}, ys[kMaxRank] = {};  // row-major strides of the input and of the output
  I nx = 0, ny = 0;
  float value = 0;                   // Pad's constant
  PadMode mode = PadMode::Constant;  // outside the input: the constant, the mirror image (no edge repeat), the edge
};

// The input coordinate (along an axis of n) that window position `at` reads, or -1 for the
// constant: the reference's pad_source (a reflection once: window_of keeps the pads below n).
D500_HOST_DEVICE inline I window_source(PadMode mode, I at, I n) {
  if (at >= 0 && at < n) return at;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Edge) return at < 0 ? 0 : n - 1;
  return at < 0 ? -at : 2 * (n - 1) - at;
}

// Output element i: the input element its coordinates read, or the constant outside the input.
D500_HOST_DEVICE inline float window_at(const Window& k, const float* x, I i) {
  I src = 0;
  for (int d = k.rank - 1; d >= 0; --d) {
    const I c = i % k.ydims[d];
    i /= k.ydims[d];
    const I at = window_source(k.mode, k.start[d] + c * k.step[d], k.xdims[d]);
    if (at < 0) return k.value;
    src += at * k.xs[d];
  }
  return x[src];
}

// A reflecting or edge pad's input element j: the sum of dy over the output elements that read it,
// in row-major order, in double. Along an axis of n, coordinate c is read by at most three runs
// of output positions: its own; its mirror images (-c, 2(n-1)-c) or, at an edge, the whole pad
// beyond it. The outputs that read j are the runs' product over the axes.
D500_HOST_DEVICE inline float window_grad_gathered(const Window& k, const float* dy, I j) {
  I lo[kMaxRank][3], hi[kMaxRank][3];
  int runs[kMaxRank], r[kMaxRank];
  I o[kMaxRank];
  for (int d = k.rank - 1; d >= 0; --d) {
    const I c = j % k.xdims[d], n = k.xdims[d], y = k.ydims[d], s = k.start[d];
    j /= k.xdims[d];
    int m = 0;
    auto run = [&](I a, I b) {  // output positions [a, b), clipped to the output
      a = a < 0 ? 0 : a, b = b > y ? y : b;
      if (a < b) lo[d][m] = a, hi[d][m] = b, ++m;
    };
    if (k.mode == PadMode::Edge) {
      if (c == 0) run(0, -s);  // every position before the input
      run(c - s, c - s + 1);
      if (c == n - 1) run(n - s, y);
    } else {
      if (c >= 1) run(-c - s, -c - s + 1);
      run(c - s, c - s + 1);
      if (c <= n - 2) run(2 * (n - 1) - c - s, 2 * (n - 1) - c - s + 1);
    }
    if (m == 0) return 0.0f;
    runs[d] = m, r[d] = 0, o[d] = lo[d][0];
  }
  double sum = 0;
  for (;;) {
    I dst = 0;
    for (int d = 0; d < k.rank; ++d) dst += o[d] * k.ys[d];
    sum += dy[dst];
    int d = k.rank - 1;  // the next output position, the last axis fastest
    for (; d >= 0; --d) {
      if (++o[d] < hi[d][r[d]]) break;
      if (++r[d] < runs[d]) {
        o[d] = lo[d][r[d]];
        break;
      }
      r[d] = 0, o[d] = lo[d][0];
    }
    if (d < 0) return static_cast<float>(sum);
  }
}

// Input element j's gradient: dy at the one output element that read it, or 0 when none did
// (a slice's steps and a constant pad's offsets are one-to-one); a reflecting or edge pad's sums.
D500_HOST_DEVICE inline float window_grad_at(const Window& k, const float* dy, I j) {
  if (k.mode != PadMode::Constant) return window_grad_gathered(k, dy, j);
  I dst = 0;
  bool read = true;
  for (int d = k.rank - 1; d >= 0; --d) {
    const I c = j % k.xdims[d];
    j /= k.xdims[d];
    const I t = c - k.start[d];
    if (t % k.step[d] != 0) {
      read = false;
      continue;
    }
    const I q = t / k.step[d];
    if (q < 0 || q >= k.ydims[d])
      read = false;
    else
      dst += q * k.ys[d];
  }
  return read ? dy[dst] : 0.0f;
}

// ---- Cast between float32, int64, int32 and bool (Elem: above, with Binary) ------------------
struct Cast {
  Elem from = Elem::F32, to = Elem::F32;
  I n = 0;
};
// Element i of src (its type `from`) as `to`: a static_cast, or != 0 for bool, as the reference.
template <class From>
D500_HOST_DEVICE inline void cast_to(Elem to, From v, void* dst, I i) {
  switch (to) {
    case Elem::F32: static_cast<float*>(dst)[i] = static_cast<float>(v); return;
    case Elem::I64: static_cast<std::int64_t*>(dst)[i] = static_cast<std::int64_t>(v); return;
    case Elem::I32: static_cast<std::int32_t*>(dst)[i] = static_cast<std::int32_t>(v); return;
    case Elem::Bool: static_cast<std::uint8_t*>(dst)[i] = v != From(0) ? 1 : 0; return;
  }
}
D500_HOST_DEVICE inline void cast_at(const Cast& k, const void* src, void* dst, I i) {
  switch (k.from) {
    case Elem::F32: return cast_to(k.to, static_cast<const float*>(src)[i], dst, i);
    case Elem::I64: return cast_to(k.to, static_cast<const std::int64_t*>(src)[i], dst, i);
    case Elem::I32: return cast_to(k.to, static_cast<const std::int32_t*>(src)[i], dst, i);
    case Elem::Bool: return cast_to(k.to, static_cast<const std::uint8_t*>(src)[i], dst, i);
  }
}

// ---- SoftmaxCrossEntropyLoss: scores [N, C, d...], labels [N, d...] ---------------------------
// A row is one label's scores: row r = b inner + t (b < N, t < inner = the product of d...), its
// class c at b C inner + c inner + t. Its log-sum-exp (max + log of the sum of exp(x - max), the
// sum in double) is kept for the backward pass; its loss is -w_l (x_l - lse) and its weight w_l
// (1 without class weights; 0 where the label is ignore_index; NaN, and so is the loss, where the
// label is outside [0, C)). Reduction mean divides the rows' losses' sum by their weights' sum,
// sum by 1; none keeps the rows' losses as the output. The sums run in parts (parts_of(2, rows):
// the losses, then the weights) in double, no atomics.
struct Sce {
  I rows = 0, c = 0, inner = 1;
  bool labels64 = true;
  enum Reduction : std::int32_t { Mean, Sum, None } reduction = Mean;
  bool has_ignore = false;
  I ignore = 0;
  const float* weight = nullptr;  // class weights [C] in device memory, or none
};

D500_HOST_DEVICE inline I sce_label(const Sce& k, const void* labels, I r) {
  return k.labels64 ? static_cast<const std::int64_t*>(labels)[r]
                    : static_cast<I>(static_cast<const std::int32_t*>(labels)[r]);
}
// Row r's first score; its classes follow k.inner apart.
D500_HOST_DEVICE inline I sce_base(const Sce& k, I r) { return r / k.inner * k.c * k.inner + r % k.inner; }

// Row r: lse[r], row_loss[r], row_weight[r].
D500_HOST_DEVICE inline void sce_row(const Sce& k, const float* scores, const void* labels, float* lse, float* row_loss,
                                     float* row_weight, I r) {
  const float* x = scores + sce_base(k, r);
  float mx = -INFINITY;
  for (I j = 0; j < k.c; ++j) mx = fmaxf(mx, x[j * k.inner]);
  double sum = 0;
  for (I j = 0; j < k.c; ++j) sum += expf(x[j * k.inner] - mx);
  const float l_se = mx + static_cast<float>(log(sum));
  lse[r] = l_se;
  const I l = sce_label(k, labels, r);
  if (k.has_ignore && l == k.ignore) {
    row_loss[r] = 0.0f, row_weight[r] = 0.0f;
  } else if (l < 0 || l >= k.c) {
    row_loss[r] = NAN, row_weight[r] = NAN;
  } else {
    const float w = k.weight ? k.weight[l] : 1.0f;
    row_loss[r] = -(x[l * k.inner] - l_se) * w, row_weight[r] = w;
  }
}

// Score element i's log-probability (the optional second output).
D500_HOST_DEVICE inline float sce_log_prob_at(const Sce& k, const float* scores, const float* lse, I i) {
  return scores[i] - lse[i / (k.c * k.inner) * k.inner + i % k.inner];
}

// The reduction's parts: part e sums the losses (element 0) or the weights (element 1) of its rows.
D500_HOST_DEVICE inline void sce_total_stage(const Parts& s, const float* row_loss, const float* row_weight,
                                             double* part, I e) {
  I which = 0, r0 = 0, r1 = 0;
  part_range(s, e, which, r0, r1);
  const float* v = which == 0 ? row_loss : row_weight;
  double acc = 0;
  for (I r = r0; r < r1; ++r) acc += v[r];
  part[e] = acc;
}
// The loss (mean or sum), and the divisor the backward pass scales by.
D500_HOST_DEVICE inline void sce_total_finish(const Sce& k, const Parts& s, const double* part, float* loss,
                                              float* divisor) {
  const double total = sum_parts(s, part, 0), weight = sum_parts(s, part, 1);
  divisor[0] = k.reduction == Sce::Mean ? static_cast<float>(weight) : 1.0f;
  loss[0] = static_cast<float>(k.reduction == Sce::Mean ? total / weight : total);
}

// Row r's sum of log_prob's gradient (where log_prob is read), in double.
D500_HOST_DEVICE inline void sce_dlp_row(const Sce& k, const float* dlp, float* dlp_sum, I r) {
  const float* d = dlp + sce_base(k, r);
  double s = 0;
  for (I j = 0; j < k.c; ++j) s += d[j * k.inner];
  dlp_sum[r] = static_cast<float>(s);
}

// Score element i's gradient: the loss's, g w_l (softmax - onehot(l)), g = dloss[0] / divisor
// (dloss[r] for none; none where dloss is absent or the row ignored); plus, where log_prob is
// read (dlp), its gradient through log-softmax: dlp - softmax * dlp_sum[r].
D500_HOST_DEVICE inline float sce_grad_at(const Sce& k, const float* scores, const void* labels, const float* lse,
                                          const float* row_weight, const float* divisor, const float* dloss,
                                          const float* dlp, const float* dlp_sum, I i) {
  const I r = i / (k.c * k.inner) * k.inner + i % k.inner, j = i / k.inner % k.c;
  const float prob = expf(scores[i] - lse[r]);
  float v = 0.0f;
  if (dloss && row_weight[r] != 0.0f) {
    const float g = (k.reduction == Sce::None ? dloss[r] : dloss[0] / divisor[0]) * row_weight[r];
    v = g * (prob - (j == sce_label(k, labels, r) ? 1.0f : 0.0f));
  }
  if (dlp) v += dlp[i] - prob * dlp_sum[r];
  return v;
}

// ---- The descriptors of a node (device_ops.cpp): nullopt when the node is outside them -------
// Add, Sub, Mul, Div, Pow of float32 operands of rank <= kMaxRank (Pow's exponent may be int64 or
// int32: b_elem); Where of float32 branches (its operands a and b are the node's inputs 1 and 2,
// binary_first).
std::optional<Binary> binary_of(const NodeProblem& p);
inline int binary_first(const Binary& k) { return k.op == BinaryOp::Where ? 1 : 0; }
// The unary operators of UnaryOp on float32.
std::optional<Unary> unary_of(const NodeProblem& p);
// ReduceSum, ReduceMean of a float32 tensor of rank <= kMaxRank (the axes as inference made them).
std::optional<Reduce> reduce_of(const NodeProblem& p);
// Transpose: the forward descriptor, and the backward one (dx from dy, the inverse permutation).
std::optional<Strides> transpose_of(const NodeProblem& p, bool backward);
// LayerNormalization (Mean and InvStdDev outputs read or not).
std::optional<LayerNorm> layer_norm_of(const NodeProblem& p);
// Gather of float32 data by int64 or int32 indices.
std::optional<Gather> gather_of(const NodeProblem& p);
// Concat's (inputs into the output) or Split's (the input into its outputs) block copies, one per
// data input or output, forward; the backward pass copies the other way (swap_blocks).
std::optional<std::vector<Blocks>> blocks_of(const NodeProblem& p);
Blocks swap_blocks(const Blocks& b);
// Slice (any steps) and Pad (constant, reflect, edge), of float32 data of rank <= kMaxRank.
std::optional<Window> window_of(const NodeProblem& p);
// Expand: forward, the input's broadcast strides over the output (strided_at); backward, the sum
// of dy over the broadcast as an Add's first operand's gradient (binary_grad_part; a, b unused).
std::optional<Binary> expand_of(const NodeProblem& p);
// Cast between float32, int64, int32 and bool (its gradient: dy where both types are float32,
// else zeros).
std::optional<Cast> cast_of(const NodeProblem& p);
// BatchNormalization of float32 x [n, c, ...] (spatial), any outputs; BatchNormRelu (relu) too.
std::optional<BatchNorm> batch_norm_of(const NodeProblem& p);
// SoftmaxCrossEntropyLoss on float32 scores.
std::optional<Sce> sce_of(const NodeProblem& p);
// How the cuda backend's kernels take channels-last tensors (BackendInfo::channels_last; the
// executor's test device says the same): Each for a 2-D Conv of float32 data with symmetric pads
// (cuDNN's), Same for BatchNormalization and BatchNormRelu (cuDNN's, or the kernels above where
// cuDNN's does not serve), Relu, an Add of two tensors of one shape, and a 2-D MaxPool, AveragePool (symmetric
// pads, no dilation or ceil mode: cuDNN's windows), GlobalAveragePool, GlobalMaxPool; Never otherwise.
Takes channels_last_of(const NodeProblem& p);
// How the cuda backend's kernels take float32 tensors stored in bfloat16 with math = "bf16"
// (BackendInfo::bf16_storage, where cuDNN takes bfloat16 normalisations and poolings; the test
// device says the same): as channels_last_of says, but Never for a GlobalMaxPool, a pooling down
// to one value a channel (that output stays float32), and a BatchNormalization with any output but
// Y (its statistics outputs run on the float32 kernels above). A Conv's bias stays float32 and is
// added to the bfloat16 output by bias_add_bf16_at.
Takes bf16_storage_of(const NodeProblem& p);
// GlobalAveragePool over a 4-D input stored in bfloat16 (the kernels above).
std::optional<GlobalPool> global_pool_of(const NodeProblem& p);

}  // namespace dev
}  // namespace d500
