// The adaptive stopping rule: when it stops, why, and that the width it judges is the width the
// report computes from the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "analysis/stats.hpp"
#include "metrics/stopping.hpp"

namespace d500 {
namespace {

AutoRepetitions rule(double width, int min, int max) {
  AutoRepetitions a;
  a.on = true;
  a.ci_rel_width = width;
  a.min = min;
  a.max = max;
  return a;
}

TEST(AdaptiveStop, EqualTimesStopAtTheMinimumByWidth) {
  AdaptiveStop s(rule(0.02, 10, 1000));
  int n = 0;
  while (!s.stop(false)) {
    s.add(1000);
    ++n;
    ASSERT_LE(n, 1000);
  }
  EXPECT_EQ(s.count(), 10);
  EXPECT_EQ(s.stopped_by(), StoppedBy::CiWidth);
  EXPECT_EQ(s.last_width(), 0.0);
}

TEST(AdaptiveStop, TimesThatNeverAgreeStopAtTheMaximumWithTheirWidth) {
  AdaptiveStop s(rule(0.02, 10, 200));
  int i = 0;
  while (!s.stop(false)) s.add(i++ % 2 ? 2000 : 1000);  // half 1 us, half 2 us: the interval spans both
  EXPECT_EQ(s.count(), 200);
  EXPECT_EQ(s.stopped_by(), StoppedBy::Max);
  EXPECT_NEAR(s.last_width(), 1000.0 / 1500.0, 1e-12);  // (2000 - 1000) / the even-n median 1500
}

TEST(AdaptiveStop, TimeUpStopsEvenBeforeTheMinimum) {
  AdaptiveStop s(rule(0.02, 10, 1000));
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(s.stop(false));
    s.add(1000 + i * 500);
  }
  EXPECT_TRUE(s.stop(true));
  EXPECT_EQ(s.stopped_by(), StoppedBy::MaxTime);
  EXPECT_EQ(s.count(), 3);
  EXPECT_TRUE(std::isnan(s.last_width()));  // 3 values: no 95% interval
  EXPECT_STREQ(stopped_by_name(s.stopped_by()), "max_time");
}

// Noisy times whose interval narrows like 1/sqrt(n): the rule stops no earlier than the first n
// at which the width is within target, and no later than a 64th beyond it (its look cadence).
TEST(AdaptiveStop, StopsWithinItsLookCadenceOfTheFirstNarrowEnoughCount) {
  std::mt19937_64 gen(7);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  std::vector<std::int64_t> values;
  for (int i = 0; i < 20000; ++i) values.push_back(static_cast<std::int64_t>(1e6 * noise(gen)));
  const double target = 0.004;
  int first = -1;
  for (int n = 10; n <= 20000 && first < 0; ++n) {
    std::vector<std::int64_t> v(values.begin(), values.begin() + n);
    if (median_ci_rel_width(v, 0.95) <= target) first = n;
  }
  ASSERT_GT(first, 64) << "the test wants a stop beyond the per-repetition looks";
  AdaptiveStop s(rule(target, 10, 20000));
  std::size_t i = 0;
  while (!s.stop(false)) s.add(values[i++]);
  EXPECT_EQ(s.stopped_by(), StoppedBy::CiWidth);
  EXPECT_GE(s.count(), first);
  EXPECT_LE(s.count(), first + first / 64 + 1);
  EXPECT_LE(s.last_width(), target);
}

TEST(AdaptiveStop, ItsWidthIsTheReportsWidthOfTheSameTimes) {
  std::mt19937_64 gen(11);
  std::exponential_distribution<double> e(1.0);
  for (int n : {6, 7, 10, 31, 100, 1001}) {
    std::vector<std::int64_t> ns;
    std::vector<double> s;
    for (int i = 0; i < n; ++i) {
      ns.push_back(1000000 + static_cast<std::int64_t>(2e5 * e(gen)));
      s.push_back(static_cast<double>(ns.back()) * 1e-9);
    }
    const stats::Summary sum = stats::summarize(s, 0.95);
    ASSERT_TRUE(sum.has_ci) << n;
    EXPECT_NEAR(median_ci_rel_width(ns, 0.95), (sum.hi - sum.lo) / sum.median, 1e-12) << n;
  }
  std::vector<std::int64_t> five{1, 2, 3, 4, 5};
  EXPECT_TRUE(std::isnan(median_ci_rel_width(five, 0.95)));
}

TEST(AdaptiveStop, TheSmallestCountWithAnIntervalIsSixAt95AndEightAt99) {
  EXPECT_EQ(smallest_n_with_median_ci(0.95), 6);
  EXPECT_EQ(smallest_n_with_median_ci(0.99), 8);
  // The rule says what it does, with its numbers.
  const std::string text = rule(0.02, 10, 500).rule();
  for (const char* part : {"95% exact CI of the median", "2% of the median", "at least 10 and at most 500", "60 s"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " in " << text;
}

}  // namespace
}  // namespace d500
