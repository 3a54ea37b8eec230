// math = "bf16" on a CPU: oneDNN's bfloat16 primitives (the onednn backend's convolutions and
// matrix products) against the yardstick's simulation of bfloat16 (ExecutorSpec::reduced_mantissa
// = 7), which validation trusts to say what rounding to bfloat16 moves a step by; and validation
// judging a real bfloat16 step, computed by a library d500 did not write, rather than its own
// simulation of one.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/registry.hpp"
#include "networks/builtin.hpp"
#include "networks/executor.hpp"
#include "networks/fuse.hpp"
#include "networks/graph_builder_test.hpp"
#include "networks/prepare.hpp"
#include "networks/validate.hpp"

namespace d500 {
namespace {

using test::GraphBuilder;

const BackendInfo* onednn_or_skip() {
  const BackendInfo* b = find_backend("onednn");
  return b && b->built ? b : nullptr;
}

const Params& bf16_point() {
  static const Params p{{"math", std::string("bf16")}};
  return p;
}

// One training step of `g` on oneDNN with math = "bf16" (or `point`).
std::unique_ptr<GraphExecutor> bf16_step(const BackendInfo& onednn, const Graph& g, int loss,
                                         const std::vector<int>& params, const std::vector<const void*>& inputs = {},
                                         const Params& point = bf16_point()) {
  ExecutorSpec s;
  s.graph = &g;
  s.backend = &onednn;
  s.training = true;
  s.loss = loss;
  s.params = params;
  s.inputs = inputs;
  s.point = &point;
  auto e = std::make_unique<GraphExecutor>(s);
  e->forward(0);
  e->backward(0);
  return e;
}

struct ProductGraph {
  const char* name;
  std::function<std::vector<int>(GraphBuilder&)> build;
};

// Each product oneDNN computes in bfloat16, with sums long enough (32 to 144 terms) that float32
// and bfloat16 results differ in every tensor.
std::vector<ProductGraph> product_graphs() {
  using B = GraphBuilder;
  return {
      {"Conv (bias, pads)",
       [](B& b) {
         return std::vector<int>{
             b.node("Conv", {b.weight("x", {2, 16, 8, 8}), b.weight("w", {16, 16, 3, 3}), b.weight("c", {16})},
                    {{"pads", ints_attr({1, 1, 1, 1})}})};
       }},
      {"Conv (strided, groups)",
       [](B& b) {
         return std::vector<int>{b.node("Conv", {b.weight("x", {2, 32, 9, 9}), b.weight("w", {16, 16, 3, 3})},
                                        {{"strides", ints_attr({2, 2})}, {"group", int_attr(2)}})};
       }},
      {"Gemm (transB)",
       [](B& b) {
         return std::vector<int>{
             b.node("Gemm", {b.weight("a", {6, 64}), b.weight("b", {12, 64})}, {{"transB", int_attr(1)}})};
       }},
      {"Gemm (transA)",
       [](B& b) {
         return std::vector<int>{
             b.node("Gemm", {b.weight("a", {64, 6}), b.weight("b", {64, 12})}, {{"transA", int_attr(1)}})};
       }},
      {"MatMul (attention: equal batches)",
       [](B& b) {
         return std::vector<int>{b.node("MatMul", {b.weight("q", {2, 3, 4, 48}), b.weight("k", {2, 3, 48, 6})})};
       }},
      {"MatMul (a projection: 2-D weight)",
       [](B& b) {
         return std::vector<int>{b.node("MatMul", {b.weight("x", {2, 5, 64}), b.weight("w", {64, 8})})};
       }},
  };
}

// What the point's math = "bf16" says oneDNN computes -- products of inputs rounded to bfloat16,
// summed in float32, a convolution's result (y forward, dx and dw backward) rounded too -- is what
// it computes: every tensor of the step is as close to the yardstick's simulation of that as
// float32's sums allow (a convolution's gradients are the simulation's bit for bit), and every
// gradient a hundred times closer to it than to the exact step, so the rounding is really
// bfloat16's (a kernel left in float32 would be near the exact step instead).
TEST(Bf16, OnednnsBfloat16ProductsComputeWhatTheYardsticksSimulationDoes) {
  const BackendInfo* onednn = onednn_or_skip();
  if (!onednn) GTEST_SKIP() << "this build has no onednn backend (Debian: libdnnl-dev)";
  if (const std::string why = test::no_cpu_bf16_here(*onednn); !why.empty()) GTEST_SKIP() << why;
  for (const auto& c : product_graphs()) {
    SCOPED_TRACE(c.name);
    GraphBuilder b;
    const int loss = b.finish_with_projection_loss(c.build(b));
    const std::vector<int> params = b.params();
    const auto e = bf16_step(*onednn, b.g, loss, params);
    int products = 0;
    for (const auto& st : e->steps()) {
      if (st.node < 0) continue;
      const std::string& op = b.g.nodes[static_cast<std::size_t>(st.node)].op;
      if (op != "Conv" && op != "Gemm" && op != "MatMul") continue;
      ++products;
      EXPECT_NE(st.impl.find("bfloat16"), std::string::npos) << op << ": " << st.impl;
    }
    EXPECT_EQ(products, 2) << "the product's forward and backward pass";
    const StepValues got = step_values(*e, b.g, params, true);
    const StepValues simulated = step_values(*run_yardstick(b.g, true, loss, params, {}, 1, 0, 7), b.g, params, true);
    const StepValues exact = yardstick_step(b.g, true, loss, params, {}, 1);
    const std::vector<double> to_simulated_each = step_errors(got, simulated), to_exact_each = step_errors(got, exact);
    ASSERT_EQ(to_exact_each.size(), params.size() + 1);
    for (std::size_t k = 0; k < to_exact_each.size(); ++k) {
      SCOPED_TRACE(got.names[k]);
      const double to_simulated = to_simulated_each[k], to_exact = to_exact_each[k];
      EXPECT_LT(to_simulated, 1e-5) << "to the exact step: " << to_exact;
      if (k == 0) continue;  // the loss, one sum of a product's values, may err little by chance
      EXPECT_GT(to_exact, 1e-3) << "bfloat16's rounding (u = 2^-8) shows";
      EXPECT_LT(to_simulated * 100, to_exact);
    }
  }
}

// Validation that bites on a real bfloat16 step: ResNet-20's training step computed by oneDNN's
// bfloat16 primitives passes the bf16 judgement, fails float32's (the arithmetic really is
// reduced), and the same step with its last layer's gradient 2% off fails, named. With NCHW
// activations and with channels-last ones, which onednn keeps in bfloat16 as autocast does (NCHW's
// normalisations on d500's loops, NHWC's on oneDNN's): the judgement's simulation rounds their
// stores too; and so with the joined nodes (fusion = "add_relu+bn_relu"), whose ReLU loops run on
// bfloat16 there.
TEST(Bf16, ARealBfloat16StepPassesItsJudgementAndTwoPercentOffInOneGradientFails) {
  const BackendInfo* onednn = onednn_or_skip();
  if (!onednn) GTEST_SKIP() << "this build has no onednn backend (Debian: libdnnl-dev)";
  if (const std::string why = test::no_cpu_bf16_here(*onednn); !why.empty()) GTEST_SKIP() << why;
  Graph plain = load_builtin_network("resnet20-cifar", LoadOptions{4, {}});
  const int loss = add_training_loss(plain).loss;
  const std::vector<int> params = trainable_params(plain, loss);
  const InputData inputs = make_inputs(plain, 1, 1);
  const StepValues exact = yardstick_step(plain, true, loss, params, inputs.pointers(), 1);
  Graph joined = plain;  // the same tensor ids: the same exact step
  ASSERT_EQ(fuse_add_relu(joined), 9);
  ASSERT_EQ(fuse_bn_relu(joined), 10);
  for (const auto& [layout, fused] :
       {std::pair{"nchw", false}, {"nchw", true}, {"channels_last", false}, {"channels_last", true}}) {
    SCOPED_TRACE(std::string(layout) + (fused ? ", joined" : ""));
    const Graph& g = fused ? joined : plain;
    const Params point{{"math", std::string("bf16")}, {"memory_format", std::string(layout)}};
    const auto e = bf16_step(*onednn, g, loss, params, inputs.pointers(), point);
    const auto stored = std::count(e->bf16_plan().begin(), e->bf16_plan().end(), true);
    EXPECT_GT(stored, 40) << "every activation between the first convolution and the pool";
    const StepValues got = step_values(*e, g, params, true);
    const ToleranceBasis fp32 = network_tolerance(g, loss);
    const ToleranceBasis bf16 = with_point_math(fp32, point, e.get());
    EXPECT_EQ(bf16.reduced_storage, e->bf16_plan());

    // The judgements of one graph share its simulations (judge_step's `share`).
    const std::string share = fused ? "bf16_test resnet20 joined" : "bf16_test resnet20";
    const StepJudgement real = judge_step(got, exact, bf16, g, true, loss, params, inputs.pointers(), 1, share);
    EXPECT_LE(real.error, real.tolerance) << real.words;
    EXPECT_GE(real.caught_2pct, 3) << real.words;
    EXPECT_EQ(real.words.find("activations the step keeps in bfloat16") != std::string::npos, stored > 0) << real.words;
    const StepJudgement as_fp32 = judge_step(got, exact, fp32, g, true, loss, params, inputs.pointers(), 1, share);
    EXPECT_GT(as_fp32.error, as_fp32.tolerance) << "float32's judgement fails a bfloat16 step: " << as_fp32.words;

    StepValues off = got;
    for (double& v : off.values.back()) v *= 1.02;
    const StepJudgement wrong = judge_step(off, exact, bf16, g, true, loss, params, inputs.pointers(), 1, share);
    EXPECT_GT(wrong.error, wrong.tolerance) << wrong.words;
    EXPECT_EQ(wrong.where, exact.names.back()) << wrong.words;
  }
}

}  // namespace
}  // namespace d500
