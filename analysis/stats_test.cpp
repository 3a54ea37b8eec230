#include "stats.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace d500::stats;

TEST(QuantileCi, MedianRanksMatchTheExactBinomialValues) {
  RankInterval r10 = quantile_ci_ranks(10, 0.5, 0.95);
  ASSERT_TRUE(r10.valid);
  EXPECT_EQ(r10.lo, 2);
  EXPECT_EQ(r10.hi, 9);
  EXPECT_NEAR(r10.coverage, 0.9785, 1e-4);  // F(8) - F(1) for Binomial(10, 1/2)
  RankInterval r20 = quantile_ci_ranks(20, 0.5, 0.95);
  ASSERT_TRUE(r20.valid);
  EXPECT_EQ(r20.lo, 6);
  EXPECT_EQ(r20.hi, 15);
  EXPECT_GE(r20.coverage, 0.95);
}

TEST(QuantileCi, NoIntervalForTooFewSamples) {
  for (int n = 1; n <= 5; ++n) EXPECT_FALSE(quantile_ci_ranks(n, 0.5, 0.95).valid) << n;
  RankInterval r6 = quantile_ci_ranks(6, 0.5, 0.95);
  ASSERT_TRUE(r6.valid);
  EXPECT_EQ(r6.lo, 1);
  EXPECT_EQ(r6.hi, 6);
}

TEST(QuantileCi, AgreesWithTheNormalApproximationForLargeN) {
  const int n = 10000;
  const double p = 0.9, z = 1.959963984540054;
  RankInterval r = quantile_ci_ranks(n, p, 0.95);
  ASSERT_TRUE(r.valid);
  double sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(r.lo, std::floor(n * p - z * sd), 1.0);
  EXPECT_NEAR(r.hi, std::ceil(n * p + z * sd) + 1, 1.0);
  EXPECT_GE(r.coverage, 0.95);
}

TEST(Summarize, MedianAndIntervalFromOrderStatistics) {
  std::vector<double> x = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};  // sorted: 1..10
  Summary s = summarize(x, 0.95);
  EXPECT_EQ(s.n, 10);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  ASSERT_TRUE(s.has_ci);
  EXPECT_DOUBLE_EQ(s.lo, 2);  // x(2)
  EXPECT_DOUBLE_EQ(s.hi, 9);  // x(9)
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  Summary few = summarize({1, 2, 3}, 0.95);
  EXPECT_FALSE(few.has_ci);
  EXPECT_DOUBLE_EQ(few.median, 2);
}
