// pool2d: max and average pooling over square windows, forward and backward.
#include "backends/reference/nn.hpp"
#include "workloads/level0/operator.hpp"

namespace d500 {

namespace {

template <class T>
void pool_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out) {
  const PoolShape ps = pool_shape(p);
  if (p.pass == "forward")
    reference::pool2d_forward(ps, in[0], out[0]);
  else
    reference::pool2d_backward(ps, in[0], in[1], out[0]);
}

OpProblem pool_problem(const Params& params) {
  OpProblem p;
  p.op = "pool2d";
  p.params = params;
  p.pass = p.s("pass");
  const PoolShape ps = pool_shape(p);
  Tensor x{"x", {ps.n, ps.c, ps.h, ps.w}, true, {}}, y{"y", {ps.n, ps.c, ps.p(), ps.q()}, true, {}};
  if (p.pass == "forward") {
    p.in = {x};
    p.out = {y};
  } else {
    // The backward pass takes x as well: the frameworks find the maxima from it (PyTorch) or from
    // a workspace the forward pass wrote (oneDNN); average pooling does not read it.
    y.name = "dy";
    x.name = "x";
    Tensor dx = x;
    dx.name = "dx";
    p.in = {x, y};
    p.out = {dx};
  }
  // A max is exact; an average rounds once per term and once in the division.
  p.tolerance = float_tolerance(ps.kernel * ps.kernel);
  p.reduction = "scales with sqrt(kernel^2)";
  const std::int64_t xs = ps.n * ps.c * ps.h * ps.w, ys = ps.n * ps.c * ps.p() * ps.q();
  p.work = {ys * ps.kernel * ps.kernel, 4 * (p.pass == "forward" ? xs + ys : 2 * xs + ys)};
  return p;
}

}  // namespace

OperatorDef pool2d_operator() {
  OperatorDef d;
  d.info = operator_info("pool2d", "float32 2-D max or average pooling (NCHW, square window), forward / backward",
                         "GB/s", "pools its own batch");
  WorkloadInfo& w = d.info;
  // A table: one entry a line, as written.
  // clang-format off
  w.params = {
      {"pass", ValueType::String, Value{std::string("forward")}, 0, 0, {"forward", "backward"}, "which pass"},
      {"mode", ValueType::String, Value{std::string("max")}, 0, 0, {"max", "avg"},
       "max, or average over the window's elements inside the image (padding not counted)"},
      {"kernel", ValueType::Int, Value{std::int64_t{3}}, 1, 1024, {}, "window height and width"},
      {"stride", ValueType::Int, Value{std::int64_t{2}}, 1, 1024, {}, "stride along both axes"},
      {"pad", ValueType::Int, Value{std::int64_t{0}}, 0, 512, {}, "padding on every side"},
  };
  // clang-format on
  for (auto& s : nchw_params()) w.params.push_back(s);
  w.normalize = width_defaults_to_height;
  w.check = [](const Params& p) -> std::string {
    auto i = [&](const char* k) { return std::get<std::int64_t>(p.at(k)); };
    if (2 * i("pad") > i("kernel"))
      return "padding " + std::to_string(i("pad")) + " is more than half the window (" + std::to_string(i("kernel")) +
             "): windows would lie in the padding (PyTorch and oneDNN refuse it too)";
    if (i("kernel") > std::min(i("h"), i("w")) + 2 * i("pad"))
      return "the window (" + std::to_string(i("kernel")) + ") is larger than the padded input";
    return "";
  };
  d.problem = pool_problem;
  d.ref_float = pool_reference<float>;
  d.ref_double = pool_reference<double>;
  return d;
}

}  // namespace d500
