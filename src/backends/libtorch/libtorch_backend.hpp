#pragma once
// LibTorch (Debian libtorch-dev), the `libtorch` backend. Only libtorch_backend.cpp includes ATen
// (about 20 s to compile), so the rest of d500 builds without it.
#include <memory>
#include <string>

namespace d500 {

class OpKernel;
struct OpProblem;

std::string libtorch_version();
std::unique_ptr<OpKernel> make_libtorch_kernel(OpProblem& p, int threads);
std::unique_ptr<OpKernel> make_libtorch_gemm(int m, int n, int k, const float* a, const float* b, float* c, int threads);

}  // namespace d500
