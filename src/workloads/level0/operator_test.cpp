// Every backend's kernel for every operator and pass, on small awkward shapes, validated against
// the double reference exactly as the worker does before timing; and the validation itself
// shown to reject wrong outputs.
#include "workloads/level0/operator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backends/half.hpp"
#include "backends/reference/nn.hpp"
#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "common/error.hpp"
#include "common/parallel.hpp"
#include "workloads/level0/shape_sets.hpp"

namespace d500 {

// The custom backend's plan-time check of a library for an operator.
std::string check_custom_library(const std::string& path, const std::string& op) {
  return find_backend("custom")->check_point({{"library", Value{path}}, {"workload", Value{op}}});
}

namespace {

Params params_for(const OperatorDef& d, const std::map<std::string, Value>& over) {
  Params p;
  for (const auto& s : d.info.params)
    if (s.dflt) p[s.name] = *s.dflt;
  for (const auto& s : operator_common_params()) p[s.name] = *s.dflt;
  p["workload"] = Value{d.info.name};
  p["backend"] = Value{std::string("reference")};
  for (const auto& [k, v] : over) p[k] = v;
  if (d.info.normalize) d.info.normalize(p);
  return p;
}

Value I(std::int64_t v) { return Value{v}; }
Value S(const char* v) { return Value{std::string(v)}; }

struct Case {
  std::string name;
  std::string op;
  std::map<std::string, Value> params;
};
// How a case prints (gtest's listing, hence ctest's names): its operator and parameters, not
// the bytes of the struct.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.op;
  for (const auto& [k, v] : c.params) *os << " " << k << "=" << canonical(v);
}

std::vector<Case> cases() {
  const std::map<std::string, Value> conv{{"n", I(3)}, {"c", I(4)},      {"h", I(9)},   {"w", I(8)},     {"k", I(6)},
                                          {"r", I(3)}, {"stride", I(2)}, {"pad", I(1)}, {"groups", I(2)}};
  std::map<std::string, Value> dil = conv, one = conv;
  dil["dilation"] = I(2), dil["groups"] = I(1), dil["stride"] = I(1);
  one["r"] = I(1), one["stride"] = I(1), one["pad"] = I(0), one["groups"] = I(1);
  std::vector<Case> out;
  // GEMM: non-square, and tall enough (m = 40 rows) that validation compares 16 of its rows.
  out.push_back({"gemm_nonsquare", "gemm", {{"m", I(67)}, {"n", I(45)}, {"k", I(33)}}});
  out.push_back({"gemm_rows_sampled", "gemm", {{"m", I(40)}, {"n", I(7)}, {"k", I(300)}}});
  for (const char* pass : {"forward", "backward_data", "backward_filter"}) {
    auto with = [&](std::map<std::string, Value> m) { return m["pass"] = S(pass), m; };
    out.push_back({std::string("conv_grouped_strided_") + pass, "conv2d", with(conv)});
    out.push_back({std::string("conv_dilated_") + pass, "conv2d", with(dil)});
    out.push_back({std::string("conv_1x1_") + pass, "conv2d", with(one)});
  }
  for (const char* mode : {"max", "avg"})
    for (const char* pass : {"forward", "backward"})
      out.push_back({std::string("pool_") + mode + "_" + pass,
                     "pool2d",
                     {{"n", I(3)},
                      {"c", I(5)},
                      {"h", I(9)},
                      {"kernel", I(3)},
                      {"stride", I(2)},
                      {"pad", I(1)},
                      {"mode", S(mode)},
                      {"pass", S(pass)}}});
  const std::map<std::string, Value> bn{{"n", I(4)}, {"c", I(3)}, {"h", I(5)}};
  out.push_back({"bn_training_forward", "batchnorm", bn});
  auto bn_inf = bn;
  bn_inf["mode"] = S("inference");
  out.push_back({"bn_inference_forward", "batchnorm", bn_inf});
  auto bn_bwd = bn;
  bn_bwd["pass"] = S("backward");
  out.push_back({"bn_backward", "batchnorm", bn_bwd});
  for (const char* pass : {"forward", "backward"}) {
    out.push_back(
        {std::string("relu_") + pass, "relu", {{"n", I(2)}, {"c", I(3)}, {"h", I(4)}, {"w", I(5)}, {"pass", S(pass)}}});
    out.push_back({std::string("softmax_") + pass, "softmax", {{"n", I(5)}, {"c", I(37)}, {"pass", S(pass)}}});
  }
  return out;
}

class OperatorBackends : public ::testing::TestWithParam<Case> {};

TEST_P(OperatorBackends, EveryBackendMatchesTheReference) {
  const Case& c = GetParam();
  const OperatorDef* def = find_operator(c.op);
  ASSERT_NE(def, nullptr);
  const Params p = params_for(*def, c.params);
  if (def->info.check) {
    ASSERT_EQ(def->info.check(p), "") << c.name;
  }
  int backends = 0;
  std::vector<std::string> absent;
  for (const auto& src : all_backends()) {
    if (src.name == "custom" || src.name == "reference") continue;
    if (!src.built) {
      absent.push_back(src.name + " (" + src.not_built_reason + ")");
      continue;
    }
    if (!src.supports || !src.supports(c.op)) continue;
    if (src.no_device && !src.no_device().empty()) {  // built, but this host has no device to run it
      absent.push_back(src.name + " (built, no device: " + src.no_device() + ")");
      continue;
    }
    SCOPED_TRACE(src.name);
    OpProblem prob = make_problem(*def, p, 42);
    try {
      auto kernel = src.make_kernel(prob, 1);
      kernel->run();
      kernel->finish();
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << " on " << src.name << ": " << e.what();
      continue;
    }
    const Validation v = validate_outputs(*def, prob);
    EXPECT_LE(v.rel_error, v.tolerance) << c.name << " on " << src.name << ": " << v.method;
    ++backends;

    // The same outputs with one wrong value in the last image are rejected.
    Tensor& out = prob.out[0];
    out.data.back() += 1.0f;
    EXPECT_GT(validate_outputs(*def, prob).rel_error, v.tolerance) << c.name << " on " << src.name;
  }
  // Every operator has a kernel on oneDNN or LibTorch; a build with neither runs it on the
  // reference alone, which the other tests cover. Required backends are checked apart
  // (RequiredBackends.AreBuilt), so a library that silently goes missing still fails CI.
  if (backends == 0 && !absent.empty())
    GTEST_SKIP() << "no backend of this build besides the reference runs " << c.op
                 << "; not built: " << ::testing::PrintToString(absent);
  EXPECT_GE(backends, 1) << "no backend besides the reference runs " << c.op;
}

INSTANTIATE_TEST_SUITE_P(Operators, OperatorBackends, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(OperatorValidation, TheFloatReferencePassesAndTheBatchIsCutForLargeBatches) {
  const OperatorDef* def = find_operator("conv2d");
  const Params p = params_for(*def, {{"n", I(5)}, {"c", I(3)}, {"h", I(6)}, {"k", I(4)}, {"r", I(3)}, {"pad", I(1)}});
  OpProblem prob = make_problem(*def, p, 7);
  std::vector<const float*> in;
  std::vector<float*> out;
  for (auto& t : prob.in) in.push_back(t.data.data());
  for (auto& t : prob.out) out.push_back(t.data.data());
  def->ref_float(prob, in, out);
  const Validation v = validate_outputs(*def, prob);
  EXPECT_LE(v.rel_error, v.tolerance);
  EXPECT_NE(v.method.find("images 1 and 5 of 5"), std::string::npos) << v.method;
  EXPECT_GT(v.rel_error, 0.0);  // float against double: never bit-identical on this size
}

// The yardstick splits a large convolution's output channels between this rank's cores; each
// output entry is still one thread's sum in the one order, so the double result is the plain
// single-threaded loop's, bit for bit (37 channels: ranges of unequal length).
TEST(OperatorValidation, TheYardsticksConvolutionOnSeveralCoresIsTheOneCoreResultBitForBit) {
  if (rank_cores() < 2) GTEST_SKIP() << "this process may run on one core only: nothing is split";
  const OperatorDef* def = find_operator("conv2d");
  for (const char* pass : {"forward", "backward_filter", "backward_data"}) {
    SCOPED_TRACE(pass);
    const Params p = params_for(*def, {{"n", I(8)},
                                       {"c", I(32)},
                                       {"h", I(28)},
                                       {"k", I(37)},
                                       {"r", I(3)},
                                       {"pad", I(1)},
                                       {"stride", I(1)},
                                       {"pass", S(pass)}});
    OpProblem prob = make_problem(*def, p, 5);
    std::vector<std::vector<double>> in, out, whole;
    std::vector<const double*> inp;
    std::vector<double*> outp;
    for (const auto& t : prob.in) in.emplace_back(t.data.begin(), t.data.end());
    for (const auto& v : in) inp.push_back(v.data());
    out.emplace_back(static_cast<std::size_t>(prob.out[0].numel()), -1.0);
    outp.push_back(out[0].data());
    def->ref_double(prob, inp, outp);
    std::vector<double> one(out[0].size(), -2.0);
    const ConvShape cs{8, 32, 28, 28, 37, 3, 3, 1, 1, 1, 1};
    ASSERT_GT(cs.flops(), 1e8) << "large enough to be split";
    if (std::string(pass) == "forward")
      reference::conv2d_forward(cs, inp[0], inp[1], one.data());
    else if (std::string(pass) == "backward_filter")
      reference::conv2d_backward_filter(cs, inp[0], inp[1], one.data());
    else
      reference::conv2d_backward_data(cs, inp[0], inp[1], one.data());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &out[0][i], sizeof(double)) != 0;
    EXPECT_EQ(differ, 0u) << "of " << one.size();
  }
}

TEST(OperatorValidation, GemmComparesSixteenRowsSpreadOverATallMatrix) {
  const OperatorDef* def = find_operator("gemm");
  OpProblem prob = make_problem(*def, params_for(*def, {{"m", I(100)}, {"n", I(5)}, {"k", I(4)}}), 2);
  std::vector<const float*> in{prob.in[0].data.data(), prob.in[1].data.data()};
  std::vector<float*> out{prob.out[0].data.data()};
  def->ref_float(prob, in, out);
  Validation v = validate_outputs(*def, prob);
  EXPECT_LE(v.rel_error, v.tolerance);
  EXPECT_NE(v.method.find("rows 1, 7, 14,"), std::string::npos) << v.method;
  EXPECT_NE(v.method.find("and 100 of 100"), std::string::npos) << v.method;
  // A wrong value in a compared row (row 7, index 6) fails; one in a row not compared cannot be seen.
  prob.out[0].data[6 * 5 + 2] += 0.5f;
  EXPECT_GT(validate_outputs(*def, prob).rel_error, v.tolerance);
  prob.out[0].data[6 * 5 + 2] -= 0.5f;
  prob.out[0].data[1 * 5 + 2] += 0.5f;
  EXPECT_LE(validate_outputs(*def, prob).rel_error, v.tolerance);
}

// The backends this build must have: D500_REQUIRE_BACKENDS (comma-separated) is set by the
// Debian CI (tests/run.sh), so a library that goes missing fails there instead of being skipped.
TEST(RequiredBackends, AreBuilt) {
  const char* env = std::getenv("D500_REQUIRE_BACKENDS");
  if (!env || !*env) GTEST_SKIP() << "D500_REQUIRE_BACKENDS is not set: no backend is required of this build";
  // "=a,b": exactly these are built (the minimal variant: nothing optional slipped in).
  const bool exactly = env[0] == '=';
  std::vector<std::string> names;
  for (std::string rest = env + (exactly ? 1 : 0); !rest.empty();) {
    const auto comma = rest.find(',');
    names.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  for (const auto& name : names) {
    const BackendInfo* b = find_backend(name);
    ASSERT_NE(b, nullptr) << "D500_REQUIRE_BACKENDS names '" << name << "', which d500 does not know";
    EXPECT_TRUE(b->built) << "backend '" << name << "' is required but not built: " << b->not_built_reason;
    // Built into a module that does not load here is as missing (its library gone at run time).
    if (b->built) {
      EXPECT_EQ(load_backend(name), "") << "backend '" << name << "' is required, built, but its module does not load";
    }
  }
  if (exactly) {
    for (const BackendInfo& b : all_backends()) {
      EXPECT_TRUE(b.built == (std::find(names.begin(), names.end(), b.name) != names.end()))
          << "backend '" << b.name << "' is " << (b.built ? "built" : "not built") << ", D500_REQUIRE_BACKENDS says "
          << env;
    }
  }
}

TEST(OperatorValidation, NaNFails) {
  const OperatorDef* def = find_operator("softmax");
  OpProblem prob = make_problem(*def, params_for(*def, {{"n", I(2)}, {"c", I(4)}}), 1);
  prob.out[0].data.assign(prob.out[0].data.size(), std::nanf(""));
  const Validation v = validate_outputs(*def, prob);
  EXPECT_FALSE(v.rel_error <= v.tolerance);
}

// conv2d with dtype = "bf16" or "fp16" (cuda: cuDNN's pseudo-bfloat16 / pseudo-half configurations):
// a convolution whose inputs and result are rounded to the type and whose sums run in float32,
// as cuDNN's computes, passes the widened tolerance (9u), says so, and fails float32's; the
// work counts 2-byte elements.
TEST(OperatorValidation, AConvolutionIn16BitTypesPassesItsWidenedToleranceAndFailsFloat32s) {
  const OperatorDef* def = find_operator("conv2d");
  ASSERT_NE(def, nullptr);
  const std::map<std::string, Value> conv{{"n", I(3)}, {"c", I(8)}, {"h", I(9)},  {"w", I(8)},
                                          {"k", I(6)}, {"r", I(3)}, {"pad", I(1)}};
  for (const char* dtype : {"bf16", "fp16"}) {
    for (const char* pass : {"forward", "backward_data", "backward_filter"}) {
      SCOPED_TRACE(std::string(dtype) + " " + pass);
      auto with = [&](const char* type) {
        auto over = conv;
        over["pass"] = S(pass);
        over["dtype"] = S(type);
        return params_for(*def, over);
      };
      const bool bf16 = std::string(dtype) == "bf16";
      auto round = [&](float f) { return bf16 ? from_bf16(to_bf16(f)) : from_half(to_half(f)); };
      OpProblem narrow = make_problem(*def, with(dtype), 5), wide = make_problem(*def, with("fp32"), 5);
      EXPECT_EQ(narrow.work.bytes * 2, wide.work.bytes);
      EXPECT_GT(narrow.tolerance, wide.tolerance + 9 * std::ldexp(1.0, bf16 ? -8 : -11) * 0.99);
      EXPECT_NE(narrow.reduction.find(std::string("dtype = ") + dtype), std::string::npos) << narrow.reduction;
      // cuDNN's arithmetic, emulated: rounded inputs, float32 sums, a rounded result.
      std::vector<std::vector<float>> in;
      for (const auto& t : narrow.in) {
        in.emplace_back(t.data);
        for (float& v : in.back()) v = round(v);
      }
      def->ref_float(narrow, {in[0].data(), in[1].data()}, {narrow.out[0].data.data()});
      for (float& v : narrow.out[0].data) v = round(v);
      const Validation v = validate_outputs(*def, narrow);
      EXPECT_LE(v.rel_error, v.tolerance);
      ASSERT_EQ(wide.in[0].data, narrow.in[0].data) << "the same inputs, whatever the dtype";
      wide.out[0].data = narrow.out[0].data;
      const Validation strict = validate_outputs(*def, wide);
      EXPECT_GT(strict.rel_error, strict.tolerance) << "the 16-bit result fails float32's tolerance";
      for (float& x : narrow.out[0].data) x *= 1.1f;
      EXPECT_GT(validate_outputs(*def, narrow).rel_error, v.tolerance) << "and a result 10% off fails the widened one";
    }
  }
}

TEST(CustomOperator, ACorrectLibraryPassesAndAWrongOneFails) {
  const OperatorDef* def = find_operator("relu");
  for (const char* pass : {"forward", "backward"}) {
    for (bool wrong : {false, true}) {
      const Params p = params_for(*def, {{"n", I(2)},
                                         {"c", I(3)},
                                         {"h", I(4)},
                                         {"pass", S(pass)},
                                         {"backend", S("custom")},
                                         {"library", S(wrong ? D500_CUSTOM_RELU_WRONG : D500_CUSTOM_RELU)}});
      ASSERT_EQ(operator_common_check(p), "");
      OpProblem prob = make_problem(*def, p, 3);
      const BackendInfo* custom = find_backend("custom");
      ASSERT_NE(custom, nullptr);
      auto k = custom->make_kernel(prob, 1);
      k->run();
      const Validation v = validate_outputs(*def, prob);
      if (wrong) {
        EXPECT_GT(v.rel_error, 1e-3) << pass;
      } else {
        EXPECT_EQ(v.rel_error, 0.0) << pass;
      }
    }
  }
}

TEST(CustomOperator, LoadErrorsSayWhatIsWrong) {
  EXPECT_NE(check_custom_library("/nonexistent/libx.so", "relu").find("cannot be loaded"), std::string::npos);
  const std::string other = check_custom_library(D500_CUSTOM_RELU, "conv2d");
  EXPECT_NE(other.find("implements 'relu', not 'conv2d'"), std::string::npos) << other;
  EXPECT_EQ(check_custom_library(D500_CUSTOM_RELU, "relu"), "");
  // A library without the entry point: the C runtime is one.
  EXPECT_NE(check_custom_library("libm.so.6", "relu").find("does not export d500_custom_op_v1"), std::string::npos);
}

TEST(NamedShapes, ResNet50LayersFillTheSizesAndContradictionsAreErrors) {
  const OperatorDef* def = find_operator("conv2d");
  EXPECT_EQ(resnet50_convolutions().size(), 23u);
  int uses = 0;
  for (const auto& s : resnet50_convolutions()) uses += s.count;
  EXPECT_EQ(uses, 53);  // ResNet-50's 49 convolutions on the main path and 4 projection shortcuts
  Params p = params_for(*def, {{"n", I(8)}, {"shape", S("resnet50/res4_3x3_stride2")}});
  EXPECT_EQ(def->info.check(p), "");
  const ConvShape cs{8,
                     std::get<std::int64_t>(p.at("c")),
                     std::get<std::int64_t>(p.at("h")),
                     std::get<std::int64_t>(p.at("w")),
                     std::get<std::int64_t>(p.at("k")),
                     std::get<std::int64_t>(p.at("r")),
                     std::get<std::int64_t>(p.at("s")),
                     std::get<std::int64_t>(p.at("stride")),
                     std::get<std::int64_t>(p.at("pad")),
                     1,
                     1};
  EXPECT_EQ(cs.p(), 14);  // 28x28 -> 14x14
  EXPECT_EQ(cs.c, 256);
  Params bad = params_for(*def, {{"n", I(8)}, {"shape", S("resnet50/conv1")}, {"c", I(4)}});
  EXPECT_NE(def->info.check(bad).find("'c' is 4 but shape \"resnet50/conv1\" has c = 3"), std::string::npos)
      << def->info.check(bad);
  // Every layer's output is whole: stride and padding agree with the sizes.
  for (const auto& s : resnet50_convolutions()) {
    Params q = params_for(*def, {{"n", I(1)}, {"shape", Value{s.name}}});
    EXPECT_EQ(def->info.check(q), "") << s.name;
  }
}

// The memory estimate counts validation's double reference without building its problem: k
// entries of each batched tensor (validate_outputs builds that problem, with the batch set to k,
// and checks that it is that size). For operators whose validation cuts the batch and for those
// whose it cannot (batch normalisation's running statistics are not batched), the estimate is
// the floats, the inputs' double staging and the reference problem validation builds.
TEST(OperatorMemory, TheEstimateCountsTheReferenceProblemValidationBuilds) {
  auto elements = [](const std::vector<Tensor>& ts) {
    double n = 0;
    for (const auto& t : ts) n += static_cast<double>(t.numel());
    return n;
  };
  const std::vector<std::pair<const char*, std::map<std::string, Value>>> cases{
      {"gemm", {{"m", I(100)}, {"n", I(30)}, {"k", I(20)}}},
      {"conv2d", {{"n", I(9)}, {"c", I(4)}, {"h", I(7)}, {"k", I(6)}, {"r", I(3)}, {"pad", I(1)}}},
      {"conv2d", {{"n", I(9)}, {"c", I(4)}, {"h", I(7)}, {"k", I(6)}, {"r", I(3)}, {"pass", S("backward_filter")}}},
      {"pool2d", {{"n", I(9)}, {"c", I(3)}, {"h", I(8)}}},
      {"batchnorm", {{"n", I(9)}, {"c", I(3)}, {"h", I(5)}}},
      {"relu", {{"n", I(9)}, {"c", I(3)}, {"h", I(5)}}},
      {"softmax", {{"n", I(40)}, {"c", I(7)}}}};
  int cut = 0;
  for (const auto& [op, over] : cases) {
    const OperatorDef* def = find_operator(op);
    ASSERT_NE(def, nullptr) << op;
    const Params p = params_for(*def, over);
    const OpProblem full = def->problem(p);
    bool sliceable = !full.out.empty() && p.count(full.batch);
    for (const auto& t : full.out) sliceable = sliceable && t.batched;
    const std::int64_t k = std::max<std::int64_t>(2, full.validate_entries);
    double reference = elements(full.in) + elements(full.out);
    if (sliceable && full.i(full.batch) > k) {
      Params sliced = p;
      sliced[full.batch] = Value{k};
      const OpProblem ref = def->problem(sliced);
      reference = elements(ref.in) + elements(ref.out);
      ++cut;
    }
    const double in = elements(full.in), out = elements(full.out);
    EXPECT_EQ(operator_memory_bytes(*def, p), static_cast<std::int64_t>(4 * (in + out) + 8 * in + 8 * reference))
        << canonical_point(p);
  }
  EXPECT_GE(cut, 5) << "most cases must exercise the cut batch";
}

TEST(OperatorChecks, ImpossibleShapesAreRefused) {
  const OperatorDef* conv = find_operator("conv2d");
  EXPECT_NE(
      conv->info
          .check(params_for(*conv, {{"n", I(1)}, {"c", I(3)}, {"h", I(8)}, {"k", I(4)}, {"r", I(3)}, {"groups", I(2)}}))
          .find("multiples of groups"),
      std::string::npos);
  EXPECT_NE(conv->info.check(params_for(*conv, {{"n", I(1)}, {"c", I(3)}, {"h", I(2)}, {"k", I(4)}, {"r", I(5)}}))
                .find("does not fit"),
            std::string::npos);
  const OperatorDef* bn = find_operator("batchnorm");
  EXPECT_NE(bn->info
                .check(params_for(
                    *bn, {{"n", I(1)}, {"c", I(3)}, {"h", I(2)}, {"pass", S("backward")}, {"mode", S("inference")}}))
                .find("training"),
            std::string::npos);
}

}  // namespace
}  // namespace d500

