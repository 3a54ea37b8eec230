// The cuda backend's own kernels (cuda_kernels.hpp). Built by nvcc with --fmad=false (CMakeLists):
// no multiply-add is contracted, so that an element rounds as d500's reference does on the host
// (optimizer_rule.hpp is the one definition both compile).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "backends/cuda/cuda_kernels.hpp"

#include <cuda_bf16.h>

#include <cub/device/device_radix_sort.cuh>

namespace d500::cuda {
namespace {

// A grid-stride loop: every element once, in any number of blocks; the element's state is read
// and written only by its own thread (no atomics: the step is the same bits at every run).
__global__ void optimizer_step_kernel(StepRule r, float* p, const float* g, float* a, float* b, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    apply_rule_at(r, p, g, a, b, i);
}

// One thread per element of [0, n) in a grid-stride loop, calling f(i).
template <class F>
__global__ void each_element(std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

template <class F>
cudaError_t launch_each(std::int64_t n, cudaStream_t s, F f) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535));
  each_element<<<blocks, kThreads, 0, s>>>(n, f);
  return cudaGetLastError();
}

// Elementwise over [0, n) in 16-byte vectors where every pointer allows: items [0, n / kPer) call
// vec(j) on elements kPer j .. kPer j + kPer - 1 (4 floats, or 8 bfloat16 words), the rest
// (n % kPer of them) scalar(i) one element each; one launch.
template <int kPer, class V, class S>
cudaError_t launch_vectors(std::int64_t n, bool aligned, cudaStream_t s, V vec, S scalar) {
  if (!aligned) return launch_each(n, s, scalar);
  const std::int64_t nv = n / kPer;
  return launch_each(nv + n % kPer, s, [=] __device__(std::int64_t j) {
    if (j < nv)
      vec(j);
    else
      scalar(kPer * nv + (j - nv));
  });
}
template <class V, class S>
cudaError_t launch_vector4(std::int64_t n, bool aligned, cudaStream_t s, V vec, S scalar) {
  return launch_vectors<4>(n, aligned, s, vec, scalar);
}
template <class V, class S>
cudaError_t launch_vector8(std::int64_t n, bool aligned, cudaStream_t s, V vec, S scalar) {
  return launch_vectors<8>(n, aligned, s, vec, scalar);
}

bool aligned16(std::initializer_list<const void*> ps);

// Eight bfloat16 words, loaded and stored as one 16-byte vector.
union Words8 {
  uint4 v;
  std::uint16_t w[8];
};

// out = f(a, b) word by word over n words (b may be nullptr for a unary f, which ignores it).
template <class F>
cudaError_t launch_words(const void* a, const void* b, void* out, std::int64_t n, cudaStream_t s, F f) {
  const auto* pa = static_cast<const std::uint16_t*>(a);
  const auto* pb = static_cast<const std::uint16_t*>(b ? b : a);
  auto* po = static_cast<std::uint16_t*>(out);
  return launch_vector8(
      n, aligned16({pa, pb, po}), s,
      [=] __device__(std::int64_t j) {
        Words8 u, v, r;
        u.v = reinterpret_cast<const uint4*>(pa)[j];
        v.v = reinterpret_cast<const uint4*>(pb)[j];
#pragma unroll
        for (int e = 0; e < 8; ++e) r.w[e] = f(u.w[e], v.w[e]);
        reinterpret_cast<uint4*>(po)[j] = r.v;
      },
      [=] __device__(std::int64_t i) { po[i] = f(pa[i], pb[i]); });
}

bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace

cudaError_t launch_add(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t s) {
  return launch_vector4(
      n, aligned16({a, b, y}), s,
      [=] __device__(std::int64_t j) {
        const float4 u = reinterpret_cast<const float4*>(a)[j], v = reinterpret_cast<const float4*>(b)[j];
        reinterpret_cast<float4*>(y)[j] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
      },
      [=] __device__(std::int64_t i) { y[i] = a[i] + b[i]; });
}

// x copied into y0 and y1 in one read, n elements of T (float32, or bfloat16 words), 16 bytes a
// thread where the three allow.
template <class T>
cudaError_t copy_twice(const T* x, T* y0, T* y1, std::int64_t n, cudaStream_t s) {
  return launch_vectors<16 / sizeof(T)>(
      n, aligned16({x, y0, y1}), s,
      [=] __device__(std::int64_t j) {
        const uint4 u = reinterpret_cast<const uint4*>(x)[j];
        reinterpret_cast<uint4*>(y0)[j] = u;
        reinterpret_cast<uint4*>(y1)[j] = u;
      },
      [=] __device__(std::int64_t i) { y0[i] = y1[i] = x[i]; });
}

