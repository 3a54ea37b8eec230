#include "backends/blas/blas_backend.hpp"

#include <cblas.h>

namespace d500 {

std::string openblas_version() {
  // openblas_get_config() names version, target core and threading model, e.g.
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
  std::string s = openblas_get_config();
  return s + " (parallel=" + std::to_string(openblas_get_parallel()) + ")";
}

void openblas_threads(int n) { openblas_set_num_threads(n); }

void blas_sgemm(int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

}  // namespace d500
