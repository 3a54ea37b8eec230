// relu and softmax: the elementwise and the row-wise activation, forward and backward.
#include "backends/reference/nn.hpp"
#include "workloads/level0/operator.hpp"

namespace d500 {

namespace {

ParamSpec pass_param() {
  return {"pass", ValueType::String, Value{std::string("forward")}, 0, 0, {"forward", "backward"}, "which pass"};
}

// relu: forward x -> y; backward x, dy -> dx.
template <class T>
void relu_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out) {
  const std::int64_t count = nchw_shape(p).size();
  if (p.pass == "forward")
    reference::relu_forward(count, in[0], out[0]);
  else
    reference::relu_backward(count, in[0], in[1], out[0]);
}

OpProblem relu_problem(const Params& params) {
  OpProblem p;
  p.op = "relu";
  p.params = params;
  p.pass = p.s("pass");
  const Nchw d = nchw_shape(p);
  auto t = [&](const char* name) { return Tensor{name, {d.n, d.c, d.h, d.w}, true, {}}; };
  if (p.pass == "forward")
    p.in = {t("x")}, p.out = {t("y")};
  else
    p.in = {t("x"), t("dy")}, p.out = {t("dx")};
  p.tolerance = 0;  // exact: a selection, no arithmetic
  p.reduction = "0: relu is exact";
  p.work = {d.size(), 4 * d.size() * static_cast<std::int64_t>(p.in.size() + 1)};
  return p;
}

// softmax over the last axis of an n x c matrix: forward x -> y; backward y, dy -> dx.
template <class T>
void softmax_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out) {
  if (p.pass == "forward")
    reference::softmax_forward(p.i("n"), p.i("c"), in[0], out[0]);
  else
    reference::softmax_backward(p.i("n"), p.i("c"), in[0], in[1], out[0]);
}

OpProblem softmax_problem(const Params& params) {
  OpProblem p;
  p.op = "softmax";
  p.params = params;
  p.pass = p.s("pass");
  const std::int64_t n = p.i("n"), c = p.i("c");
  auto t = [&](const char* name) { return Tensor{name, {n, c}, true, {}}; };
  if (p.pass == "forward")
    p.in = {t("x")}, p.out = {t("y")};
  else
    p.in = {t("y"), t("dy")}, p.out = {t("dx")};
  p.tolerance = float_tolerance(c);
  p.reduction = "scales with sqrt(c)";
  p.work = {(p.pass == "forward" ? 5 : 4) * n * c, 4 * n * c * static_cast<std::int64_t>(p.in.size() + 1)};
  return p;
}

// The backward pass takes the forward's output: a real softmax of random logits.
void softmax_derive(const OpProblem& p, std::vector<std::vector<double>>& in) {
  if (p.pass != "backward") return;
  std::vector<double> x = in[0];
  reference::softmax_forward(p.i("n"), p.i("c"), x.data(), in[0].data());
}

}  // namespace

OperatorDef relu_operator() {
  OperatorDef d;
  d.info = operator_info("relu", "float32 ReLU y = max(x, 0) over an NCHW tensor, forward / backward", "GB/s",
                         "applies it to its own tensor");
  WorkloadInfo& w = d.info;
  w.params = {pass_param()};
  for (auto& s : nchw_params()) w.params.push_back(s);
  w.normalize = width_defaults_to_height;
  d.problem = relu_problem;
  d.ref_float = relu_reference<float>;
  d.ref_double = relu_reference<double>;
  return d;
}

OperatorDef softmax_operator() {
  OperatorDef d;
  d.info =
      operator_info("softmax", "float32 softmax over the last axis of an n x c matrix (c classes), forward / backward",
                    "GB/s", "applies it to its own matrix");
  WorkloadInfo& w = d.info;
  w.params = {
      pass_param(),
      {"n", ValueType::Int, std::nullopt, 1, 1 << 24, {}, "rows (batch)"},
      {"c", ValueType::Int, std::nullopt, 1, 1 << 24, {}, "columns (classes)"},
  };
  d.problem = softmax_problem;
  d.derive = softmax_derive;
  d.ref_float = softmax_reference<float>;
  d.ref_double = softmax_reference<double>;
  return d;
}

}  // namespace d500