cudaError_t launch_copy_twice(const float* x, float* y0, float* y1, std::int64_t n, cudaStream_t s) {
  return copy_twice(x, y0, y1, n, s);
}

cudaError_t launch_add_relu(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t s) {
  return launch_vector4(
      n, aligned16({a, b, y}), s,
      [=] __device__(std::int64_t j) {
        const float4 u = reinterpret_cast<const float4*>(a)[j], v = reinterpret_cast<const float4*>(b)[j];
        reinterpret_cast<float4*>(y)[j] = make_float4(dev::add_relu(u.x, v.x), dev::add_relu(u.y, v.y),
                                                      dev::add_relu(u.z, v.z), dev::add_relu(u.w, v.w));
      },
      [=] __device__(std::int64_t i) { y[i] = dev::add_relu(a[i], b[i]); });
}

cudaError_t launch_relu_grad_twice(const float* y, const float* dy, float* d0, float* d1, std::int64_t n,
                                   cudaStream_t s) {
  float* g0 = d0 ? d0 : d1;  // one gradient wanted: it is written twice
  float* g1 = d1 ? d1 : d0;
  return launch_vector4(
      n, aligned16({y, dy, g0, g1}), s,
      [=] __device__(std::int64_t j) {
        const float4 u = reinterpret_cast<const float4*>(y)[j], v = reinterpret_cast<const float4*>(dy)[j];
        const float4 g = make_float4(dev::relu_grad(u.x, v.x), dev::relu_grad(u.y, v.y), dev::relu_grad(u.z, v.z),
                                     dev::relu_grad(u.w, v.w));
        reinterpret_cast<float4*>(g0)[j] = g;
        reinterpret_cast<float4*>(g1)[j] = g;
      },
      [=] __device__(std::int64_t i) { g0[i] = g1[i] = dev::relu_grad(y[i], dy[i]); });
}

cudaError_t launch_binary_forward(const dev::Binary& k, const float* a, const float* b, float* y, cudaStream_t s) {
  return launch_each(k.s.n, s, [=] __device__(std::int64_t i) { y[i] = dev::binary_forward_at(k, a, b, i); });
}

cudaError_t launch_binary_grad(const dev::Binary& k, int which, const dev::Parts& ps, const float* a, const float* b,
                               const float* dy, float* dx, double* part, cudaStream_t s) {
  if (ps.chunks == 1)
    return launch_each(ps.outputs, s, [=] __device__(std::int64_t j) {
      dx[j] = static_cast<float>(dev::binary_grad_part(k, which, a, b, dy, j, 0, ps.count));
    });
  if (const cudaError_t e =
          launch_each(ps.chunks * ps.outputs, s,
                      [=] __device__(std::int64_t e) { dev::binary_grad_stage(k, which, ps, a, b, dy, part, e); });
      e != cudaSuccess)
    return e;
  return launch_each(ps.outputs, s,
                     [=] __device__(std::int64_t j) { dx[j] = static_cast<float>(dev::sum_parts(ps, part, j)); });
}

cudaError_t launch_unary_forward(const dev::Unary& k, const float* x, float* y, cudaStream_t s) {
  return launch_each(k.n, s, [=] __device__(std::int64_t i) { y[i] = dev::unary_forward(k, x[i]); });
}

cudaError_t launch_unary_backward(const dev::Unary& k, const float* v, const float* dy, float* dx, cudaStream_t s) {
  return launch_each(k.n, s, [=] __device__(std::int64_t i) { dx[i] = dev::unary_backward(k, v[i], dy[i]); });
}

cudaError_t launch_reduce_forward(const dev::Reduce& k, const float* x, float* y, cudaStream_t s) {
  return launch_each(k.kept.n, s, [=] __device__(std::int64_t o) { y[o] = dev::reduce_at(k, x, o); });
}

cudaError_t launch_reduce_backward(const dev::Reduce& k, const float* dy, float* dx, cudaStream_t s) {
  return launch_each(k.back.n, s, [=] __device__(std::int64_t i) { dx[i] = dev::reduce_grad_at(k, dy, i); });
}

