// The reference optimizers against closed forms: a constant gradient (or g = p on f = p^2 / 2)
// makes every rule's trajectory a formula.
#include "backends/optimizer.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

#include <cmath>

namespace d500 {
namespace {

// Two parameters (sizes 3 and 2); gradients either constant or equal to the parameters.
class Params final : public ParamAccess {
 public:
  std::vector<std::vector<float>> p{{1.0f, -2.0f, 0.5f}, {3.0f, -1.0f}};
  std::vector<std::vector<float>> g{{0.2f, -0.4f, 0.1f}, {1.0f, -0.3f}};
  bool grad_is_param = false;
  int changes = 0;
  std::size_t count() const override { return p.size(); }
  float* data(std::size_t k) override { return p[k].data(); }
  const float* grad(std::size_t k) override { return grad_is_param ? p[k].data() : g[k].data(); }
  std::int64_t numel(std::size_t k) const override { return static_cast<std::int64_t>(p[k].size()); }
  void changed() override { ++changes; }
};

OptimizerSpec spec(const std::string& name) {
  OptimizerSpec s;
  s.name = name;
  s.lr = 0.05;
  return s;
}

// Runs `steps` steps and checks every element against closed(p0, g, t).
template <class F>
void expect_trajectory(const OptimizerSpec& s, int steps, F closed, double tol = 2e-6) {
  Params a;
  const Params start = a;
  auto o = make_reference_optimizer(s, a);
  for (int t = 1; t <= steps; ++t) {
    o->step(learning_rate(s, t - 1));
    for (std::size_t k = 0; k < a.p.size(); ++k)
      for (std::size_t i = 0; i < a.p[k].size(); ++i)
        ASSERT_NEAR(a.p[k][i], closed(start.p[k][i], start.g[k][i], t),
                    tol * std::max(1.0, std::fabs(closed(start.p[k][i], start.g[k][i], t))))
            << s.name << " step " << t << " param " << k << "[" << i << "]";
  }
  EXPECT_EQ(a.changes, steps);
}

TEST(Optimizers, SgdOnAQuadraticDecaysGeometrically) {
  Params a;
  a.grad_is_param = true;
  auto o = make_reference_optimizer(spec("sgd"), a);
  for (int t = 0; t < 20; ++t) o->step(0.05);
  EXPECT_NEAR(a.p[0][1], -2.0 * std::pow(0.95, 20), 1e-5);
  EXPECT_NEAR(a.p[1][0], 3.0 * std::pow(0.95, 20), 1e-5);
}

TEST(Optimizers, SgdWithWeightDecayAndNoGradientShrinks) {
  Params a;
  for (auto& v : a.g) std::fill(v.begin(), v.end(), 0.0f);
  OptimizerSpec s = spec("sgd");
  s.weight_decay = 0.1;
  auto o = make_reference_optimizer(s, a);
  for (int t = 0; t < 10; ++t) o->step(s.lr);
  EXPECT_NEAR(a.p[1][0], 3.0 * std::pow(1 - 0.05 * 0.1, 10), 1e-6);
}

TEST(Optimizers, HeavyBallMomentumUnderAConstantGradient) {
  const double mu = 0.9, lr = 0.05;
  expect_trajectory(spec("momentum"), 15, [&](double p0, double g, int t) {
    double sum = 0;  // b_k = g (1 - mu^k) / (1 - mu)
    for (int k = 1; k <= t; ++k) sum += (1 - std::pow(mu, k)) / (1 - mu);
    return p0 - lr * g * sum;
  });
}

TEST(Optimizers, NesterovLooksAhead) {
  const double mu = 0.9, lr = 0.05;
  expect_trajectory(spec("nesterov"), 15, [&](double p0, double g, int t) {
    double sum = 0;  // update g + mu b_k
    for (int k = 1; k <= t; ++k) sum += 1 + mu * (1 - std::pow(mu, k)) / (1 - mu);
    return p0 - lr * g * sum;
  });
}

TEST(Optimizers, AdamTakesStepsOfLrUnderAConstantGradient) {
  // Bias correction makes m_hat = g and v_hat = g^2 exactly: each step moves lr g / (|g| + eps).
  // (Float32 bias corrections round: a few ulps a step.)
  expect_trajectory(
      spec("adam"), 12, [](double p0, double g, int t) { return p0 - t * 0.05 * g / (std::fabs(g) + 1e-8); }, 2e-5);
}

TEST(Optimizers, AdamWDecaysTheWeightsApartFromTheGradient) {
  OptimizerSpec s = spec("adamw");
  s.weight_decay = 0.2;
  expect_trajectory(
      s, 12,
      [](double p0, double g, int t) {
        double p = p0;
        for (int k = 0; k < t; ++k) p = p * (1 - 0.05 * 0.2) - 0.05 * g / (std::fabs(g) + 1e-8);
        return p;
      },
      2e-5);
  // Adam with the same weight decay couples it to the gradient: another trajectory.
  Params a, b;
  OptimizerSpec coupled = spec("adam");
  coupled.weight_decay = 0.2;
  auto oa = make_reference_optimizer(s, a), ob = make_reference_optimizer(coupled, b);
  for (int t = 0; t < 5; ++t) oa->step(0.05), ob->step(0.05);
  EXPECT_GT(std::fabs(a.p[1][0] - b.p[1][0]), 1e-3);
}

TEST(Optimizers, AdagradStepsShrinkAsOneOverSqrtT) {
  expect_trajectory(spec("adagrad"), 12, [](double p0, double g, int t) {
    double p = p0;
    for (int k = 1; k <= t; ++k) p -= 0.05 * g / (std::sqrt(k) * std::fabs(g) + 1e-8);
    return p;
  });
}

TEST(Optimizers, RmspropNormalisesByTheRunningSquare) {
  OptimizerSpec s = spec("rmsprop");
  s.momentum = 0;
  expect_trajectory(
      s, 12,
      [](double p0, double g, int t) {
        double p = p0;
        for (int k = 1; k <= t; ++k) p -= 0.05 * g / (std::fabs(g) * std::sqrt(1 - std::pow(0.99, k)) + 1e-8);
        return p;
      },
      1e-5);
  s.momentum = 0.5;  // with momentum: b_k = 0.5 b_{k-1} + g / a_k; p -= lr b_k
  expect_trajectory(
      s, 12,
      [](double p0, double g, int t) {
        double p = p0, b = 0;
        for (int k = 1; k <= t; ++k) {
          b = 0.5 * b + g / (std::fabs(g) * std::sqrt(1 - std::pow(0.99, k)) + 1e-8);
          p -= 0.05 * b;
        }
        return p;
      },
      1e-5);
}

TEST(Optimizers, SchedulesGiveTheirLearningRates) {
  OptimizerSpec s = spec("sgd");
  s.lr = 1.0;
  s.schedule = "step";
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(s, 9), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(s, 25), 0.25);
  s.schedule = "cosine";
  s.total_steps = 100;
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 1.0);
  EXPECT_NEAR(learning_rate(s, 50), 0.5, 1e-12);
  EXPECT_NEAR(learning_rate(s, 100), 0.0, 1e-12);
  s.warmup_steps = 10;  // linear warm-up, then the cosine over the remaining 90 steps
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(s, 9), 1.0);
  EXPECT_NEAR(learning_rate(s, 55), 0.5, 1e-12);
}

