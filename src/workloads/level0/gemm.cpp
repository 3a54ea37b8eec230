// Level-0 GEMM as an operator like the others: float32, row-major C = A * B with A m x k and
// B k x n. Rows of C depend on the same rows of A only, so validation compares a few rows
// (evenly spread, first and last among them) against the double reference.
#include <algorithm>
#include <cmath>

#include "backends/reference/ops.hpp"
#include "backends/registry.hpp"
#include "common/text.hpp"
#include "workloads/level0/operator.hpp"
#include "workloads/level0/shape_sets.hpp"

namespace d500 {

namespace {

// Rows of C compared with the double reference: enough to touch every part of a large matrix
// without the cost of a double-precision product of the whole.
constexpr std::int64_t kValidateRows = 16;

template <class T>
void gemm_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out);

template <>
void gemm_reference<float>(const OpProblem& p, const std::vector<const float*>& in, const std::vector<float*>& out) {
  reference::sgemm(static_cast<int>(p.i("m")), static_cast<int>(p.i("n")), static_cast<int>(p.i("k")), in[0], in[1],
                   out[0]);
}

template <>
void gemm_reference<double>(const OpProblem& p, const std::vector<const double*>& in, const std::vector<double*>& out) {
  const std::int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  for (std::int64_t i = 0; i < m; ++i) {
    double* ci = out[0] + i * n;
    std::fill(ci, ci + n, 0.0);
    for (std::int64_t q = 0; q < k; ++q) {
      const double aiq = in[0][i * k + q];
      const double* bq = in[1] + q * n;
      for (std::int64_t j = 0; j < n; ++j) ci[j] += aiq * bq[j];
    }
  }
}

OpProblem gemm_problem(const Params& params) {
  OpProblem p;
  p.op = "gemm";
  p.pass = "forward";
  p.params = params;
  const std::int64_t m = p.i("m"), n = p.i("n"), k = p.i("k");
  p.in = {Tensor{"a", {m, k}, true, {}}, Tensor{"b", {k, n}, false, {}}};
  p.out = {Tensor{"c", {m, n}, true, {}}};
  p.batch = "m";
  p.batch_word = "rows";
  p.validate_entries = kValidateRows;
  p.tolerance = float_tolerance(k);
  p.reduction = "scales with sqrt(k)";
  // Reduced precision: each input (and for bf16 and fp16 the result) is rounded to the type's
  // mantissa, a relative error of up to u each; the products are summed in float32. The error
  // of the result relative to its norm then stays near a few u whatever k is: 8u, plus the
  // float32 tolerance of the sum.
  const std::string dtype = p.params.count("dtype") ? p.s("dtype") : std::string();
  if (dtype == "tf32" || dtype == "bf16" || dtype == "fp16") {
    const int mantissa = dtype == "bf16" ? 7 : 10;
    p.tolerance += rounded_inputs_tolerance(mantissa);
    p.reduction = "8u + the float32 tolerance (sqrt(k)), u = 2^-" + std::to_string(mantissa + 1) + ": " + dtype +
                  " keeps " + std::to_string(mantissa) + " mantissa bits; accumulation in float32";
  }
  p.work = {2 * m * n * k, 4 * (m * k + k * n + m * n)};
  return p;
}

}  // namespace

OperatorDef gemm_operator() {
  OperatorDef d;
  d.info = operator_info("gemm", "float32 matrix multiply C = A*B (A m x k, B k x n), row-major", "GFLOP/s",
                         "multiplies its own matrices");
  const Value minus_one{std::int64_t{-1}};
  // A table: one entry a line, as written.
  // clang-format off
  d.info.params = {
      {"shape", ValueType::String, Value{std::string()}, 0, 0, shape_names(deepbench_gemms()),
       "a named problem (deepbench/...) giving m, n, k; \"\": give them directly"},
      {"n", ValueType::Int, minus_one, 1, 65536, {}, "columns of C (and m, k unless given)"},
      {"m", ValueType::Int, minus_one, -1, 65536, {}, "rows of C; -1: same as n"},
      {"k", ValueType::Int, minus_one, -1, 65536, {}, "inner dimension; -1: same as n"},
      {"dtype", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "tf32", "bf16", "fp16"},
       "element type: unset or fp32, float32; tf32 (float32 in and out, inputs rounded to TF32 by tensor cores), bf16 and fp16 "
       "(inputs and C in that type), each accumulating in float32, on a backend with reduced precision (cuda)",
       "fp32"},
  };
  // clang-format on
  d.info.normalize = [](Params& p) {
    apply_named_shape(p, deepbench_gemms());
    if (std::get<std::string>(p.at("dtype")) == "fp32") p["dtype"] = std::string();  // one point id for float32
    for (const char* dim : {"m", "k"})
      if (std::get<std::int64_t>(p.at(dim)) == -1) p[dim] = p.at("n");
  };
  d.info.check = [](const Params& p) -> std::string {
    std::string why = check_named_shape(p, deepbench_gemms());
    if (!why.empty()) return why;
    if (std::get<std::int64_t>(p.at("n")) <= 0)
      return "'n' must be given (a positive size) unless 'shape' names a problem";
    for (const char* dim : {"m", "k"})
      if (std::get<std::int64_t>(p.at(dim)) <= 0) return std::string(dim) + " must be positive, or -1 for 'same as n'";
    if (const auto m = p.find("math"); m != p.end() && !std::get<std::string>(m->second).empty())
      return "'math' is for conv2d and networks; gemm's element type is its own key: dtype = \"" +
             std::get<std::string>(m->second) + "\" (valid: fp32, tf32, bf16, fp16)";
    return reduced_precision_check(p);
  };
  d.problem = gemm_problem;
  d.ref_float = gemm_reference<float>;
  d.ref_double = gemm_reference<double>;
  return d;
}

}  // namespace d500