cudaError_t launch_strided_copy(const dev::Strides& k, const float* x, float* y, cudaStream_t s) {
  return launch_each(k.n, s, [=] __device__(std::int64_t i) { y[i] = dev::strided_at(k, x, i); });
}

cudaError_t launch_layer_norm_forward(const dev::LayerNorm& k, const float* x, const float* scale, const float* bias,
                                      float* y, float* mean, float* inv, cudaStream_t s) {
  return launch_each(k.rows, s,
                     [=] __device__(std::int64_t r) { dev::ln_forward_row(k, x, scale, bias, y, mean, inv, r); });
}

cudaError_t launch_layer_norm_backward(const dev::LayerNorm& k, const dev::Parts& ps, const float* x,
                                       const float* scale, const float* dy, const float* dmean, const float* dinv,
                                       float* dx, float* mean, float* inv, float* dscale, float* dbias, double* part,
                                       cudaStream_t s) {
  if (const cudaError_t e = launch_each(
          k.rows, s,
          [=] __device__(std::int64_t r) { dev::ln_backward_row(k, x, scale, dy, dmean, dinv, dx, mean, inv, r); });
      e != cudaSuccess)
    return e;
  if (!dscale && !dbias) return cudaSuccess;
  if (const cudaError_t e =
          launch_each(ps.chunks * ps.outputs, s,
                      [=] __device__(std::int64_t e) { dev::ln_param_grad_stage(k, ps, x, dy, mean, inv, part, e); });
      e != cudaSuccess)
    return e;
  return launch_each(ps.outputs, s,
                     [=] __device__(std::int64_t i) { dev::ln_param_grad_finish(ps, part, dscale, dbias, i); });
}

cudaError_t launch_gather_forward(const dev::Gather& k, const float* data, const void* idx, float* y, cudaStream_t s) {
  return launch_each(k.outer * k.count * k.inner, s,
                     [=] __device__(std::int64_t i) { y[i] = dev::gather_at(k, data, idx, i); });
}

namespace {
// The scratch of the sorted gradient: keys and positions, in and out of the sort (count int32
// each), the runs' starts (axis_dim + 1), then CUB's temporary storage (aligned to 256 bytes).
struct GatherScratch {
  std::int32_t *keys_in, *order_in, *keys, *order, *first;
  void* temp;
  std::size_t temp_bytes;
};
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
int key_bits(const dev::Gather& k) {  // keys are 0..axis_dim
  int bits = 1;
  while ((std::int64_t{1} << bits) <= k.axis_dim) ++bits;
  return bits;
}
std::size_t sort_temp_bytes(const dev::Gather& k) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(k.count), 0, key_bits(k));
  return bytes;
}
GatherScratch gather_scratch(const dev::Gather& k, void* base) {
  auto* p = static_cast<char*>(base);
  const std::size_t ints = aligned(static_cast<std::size_t>(k.count) * sizeof(std::int32_t));
  GatherScratch g{};
  g.keys_in = reinterpret_cast<std::int32_t*>(p);
  g.order_in = reinterpret_cast<std::int32_t*>(p + ints);
  g.keys = reinterpret_cast<std::int32_t*>(p + 2 * ints);
  g.order = reinterpret_cast<std::int32_t*>(p + 3 * ints);
  g.first = reinterpret_cast<std::int32_t*>(p + 4 * ints);
  g.temp = p + 4 * ints + aligned(static_cast<std::size_t>(k.axis_dim + 1) * sizeof(std::int32_t));
  g.temp_bytes = sort_temp_bytes(k);
  return g;
}
}  // namespace

std::size_t gather_grad_scratch_bytes(const dev::Gather& k) {
  return 4 * aligned(static_cast<std::size_t>(k.count) * sizeof(std::int32_t)) +
         aligned(static_cast<std::size_t>(k.axis_dim + 1) * sizeof(std::int32_t)) + sort_temp_bytes(k);
}

