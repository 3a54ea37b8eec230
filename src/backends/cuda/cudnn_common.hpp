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

// A float32 NCHW tensor descriptor, destroyed with its owner.
class TensorDesc {
 public:
  TensorDesc(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

// The algorithm cuDNN's heuristics rank first (cudnnGet*Algorithm_v7) among those that succeed
// within a workspace of 1 GiB, for each pass of a described convolution: its enum value, name,
// workspace and whether cuDNN says it computes the same bits at every run; found is false when
// none fits. The choice itself is the same for a device model and cuDNN version, so every rank
// of a job makes the same one. With Determinism::Prefer the first deterministic algorithm that
// fits is taken, and the first of any kind only when none is: cuDNN's backward filter ALGO_0 and
// ALGO_3 and backward data ALGO_0 add with atomics, so that two runs of one training step on
// the same GPU differ in their last bits (cuDNN's "Reproducibility" notes).
enum class Determinism { Any, Prefer };
// The point's choice (its cudnn_algorithms: "heuristic" is Any, "deterministic" Prefer); `unset`
// when the point leaves it to the workload's default or there is no point.
inline Determinism determinism_of(const Params* p, Determinism unset) {
  const auto it = p ? p->find("cudnn_algorithms") : Params::const_iterator{};
  if (!p || it == p->end() || !std::holds_alternative<std::string>(it->second)) return unset;
  const auto& v = std::get<std::string>(it->second);
  return v == "heuristic" ? Determinism::Any : v == "deterministic" ? Determinism::Prefer : unset;
}
struct ConvAlgorithm {
  bool found = false;
  int algo = 0;
  std::size_t workspace = 0;
  bool deterministic = false;
  std::string name;  // "forward IMPLICIT_GEMM"
};
ConvAlgorithm choose_forward(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                             cudnnTensorDescriptor_t y, Determinism d = Determinism::Any);
ConvAlgorithm choose_backward_data(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                   cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Determinism d = Determinism::Any);
ConvAlgorithm choose_backward_filter(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, Determinism d = Determinism::Any);

class CudnnKernel : public DeviceKernel {
 public:
  ~CudnnKernel() override;
  // Every output back into the problem (untimed); a kernel whose outputs need more overrides it.
  void finish() override;

 protected:
  explicit CudnnKernel(OpProblem& p);
  const void* in(std::size_t i) const { return in_[i]->get(); }
  void* out(std::size_t i) { return out_[i]->get(); }
  // A device buffer of its own (a forward output a backward pass reads, a workspace), made at setup.
  void* scratch(std::size_t bytes);

  OpProblem& p_;
  cudnnHandle_t handle_ = nullptr;

 private:
  std::vector<std::unique_ptr<DeviceBuffer>> in_, out_, scratch_;
};

}  // namespace d500::cuda
