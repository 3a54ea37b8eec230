#pragma once
// What the cuda backend's cuDNN kernels share (convolutions in cudnn_conv.cpp; pooling, batch
// normalisation, ReLU and softmax in cudnn_ops.cpp): checked cuDNN calls, float32 NCHW tensor
// descriptors, and CudnnKernel, a handle on the kernel's stream with the problem's tensors on the
// device (inputs copied once at setup, outputs written by each run and copied back by finish()).
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_common.hpp"
#include "common/value.hpp"

namespace d500::cuda {

void cudnn_check(cudnnStatus_t s, const char* call);  // throws d500::Error naming the call and cuDNN's words

// A tensor descriptor of shape N C H W, stored NCHW or, with `nhwc`, channels-last (d500's
// executor with memory_format = "channels_last"), float32 unless `type` says otherwise (bfloat16:
// the executor's convolutions with math = "bf16"), destroyed with its owner.
class TensorDesc {
 public:
  TensorDesc(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, cudnnDataType_t type = CUDNN_DATA_FLOAT,
             bool nhwc = false);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// How a convolution's algorithm for each pass is chosen at setup, from the point's
// cudnn_algorithms:
// - Heuristic ("heuristic"): the algorithm cuDNN's heuristics rank first (cudnnGet*Algorithm_v7)
//   among those that succeed within a workspace of 1 GiB. The choice is the same for a device
//   model and cuDNN version, so every rank of a job makes the same one.
// - Deterministic ("deterministic"): the first of that ranking that cuDNN says computes the same
//   bits at every run, and the first of any kind only when none is. cuDNN's backward filter
//   ALGO_0 and ALGO_3 and backward data ALGO_0 add with atomics, so that two runs of one training
//   step on the same GPU differ in their last bits (cuDNN's "Reproducibility" notes).
// - Find ("find"): every algorithm run once on the pass's own buffers by cudnnFind*AlgorithmEx,
//   with a workspace as large as the largest any of them asks within 1 GiB, and the fastest that
//   succeeded taken (PyTorch's torch.backends.cudnn.benchmark = True). Measured, so two ranks, or
//   two runs, may choose differently when two algorithms are close.
enum class Choice { Heuristic, Deterministic, Find };
// The largest workspace an algorithm (legacy API) or engine configuration (graph API) may ask
// for: beyond it, the next of cuDNN's choices.
constexpr std::int64_t kCudnnWorkspaceLimit = std::int64_t{1} << 30;
// The descriptor's math type for the point's `math`: CUDNN_DEFAULT_MATH with "tf32" (TF32 tensor
// cores allowed for float32, PyTorch's allow_tf32 = True), else CUDNN_FMA_MATH (strict float32).
cudnnMathType_t conv_math_of(const Params* p);
// "float32 (CUDNN_FMA_MATH, no TF32)" or "float32 with TF32 tensor cores allowed (...)", for the point's attributes.
std::string conv_math_words(cudnnMathType_t descriptor_math, cudnnMathType_t chosen);
const char* math_type_name(cudnnMathType_t m);  // "CUDNN_TENSOR_OP_MATH", ...
// Whether the point says cudnn_api = "graph" (cuDNN's graph API instead of the legacy calls).
inline bool graph_api_of(const Params* p) {
  const auto it = p ? p->find("cudnn_api") : Params::const_iterator{};
  return p && it != p->end() && std::holds_alternative<std::string>(it->second) &&
         std::get<std::string>(it->second) == "graph";
}
// The point's choice; `unset` when the point leaves it to the workload's default or there is no point.
inline Choice choice_of(const Params* p, Choice unset) {
  const auto it = p ? p->find("cudnn_algorithms") : Params::const_iterator{};
  if (!p || it == p->end() || !std::holds_alternative<std::string>(it->second)) return unset;
  const auto& v = std::get<std::string>(it->second);
  return v == "heuristic"       ? Choice::Heuristic
         : v == "deterministic" ? Choice::Deterministic
         : v == "find"          ? Choice::Find
                                : unset;
}
// The device buffers Choice::Find runs the algorithms on, in cuDNN's names for the forward pass:
// x, w and y (a backward data pass writes its dx into x, a backward filter pass its dw into w).
// The pass's output is overwritten; its inputs are read.
struct ConvBuffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
};
// The chosen algorithm: its enum value, name, workspace and whether cuDNN says it computes the
// same bits at every run; found is false when none fits; with Choice::Find, the time cuDNN
// measured for it (milliseconds, one run), else -1.
struct ConvAlgorithm {
  bool found = false;
  int algo = 0;
  std::size_t workspace = 0;
  bool deterministic = false;
  std::string name;  // "forward IMPLICIT_GEMM"
  double found_ms = -1;
  // The math type cuDNN ran it with (its perf result's), set on the descriptor before each call,
  // as cuDNN asks: within the descriptor's own (CUDNN_FMA_MATH allows no TF32; CUDNN_DEFAULT_MATH
  // allows TF32 for float32), an algorithm may run in another.
  cudnnMathType_t math = CUDNN_FMA_MATH;
};
// `on` is needed with Choice::Find and ignored otherwise.
ConvAlgorithm choose_forward(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                             cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Choice c = Choice::Heuristic,
                             const ConvBuffers* on = nullptr);
ConvAlgorithm choose_backward_data(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                   cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                                   Choice c = Choice::Heuristic, const ConvBuffers* on = nullptr);
ConvAlgorithm choose_backward_filter(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                                     Choice c = Choice::Heuristic, const ConvBuffers* on = nullptr);

// How a kernel's tensors are stored on the device: float32, or 16-bit (level 0's conv2d with
// dtype = "bf16" or "fp16": each input rounded on the host at setup, to nearest even, each output
// widened on the host in finish(), both untimed).
enum class Storage { F32, BF16, F16 };
Storage storage_of(const std::string& dtype);  // "" or "fp32", "bf16", "fp16"
cudnnDataType_t cudnn_type(Storage s);

class CudnnKernel : public DeviceKernel {
 public:
  ~CudnnKernel() override;
  // Every output back into the problem (untimed); a kernel whose outputs need more overrides it.
  void finish() override;

 protected:
  explicit CudnnKernel(OpProblem& p, Storage storage = Storage::F32);
  const void* in(std::size_t i) const { return in_[i]->get(); }
  void* input_buffer(std::size_t i) {
    return in_[i]->get();
  }  // for a library call that takes it unqualified (cuDNN's find)
  void* out(std::size_t i) { return out_[i]->get(); }
  // A device buffer of its own (a forward output a backward pass reads, a workspace), made at setup.
  void* scratch(std::size_t bytes);

  OpProblem& p_;
  cudnnHandle_t handle_ = nullptr;
  const Storage storage_;

 private:
  std::vector<std::unique_ptr<DeviceBuffer>> in_, out_, scratch_;
};

}  // namespace d500::cuda