cudaError_t launch_gather_grad(const dev::Gather& k, const void* idx, const float* dy, float* ddata, void* scratch,
                               cudaStream_t s) {
  const GatherScratch g = gather_scratch(k, scratch);
  if (const cudaError_t e = launch_each(k.count, s,
                                        [=] __device__(std::int64_t t) {
                                          g.keys_in[t] = dev::gather_key(k, idx, t);
                                          g.order_in[t] = static_cast<std::int32_t>(t);
                                        });
      e != cudaSuccess)
    return e;
  std::size_t temp_bytes = g.temp_bytes;
  if (const cudaError_t e = cub::DeviceRadixSort::SortPairs(g.temp, temp_bytes, g.keys_in, g.keys, g.order_in, g.order,
                                                            static_cast<int>(k.count), 0, key_bits(k), s);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = launch_each(
          k.axis_dim + 1, s, [=] __device__(std::int64_t v) { g.first[v] = dev::gather_first(g.keys, k.count, v); });
      e != cudaSuccess)
    return e;
  return launch_each(k.outer * k.axis_dim * k.inner, s, [=] __device__(std::int64_t j) {
    ddata[j] = dev::gather_grad_sorted_at(k, g.order, g.first, dy, j);
  });
}

cudaError_t launch_block_copy(const dev::Blocks& k, const float* src, float* dst, cudaStream_t s) {
  return launch_each(k.outer * k.width, s, [=] __device__(std::int64_t i) { dev::block_copy_at(k, src, dst, i); });
}

cudaError_t launch_window_forward(const dev::Window& k, const float* x, float* y, cudaStream_t s) {
  return launch_each(k.ny, s, [=] __device__(std::int64_t i) { y[i] = dev::window_at(k, x, i); });
}

cudaError_t launch_window_backward(const dev::Window& k, const float* dy, float* dx, cudaStream_t s) {
  return launch_each(k.nx, s, [=] __device__(std::int64_t j) { dx[j] = dev::window_grad_at(k, dy, j); });
}

// Four elements a thread where the float32 side is 16-byte aligned and the bfloat16 side 8-byte
// aligned (16 bytes in, 8 out, or the reverse); the rounding is the same, element by element.
cudaError_t launch_add_bf16(const void* a, const void* b, void* y, std::int64_t n, cudaStream_t s) {
  return launch_words(a, b, y, n, s, [] __device__(std::uint16_t u, std::uint16_t v) { return dev::add_bf16(u, v); });
}

cudaError_t launch_add_relu_bf16(const void* a, const void* b, void* y, std::int64_t n, cudaStream_t s) {
  return launch_words(a, b, y, n, s,
                      [] __device__(std::uint16_t u, std::uint16_t v) { return dev::add_relu_bf16(u, v); });
}

cudaError_t launch_relu_bf16(const void* x, void* y, std::int64_t n, cudaStream_t s) {
  return launch_words(x, nullptr, y, n, s, [] __device__(std::uint16_t u, std::uint16_t) { return dev::relu_bf16(u); });
}

cudaError_t launch_relu_grad_bf16(const void* y, const void* dy, void* d0, void* d1, std::int64_t n, cudaStream_t s) {
  if (!d0 && !d1) return cudaSuccess;
  const auto* py = static_cast<const std::uint16_t*>(y);
  const auto* pdy = static_cast<const std::uint16_t*>(dy);
  auto* g0 = static_cast<std::uint16_t*>(d0 ? d0 : d1);  // one gradient wanted: it is written twice
  auto* g1 = static_cast<std::uint16_t*>(d1 ? d1 : d0);
  return launch_vector8(
      n, aligned16({py, pdy, g0, g1}), s,
      [=] __device__(std::int64_t j) {
        Words8 u, v, r;
        u.v = reinterpret_cast<const uint4*>(py)[j];
        v.v = reinterpret_cast<const uint4*>(pdy)[j];
#pragma unroll
        for (int e = 0; e < 8; ++e) r.w[e] = dev::relu_grad_bf16(u.w[e], v.w[e]);
        reinterpret_cast<uint4*>(g0)[j] = r.v;
        reinterpret_cast<uint4*>(g1)[j] = r.v;
      },
      [=] __device__(std::int64_t i) { g0[i] = g1[i] = dev::relu_grad_bf16(py[i], pdy[i]); });
}

cudaError_t launch_copy_twice_bf16(const void* x, void* y0, void* y1, std::int64_t n, cudaStream_t s) {
  return copy_twice(static_cast<const std::uint16_t*>(x), static_cast<std::uint16_t*>(y0),
                    static_cast<std::uint16_t*>(y1), n, s);
}

