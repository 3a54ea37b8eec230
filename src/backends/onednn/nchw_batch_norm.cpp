// The onednn backend's batch normalisation over NCHW activations: d500's own loops, per channel
// over its N planes of H x W, on the kernel's OpenMP threads, in float32 or with x, y and their
// gradients stored in bfloat16 (TensorView::bf16). oneDNN 2.6 has no JIT kernel for a plain NCHW
// ("ncsp") normalisation: its C++ fallback took 20 of ResNet-20's 54 ms training step at batch 32
// (NHWC's JIT: 2.7 ms), where PyTorch, on the same oneDNN, runs its own loops over NCHW. So do we,
// and name them in the step table. The sums are float32 in independent lanes (which vectorise),
// each plane's added into a double; the variance is taken about the mean (two passes, no
// cancellation); a value is read from bfloat16 exactly and written rounded to nearest even, as
// oneDNN's bfloat16 normalisation reads and writes it.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/device_ops.hpp"
#include "backends/half.hpp"
#include "backends/onednn/onednn_backend.hpp"

namespace d500 {
namespace {

constexpr int kLanes = 16;
using Bf16 = std::uint16_t;

template <class T>
inline float load(const T* p, std::int64_t i) {
  if constexpr (std::is_same_v<T, Bf16>)
    return from_bf16(p[i]);
  else
    return p[i];
}
template <class T>
inline void store(T* p, std::int64_t i, float v) {
  if constexpr (std::is_same_v<T, Bf16>)
    p[i] = to_bf16(v);
  else
    p[i] = v;
}

// sum over i of f(i) for i in [0, n), in kLanes float lanes and a scalar tail.
template <class F>
[[gnu::always_inline]] inline double lane_sum(std::int64_t n, F f) {
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += f(i + k);
  double s = 0;
  for (; i < n; ++i) s += f(i);
  for (float v : lane) s += v;
  return s;
}

// Both sums of f(i) = {first, second} at once: one pass over the operands.
template <class F>
[[gnu::always_inline]] inline void lane_sums(std::int64_t n, F f, double& first, double& second) {
  float a[kLanes] = {}, b[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const auto [u, v] = f(i + k);
      a[k] += u, b[k] += v;
    }
  for (; i < n; ++i) {
    const auto [u, v] = f(i);
    first += u, second += v;
  }
  for (int k = 0; k < kLanes; ++k) first += a[k], second += b[k];
}

// One normalisation's planes: channel c of sample n at (n * channels + c) * plane of x, y and, in
// the backward pass, dy (nullptr: no gradient reaches y) and dx (nullptr: none wanted).
struct Planes {
  const void* x = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  const float *scale = nullptr, *shift = nullptr;  // per channel
  std::int64_t batch = 0, channels = 0, plane = 1;
  bool relu = false;  // BatchNormRelu: y = max(., 0), and the gradient passed where y > 0
  template <class T>
  const T* at(const void* base, std::int64_t n, std::int64_t c) const {
    return static_cast<const T*>(base) + (n * channels + c) * plane;
  }
  template <class T>
  T* at(void* base, std::int64_t n, std::int64_t c) const {
    return static_cast<T*>(base) + (n * channels + c) * plane;
  }
};
// One channel's statistics: the batch's in training (else the running ones, given), and what the
// backward pass writes.
struct Channel {
  float mean = 0, var = 0, inv_std = 0;
  double sum_g = 0, sum_gx = 0;  // backward: the sums of the gradient reaching y, and times x - mean
};

// The gradient reaching the normalisation's output: dy, where y > 0 with the joined relu.
template <class T>
inline float reaching(const T* y, const T* dy, std::int64_t i, bool relu) {
  const float g = load(dy, i);
  return relu ? dev::relu_grad(load(y, i), g) : g;
}

template <class T>
[[gnu::always_inline]] inline void forward_channel(const Planes& p, std::int64_t c, bool training, float eps,
                                                   Channel& ch) {
  if (training) {
    const double m = static_cast<double>(p.batch * p.plane);
    double sum = 0, ss = 0;
    for (std::int64_t n = 0; n < p.batch; ++n) {
      const T* x = p.at<T>(p.x, n, c);
      sum += lane_sum(p.plane, [x](std::int64_t i) { return load(x, i); });
    }
    const auto mean = static_cast<float>(sum / m);
    for (std::int64_t n = 0; n < p.batch; ++n) {
      const T* x = p.at<T>(p.x, n, c);
      ss += lane_sum(p.plane, [x, mean](std::int64_t i) {
        const float d = load(x, i) - mean;
        return d * d;
      });
    }
    ch.mean = mean, ch.var = static_cast<float>(ss / m);
  }
  ch.inv_std = 1.0f / std::sqrt(ch.var + eps);
  // y = (x - mean) a + shift, not x a + (shift - mean a) as PyTorch's CPU loop and oneDNN's
  // fallback compute it: x lies near its mean, and x a and mean a, each rounded, cancel (ResNet-20's
  // float32 step: 8.4e-4 from the double-precision yardstick so, as theirs, and 2.8e-6 this way).
  const float a = p.scale[c] * ch.inv_std, b = p.shift[c], mean = ch.mean;
  for (std::int64_t n = 0; n < p.batch; ++n) {
    const T* x = p.at<T>(p.x, n, c);
    T* y = p.at<T>(p.y, n, c);
    if (p.relu)
      for (std::int64_t i = 0; i < p.plane; ++i) store(y, i, dev::relu((load(x, i) - mean) * a + b));
    else
      for (std::int64_t i = 0; i < p.plane; ++i) store(y, i, (load(x, i) - mean) * a + b);
  }
}

template <class T>
[[gnu::always_inline]] inline void backward_channel(const Planes& p, std::int64_t c, Channel& ch) {
  const double m = static_cast<double>(p.batch * p.plane);
  const float mean = ch.mean;
  for (std::int64_t n = 0; p.dy && n < p.batch; ++n) {
    const T *x = p.at<T>(p.x, n, c), *y = p.at<T>(p.y, n, c), *dy = p.at<T>(p.dy, n, c);
    const bool relu = p.relu;
    lane_sums(
        p.plane,
        [=](std::int64_t i) {
          const float g = reaching(y, dy, i, relu);
          return std::pair<float, float>{g, g * (load(x, i) - mean)};
        },
        ch.sum_g, ch.sum_gx);
  }
  if (!p.dx) return;
  // dx = scale inv_std (g - mean(g) - xhat mean(g xhat)) = k1 g + k2 (x - mean) + k3, with
  // xhat = (x - mean) inv_std (x - mean as the forward pass takes it, for the same reason).
  const float k1 = p.scale[c] * ch.inv_std;
  const float k2 = -k1 * ch.inv_std * static_cast<float>(ch.sum_gx * ch.inv_std / m);
  const float k3 = -k1 * static_cast<float>(ch.sum_g / m);
  for (std::int64_t n = 0; n < p.batch; ++n) {
    const T* x = p.at<T>(p.x, n, c);
    T* dx = p.at<T>(p.dx, n, c);
    if (!p.dy) {
      for (std::int64_t i = 0; i < p.plane; ++i) store(dx, i, 0.0f);
      continue;
    }
    const T *y = p.at<T>(p.y, n, c), *dy = p.at<T>(p.dy, n, c);
    // dx may be dy's own buffer: each element is read before it is written.
    for (std::int64_t i = 0; i < p.plane; ++i)
      store(dx, i, k1 * reaching(y, dy, i, p.relu) + k2 * (load(x, i) - mean) + k3);
  }
}

// The loops above compiled for AVX-512 and AVX2 too, the one the CPU has picked at load time (the
// build itself targets the baseline x86-64, for any node of a cluster): 16 lanes, not 4. Each
// clone must inline them (always_inline): one left out of line is compiled for the baseline only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define D500_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define D500_CPU_CLONES
#endif
D500_CPU_CLONES void forward_f32(const Planes& p, std::int64_t c, bool training, float eps, Channel& ch) {
  forward_channel<float>(p, c, training, eps, ch);
}
D500_CPU_CLONES void forward_bf16(const Planes& p, std::int64_t c, bool training, float eps, Channel& ch) {
  forward_channel<Bf16>(p, c, training, eps, ch);
}
D500_CPU_CLONES void backward_f32(const Planes& p, std::int64_t c, Channel& ch) { backward_channel<float>(p, c, ch); }
D500_CPU_CLONES void backward_bf16(const Planes& p, std::int64_t c, Channel& ch) { backward_channel<Bf16>(p, c, ch); }

class NchwBatchNorm final : public NodeKernel {
 public:
  NchwBatchNorm(const NodeProblem& p, bool training, float eps, bool relu)
      : bf16_(p.in[0].bf16), training_(training), eps_(eps), stats_(p) {
    const Shape& s = *p.in[0].shape;
    planes_.batch = s[0], planes_.channels = s[1], planes_.relu = relu;
    for (std::size_t i = 2; i < s.size(); ++i) planes_.plane *= s[i];
    planes_.x = p.in[0].data, planes_.y = p.out[0].data;
    planes_.scale = static_cast<const float*>(p.in[1].data), planes_.shift = static_cast<const float*>(p.in[2].data);
    ch_.assign(static_cast<std::size_t>(planes_.channels), Channel{});
    if (!p.training) return;
    planes_.dy = p.dout[0].present() ? p.dout[0].data : nullptr;
    planes_.dx = p.din[0].present() ? p.din[0].data : nullptr;
    dscale_ = p.din[1].present() ? static_cast<float*>(p.din[1].data) : nullptr;
    dshift_ = p.din[2].present() ? static_cast<float*>(p.din[2].data) : nullptr;
  }
  void forward() override {
    const auto channels = planes_.channels;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < channels; ++c) {
      Channel& ch = ch_[static_cast<std::size_t>(c)];
      if (!training_) ch.mean = stats_.running_mean[c], ch.var = stats_.running_var[c];
      (bf16_ ? forward_bf16 : forward_f32)(planes_, c, training_, eps_, ch);
    }
    if (!training_) return;
    for (std::int64_t c = 0; c < channels; ++c) {
      const Channel& ch = ch_[static_cast<std::size_t>(c)];
      stats_.write(c, ch.mean, ch.var);
    }
  }
  void backward() override {
    const auto channels = planes_.channels;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < channels; ++c) {
      Channel& ch = ch_[static_cast<std::size_t>(c)];
      ch.sum_g = ch.sum_gx = 0;
      (bf16_ ? backward_bf16 : backward_f32)(planes_, c, ch);
      if (dscale_) dscale_[c] = static_cast<float>(ch.sum_gx) * ch.inv_std;
      if (dshift_) dshift_[c] = static_cast<float>(ch.sum_g);
    }
  }
  std::string impl() const override {
    // (At most 63 characters: the step table's impl field.)
    return std::string("d500 batch normalization loops") + (planes_.relu ? ", relu joined" : "") +
           (bf16_ ? " (bfloat16, NCHW)" : " (NCHW)");
  }

 private:
  Planes planes_;
  bool bf16_, training_;
  float eps_;
  BatchNormStatistics stats_;
  float *dscale_ = nullptr, *dshift_ = nullptr;
  std::vector<Channel> ch_;
};

}  // namespace

std::unique_ptr<NodeKernel> make_nchw_batch_norm(const NodeProblem& p, bool training, float eps, bool relu) {
  return std::make_unique<NchwBatchNorm>(p, training, eps, relu);
}

}  // namespace d500