namespace d500 {
namespace {

// d500's executor records its device's peak for the arithmetic the point allows: float32, or TF32
// with math = "tf32"; nothing on the host or on a backend without a peak.
TEST(ExecutorPeak, AskedForThePointsArithmeticOnlyOnADeviceBackendWithAPeak) {
  BackendInfo b;
  std::vector<std::string> asked;
  b.device_peak = [&](const std::string& arithmetic) {
    asked.push_back(arithmetic);
    return std::vector<std::pair<std::string, Value>>{{"device.peak_flops", 1e12}, {"device.peak_basis", arithmetic}};
  };
  const Params tf32{{"math", Value{std::string("tf32")}}}, strict{{"math", Value{std::string("fp32")}}}, none{},
      bf16{{"math", Value{std::string("bf16")}}}, normalised{{"math", Value{std::string()}}};
  EXPECT_TRUE(executor_peak_attributes(b, tf32, false).empty());
  const auto a = executor_peak_attributes(b, tf32, true);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].second, Value{std::string("tf32")});
  executor_peak_attributes(b, strict, true);
  executor_peak_attributes(b, none, true);
  executor_peak_attributes(b, bf16, true);
  executor_peak_attributes(b, normalised, true);
  EXPECT_EQ(asked, (std::vector<std::string>{"tf32", "fp32", "fp32", "bf16", "fp32"}));
  EXPECT_TRUE(executor_peak_attributes(BackendInfo{}, tf32, true).empty());
}