cudaError_t launch_global_pool_bf16(const dev::GlobalPool& k, const void* x, float* y, cudaStream_t s) {
  const auto* in = static_cast<const std::uint16_t*>(x);
  return launch_each(k.n * k.c, s, [=] __device__(std::int64_t o) { y[o] = dev::global_pool_at(k, in, o); });
}

cudaError_t launch_global_pool_grad_bf16(const dev::GlobalPool& k, const float* dy, void* dx, cudaStream_t s) {
  auto* out = static_cast<std::uint16_t*>(dx);
  return launch_each(k.n * k.c * k.plane, s,
                     [=] __device__(std::int64_t i) { out[i] = dev::global_pool_grad_at(k, dy, i); });
}

cudaError_t launch_to_bf16(const float* src, void* dst, std::int64_t n, cudaStream_t s) {
  auto* out = static_cast<__nv_bfloat16*>(dst);
  return launch_vector4(
      n, aligned16({src}) && reinterpret_cast<std::uintptr_t>(dst) % 8 == 0, s,
      [=] __device__(std::int64_t j) {
        const float4 v = reinterpret_cast<const float4*>(src)[j];
        auto* o = reinterpret_cast<__nv_bfloat162*>(out + 4 * j);
        o[0] = __floats2bfloat162_rn(v.x, v.y);
        o[1] = __floats2bfloat162_rn(v.z, v.w);
      },
      [=] __device__(std::int64_t i) { out[i] = __float2bfloat16_rn(src[i]); });
}

cudaError_t launch_from_bf16(const void* src, float* dst, std::int64_t n, cudaStream_t s) {
  const auto* in = static_cast<const __nv_bfloat16*>(src);
  return launch_vector4(
      n, aligned16({dst}) && reinterpret_cast<std::uintptr_t>(src) % 8 == 0, s,
      [=] __device__(std::int64_t j) {
        const auto* h = reinterpret_cast<const __nv_bfloat162*>(in + 4 * j);
        const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
        reinterpret_cast<float4*>(dst)[j] = make_float4(a.x, a.y, b.x, b.y);
      },
      [=] __device__(std::int64_t i) { dst[i] = __bfloat162float(in[i]); });
}

cudaError_t launch_cast(const dev::Cast& k, const void* src, void* dst, cudaStream_t s) {
  return launch_each(k.n, s, [=] __device__(std::int64_t i) { dev::cast_at(k, src, dst, i); });
}

cudaError_t launch_sce_forward(const dev::Sce& k, const dev::Parts& ps, const float* scores, const void* labels,
                               float* loss, float* log_prob, float* lse, float* row_loss, float* row_weight,
                               float* divisor, double* part, cudaStream_t s) {
  if (const cudaError_t e = launch_each(
          k.rows, s, [=] __device__(std::int64_t r) { dev::sce_row(k, scores, labels, lse, row_loss, row_weight, r); });
      e != cudaSuccess)
    return e;
  if (log_prob)
    if (const cudaError_t e = launch_each(
            k.rows * k.c, s, [=] __device__(std::int64_t i) { log_prob[i] = dev::sce_log_prob_at(k, scores, lse, i); });
        e != cudaSuccess)
      return e;
  if (k.reduction == dev::Sce::None)
    return launch_each(k.rows, s, [=] __device__(std::int64_t r) { loss[r] = row_loss[r]; });
  if (const cudaError_t e =
          launch_each(ps.chunks * ps.outputs, s,
                      [=] __device__(std::int64_t e) { dev::sce_total_stage(ps, row_loss, row_weight, part, e); });
      e != cudaSuccess)
    return e;
  return launch_each(1, s, [=] __device__(std::int64_t) { dev::sce_total_finish(k, ps, part, loss, divisor); });
}

cudaError_t launch_sce_backward(const dev::Sce& k, const float* scores, const void* labels, const float* lse,
                                const float* row_weight, const float* divisor, const float* dloss, const float* dlp,
                                float* dlp_sum, float* dscores, cudaStream_t s) {
  if (dlp)
    if (const cudaError_t e =
            launch_each(k.rows, s, [=] __device__(std::int64_t r) { dev::sce_dlp_row(k, dlp, dlp_sum, r); });
        e != cudaSuccess)
      return e;
  return launch_each(k.rows * k.c, s, [=] __device__(std::int64_t i) {
    dscores[i] = dev::sce_grad_at(k, scores, labels, lse, row_weight, divisor, dloss, dlp, dlp_sum, i);
  });
}

