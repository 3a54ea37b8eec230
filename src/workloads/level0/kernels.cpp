// Which backends run which operators: the one list that ties the operator workloads to the
// backends' kernels (each backend's kernels live in src/backends/<name>/).
#include <memory>

#include "backends/blas/blas_backend.hpp"
#include "workloads/level0/operator.hpp"
#ifdef D500_HAVE_LIBTORCH
#include "backends/libtorch/libtorch_backend.hpp"
#endif
#ifdef D500_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif

namespace d500 {

std::unique_ptr<OpKernel> make_custom_kernel(OpProblem& p, int threads);  // custom/custom_backend.cpp

const std::vector<KernelSource>& kernel_sources() {
  static const std::vector<KernelSource> list = {
      {"blas", [](const std::string& op) { return op == "conv2d"; }, make_blas_conv},
#ifdef D500_HAVE_ONEDNN
      {"onednn", onednn_supports, make_onednn_kernel},
#endif
#ifdef D500_HAVE_LIBTORCH
      {"libtorch", [](const std::string&) { return true; }, make_libtorch_kernel},
#endif
      {"custom", [](const std::string&) { return true; }, make_custom_kernel},
  };
  return list;
}

}  // namespace d500
