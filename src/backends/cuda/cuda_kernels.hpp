#pragma once
// The cuda backend's own GPU kernels (cuda_kernels.cu, compiled by nvcc where CMake finds it:
// D500_HAVE_CUDA_KERNELS), for what cuBLAS and cuDNN have no call for. Each launch is enqueued on
// the given stream and returns the launch's error (cudaSuccess, or why it was refused).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/device_ops.hpp"
#include "backends/optimizer_rule.hpp"

namespace d500::cuda {

// One optimizer step over n float32 elements: apply_rule(r, p[i], g[i], a[i], b[i]) for every i
// (a, b: nullptr where the rule keeps no such state).
cudaError_t launch_optimizer_step(const StepRule& r, float* p, const float* g, float* a, float* b, std::int64_t n,
                                  cudaStream_t s);

// ONNX's SoftmaxCrossEntropyLoss (dev::Sce): forward, each row's log-sum-exp, loss and weight
// (lse, row_loss, row_weight: k.rows floats each), log_prob where not nullptr, and the loss (mean,
// sum: through ps = dev::parts_of(2, k.rows), part its 2 ps.chunks doubles; none: the rows'
// losses) with the divisor the backward pass scales by; backward, dscores element by element (with
// log_prob's gradient dlp where read: its rows' sums into dlp_sum, k.rows floats, first).
cudaError_t launch_sce_forward(const dev::Sce& k, const dev::Parts& ps, const float* scores, const void* labels,
                               float* loss, float* log_prob, float* lse, float* row_loss, float* row_weight,
                               float* divisor, double* part, cudaStream_t s);
cudaError_t launch_sce_backward(const dev::Sce& k, const float* scores, const void* labels, const float* lse,
                                const float* row_weight, const float* divisor, const float* dloss, const float* dlp,
                                float* dlp_sum, float* dscores, cudaStream_t s);

// Add of two operands of one shape, y = a + b, in one pass (float4 loads and stores where the
// three are 16-byte aligned); its backward pass, dy into both gradients, in one read.
cudaError_t launch_add(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t s);
cudaError_t launch_copy_twice(const float* x, float* y0, float* y1, std::int64_t n, cudaStream_t s);
// AddRelu (networks/fuse.hpp) of two operands of one shape, y = max(a + b, 0), in one pass; its
// backward pass, dy where y > 0 into both gradients (d0 or d1 may be nullptr: not wanted), in one
// read of y and dy. Each value dev::add_relu's and dev::relu_grad's.
cudaError_t launch_add_relu(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t s);
cudaError_t launch_relu_grad_twice(const float* y, const float* dy, float* d0, float* d1, std::int64_t n,
                                   cudaStream_t s);

// Level 1's other operators (device_ops.hpp's functions, one thread per element or row):
// y = a op b, broadcast; d(a) or d(b) (which: 0 or 1), each element the sum over its broadcast.
cudaError_t launch_binary_forward(const dev::Binary& k, const float* a, const float* b, float* y, cudaStream_t s);
// The gradient in parts (ps = dev::parts_of(dx's elements, dev::binary_grad_count)); part: scratch
// of ps.chunks * ps.outputs doubles where ps.chunks > 1.
cudaError_t launch_binary_grad(const dev::Binary& k, int which, const dev::Parts& ps, const float* a, const float* b,
                               const float* dy, float* dx, double* part, cudaStream_t s);
// A unary operator: y = f(x); dx = f'(v) dy, v the output where dev::unary_uses_y, else the input.
cudaError_t launch_unary_forward(const dev::Unary& k, const float* x, float* y, cudaStream_t s);
cudaError_t launch_unary_backward(const dev::Unary& k, const float* v, const float* dy, float* dx, cudaStream_t s);
// ReduceSum, ReduceMean: one thread per output (its elements summed in order); dx = dy broadcast.
cudaError_t launch_reduce_forward(const dev::Reduce& k, const float* x, float* y, cudaStream_t s);
cudaError_t launch_reduce_backward(const dev::Reduce& k, const float* dy, float* dx, cudaStream_t s);
// y[i] = x at the offset k's strides give (Transpose, forward or backward).
cudaError_t launch_strided_copy(const dev::Strides& k, const float* x, float* y, cudaStream_t s);
// LayerNormalization: rows forward; backward: rows (dx where given, from dy and the Mean and
// InvStdDev outputs' gradients where read, each nullptr where not; the statistics into mean, inv), then the columns'
// parts (ps = dev::parts_of(inner, rows); part: 2 ps.chunks inner doubles) and their sums (dscale, dbias where given).
cudaError_t launch_layer_norm_forward(const dev::LayerNorm& k, const float* x, const float* scale, const float* bias,
                                      float* y, float* mean, float* inv, cudaStream_t s);
cudaError_t launch_layer_norm_backward(const dev::LayerNorm& k, const dev::Parts& ps, const float* x,
                                       const float* scale, const float* dy, const float* dmean, const float* dinv,
                                       float* dx, float* mean, float* inv, float* dscale, float* dbias, double* part,
                                       cudaStream_t s);
// Gather: y = data at the indices; d(data) as the sums of dy over the indices naming each row.
cudaError_t launch_gather_forward(const dev::Gather& k, const float* data, const void* idx, float* y, cudaStream_t s);
// The gradient through the indices sorted by row (CUB's stable radix sort): its scratch is
// gather_grad_scratch_bytes(k) bytes of device memory.
std::size_t gather_grad_scratch_bytes(const dev::Gather& k);
cudaError_t launch_gather_grad(const dev::Gather& k, const void* idx, const float* dy, float* ddata, void* scratch,
                               cudaStream_t s);

// Concat and Split: one block copy (dev::Blocks) from src to dst.
cudaError_t launch_block_copy(const dev::Blocks& k, const float* src, float* dst, cudaStream_t s);
// Slice and Pad (constant, reflect, edge): y from x through the window; dx from dy (0 where no
// output read x; a reflecting or edge pad's sums over the outputs that read x, in double).
cudaError_t launch_window_forward(const dev::Window& k, const float* x, float* y, cudaStream_t s);
cudaError_t launch_window_backward(const dev::Window& k, const float* dy, float* dx, cudaStream_t s);

// BatchNormalization (dev::BatchNorm; ps = dev::parts_of(k.c, k.n k.plane), part: 2 ps.chunks k.c
// doubles). A statistic per channel: the mean (mean nullptr) or the variance about `mean`, into
// stat. Forward: the optional outputs (outs: running mean, running variance, batch mean, batch
// variance, each nullptr where absent; in training only) and y. Backward: the channel's sums into
// sdy, sdyx (k.c floats each), dscale and dbias where given, then dx where given. x, y, dy and dx
// are float32, or bfloat16 words where k.bf16 says the executor stores them so (math = "bf16").
cudaError_t launch_bn_stat(const dev::BatchNorm& k, const dev::Parts& ps, const void* x, const float* mean,
                           double* part, float* stat, cudaStream_t s);
cudaError_t launch_bn_forward(const dev::BatchNorm& k, const void* x, const float* scale, const float* bias,
                              const float* rm, const float* rv, const float* mean, const float* var, void* y,
                              float* const outs[4], cudaStream_t s);
// The running statistics (out_rm, out_rv: nullptr where absent) from the batch's mean and the
// inverse deviation cuDNN saved (dev::bn_running_from_inv), one thread per channel.
cudaError_t launch_bn_running_from_inv(const dev::BatchNorm& k, const float* rm, const float* rv, const float* mean,
                                       const float* inv, float* out_rm, float* out_rv, cudaStream_t s);
// y: the forward pass's output, read where k.relu masks the gradient (BatchNormRelu), else unread.
cudaError_t launch_bn_backward(const dev::BatchNorm& k, const dev::Parts& ps, const void* x, const void* y,
                               const float* scale, const void* dy, const float* mean, const float* var, double* part,
                               float* sdy, float* sdyx, void* dx, float* dscale, float* dbias, cudaStream_t s);

// A convolution's output stored in bfloat16 (k: its shape and layout as a normalisation's): the
// float32 bias added in place (dev::bias_add_bf16_at); and the bias's gradient, each channel's
// sum of dy (bfloat16 words) in parts (ps over k.c channels) into db.
cudaError_t launch_bias_add_bf16(const dev::BatchNorm& k, void* y, const float* bias, cudaStream_t s);
cudaError_t launch_channel_sum(const dev::BatchNorm& k, const dev::Parts& ps, const void* dy, double* part, float* db,
                               cudaStream_t s);

// math = "bf16": n float32 elements rounded to bfloat16 (to nearest even; dst: n 16-bit words),
// and back (exact).
cudaError_t launch_to_bf16(const float* src, void* dst, std::int64_t n, cudaStream_t s);
cudaError_t launch_from_bf16(const void* src, float* dst, std::int64_t n, cudaStream_t s);

// math = "bf16" with the activations stored in bfloat16 (TensorView::bf16; each pointer to n
// 16-bit words): Add, AddRelu and Relu (dev::add_bf16, add_relu_bf16, relu_bf16: the operands
// read exactly, the result rounded to nearest even; y may be a, as the gradients' sums have it),
// Relu's gradient masked where y > 0 into d0 and d1 (either nullptr: not wanted; AddRelu's two, or
// Relu's one), dy copied into both of Add's gradients; eight elements a thread where every
// pointer is 16-byte aligned. GlobalAveragePool of a bfloat16 input into its float32 output
// (dev::GlobalPool: one thread per output, the plane summed in order in double) and its gradient.
cudaError_t launch_add_bf16(const void* a, const void* b, void* y, std::int64_t n, cudaStream_t s);
cudaError_t launch_add_relu_bf16(const void* a, const void* b, void* y, std::int64_t n, cudaStream_t s);
cudaError_t launch_relu_bf16(const void* x, void* y, std::int64_t n, cudaStream_t s);
cudaError_t launch_relu_grad_bf16(const void* y, const void* dy, void* d0, void* d1, std::int64_t n, cudaStream_t s);
cudaError_t launch_copy_twice_bf16(const void* x, void* y0, void* y1, std::int64_t n, cudaStream_t s);
cudaError_t launch_global_pool_bf16(const dev::GlobalPool& k, const void* x, float* y, cudaStream_t s);
cudaError_t launch_global_pool_grad_bf16(const dev::GlobalPool& k, const float* dy, void* dx, cudaStream_t s);

// Cast: dst from src, element by element.
cudaError_t launch_cast(const dev::Cast& k, const void* src, void* dst, cudaStream_t s);

}  // namespace d500::cuda
