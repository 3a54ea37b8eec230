#pragma once
// oneDNN (Debian libdnnl-dev), the `onednn` backend. Only onednn_backend.cpp and onednn_ops.cpp include dnnl.hpp,
// so the rest of d500 builds without it and a build without oneDNN simply lacks the backend.
#include <memory>
#include <string>

namespace d500 {

std::string onednn_version();

// The neural-network operators (onednn_ops.cpp): which ones, and a kernel for a problem.
class OpKernel;
struct OpProblem;
bool onednn_supports(const std::string& op);
std::unique_ptr<OpKernel> make_onednn_kernel(OpProblem& p, int threads);

// C = A * B through a oneDNN matmul primitive, created once (outside any timing) over the
// caller's row-major buffers; run() executes it and waits for the stream.
class OnednnGemm {
 public:
  OnednnGemm(int m, int n, int k, const float* a, const float* b, float* c, int threads);
  ~OnednnGemm();
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace d500
