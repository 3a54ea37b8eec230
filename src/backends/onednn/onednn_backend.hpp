#pragma once
// Shared between the onednn backend's files; the rest of d500 reaches oneDNN through the
// backend registry.
#include <memory>
#include <string>

#include "backends/graph.hpp"
#include "backends/kernel.hpp"

namespace d500 {

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
// A batch normalisation (BatchNormRelu: with its relu) over NCHW activations of rank 3 to 5, in
// float32 or bfloat16 as stored, on d500's loops (nchw_batch_norm.cpp); training: batch statistics.
std::unique_ptr<NodeKernel> make_nchw_batch_norm(const NodeProblem& p, bool training, float eps, bool relu);

}  // namespace d500
