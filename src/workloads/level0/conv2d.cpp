// conv2d: 2-D convolution, forward and both backward passes, grouped, strided, padded, dilated.
#include "backends/reference/nn.hpp"
#include "common/parallel.hpp"
#include "workloads/level0/operator.hpp"
#include "workloads/level0/shape_sets.hpp"

namespace d500 {

namespace {

template <class T>
void conv_reference(const OpProblem& p, const std::vector<const T*>& in, const std::vector<T*>& out) {
  const ConvShape cs = conv_shape(p);
  if (p.pass == "forward")
    reference::conv2d_forward(cs, in[0], in[1], out[0]);
  else if (p.pass == "backward_data")
    reference::conv2d_backward_data(cs, in[0], in[1], out[0]);
  else
    reference::conv2d_backward_filter(cs, in[0], in[1], out[0]);
}

// The yardstick of validation, outside every timed region. The forward and backward-filter
// passes split the output channels between the cores this rank may run on: each output entry is
// still summed by one thread in the one order, so the result is the single-threaded one, bit for
// bit. (Backward-data sums over output channels, so it stays on one thread; validation compares a
// slice of the batch there, while backward-filter's dw needs the whole batch.)
void conv_reference_double(const OpProblem& p, const std::vector<const double*>& in, const std::vector<double*>& out) {
  const ConvShape cs = conv_shape(p);
  const std::int64_t threads = cs.flops() > 1e8 ? std::min<std::int64_t>({rank_cores(), cs.k, 64}) : 1;
  if (p.pass == "backward_data" || threads <= 1) return conv_reference<double>(p, in, out);
  const bool forward = p.pass == "forward";
  double* o = out[0];
  std::fill(o, o + (forward ? cs.y_size() : cs.w_size()), 0.0);
  parallel_ranges(cs.k, threads, [&](std::int64_t k0, std::int64_t k1) {
    if (forward)
      reference::conv2d_forward_channels(cs, in[0], in[1], o, k0, k1);
    else
      reference::conv2d_backward_filter_channels(cs, in[0], in[1], o, k0, k1);
  });
}

OpProblem conv_problem(const Params& params) {
  OpProblem p;
  p.op = "conv2d";
  p.params = params;
  p.pass = p.s("pass");
  const ConvShape cs = conv_shape(p);
  const Tensor x{"x", {cs.n, cs.c, cs.h, cs.w}, true, {}}, w{"w", {cs.k, cs.cg(), cs.r, cs.s}, false, {}},
      y{"y", {cs.n, cs.k, cs.p(), cs.q()}, true, {}};
  auto named = [](Tensor t, const char* name) { return t.name = name, t; };
  std::int64_t terms = 0;
  if (p.pass == "forward") {
    p.in = {x, w};
    p.out = {y};
    terms = cs.cg() * cs.r * cs.s;
    p.reduction = "scales with sqrt(C/groups * R * S)";
  } else if (p.pass == "backward_data") {
    p.in = {named(y, "dy"), w};
    p.out = {named(x, "dx")};
    terms = cs.kg() * cs.r * cs.s;
    p.reduction = "scales with sqrt(K/groups * R * S)";
  } else {
    p.in = {x, named(y, "dy")};
    Tensor dw = named(w, "dw");
    p.out = {dw};
    terms = cs.n * cs.p() * cs.q();
    p.reduction = "scales with sqrt(N * P * Q)";
  }
  p.tolerance = float_tolerance(terms);
  const std::string dtype = p.params.count("dtype") ? p.s("dtype") : std::string();
  if (tf32_math(p.params)) {  // tensor cores round x, w and dy to TF32; the sums stay float32
    p.tolerance += rounded_inputs_tolerance(10);
    p.reduction =
        "8u, u = 2^-11 (math = tf32: inputs rounded to TF32's 10 mantissa bits), + the float32 tolerance that " +
        p.reduction;
  } else if (dtype == "bf16" || dtype == "fp16") {
    // The inputs (8u: each a relative error of up to u) and the result (u) rounded to the type;
    // the sums in float32.
    const int mantissa = dtype == "bf16" ? 7 : 10;
    p.tolerance += rounded_inputs_and_result_tolerance(mantissa);
    p.reduction = "9u, u = 2^-" + std::to_string(mantissa + 1) + " (dtype = " + dtype + ": inputs and result in " +
                  std::to_string(mantissa) + " mantissa bits, sums in float32), + the float32 tolerance that " +
                  p.reduction;
  }
  const std::int64_t element_bytes = dtype == "bf16" || dtype == "fp16" ? 2 : 4;
  p.work = {cs.flops(), element_bytes * (cs.x_size() + cs.w_size() + cs.y_size())};
  return p;
}

// Sizes a named shape may give: -1 (the default, never written in a campaign) means "not given".
ParamSpec size(const char* name, const char* help, std::int64_t min = 1) {
  return {name, ValueType::Int, Value{std::int64_t{-1}}, min, 1 << 20, {}, help};
}

}  // namespace

OperatorDef conv2d_operator() {
  OperatorDef d;
  d.info = operator_info(
      "conv2d",
      "2-D convolution (NCHW, weights KCRS; float32, or bf16/fp16 with dtype), forward / backward_data / backward_filter",
      "GFLOP/s", "convolves its own batch");
  WorkloadInfo& w = d.info;
  // A table: one entry a line, as written.
  // clang-format off
  w.params = {
      {"pass", ValueType::String, Value{std::string("forward")}, 0, 0, {"forward", "backward_data", "backward_filter"},
       "which pass: y = conv(x, w), dx from dy, or dw from dy"},
      {"shape", ValueType::String, Value{std::string()}, 0, 0, shape_names(resnet50_convolutions()),
       "a named layer (resnet50/...) giving c, h, w, k, r, s, stride, pad; \"\": give them directly"},
      {"n", ValueType::Int, std::nullopt, 1, 1 << 20, {}, "batch size"},
      size("c", "input channels"),
      size("h", "input height"),
      size("w", "input width; default: same as h"),
      size("k", "output channels"),
      size("r", "kernel height"),
      size("s", "kernel width; default: same as r"),
      size("stride", "stride along both axes; default 1"),
      size("pad", "zero padding on every side; default 0", 0),
      {"dilation", ValueType::Int, Value{std::int64_t{1}}, 1, 64, {}, "dilation along both axes"},
      {"groups", ValueType::Int, Value{std::int64_t{1}}, 1, 1 << 20, {}, "groups (c and k must be multiples)"},
      {"dtype", ValueType::String, Value{std::string()}, 0, 0, {"fp32", "bf16", "fp16"},
       "element type of x, w, y and their gradients: unset or fp32, float32; bf16 and fp16 (the tensors in that type, the sums "
       "in float32: cuDNN's pseudo-bfloat16 and pseudo-half configurations, PyTorch's conv2d on such tensors), on a backend "
       "with reduced precision (cuda, through cuDNN's legacy calls or its graph API); validation allows 9u more (u = 2^-8, 2^-11)",
       "fp32"},
  };
  // clang-format on
  w.normalize = [](Params& p) {
    apply_named_shape(p, resnet50_convolutions());
    width_defaults_to_height(p);
    auto dflt = [&](const char* key, const Value& v) {
      if (std::get<std::int64_t>(p.at(key)) == -1) p[key] = v;
    };
    dflt("s", p.at("r"));
    dflt("stride", Value{std::int64_t{1}});
    dflt("pad", Value{std::int64_t{0}});
    if (std::get<std::string>(p.at("dtype")) == "fp32") p["dtype"] = std::string();  // one point id for float32
  };
  w.check = [](const Params& p) -> std::string {
    std::string why = check_named_shape(p, resnet50_convolutions());
    if (!why.empty()) return why;
    for (const char* key : {"c", "h", "k", "r"})
      if (std::get<std::int64_t>(p.at(key)) <= 0)
        return std::string("'") + key + "' must be given (a positive size) unless 'shape' names a layer";
    auto i = [&](const char* k) { return std::get<std::int64_t>(p.at(k)); };
    if (i("c") % i("groups") || i("k") % i("groups"))
      return "c (" + std::to_string(i("c")) + ") and k (" + std::to_string(i("k")) + ") must be multiples of groups (" +
             std::to_string(i("groups")) + ")";
    const ConvShape cs{i("n"), i("c"),      i("h"),   i("w"),        i("k"),     i("r"),
                       i("s"), i("stride"), i("pad"), i("dilation"), i("groups")};
    if (cs.p() < 1 || cs.q() < 1)
      return "the dilated kernel (" + std::to_string(cs.dilation * (cs.r - 1) + 1) + "x" +
             std::to_string(cs.dilation * (cs.s - 1) + 1) + ") does not fit the padded input";
    if (cs.pad >= cs.dilation * (std::max(cs.r, cs.s) - 1) + 1)
      return "padding " + std::to_string(cs.pad) + " is as large as the kernel: some outputs would see only padding";
    if (const std::string& dtype = std::get<std::string>(p.at("dtype")); !dtype.empty()) {
      if (const auto m = p.find("math"); m != p.end() && m->second == Value{std::string("tf32")})
        return "'math' \"tf32\" rounds float32 data; with dtype = \"" + dtype + "\" the tensor cores take " + dtype +
               " as it is: leave math unset";
      return reduced_precision_check(p);
    }
    return "";
  };
  d.problem = conv_problem;
  d.ref_float = conv_reference<float>;
  d.ref_double = conv_reference_double;
  return d;
}

}  // namespace d500
