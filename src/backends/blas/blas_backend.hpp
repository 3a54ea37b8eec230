#pragma once
// OpenBLAS, the `blas` backend: shared between its files (and LibTorch's, which calls the same
// OpenBLAS instance). The rest of d500 reaches it through the backend registry.
#include <memory>
#include <string>

#include "backends/graph.hpp"
#include "backends/kernel.hpp"

namespace d500 {

std::string openblas_version();
void openblas_threads(int n);

// conv2d through im2col and sgemm (blas_conv.cpp).
std::unique_ptr<OpKernel> make_blas_conv(OpProblem& p, int threads);
// Level 1 (blas_graph.cpp): Conv, Gemm and MatMul nodes; nullptr for every other node.
std::unique_ptr<NodeKernel> make_blas_node_kernel(const NodeProblem& p, int threads);

}  // namespace d500
