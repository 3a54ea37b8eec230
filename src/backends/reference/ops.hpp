#pragma once
// The `reference` backend: plain, readable C++. Every other backend is validated against it,
// so clarity beats speed here; the loop order (i, p, j) is only the natural cache-friendly one.
#include <cstddef>
#include <vector>

namespace d500::reference {

// C = A * B, row-major, A is m x k, B is k x n, accumulated in float like the backends.
inline void sgemm(int m, int n, int k, const float* a, const float* b, float* c) {
  for (int i = 0; i < m; ++i) {
    float* ci = c + static_cast<std::size_t>(i) * n;
    for (int j = 0; j < n; ++j) ci[j] = 0.0f;
    for (int p = 0; p < k; ++p) {
      const float aip = a[static_cast<std::size_t>(i) * k + p];
      const float* bp = b + static_cast<std::size_t>(p) * n;
      for (int j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

// Row `i` of A * B accumulated in double: the yardstick for validation.
inline void gemm_row_double(int i, int n, int k, const float* a, const float* b, double* out) {
  for (int j = 0; j < n; ++j) out[j] = 0.0;
  for (int p = 0; p < k; ++p) {
    const double aip = a[static_cast<std::size_t>(i) * k + p];
    const float* bp = b + static_cast<std::size_t>(p) * n;
    for (int j = 0; j < n; ++j) out[j] += aip * bp[j];
  }
}

}  // namespace d500::reference
