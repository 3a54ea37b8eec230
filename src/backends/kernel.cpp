#include "backends/kernel.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace d500 {

double float_tolerance(double terms) { return 1e-6 * std::max(10.0, 4.0 * std::sqrt(std::max(terms, 1.0))); }

double rounded_inputs_tolerance(int mantissa_bits) { return 8 * std::ldexp(1.0, -(mantissa_bits + 1)); }

double rounded_inputs_and_result_tolerance(int mantissa_bits) {
  return rounded_inputs_tolerance(mantissa_bits) + std::ldexp(1.0, -(mantissa_bits + 1));
}

std::string point_math(const Params& p) {
  const auto it = p.find("math");
  if (it == p.end() || !std::holds_alternative<std::string>(it->second)) return "fp32";
  const auto& m = std::get<std::string>(it->second);
  return m.empty() ? "fp32" : m;
}

bool tf32_math(const Params& p) { return point_math(p) == "tf32"; }
bool bf16_math(const Params& p) { return point_math(p) == "bf16"; }

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

const Tensor& OpProblem::input(const std::string& name) const {
  for (const auto& t : in)
    if (t.name == name) return t;
  throw Error(op + ": no input tensor '" + name + "'");
}

Tensor& OpProblem::output(const std::string& name) {
  for (auto& t : out)
    if (t.name == name) return t;
  throw Error(op + ": no output tensor '" + name + "'");
}

ConvShape conv_shape(const OpProblem& p) {
  return {p.i("n"), p.i("c"),      p.i("h"),   p.i("w"),        p.i("k"),     p.i("r"),
          p.i("s"), p.i("stride"), p.i("pad"), p.i("dilation"), p.i("groups")};
}

PoolShape pool_shape(const OpProblem& p) {
  return {p.i("n"), p.i("c"), p.i("h"), p.i("w"), p.i("kernel"), p.i("stride"), p.i("pad"), p.s("mode") == "max"};
}

Nchw nchw_shape(const OpProblem& p) { return {p.i("n"), p.i("c"), p.i("h"), p.i("w")}; }

}  // namespace d500
