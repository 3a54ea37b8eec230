// batchnorm: batch normalisation over (N, H, W) per channel, training and inference.
#include <cmath>

#include "backends/reference/nn.hpp"
#include "workloads/level0/operator.hpp"

namespace d500 {

namespace {

double eps_of(const OpProblem& p) { return std::get<double>(p.params.at("eps")); }

// Inputs and outputs, in order:
//   forward training:  x, gamma, beta            -> y, mean, var (the batch statistics)
//   forward inference: x, gamma, beta, mean, var -> y
//   backward:          x, dy, gamma, mean, var   -> dx, dgamma, dbeta
template <class T>
void bn_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out) {
  const Nchw d = nchw_shape(p);
  const double eps = eps_of(p);
  if (p.pass == "backward")
    reference::batchnorm_backward(d, eps, in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2]);
  else if (p.s("mode") == "training")
    reference::batchnorm_forward_training(d, eps, in[0], in[1], in[2], out[0], out[1], out[2]);
  else
    reference::batchnorm_normalize(d, eps, in[0], in[1], in[2], in[3], in[4], out[0]);
}

OpProblem bn_problem(const Params& params) {
  OpProblem p;
  p.op = "batchnorm";
  p.params = params;
  p.pass = p.s("pass");
  const Nchw d = nchw_shape(p);
  const bool training = p.s("mode") == "training";
  auto act = [&](const char* name, bool batched) { return Tensor{name, {d.n, d.c, d.h, d.w}, batched, {}}; };
  auto chan = [&](const char* name) { return Tensor{name, {d.c}, false, {}}; };
  if (p.pass == "backward") {
    p.in = {act("x", false), act("dy", false), chan("gamma"), chan("mean"), chan("var")};
    p.out = {act("dx", false), chan("dgamma"), chan("dbeta")};
  } else if (training) {
    // y depends on the whole batch through its statistics: not independent across images.
    p.in = {act("x", false), chan("gamma"), chan("beta")};
    p.out = {act("y", false), chan("mean"), chan("var")};
  } else {
    p.in = {act("x", true), chan("gamma"), chan("beta"), chan("mean"), chan("var")};
    p.out = {act("y", true)};
  }
  const std::int64_t m = d.n * d.plane();
  p.tolerance = float_tolerance(training || p.pass == "backward" ? m : 1);
  p.reduction = training || p.pass == "backward" ? "scales with sqrt(N * H * W)" : "elementwise (floor 1e-5)";
  // Minimum traffic: every activation tensor read or written once.
  std::int64_t bytes = 0;
  for (const auto& t : p.in) bytes += 4 * t.numel();
  for (const auto& t : p.out) bytes += 4 * t.numel();
  const std::int64_t per_element = p.pass == "backward" ? 10 : training ? 7 : 4;
  p.work = {per_element * d.size(), bytes};
  return p;
}

// Statistics must be what they claim: a positive variance, and for the backward pass the
// statistics of x itself (the frameworks take them from the forward pass).
void bn_derive(const OpProblem& p, std::vector<std::vector<double>>& in) {
  const Nchw d = nchw_shape(p);
  if (p.pass == "backward") {
    reference::batchnorm_statistics(d, in[0].data(), in[3].data(), in[4].data());
  } else if (p.s("mode") == "inference") {
    for (auto& v : in[4]) v = std::fabs(v) + 0.5;
  }
}

}  // namespace

OperatorDef batchnorm_operator() {
  OperatorDef d;
  d.info = operator_info(
      "batchnorm",
      "float32 batch normalisation (NCHW, per channel, scale and shift), training / inference, forward / backward",
      "GB/s", "normalises its own batch");
  WorkloadInfo& w = d.info;
  // A table: one entry a line, as written.
  // clang-format off
  w.params = {
      {"pass", ValueType::String, Value{std::string("forward")}, 0, 0, {"forward", "backward"}, "which pass"},
      {"mode", ValueType::String, Value{std::string("training")}, 0, 0, {"training", "inference"},
       "training: batch statistics (outputs too); inference: given mean and variance"},
      {"eps", ValueType::Real, Value{1e-5}, 0, 0, {}, "added to the variance"},
  };
  // clang-format on
  for (auto& s : nchw_params()) w.params.push_back(s);
  w.normalize = width_defaults_to_height;
  w.check = [](const Params& p) -> std::string {
    if (!(std::get<double>(p.at("eps")) > 0)) return "'eps' must be positive";
    if (std::get<std::string>(p.at("pass")) == "backward" && std::get<std::string>(p.at("mode")) == "inference")
      return "the backward pass is benchmarked in training mode (through the batch statistics): set mode = \"training\"";
    return "";
  };
  d.problem = bn_problem;
  d.derive = bn_derive;
  d.ref_float = bn_reference<float>;
  d.ref_double = bn_reference<double>;
  return d;
}

}  // namespace d500