// What a backend setting a point leaves unset stands for (unset_settings, unset_meanings; the results
// file's unset.<key>): its backend's own choice for the workload, the old default where a changed one
// is planned into ids, "" for another backend's setting, nothing where it follows the dtype.
TEST(UnsetSettings, StandForTheBackendsOwnChoiceOnTheWorkload) {
  auto meanings = [](Params p, const std::string& workload) {
    normalize_backend_settings(p, workload);
    std::map<std::string, std::string> m;
    for (const auto& [k, v] : unset_settings(p, workload)) m[k] = v;
    return m;
  };
  Params net{{"workload", Value{std::string("network")}}, {"backend", Value{std::string("cuda")}}};
  for (const auto& spec : backend_setting_params()) net[spec.name] = Value{std::string()};
  net["cudnn_api"] = Value{std::string("legacy")};  // the old default, written out: "" in the id
  net["fusion"] = Value{std::string("off")};
  net["math"] = Value{std::string("tf32")};
  const auto cuda = meanings(net, "network");
  EXPECT_EQ(cuda.at("cudnn_api"), "legacy") << "not graph, which a point that leaves it unset is planned with";
  EXPECT_EQ(cuda.at("fusion"), "off");
  EXPECT_EQ(cuda.at("memory_format"), "nchw");
  EXPECT_EQ(cuda.at("cudnn_algorithms"), "deterministic");
  EXPECT_EQ(cuda.at("cuda_graph"), "") << "training only: it changes nothing on a network point";
  EXPECT_EQ(cuda.at("library"), "") << "the custom backend's";
  EXPECT_FALSE(cuda.count("math")) << "set: nothing to say";
  Params conv = net;
  conv["workload"] = Value{std::string("conv2d")};
  conv["math"] = Value{std::string()};
  const auto level0 = meanings(conv, "conv2d");
  EXPECT_EQ(level0.at("cudnn_algorithms"), "heuristic") << "level 0's own neutral choice";
  EXPECT_FALSE(level0.count("math")) << "on conv2d an unset math follows the dtype";
  Params cpu = net;
  cpu["backend"] = Value{std::string("onednn")};
  cpu["cudnn_api"] = cpu["fusion"] = cpu["math"] = Value{std::string()};
  const auto onednn = meanings(cpu, "network");
  EXPECT_EQ(onednn.at("math"), "fp32");
  EXPECT_EQ(onednn.at("fusion"), "off");
  EXPECT_EQ(onednn.at("cudnn_api"), "") << "cuda's";
  // A workload's own parameter: gemm's dtype.
  const WorkloadInfo* gemm = builtin_workloads().find("gemm");
  ASSERT_NE(gemm, nullptr);
  Params g{{"workload", Value{std::string("gemm")}},
           {"backend", Value{std::string("blas")}},
           {"dtype", Value{std::string()}},
           {"shape", Value{std::string()}}};
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : unset_meanings(*gemm, g)) m[k] = v;
  EXPECT_EQ(m.at("dtype"), "fp32");
  EXPECT_FALSE(m.count("shape")) << "an unset shape stands for no value";
}

}  // namespace
}  // namespace d500
