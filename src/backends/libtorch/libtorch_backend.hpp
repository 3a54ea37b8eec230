#pragma once
// Shared between the libtorch backends' files; the rest of d500 reaches LibTorch through the
// backend registry. Each of these files includes ATen; nothing else does.
#include <memory>
#include <string>

#include "backends/graph.hpp"

namespace d500 {

// `libtorch`, level 1 (libtorch_graph.cpp): ATen's operators as d500's executor's node kernels.
std::unique_ptr<NodeKernel> make_libtorch_node_kernel(const NodeProblem& p, int threads);

// `libtorch-native` (libtorch_native.cpp): LibTorch executing a whole graph with its autograd.
std::unique_ptr<GraphRunner> make_libtorch_native_runner(const RunnerSpec& s);
// `libtorch-cuda`: the same on this rank's GPU (by local rank), when LibTorch has CUDA; why it
// cannot run here ("" when it can), and this rank's device in words.
std::unique_ptr<GraphRunner> make_libtorch_cuda_runner(const RunnerSpec& s);
std::string libtorch_cuda_no_device();
std::string libtorch_cuda_rank_device();
// "" when every node of `g` translates to ATen, else which does not.
std::string libtorch_native_check(const Graph& g);

}  // namespace d500