TEST(Optimizers, StateSavedAndLoadedContinuesBitForBit) {
  for (const auto& name : optimizer_names()) {
    Params a;
    auto o = make_reference_optimizer(spec(name), a);
    for (int t = 0; t < 3; ++t) o->step(0.05);
    const std::vector<std::byte> state = o->save();
    Params b = a;
    for (int t = 0; t < 2; ++t) o->step(0.05);
    auto o2 = make_reference_optimizer(spec(name), b);
    o2->load(state);
    for (int t = 0; t < 2; ++t) o2->step(0.05);
    EXPECT_EQ(a.p, b.p) << name;
  }
  Params a;
  auto o = make_reference_optimizer(spec("adam"), a);
  EXPECT_THROW(o->load(std::vector<std::byte>(3)), Error);
}

TEST(Optimizers, BadSpecsAreRefusedWithTheKey) {
  OptimizerSpec s = spec("adamax");
  EXPECT_NE(check_optimizer(s).find("not one of sgd, momentum"), std::string::npos);
  s = spec("momentum");
  s.momentum = 0;
  EXPECT_NE(check_optimizer(s).find("needs momentum > 0"), std::string::npos);
  s = spec("sgd");
  s.lr = -1;
  EXPECT_NE(check_optimizer(s).find("lr must be"), std::string::npos);
  EXPECT_EQ(check_optimizer(spec("rmsprop")), "");
}

}  // namespace
}  // namespace d500
