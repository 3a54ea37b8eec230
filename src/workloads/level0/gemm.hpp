#pragma once
// Level 0 GEMM, float32, row-major C = A * B with A m x k and B k x n.
#include <cstdint>
#include <vector>

#include "workloads/registry.hpp"

namespace d500 {

// Relative Frobenius-norm error of C against a double-accumulated reference, computed on
// `rows` rows of C (all rows when rows >= m); rows are drawn evenly so the check is cheap
// for large m and still touches every part of the matrix.
double gemm_rel_error(int m, int n, int k, const float* a, const float* b, const float* c, int rows);

// Tolerance for a float32 GEMM with inner dimension k: a few units of roundoff growth.
double gemm_tolerance(int k);

}  // namespace d500
