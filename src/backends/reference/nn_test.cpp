// The reference operators are the truth every backend is compared with, so their gradients are
// checked here against central finite differences of their own forward passes, in double:
// for L(theta) = <dy, f(theta)> and a random direction v,
//   (L(theta + h v) - L(theta - h v)) / 2h  must equal  <dL/dtheta, v>.
#include "backends/reference/nn.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

namespace d500::reference {
namespace {

using Vec = std::vector<double>;

Vec random_vec(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Vec v(n);
  for (auto& x : v) x = u(g);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Relative difference between the finite-difference and the analytic directional derivative.
double fd_error(const std::function<Vec(const Vec&)>& f, const Vec& theta, const Vec& dy, const Vec& grad,
                std::uint64_t seed) {
  const Vec v = random_vec(theta.size(), seed);
  const double h = 1e-6;
  Vec plus = theta, minus = theta;
  for (std::size_t i = 0; i < theta.size(); ++i) plus[i] += h * v[i], minus[i] -= h * v[i];
  const double numeric = (dot(dy, f(plus)) - dot(dy, f(minus))) / (2 * h);
  const double analytic = dot(grad, v);
  return std::abs(numeric - analytic) / std::max(1e-12, std::abs(analytic));
}

TEST(ReferenceConv, ForwardMatchesAHandComputedExample) {
  // 1 image, 1 channel, 3x3 input 1..9, 2x2 kernel of ones, stride 1: sums of 2x2 windows.
  const ConvShape cs{1, 1, 3, 3, 1, 2, 2, 1, 0, 1, 1};
  const Vec x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 1, 1, 1};
  Vec y(4);
  conv2d_forward(cs, x.data(), w.data(), y.data());
  EXPECT_EQ(y, (Vec{12, 16, 24, 28}));
  // Padding 1, stride 2: the corners see one, two or four inputs.
  const ConvShape padded{1, 1, 3, 3, 1, 2, 2, 2, 1, 1, 1};
  ASSERT_EQ(padded.p(), 2);
  conv2d_forward(padded, x.data(), w.data(), y.data());
  EXPECT_EQ(y, (Vec{1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9}));
}

struct ConvCase {
  const char* name;
  ConvShape cs;
};
// How a case prints in gtest's (and ctest's) listing: its shape, not the struct's bytes.
void PrintTo(const ConvCase& c, std::ostream* os) {
  const ConvShape& x = c.cs;
  *os << c.name << ": n=" << x.n << " c=" << x.c << " h=" << x.h << " w=" << x.w << " k=" << x.k << " r=" << x.r
      << " s=" << x.s << " stride=" << x.stride << " pad=" << x.pad << " dilation=" << x.dilation
      << " groups=" << x.groups;
}

class ReferenceConvGrad : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ReferenceConvGrad, BackwardPassesAreTheGradientsOfTheForward) {
  const ConvShape cs = GetParam().cs;
  const Vec x = random_vec(static_cast<std::size_t>(cs.x_size()), 1),
            w = random_vec(static_cast<std::size_t>(cs.w_size()), 2),
            dy = random_vec(static_cast<std::size_t>(cs.y_size()), 3);
  Vec dx(x.size()), dw(w.size());
  conv2d_backward_data(cs, dy.data(), w.data(), dx.data());
  conv2d_backward_filter(cs, x.data(), dy.data(), dw.data());
  auto fwd_x = [&](const Vec& xv) {
    Vec y(dy.size());
    conv2d_forward(cs, xv.data(), w.data(), y.data());
    return y;
  };
  auto fwd_w = [&](const Vec& wv) {
    Vec y(dy.size());
    conv2d_forward(cs, x.data(), wv.data(), y.data());
    return y;
  };
  for (std::uint64_t seed : {11, 12}) {
    EXPECT_LT(fd_error(fwd_x, x, dy, dx, seed), 1e-7) << GetParam().name << " dx";
    EXPECT_LT(fd_error(fwd_w, w, dy, dw, seed), 1e-7) << GetParam().name << " dw";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReferenceConvGrad,
                         ::testing::Values(ConvCase{"plain3x3", {2, 3, 6, 5, 4, 3, 3, 1, 0, 1, 1}},
                                           ConvCase{"stride2pad1", {2, 3, 7, 7, 4, 3, 3, 2, 1, 1, 1}},
                                           ConvCase{"dilation2", {1, 2, 8, 8, 3, 3, 2, 1, 2, 2, 1}},
                                           ConvCase{"groups2", {2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 2}},
                                           ConvCase{"depthwise", {1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 3}}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReferencePool, GradientsOfMaxAndAverage) {
  for (bool max : {true, false}) {
    const PoolShape ps{2, 3, 7, 6, 3, 2, 1, max};
    const std::size_t xs = static_cast<std::size_t>(2 * 3 * 7 * 6),
                      ys = static_cast<std::size_t>(2 * 3 * ps.p() * ps.q());
    const Vec x = random_vec(xs, 4), dy = random_vec(ys, 5);
    Vec dx(xs);
    pool2d_backward(ps, x.data(), dy.data(), dx.data());
    auto f = [&](const Vec& xv) {
      Vec y(ys);
      pool2d_forward(ps, xv.data(), y.data());
      return y;
    };
    EXPECT_LT(fd_error(f, x, dy, dx, 13), 1e-7) << (max ? "max" : "avg");
  }
}

TEST(ReferencePool, AverageExcludesPaddingAndMaxIgnoresIt) {
  // All inputs -1: a max over a window that includes padding is still -1 (padding is not 0),
  // and an average of the inside elements is -1 too.
  const PoolShape ps{1, 1, 2, 2, 2, 1, 1, true};
  const Vec x{-1, -1, -1, -1};
  Vec y(9);
  pool2d_forward(ps, x.data(), y.data());
  for (double v : y) EXPECT_EQ(v, -1.0);
  PoolShape avg = ps;
  avg.max = false;
  pool2d_forward(avg, x.data(), y.data());
  for (double v : y) EXPECT_EQ(v, -1.0);
}

TEST(ReferenceBatchnorm, TrainingForwardNormalisesAndBackwardIsItsGradient) {
  const Nchw d{3, 2, 4, 3};
  const auto n = static_cast<std::size_t>(d.size());
  const Vec x = random_vec(n, 6), gamma = random_vec(2, 7), beta = random_vec(2, 8), dy = random_vec(n, 9);
  const double eps = 1e-5;
  Vec y(n), mean(2), var(2);
  const Vec ones{1, 1}, zeros{0, 0};
  batchnorm_forward_training(d, eps, x.data(), ones.data(), zeros.data(), y.data(), mean.data(), var.data());
  Vec m2(2), v2(2);
  batchnorm_statistics(d, y.data(), m2.data(), v2.data());
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(m2[c], 0.0, 1e-12);
    EXPECT_NEAR(v2[c], var[c] / (var[c] + eps), 1e-12);
  }

  Vec dx(n), dgamma(2), dbeta(2);
  batchnorm_statistics(d, x.data(), mean.data(), var.data());
  batchnorm_backward(d, eps, x.data(), dy.data(), gamma.data(), mean.data(), var.data(), dx.data(), dgamma.data(),
                     dbeta.data());
  auto f_x = [&](const Vec& xv) {
    Vec out(n), m(2), v(2);
    batchnorm_forward_training(d, eps, xv.data(), gamma.data(), beta.data(), out.data(), m.data(), v.data());
    return out;
  };
  auto f_gamma = [&](const Vec& g) {
    Vec out(n), m(2), v(2);
    batchnorm_forward_training(d, eps, x.data(), g.data(), beta.data(), out.data(), m.data(), v.data());
    return out;
  };
  auto f_beta = [&](const Vec& b) {
    Vec out(n), m(2), v(2);
    batchnorm_forward_training(d, eps, x.data(), gamma.data(), b.data(), out.data(), m.data(), v.data());
    return out;
  };
  EXPECT_LT(fd_error(f_x, x, dy, dx, 14), 1e-6);
  EXPECT_LT(fd_error(f_gamma, gamma, dy, dgamma, 15), 1e-7);
  EXPECT_LT(fd_error(f_beta, beta, dy, dbeta, 16), 1e-7);
}

TEST(ReferenceActivations, ReluAndSoftmaxGradients) {
  const Vec x = random_vec(60, 17), dy = random_vec(60, 18);
  Vec dx(60);
  relu_backward(60, x.data(), dy.data(), dx.data());
  auto relu = [](const Vec& xv) {
    Vec y(xv.size());
    relu_forward(static_cast<std::int64_t>(xv.size()), xv.data(), y.data());
    return y;
  };
  EXPECT_LT(fd_error(relu, x, dy, dx, 19), 1e-7);

  // softmax over rows of a 6 x 10 matrix; the backward pass takes the forward's output.
  auto softmax = [](const Vec& xv) {
    Vec y(xv.size());
    softmax_forward(6, 10, xv.data(), y.data());
    return y;
  };
  const Vec y = softmax(x);
  for (int i = 0; i < 6; ++i) {
    double sum = 0;
    for (int j = 0; j < 10; ++j) sum += y[static_cast<std::size_t>(i * 10 + j)];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  softmax_backward(6, 10, y.data(), dy.data(), dx.data());
  EXPECT_LT(fd_error(softmax, x, dy, dx, 20), 1e-7);
}

TEST(ReferenceGradCheck, CatchesAWrongGradient) {
  // The check itself must be able to fail: a relu backward that passes dy through everywhere.
  const Vec x = random_vec(60, 21), dy = random_vec(60, 22);
  auto relu = [](const Vec& xv) {
    Vec y(xv.size());
    relu_forward(static_cast<std::int64_t>(xv.size()), xv.data(), y.data());
    return y;
  };
  EXPECT_GT(fd_error(relu, x, dy, dy, 23), 0.1);
}

}  // namespace
}  // namespace d500::reference