cudaError_t launch_bn_stat(const dev::BatchNorm& k, const dev::Parts& ps, const void* x, const float* mean,
                           double* part, float* stat, cudaStream_t s) {
  if (const cudaError_t e = launch_each(
          ps.chunks * ps.outputs, s, [=] __device__(std::int64_t e) { dev::bn_stats_stage(k, ps, x, mean, part, e); });
      e != cudaSuccess)
    return e;
  return launch_each(k.c, s, [=] __device__(std::int64_t ch) { dev::bn_stats_finish(ps, part, stat, ch); });
}

cudaError_t launch_bn_forward(const dev::BatchNorm& k, const void* x, const float* scale, const float* bias,
                              const float* rm, const float* rv, const float* mean, const float* var, void* y,
                              float* const outs[4], cudaStream_t s) {
  float *o1 = outs[0], *o2 = outs[1], *o3 = outs[2], *o4 = outs[3];
  if (k.training && (o1 || o2 || o3 || o4))
    if (const cudaError_t e = launch_each(
            k.c, s,
            [=] __device__(std::int64_t ch) { dev::bn_running_outputs(k, rm, rv, mean, var, o1, o2, o3, o4, ch); });
        e != cudaSuccess)
      return e;
  return launch_each(k.n * k.c * k.plane, s, [=] __device__(std::int64_t i) {
    dev::bn_store(k, y, i, dev::bn_forward_at(k, x, scale, bias, mean, var, i));
  });
}

cudaError_t launch_bn_running_from_inv(const dev::BatchNorm& k, const float* rm, const float* rv, const float* mean,
                                       const float* inv, float* out_rm, float* out_rv, cudaStream_t s) {
  return launch_each(
      k.c, s, [=] __device__(std::int64_t ch) { dev::bn_running_from_inv(k, rm, rv, mean, inv, out_rm, out_rv, ch); });
}

cudaError_t launch_bn_backward(const dev::BatchNorm& k, const dev::Parts& ps, const void* x, const void* y,
                               const float* scale, const void* dy, const float* mean, const float* var, double* part,
                               float* sdy, float* sdyx, void* dx, float* dscale, float* dbias, cudaStream_t s) {
  if (const cudaError_t e =
          launch_each(ps.chunks * ps.outputs, s,
                      [=] __device__(std::int64_t e) { dev::bn_grad_stage(k, ps, x, y, dy, mean, var, part, e); });
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = launch_each(
          k.c, s, [=] __device__(std::int64_t ch) { dev::bn_grad_finish(ps, part, sdy, sdyx, dscale, dbias, ch); });
      e != cudaSuccess)
    return e;
  if (!dx) return cudaSuccess;
  return launch_each(k.n * k.c * k.plane, s, [=] __device__(std::int64_t i) {
    dev::bn_store(k, dx, i, dev::bn_dx_at(k, x, y, scale, dy, mean, var, sdy, sdyx, i));
  });
}

cudaError_t launch_bias_add_bf16(const dev::BatchNorm& k, void* y, const float* bias, cudaStream_t s) {
  return launch_each(k.n * k.c * k.plane, s, [=] __device__(std::int64_t i) { dev::bias_add_bf16_at(k, y, bias, i); });
}

cudaError_t launch_channel_sum(const dev::BatchNorm& k, const dev::Parts& ps, const void* dy, double* part, float* db,
                               cudaStream_t s) {
  if (const cudaError_t e =
          launch_each(ps.chunks * ps.outputs, s,
                      [=] __device__(std::int64_t e) { dev::bn_stats_stage(k, ps, dy, nullptr, part, e); });
      e != cudaSuccess)
    return e;
  return launch_each(k.c, s, [=] __device__(std::int64_t ch) { dev::channel_sum_finish(ps, part, db, ch); });
}

cudaError_t launch_optimizer_step(const StepRule& r, float* p, const float* g, float* a, float* b, std::int64_t n,
                                  cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  // Enough blocks to fill a large GPU several times over; the loop covers any n beyond.
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 4096));
  optimizer_step_kernel<<<blocks, kThreads, 0, s>>>(r, p, g, a, b, n);
  return cudaGetLastError();
}

}  // namespace d500::cuda
