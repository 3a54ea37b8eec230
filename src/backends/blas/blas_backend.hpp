#pragma once
// OpenBLAS, the `blas` backend.
#include <memory>
#include <string>

namespace d500 {

std::string openblas_version();
void openblas_threads(int n);
// C = A * B, row-major, A is m x k, B is k x n.
void blas_sgemm(int m, int n, int k, const float* a, const float* b, float* c);

// conv2d through im2col and sgemm (blas_conv.cpp).
class OpKernel;
struct OpProblem;
std::unique_ptr<OpKernel> make_blas_conv(OpProblem& p, int threads);

}  // namespace d500
