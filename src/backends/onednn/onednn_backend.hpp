#pragma once
// Shared between the onednn backend's files; the rest of d500 reaches oneDNN through the
// backend registry.
#include <memory>
#include <string>

#include "backends/graph.hpp"
#include "backends/kernel.hpp"

namespace d500 {

// The instruction set oneDNN's kernels use on this CPU ("avx2", "avx512_core_bf16", ...), and
// whether oneDNN computes in bfloat16 on it (2.6: from avx512_core on, natively from
// avx512_core_bf16; an AVX2 CPU has no bfloat16 convolution).
std::string onednn_isa();
bool onednn_isa_has_bf16();
// The neural-network operators (onednn_ops.cpp): which ones, and a kernel for a problem.
bool onednn_supports(const std::string& op);
std::unique_ptr<OpKernel> make_onednn_kernel(OpProblem& p, int threads);
// Level 1 (onednn_graph.cpp): a kernel for one node of a graph, or nullptr when oneDNN has none for it.
std::unique_ptr<NodeKernel> make_onednn_node_kernel(const NodeProblem& p, int threads);
// With the point's memory_format = "channels_last": how make_onednn_node_kernel's kernel for a
// node takes channels-last tensors (BackendInfo::channels_last): its convolutions each side, its
// per-channel and element-wise primitives all alike.
Takes onednn_takes(const NodeProblem& p);
// With the point's math = "bf16": how it takes bfloat16 ones (BackendInfo::bf16_storage): as
// onednn_takes says, in either layout (an NCHW normalisation runs on d500's loops, which take both).
Takes onednn_bf16_storage(const NodeProblem& p);
// A batch normalisation's running statistics (inputs 3 and 4) and, in training, its optional
// outputs 1 to 4: the running mean and variance updated by the node's momentum (ONNX's), the
// batch's mean and (biased) variance. Shared by the onednn backend's two normalisation kernels.
class BatchNormStatistics {
 public:
  explicit BatchNormStatistics(const NodeProblem& p)
      : running_mean(static_cast<const float*>(p.in[3].data)),
        running_var(static_cast<const float*>(p.in[4].data)),
        momentum_(static_cast<float>(p.node->attr_f("momentum", 0.9))) {
    for (std::size_t j = 1; j < p.out.size() && j < 5; ++j)
      if (p.out[j].present()) outs_[j - 1] = static_cast<float*>(p.out[j].data), any_ = true;
  }
  // Channel c's outputs from the batch's mean and variance (none where the node has none).
  void write(std::int64_t c, float mean, float var) const {
    if (!any_) return;
    // Read before written: an output may be the running statistic itself (kept in place).
    const float rm = running_mean[c], rv = running_var[c];
    if (outs_[0]) outs_[0][c] = rm * momentum_ + mean * (1.0f - momentum_);
    if (outs_[1]) outs_[1][c] = rv * momentum_ + var * (1.0f - momentum_);
    if (outs_[2]) outs_[2][c] = mean;
    if (outs_[3]) outs_[3][c] = var;
  }
  const float *running_mean, *running_var;

 private:
  float momentum_;
  float* outs_[4] = {};  // outputs 1 to 4 (nullptr: absent)
  bool any_ = false;
};

// A batch normalisation (BatchNormRelu: with its relu) over NCHW activations of rank 3 to 5, in
// float32 or bfloat16 as stored, on d500's loops (nchw_batch_norm.cpp); training: batch statistics.
std::unique_ptr<NodeKernel> make_nchw_batch_norm(const NodeProblem& p, bool training, float eps, bool relu);

}  // namespace d500
