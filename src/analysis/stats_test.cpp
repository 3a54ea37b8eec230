#include "analysis/stats.hpp"
#include "analysis/document.hpp"
#include "analysis/format.hpp"
#include "analysis/reporters.hpp"
#include "analysis/summary.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

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

// Reference values below were computed independently with SciPy 1.10 (scipy.stats).

TEST(MeanInterval, UsesStudentsT) {
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  MeanInterval m = mean_t_interval(x, 0.95);
  ASSERT_TRUE(m.valid);
  EXPECT_DOUBLE_EQ(m.mean, 5.5);
  const double half = 2.2621571627409915 * std::sqrt(55.0 / 6.0) / std::sqrt(10.0);  // t(0.975; 9)
  EXPECT_NEAR(m.lo, 3.3341494103866087, 1e-9);                                       // scipy.stats.t.interval
  EXPECT_NEAR(m.lo, 5.5 - half, 1e-9);
  EXPECT_NEAR(m.hi, 5.5 + half, 1e-9);
}

TEST(AndersonDarling, MatchesScipyAndRejectsSkewedData) {
  NormalityTest n = anderson_darling({10.2, 9.8, 10.5, 10.1, 9.9, 10.3, 10.0, 10.7, 9.6, 10.4, 10.2, 9.95});
  ASSERT_TRUE(n.applicable);
  EXPECT_NEAR(n.a2, 0.09681314107574934, 1e-9);
  EXPECT_FALSE(n.rejects());
  NormalityTest s = anderson_darling({1, 1.1, 1.2, 1.3, 1.5, 2, 3, 5, 8, 13, 21, 34});
  EXPECT_NEAR(s.a2, 1.4312678089779354, 1e-9);
  EXPECT_TRUE(s.rejects());
  EXPECT_LT(s.p_value, 0.01);
  EXPECT_FALSE(anderson_darling({1, 2, 3}).applicable);
}

TEST(Tukey, CountsValuesOutsideTheFences) {
  Outliers o = tukey_outliers({1, 2, 3, 4, 5, 6, 7, 8, 9, 100, -50});
  EXPECT_EQ(o.high, 1);
  EXPECT_EQ(o.low, 1);
  EXPECT_DOUBLE_EQ(o.lo_fence, 2.5 - 1.5 * 5);  // Q1 = 2.5, Q3 = 7.5 (type 7, n = 11)
  EXPECT_DOUBLE_EQ(o.hi_fence, 7.5 + 1.5 * 5);
}

TEST(KruskalWallis, MatchesScipyWithAndWithoutTies) {
  KruskalWallis k = kruskal_wallis({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {2, 4, 6, 8, 10.5}});
  ASSERT_TRUE(k.applicable);
  EXPECT_NEAR(k.h, 7.030215827338126, 1e-9);
  EXPECT_NEAR(k.p_value, 0.02974459293273992, 1e-9);
  KruskalWallis t = kruskal_wallis({{1, 1, 2, 2, 3}, {2, 3, 3, 4, 4}});
  EXPECT_NEAR(t.h, 4.192258064516128, 1e-9);
  EXPECT_NEAR(t.p_value, 0.04060897340425361, 1e-9);
  EXPECT_FALSE(kruskal_wallis({{1, 2}, {}}).applicable);
}

TEST(ClopperPearson, MatchesScipyBetaQuantiles) {
  Proportion p = clopper_pearson(5, 10, 0.95);
  EXPECT_NEAR(p.lo, 0.18708602844739855, 1e-9);
  EXPECT_NEAR(p.hi, 0.8129139715526015, 1e-9);
  Proportion z = clopper_pearson(0, 10, 0.95);
  EXPECT_EQ(z.lo, 0);
  EXPECT_NEAR(z.hi, 0.3084971078187608, 1e-9);
  Proportion a = clopper_pearson(10, 10, 0.95);
  EXPECT_NEAR(a.lo, 0.6915028921812392, 1e-9);
  EXPECT_EQ(a.hi, 1);
}

TEST(Bootstrap, IsReproducibleForAFixedSeed) {
  std::vector<double> a = {2.1, 2.0, 2.3, 1.9, 2.2, 2.05, 2.4, 1.95, 2.15, 2.0};
  std::vector<double> b = {1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 1.2, 0.98, 1.01, 1.0};
  for (auto m : {BootstrapMethod::Percentile, BootstrapMethod::BCa}) {
    RatioInterval r1 = bootstrap_median_ratio(a, b, 0.95, m, 2000, 7);
    RatioInterval r2 = bootstrap_median_ratio(a, b, 0.95, m, 2000, 7);
    RatioInterval r3 = bootstrap_median_ratio(a, b, 0.95, m, 2000, 8);
    EXPECT_EQ(r1.lo, r2.lo);
    EXPECT_EQ(r1.hi, r2.hi);
    EXPECT_NE(r1.lo + r1.hi, r3.lo + r3.hi);
    EXPECT_NEAR(r1.estimate, 2.075 / 1.005, 1e-12);
    EXPECT_LT(r1.lo, r1.estimate);
    EXPECT_GT(r1.hi, r1.estimate);
    EXPECT_TRUE(r1.excludes_one());
  }
}

// Coverage: over many data sets with a known true ratio of medians, the 95% intervals should
// contain it about 95% of the time (a bootstrap with small n undercovers somewhat).
TEST(Bootstrap, CoversTheTrueRatioOfMedians) {
  std::mt19937_64 gen(123);
  std::lognormal_distribution<double> noise(0.0, 0.2);  // median 1
  for (auto m : {BootstrapMethod::Percentile, BootstrapMethod::BCa}) {
    int covered = 0;
    const int sets = 300;
    for (int s = 0; s < sets; ++s) {
      std::vector<double> a(30), b(30);
      for (auto& v : a) v = 2.0 * noise(gen);
      for (auto& v : b) v = 1.0 * noise(gen);
      RatioInterval r = bootstrap_median_ratio(a, b, 0.95, m, 1000, static_cast<std::uint64_t>(s));
      covered += r.lo <= 2.0 && 2.0 <= r.hi;
    }
    EXPECT_GE(covered, static_cast<int>(0.88 * sets)) << static_cast<int>(m);
    EXPECT_LE(covered, static_cast<int>(0.995 * sets)) << static_cast<int>(m);
  }
}

// Issue 17: BCa as Efron defines it and SciPy computes it. Reference values from SciPy 1.10.1:
// scipy.stats._resampling._bca_interval((a, b), median(a)/median(b), -1, 0.025, theta, None) and
// ndtri(_percentile_of_score(theta, estimate)), on the data and replicates built here.
namespace {
const std::vector<double> kBcaA = {2.1, 2.0, 2.3, 1.9, 2.2, 2.05, 2.9, 1.95, 2.15, 2.0, 2.6, 2.0, 2.7};
const std::vector<double> kBcaB = {1.3, 0.9, 1.5, 0.97, 1.0, 1.6, 0.95, 1.01, 1.35, 0.98, 1.4};
std::vector<double> leave_each_out(const std::vector<double>& x,
                                   const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<double> y = x;
    y.erase(y.begin() + static_cast<long>(i));
    out.push_back(f(y));
  }
  return out;
}
}  // namespace

TEST(Bootstrap, BcaLevelsMatchScipy) {
  const double ma = median(kBcaA), mb = median(kBcaB), est = ma / mb;
  EXPECT_DOUBLE_EQ(est, 2.0792079207920793);
  // 400 replicates, 8 of them exactly the estimate: ties count half in z0.
  std::vector<double> theta;
  for (int k = 0; k < 400; ++k)
    theta.push_back(k % 50 == 0 ? est : est * (1 + 0.05 * (((k * 37) % 400) - 180) / 200.0));
  std::sort(theta.begin(), theta.end());
  const std::vector<std::vector<double>> jack = {
      leave_each_out(kBcaA, [&](const std::vector<double>& y) { return median(y) / mb; }),
      leave_each_out(kBcaB, [&](const std::vector<double>& y) { return ma / median(y); })};
  const BcaLevels l = bca_levels(theta, est, jack, 0.95);
  EXPECT_NEAR(l.z0, -0.12250384633825986, 1e-12);
  EXPECT_NEAR(l.acceleration, -0.008637282965215659, 1e-12);  // one jackknife pooled over both samples: +0.0365
  EXPECT_NEAR(l.p_lo, 0.012444705677952311, 1e-12);
  EXPECT_NEAR(l.p_hi, 0.9541261874606135, 1e-12);
  EXPECT_NEAR(quantile_sorted(theta, l.p_lo), 1.988744410615732, 1e-12);
  EXPECT_NEAR(quantile_sorted(theta, l.p_hi), 2.18353028031516, 1e-12);
}

// The whole interval against scipy.stats.bootstrap((b, a), median(a)/median(b), method='BCa',
// n_resamples=40000, random_state=1): [1.5185185185185184, 2.5742574257425743]. The streams
// differ, so the limits agree to within the Monte Carlo error of 40,000 resamples.
TEST(Bootstrap, BcaIntervalMatchesScipyBootstrap) {
  const RatioInterval r = bootstrap_median_ratio(kBcaA, kBcaB, 0.95, BootstrapMethod::BCa, 40000, 3);
  EXPECT_NEAR(r.lo, 1.5185185185185184, 0.02) << r.lo;
  EXPECT_NEAR(r.hi, 2.5742574257425743, 0.02) << r.hi;
}

// One policy for n <= 5, medians and ratios alike: no exact median interval exists there at 95%,
// so no ratio of medians gets one either.
TEST(Bootstrap, NoRatioIntervalWhereAMedianHasNone) {
  const std::vector<double> five = {1.0, 1.1, 0.9, 1.05, 0.95}, six = {1.0, 1.1, 0.9, 1.05, 0.95, 1.02};
  EXPECT_FALSE(summarize(five).has_ci);
  const RatioInterval r = bootstrap_median_ratio(kBcaA, five, 0.95, BootstrapMethod::BCa, 2000, 1);
  EXPECT_FALSE(r.bounded);
  EXPECT_NE(r.withheld.find("fewer than 6"), std::string::npos) << r.withheld;
  EXPECT_NEAR(r.estimate, median(kBcaA) / 1.0, 1e-12);
  EXPECT_TRUE(summarize(six).has_ci);
  EXPECT_TRUE(bootstrap_median_ratio(kBcaA, six, 0.95, BootstrapMethod::BCa, 2000, 1).bounded);
  // At 99% the smallest n with an interval is 8.
  EXPECT_FALSE(bootstrap_median_ratio(kBcaA, six, 0.99, BootstrapMethod::BCa, 2000, 1).bounded);
}

// Issue 17: cut-off runs are censored, not dropped. The textbook check: the 6-MP arm of Freireich
// et al. (1963), remission weeks with censoring; R's survfit(Surv(time, status) ~ 1) prints
// median 23, 0.95LCL 16, 0.95UCL NA (Klein & Moeschberger's example; SciPy 1.10 has no
// Kaplan-Meier to compare with).
TEST(KaplanMeier, SixMpMedianMatchesR) {
  const std::vector<double> t = {6, 6, 6, 6, 7, 9, 10, 10, 11, 13, 16, 17, 19, 20, 22, 23, 25, 32, 32, 34, 35};
  const std::vector<bool> e = {1, 1, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  const KaplanMeierMedian m = kaplan_meier_median(t, e, 0.95);
  ASSERT_TRUE(m.defined);
  EXPECT_EQ(m.median, 23);
  ASSERT_TRUE(m.lo_defined);
  EXPECT_EQ(m.lo, 16);
  EXPECT_FALSE(m.hi_defined);
}

// Without censoring the estimate is the sample median (the midpoint rule for even n), and a
// curve that never reaches 0.5 has no median.
TEST(KaplanMeier, WithoutCensoringIsTheSampleMedian) {
  const std::vector<double> t = {5, 1, 4, 2, 3, 6};
  const KaplanMeierMedian m = kaplan_meier_median(t, std::vector<bool>(6, true), 0.95);
  EXPECT_DOUBLE_EQ(m.median, 3.5);
  EXPECT_DOUBLE_EQ(m.median, median(t));
  const KaplanMeierMedian none = kaplan_meier_median({1, 2, 3, 4}, {true, false, false, false}, 0.95);
  EXPECT_FALSE(none.defined);
}

// Issue 17: the replicated-launch interval. Reference values from SciPy 1.10.1:
// m = medians; stats.t.interval(0.95, 2, loc=log(m).mean(), scale=stats.sem(log(m))), exponentiated;
// the between share from the one-way ANOVA's mean squares on the logs (F = 82.37 there).
TEST(LaunchInterval, MatchesScipyAndSplitsTheVariance) {
  const std::vector<std::vector<double>> launches = {
      {1.0, 1.1, 0.9, 1.05, 0.95, 1.02}, {1.3, 1.2, 1.25, 1.4, 1.35, 1.28, 1.31}, {0.8, 0.85, 0.9, 0.82, 0.88}};
  const LaunchInterval r = launch_interval(launches, 0.95);
  EXPECT_EQ(r.launches, 3);
  ASSERT_TRUE(r.has_ci);
  EXPECT_NEAR(r.estimate, 1.0372765280530498, 1e-12);
  EXPECT_NEAR(r.lo, 0.6100341198663539, 1e-9);  // t quantiles: Boost and SciPy agree to ~1e-11
  EXPECT_NEAR(r.hi, 1.7637416672456068, 1e-9);
  EXPECT_NEAR(r.between_share, 0.9319199165915211, 1e-12);
  // One launch: an estimate, no interval.
  const LaunchInterval one = launch_interval({launches[0]}, 0.95);
  EXPECT_FALSE(one.has_ci);
  EXPECT_DOUBLE_EQ(one.estimate, median(launches[0]));
  // Launches that agree: no share between them.
  EXPECT_EQ(launch_interval({launches[0], launches[0]}, 0.95).between_share, 0);
}

// A tail quantile: the type-7 sample quantile, and the exact order-statistic interval whose ranks
// quantile_ci_ranks gives, from the least n that has one (the 90th percentile needs 36 values at
// 95%: 1 - 0.9^n >= 0.975; the 99th, 368).
TEST(TailQuantile, IsTheSampleQuantileWithItsExactIntervalFromTheLeastNThatHasOne) {
  std::vector<double> x;
  for (int i = 100; i >= 1; --i) x.push_back(i);  // unsorted on purpose
  const QuantileSummary q = summarize_quantile(x, 0.9, 0.95);
  EXPECT_EQ(q.n, 100);
  EXPECT_DOUBLE_EQ(q.estimate, 90.1);  // x(90) + 0.1 (x(91) - x(90)), as numpy.percentile(x, 90)
  const RankInterval r = quantile_ci_ranks(100, 0.9, 0.95);
  ASSERT_TRUE(q.has_ci);
  EXPECT_DOUBLE_EQ(q.lo, r.lo);  // x(k) = k here
  EXPECT_DOUBLE_EQ(q.hi, r.hi);
  EXPECT_LE(q.lo, q.estimate);
  EXPECT_GE(q.hi, q.estimate);
  EXPECT_GE(q.coverage, 0.95);
  EXPECT_EQ(q.least_n_for_ci, 36);
  EXPECT_TRUE(quantile_ci_ranks(36, 0.9, 0.95).valid);
  EXPECT_FALSE(quantile_ci_ranks(35, 0.9, 0.95).valid);
  const QuantileSummary p99 = summarize_quantile(x, 0.99, 0.95);
  EXPECT_FALSE(p99.has_ci);
  EXPECT_EQ(p99.least_n_for_ci, 368);
  EXPECT_DOUBLE_EQ(p99.estimate, 99.01);
}

// Two backends' launch medians paired by launch: ratios 2, 4, 4, whose logs are ln 2 (1, 2, 2),
// so the geometric mean is 2^(5/3) and the t interval (2 degrees of freedom, standard error
// ln 2 / 3) is 2^((5 -+ t) / 3) with t = 4.302652729911275 (SciPy's stats.t.ppf(0.975, 2)).
TEST(LaunchRatio, IsTheTIntervalOnTheLogRatiosPairedByLaunchAndNeedsTwoLaunches) {
  const double t = 4.302652729911275;
  const RatioInterval r = launch_ratio({2, 4, 8}, {1, 1, 2}, 0.95);
  ASSERT_TRUE(r.bounded) << r.withheld;
  EXPECT_NEAR(r.estimate, std::pow(2.0, 5.0 / 3), 1e-12);
  EXPECT_NEAR(r.lo, std::pow(2.0, (5 - t) / 3), 1e-9);
  EXPECT_NEAR(r.hi, std::pow(2.0, (5 + t) / 3), 1e-9);
  EXPECT_TRUE(r.excludes_one());
  // Pairing: the same medians in another order pair differently (ratios 1, 4, 8 here).
  const RatioInterval shuffled = launch_ratio({2, 4, 8}, {2, 1, 1}, 0.95);
  EXPECT_NEAR(shuffled.estimate, std::cbrt(32.0), 1e-12);
  EXPECT_GT(shuffled.hi / shuffled.lo, r.hi / r.lo);
  // One launch: an estimate, no interval; a median that is not positive: none.
  const RatioInterval one = launch_ratio({2}, {1}, 0.95);
  EXPECT_FALSE(one.bounded);
  EXPECT_DOUBLE_EQ(one.estimate, 2);
  EXPECT_FALSE(one.withheld.empty());
  const RatioInterval zero = launch_ratio({2, 0}, {1, 1}, 0.95);
  EXPECT_FALSE(zero.bounded);
  EXPECT_NE(zero.withheld.find("not positive"), std::string::npos);
}

TEST(Fieller, BracketsTheRatioAndIsUnboundedNearZeroDenominators) {
  std::vector<double> a = {2.0, 2.2, 1.9, 2.1, 2.05}, b = {1.0, 1.1, 0.95, 1.05, 1.02};
  RatioInterval r = fieller_ratio(a, b, 0.95);
  ASSERT_TRUE(r.bounded);
  EXPECT_NEAR(r.estimate, 2.05 / 1.024, 1e-12);
  EXPECT_LT(r.lo, r.estimate);
  EXPECT_GT(r.hi, r.estimate);
  // Small relative errors: Fieller approaches the delta method's interval.
  const double t = 2.7764451051977987;  // t(0.975; 4)
  const double se = r.estimate * std::sqrt(0.0125 / 5 / (2.05 * 2.05) + 0.00313 / 5 / (1.024 * 1.024));
  EXPECT_NEAR(r.lo, r.estimate - t * se, 0.02);
  EXPECT_NEAR(r.hi, r.estimate + t * se, 0.02);
  EXPECT_FALSE(fieller_ratio(a, {-1, 1, -0.5, 0.6, 0.1}, 0.95).bounded);
}

TEST(RepetitionAdvice, SaysWhetherTheCiIsTightEnough) {
  std::vector<double> tight, loose;
  for (int i = 0; i < 20; ++i) tight.push_back(1.0 + 0.001 * i), loose.push_back(1.0 + 0.1 * i);
  RepetitionAdvice t = repetition_advice(tight, summarize(tight));
  EXPECT_TRUE(t.enough);
  EXPECT_EQ(t.needed, 20);
  RepetitionAdvice l = repetition_advice(loose, summarize(loose));
  EXPECT_FALSE(l.enough);
  EXPECT_GT(l.needed, 20);
  EXPECT_FALSE(l.capped);
  RepetitionAdvice none = repetition_advice({1, 2, 3}, summarize({1, 2, 3}));
  EXPECT_FALSE(none.enough);
  EXPECT_GE(none.needed, 10);
}

namespace {
// The share of `trials` samples of m values from `draw` whose median CI is within `target`.
template <class Draw>
double share_within(int m, double target, Draw draw, int trials = 400) {
  int ok = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> x(static_cast<std::size_t>(m));
    for (auto& v : x) v = draw();
    const Summary s = summarize(x);
    ok += s.has_ci && std::max(s.median - s.lo, s.hi - s.median) / s.median <= target;
  }
  return static_cast<double>(ok) / trials;
}
}  // namespace

// Issue 17: the 1/sqrt(n) law advised ~1,400 repetitions for bimodal samples where ~150
// suffice. The advice now follows the data's own quantiles: checked by drawing samples of the
// advised size from the planted distribution, the advised count reaches the target about half
// the time or more, and it is a small fraction of what the square-root law says (it still
// overstates: ~40 suffice here, 2-5x that is typical advice from 30 values).
TEST(RepetitionAdvice, FollowsTheShapeOfBimodalData) {
  std::mt19937_64 gen(17);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> jitter(0, 0.01);
  auto bimodal = [&] { return (u(gen) < 0.7 ? 1.0 : 2.0) * (1 + jitter(gen)); };  // 70% at 1, 30% at 2
  std::vector<double> x(30);
  for (auto& v : x) v = bimodal();
  const Summary s = summarize(x);
  const RepetitionAdvice a = repetition_advice(x, s, 0.01);
  ASSERT_FALSE(a.enough);
  ASSERT_FALSE(a.capped);
  const double sqrt_law = s.n * std::pow(a.rel_half_width / 0.01, 2);
  EXPECT_LT(a.needed * 20, sqrt_law) << a.needed << " vs the 1/sqrt(n) law's " << sqrt_law;
  EXPECT_GE(share_within(a.needed, 0.01, bimodal), 0.45) << a.needed;
}

// For unimodal data it is about right: over 101 samples of 40 lognormal values, the median
// advice reaches the target in 20-80% of fresh samples of that size (the square-root law's median
// advice overstates by ~1.7x here). And it is capped.
TEST(RepetitionAdvice, IsAboutRightForLognormalDataAndIsCapped) {
  std::mt19937_64 gen(5);
  std::lognormal_distribution<double> ln(0, 0.1);
  auto draw = [&] { return ln(gen); };
  std::vector<double> advised;
  std::vector<double> x(40);
  for (int k = 0; k < 101; ++k) {
    for (auto& v : x) v = draw();
    const RepetitionAdvice a = repetition_advice(x, summarize(x), 0.01);
    ASSERT_FALSE(a.enough);
    advised.push_back(a.needed);
  }
  const int m = static_cast<int>(median(advised));
  const double share = share_within(m, 0.01, draw);
  EXPECT_GE(share, 0.2) << m;
  EXPECT_LE(share, 0.8) << m;
  const RepetitionAdvice c = repetition_advice(x, summarize(x), 0.0001);
  EXPECT_TRUE(c.capped);
  EXPECT_EQ(c.needed, 1000);
}

#include "analysis/tta.hpp"

namespace {
std::vector<d500::Event> curve(std::vector<std::pair<double, double>> pts, int rank = 0) {
  std::vector<d500::Event> e;
  std::int64_t step = 0;
  for (auto [t, a] : pts) e.push_back({static_cast<std::int64_t>(t * 1e9), step += 100, 1 - a, a, rank});
  return e;
}
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST(TimeToAccuracy, IsTheFirstEvaluationReachingTheTargetWithinBudget) {
  auto c = curve({{1, 0.5}, {2, 0.8}, {3, 0.91}, {4, 0.89}, {5, 0.95}});
  EXPECT_DOUBLE_EQ(d500::time_to_target(c, 0.9, 10), 3);
  EXPECT_DOUBLE_EQ(d500::time_to_target(c, 0.95, 10), 5);
  EXPECT_EQ(d500::time_to_target(c, 0.95, 4.5), kInf);  // reached only after the budget: censored
  EXPECT_EQ(d500::time_to_target(c, 0.99, 10), kInf);
  EXPECT_EQ(d500::time_to_target(curve({{1, 0.99}}, 1), 0.9, 10, 0), kInf);  // another rank's curve
}

TEST(TimeToAccuracy, CensoredRunsKeepTheirPlaceInTheOrderStatistics) {
  // 10 runs, 2 miss: the median is defined, and the upper CI rank (9) lands on a miss.
  std::vector<double> t = {10, 11, 12, 13, 14, 15, 16, 17, kInf, kInf};
  d500::TtaSummary s = d500::summarize_tta(t, 0.9, 20, 0.95);
  EXPECT_EQ(s.runs, 10);
  EXPECT_EQ(s.reached, 8);
  ASSERT_TRUE(s.median_defined);
  EXPECT_DOUBLE_EQ(s.median, 14.5);
  ASSERT_TRUE(s.has_ci);
  EXPECT_DOUBLE_EQ(s.lo, 11);                           // x(2)
  EXPECT_TRUE(s.hi_censored());                         // x(9) is a miss: "> budget"
  EXPECT_NEAR(s.success.lo, 0.4439045376923585, 1e-9);  // scipy beta.ppf(0.025, 8, 3)
  EXPECT_NEAR(s.success.hi, 0.9747892736731666, 1e-9);  // scipy beta.ppf(0.975, 9, 2)
}

TEST(TimeToAccuracy, MedianIsUndefinedWhenHalfOrMoreMiss) {
  d500::TtaSummary half = d500::summarize_tta({10, 11, 12, kInf, kInf, kInf}, 0.9, 20, 0.95);
  EXPECT_FALSE(half.median_defined);
  EXPECT_EQ(half.reached, 3);
  d500::TtaSummary most = d500::summarize_tta({10, kInf, kInf, kInf, kInf, kInf, kInf}, 0.9, 20, 0.95);
  EXPECT_FALSE(most.median_defined);
  // The median is unknown, yet the interval still says something: at least x(1), at most "> budget".
  ASSERT_TRUE(most.has_ci);
  EXPECT_DOUBLE_EQ(most.lo, 10);
  EXPECT_TRUE(most.hi_censored());
  d500::TtaSummary all = d500::summarize_tta({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 20, 0.95);
  EXPECT_TRUE(all.median_defined);
  EXPECT_FALSE(all.hi_censored());
  EXPECT_DOUBLE_EQ(all.hi, 9);
  // Most runs missed and even the lower rank (x(2) of 10) is a miss: beyond the budget, not "none".
  d500::TtaSummary beyond =
      d500::summarize_tta({10, kInf, kInf, kInf, kInf, kInf, kInf, kInf, kInf, kInf}, 0.9, 20, 0.95);
  EXPECT_FALSE(beyond.has_ci);
  EXPECT_TRUE(beyond.beyond_budget);
  EXPECT_EQ(d500::tta_ci_text(beyond), "> budget (20.00 s) at both bounds: the median exceeds the budget");
  EXPECT_FALSE(most.beyond_budget);
}

namespace {
// The Kolmogorov-Smirnov distance between the empirical distributions of two samples (sorted here).
double ks_distance(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  double ks = 0;
  for (const auto* s : {&a, &b})
    for (double v : *s) {
      const double fa =
          static_cast<double>(std::upper_bound(a.begin(), a.end(), v) - a.begin()) / static_cast<double>(a.size());
      const double fb =
          static_cast<double>(std::upper_bound(b.begin(), b.end(), v) - b.begin()) / static_cast<double>(b.size());
      ks = std::max(ks, std::fabs(fa - fb));
    }
  return ks;
}
}  // namespace

// The exact-distribution draw of a resample's median must agree with resampling value by value.
TEST(Bootstrap, ResampledMedianMatchesDirectResampling) {
  std::mt19937_64 gen(99);
  std::lognormal_distribution<double> dist(0.0, 0.5);
  std::vector<double> x(1001);
  for (auto& v : x) v = dist(gen);
  std::vector<double> sorted(x);
  std::sort(sorted.begin(), sorted.end());
  ResampledMedian fast(sorted, x.size());
  std::vector<double> direct, drawn, r(x.size());
  std::mt19937_64 g(5);
  std::uniform_int_distribution<std::size_t> pick(0, x.size() - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int k = 0; k < 4000; ++k) {
    for (auto& v : r) v = x[pick(g)];
    direct.push_back(median(r));
    drawn.push_back(fast.draw(u(g)));
  }
  // The 1% critical value of the Kolmogorov-Smirnov distance for two samples of 4000 is
  // 1.63 * sqrt(2 / 4000) = 0.036.
  EXPECT_LT(ks_distance(direct, drawn), 0.036);
}

// MedianResampler's two ways of drawing a bootstrap median draw from one distribution, for an
// even sample too (the exact way's resample is then one value smaller).
TEST(Bootstrap, MedianResamplerDrawsTheSameDistributionEitherWay) {
  std::mt19937_64 gen(17);
  std::lognormal_distribution<double> dist(0.0, 0.5);
  std::vector<double> x(1000);
  for (auto& v : x) v = dist(gen);
  MedianResampler exact(x, true), direct(x, false);
  EXPECT_TRUE(exact.exact());
  EXPECT_FALSE(direct.exact());
  std::vector<double> a, b;
  std::mt19937_64 g(3);
  for (int k = 0; k < 4000; ++k) a.push_back(exact.draw(g)), b.push_back(direct.draw(g));
  EXPECT_LT(ks_distance(a, b), 0.036);  // as above
  std::sort(b.begin(), b.end());
  // Not a degenerate distribution: the draws spread about as a median's sampling error does
  // (1.2533 sigma / sqrt(n) for normal data; log-normal with sigma 0.5 near its median, about 0.5).
  const double sd = (b[3599] - b[399]) / (2 * 1.2816);
  EXPECT_NEAR(sd, 1.2533 * 0.5 / std::sqrt(1000.0), 0.006);
}

// A scaling series whose points hold more than kDirectBootstrapMax repetitions has its model's
// bootstrap draw each resample's median from its exact distribution (resampling 10^5 values a
// thousand times per point made a 10-million-sample report take 11 minutes); the planted serial
// fraction is still inside the interval, which is no wider than the small series' one.
TEST(ScalingModel, LargePointsDrawExactResampleMediansAndKeepThePlantedFraction) {
  auto series = [](int reps) {
    std::mt19937_64 gen(23);
    std::normal_distribution<double> noise(1.0, 0.02);
    std::vector<d500::PointRow> rows;
    for (int ranks : {1, 2, 4}) {
      d500::PointRow r;
      r.id = "p" + std::to_string(ranks);
      r.workload = "synthetic";
      r.backend = "x";
      r.params = {{"workload", std::string("synthetic")}, {"backend", std::string("x")}};
      r.outcome = d500::Outcome::Complete;
      r.ranks = ranks;
      for (int i = 0; i < reps; ++i) r.costs.push_back(0.02 * (0.2 + 0.8 / ranks) * noise(gen));  // Amdahl, s = 0.2
      r.time = summarize(r.costs);
      rows.push_back(r);
    }
    const auto s = d500::scaling_series(rows, 0.95, 5);
    EXPECT_EQ(s.size(), 1u);
    return s.empty() ? d500::ScalingSeries{} : s.front();
  };
  const auto large = series(20000), small = series(200);
  EXPECT_TRUE(large.model.exact_medians);
  EXPECT_FALSE(small.model.exact_medians);
  for (const auto* s : {&large, &small}) {
    EXPECT_EQ(s->model.law, "Amdahl");
    EXPECT_LE(s->model.s_lo, 0.2);
    EXPECT_GE(s->model.s_hi, 0.2);
    const std::string text = d500::scaling_model_text(*s);
    EXPECT_EQ(text.find("exact distribution") != std::string::npos, s->model.exact_medians) << text;
  }
  // 100 times the repetitions: an interval about a tenth as wide, and certainly narrower.
  EXPECT_LT(large.model.s_hi - large.model.s_lo, 0.3 * (small.model.s_hi - small.model.s_lo));
}

// An allreduce's weak scaling is judged as nccl-tests judges it: on bus bandwidth, whose ideal is
// constant while a ring's time grows as 2(p-1)/p. Times that follow that law exactly are 100%
// efficient at every count, and the Amdahl fit finds no serial share; the 1-rank point, which
// moves nothing between ranks (0.1 us here), is no base, no series point and no figure point.
TEST(ScalingModel, ACollectiveScalesOnBusBandwidthAndItsOneRankRunIsNoBase) {
  std::mt19937_64 gen(29);
  std::normal_distribution<double> noise(1.0, 0.01);
  std::vector<d500::PointRow> rows;
  for (int ranks : {1, 2, 4, 8}) {
    d500::PointRow r;
    r.id = "p" + std::to_string(ranks);
    r.workload = "allreduce";
    r.backend = "mpi";
    r.level = 0;
    r.scaling = "weak";
    r.rate_unit = "GB/s";
    r.params = {{"workload", std::string("allreduce")},
                {"backend", std::string("mpi")},
                {"nodes", std::int64_t{1}},
                {"ranks_per_node", std::int64_t{ranks}}};
    r.outcome = d500::Outcome::Complete;
    r.ranks = ranks;
    r.nodes = 1;
    const double ideal = ranks == 1 ? 1e-7 : 1e-4 * 2 * (ranks - 1) / ranks;  // 1 rank: an in-place no-op
    for (int i = 0; i < 40; ++i) r.costs.push_back(ideal * noise(gen));
    r.time = summarize(r.costs);
    r.rate = 1e6 / r.time.median / 1e9;
    r.bus_factor = *d500::collective_bus_factor("allreduce", ranks);
    rows.push_back(r);
  }
  EXPECT_TRUE(rows[0].lone_collective());
  EXPECT_FALSE(rows[1].lone_collective());
  const auto s = d500::scaling_series(rows, 0.95, 5);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].bus, "allreduce");
  EXPECT_EQ(s[0].base_ranks, 2);
  ASSERT_EQ(s[0].points.size(), 3u);
  for (const auto& p : s[0].points) {
    EXPECT_NEAR(p.efficiency, 1.0, 0.03) << p.ranks << " ranks: T(2)/T(p) alone would read "
                                         << s[0].base_time / p.time.median;
    EXPECT_LE(p.efficiency_lo, 1.0);
    EXPECT_GE(p.efficiency_hi, 1.0);
  }
  EXPECT_EQ(s[0].model.law, "Amdahl") << d500::scaling_model_text(s[0]);
  EXPECT_LT(s[0].model.s_hi, 0.02) << d500::scaling_model_text(s[0]);
  EXPECT_NE(d500::scaling_caption(s[0]).find("efficiency = busbw(p) / busbw(base)"), std::string::npos);
  // The ideal line of its figure is the bus factor's growth: 8 ranks ideally take 1.75x 2 ranks'.
  EXPECT_NEAR(s[0].ideal_load(8), 1.75, 1e-12);
  d500::Report rep;
  rep.campaign = "t";
  rep.rows = rows;
  rep.names = d500::point_names(rep.rows);
  rep.scaling = s;
  const d500::Document d = d500::report_document(rep);
  std::string figures;
  for (const auto& sec : d.sections)
    for (const auto& b : sec.blocks)
      if (b.kind == d500::Block::Kind::Figure && b.name.find("rate-allreduce") != std::string::npos) figures += b.svg;
  EXPECT_FALSE(figures.empty());
  EXPECT_EQ(figures.find("data-x=\"1\""), std::string::npos) << "the 1-rank point is no figure point:\n" << figures;
  EXPECT_NE(figures.find("data-x=\"2\""), std::string::npos) << figures;
  // The Results table shows its time, not its "bandwidth", and says why.
  const std::string terminal = d500::render_console(d, 0);
  EXPECT_NE(terminal.find("The 1-rank allreduce points move nothing between ranks"), std::string::npos) << terminal;
  EXPECT_EQ(terminal.find(d500::fmt_sig(rows[0].rate, 4)), std::string::npos) << "no GB/s of the no-op:\n" << terminal;
  // A workload that is no collective keeps its 1-rank base.
  for (auto& r : rows) r.workload = "gemm";
  const auto g = d500::scaling_series(rows, 0.95, 5);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].base_ranks, 1);
  EXPECT_TRUE(g[0].bus.empty());
}

TEST(Bootstrap, CoversTheTrueRatioForLargeSamples) {
  std::mt19937_64 gen(321);
  std::lognormal_distribution<double> noise(0.0, 0.3);
  int covered = 0;
  const int sets = 100;
  for (int s = 0; s < sets; ++s) {
    std::vector<double> a(5000), b(4000);  // beyond kDirectBootstrapMax, one of them even
    for (auto& v : a) v = 2.0 * noise(gen);
    for (auto& v : b) v = 1.0 * noise(gen);
    RatioInterval r = bootstrap_median_ratio(a, b, 0.95, BootstrapMethod::BCa, 2000, static_cast<std::uint64_t>(s));
    covered += r.lo <= 2.0 && 2.0 <= r.hi;
  }
  EXPECT_GE(covered, 88);
  EXPECT_LE(covered, 100);
}

// Issue 15, item 4: a p-value that underflowed printed as "p=0.0".
TEST(Format, PValuesNeverPrintAsZero) {
  EXPECT_EQ(d500::fmt_p(0.0), "p < 0.0001");
  EXPECT_EQ(d500::fmt_p(3e-12), "p < 0.0001");
  EXPECT_EQ(d500::fmt_p(0.034), "p=0.034");
  EXPECT_EQ(d500::fmt_p(0.5), "p=0.5");
}

// Issue 15, item 4: "~16133 needed" for one noisy point: the advice is capped and says why.
TEST(Format, RepetitionAdviceBeyondAThousandSaysTooNoisy) {
  d500::PointRow r;
  r.time.n = 15;
  r.advice.enough = false;
  r.advice.rel_half_width = 0.8;
  r.advice.needed = 16133;
  EXPECT_EQ(d500::reps_text(r).find("16133"), std::string::npos) << d500::reps_text(r);
  EXPECT_NE(d500::reps_text(r).find("over 1000 needed, too noisy"), std::string::npos) << d500::reps_text(r);
  r.advice.needed = 40;
  EXPECT_EQ(d500::reps_text(r), "no, ~40 needed");
}

// Reference values from SciPy 1.10.1 (friedmanchisquare, binomtest, spearmanr) on the same data,
// recorded here: the Python that computed them is in the comment above each.
TEST(PairedRanks, FriedmanWithTiesMatchesSciPy) {
  // stats.friedmanchisquare(*np.array(b).T)
  const std::vector<std::vector<double>> b{{1, 2, 3}, {2, 2, 5}, {3.1, 1, 4}, {1.5, 2.5, 2.5},
                                           {4, 3, 5}, {1, 1, 1}, {2, 3, 4},   {5, 4, 6}};
  const auto r = paired_ranks_test(b);
  ASSERT_TRUE(r.applicable);
  EXPECT_EQ(r.method, "Friedman");
  EXPECT_EQ(r.df, 2);
  EXPECT_NEAR(r.statistic, 9.76923076923077, 1e-12);
  EXPECT_NEAR(r.p_value, 0.007562031676513105, 1e-12);
  const std::vector<std::vector<double>> b4{{10, 12, 11, 13}, {9, 11, 10, 14},  {8, 8, 9, 12},
                                            {11, 13, 12, 12}, {10, 10, 10, 11}, {7, 9, 8, 10}};
  const auto r4 = paired_ranks_test(b4);
  EXPECT_NEAR(r4.statistic, 13.000000000000004, 1e-10);
  EXPECT_NEAR(r4.p_value, 0.004636605438041712, 1e-12);
  // All ties in every block: no test.
  EXPECT_FALSE(paired_ranks_test({{1, 1, 1}, {2, 2, 2}}).applicable);
}

TEST(PairedRanks, TwoRanksUseTheExactSignTestAsSciPysBinomtest) {
  // d = x - y: 2 positive, 9 negative, 1 tie; stats.binomtest(2, 11, 0.5).pvalue
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
      y{1.5, 2.5, 2.5, 4.5, 5.5, 6.5, 7.5, 7.5, 9.5, 10.5, 11.5, 12};
  std::vector<std::vector<double>> b;
  for (std::size_t i = 0; i < x.size(); ++i) b.push_back({x[i], y[i]});
  const auto r = paired_ranks_test(b);
  ASSERT_TRUE(r.applicable);
  EXPECT_EQ(r.method, "sign test");
  EXPECT_EQ(r.df, 11);
  EXPECT_NEAR(r.p_value, 0.0654296875, 1e-15);
}

TEST(Independence, TrendAndLagOneMatchSciPyAndNumPy) {
  // stats.spearmanr(np.arange(12), v); lag 1 as defined in stats.hpp, with NumPy
  const std::vector<double> v{5.0, 5.2, 5.1, 5.6, 5.4, 5.9, 6.1, 5.8, 6.3, 6.4, 6.2, 6.8};
  auto c = independence_check(v);
  ASSERT_TRUE(c.applicable);
  EXPECT_NEAR(c.trend_rho, 0.9440559440559443, 1e-12);
  EXPECT_NEAR(c.trend_p, 3.9272610809659444e-06, 1e-12);
  EXPECT_NEAR(c.lag1, 0.5763042799125275, 1e-12);
  EXPECT_TRUE(c.trend());
  // With ties (average ranks), as spearmanr.
  const std::vector<double> v2{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
  c = independence_check(v2);
  EXPECT_NEAR(c.trend_rho, 0.5256369525045375, 1e-12);
  EXPECT_NEAR(c.trend_p, 0.036516480880181904, 1e-12);
  EXPECT_NEAR(c.lag1, 0.1810344827586207, 1e-12);
  EXPECT_FALSE(c.trend());  // p = 0.037 is not below the flag's 0.01
  EXPECT_FALSE(c.autocorrelated(16));
  EXPECT_FALSE(independence_check({1, 2, 3, 4, 5, 6, 7, 8, 9}).applicable);  // n < 10
}

// Two comparisons of the same numbers in one report draw their own resamples (seeded by the
// points' ids), and the same report twice gives the same intervals.
TEST(Comparisons, EachHasItsOwnBootstrapStreamAndIsReproducible) {
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) a.push_back(1 + 0.1 * std::sin(i * 1.7)), b.push_back(2 + 0.3 * std::cos(i * 2.3));
  std::vector<d500::PointRow> rows;
  for (const char* size : {"1", "2"})
    for (const char* backend : {"reference", "blas"}) {
      d500::PointRow r;
      r.id = std::string(backend) + size;
      r.workload = "gemm";
      r.backend = backend;
      r.params = {
          {"workload", std::string("gemm")}, {"backend", std::string(backend)}, {"n", std::int64_t{std::atoi(size)}}};
      r.outcome = d500::Outcome::Complete;
      r.costs = std::string(backend) == "reference" ? a : b;
      r.time = summarize(r.costs);
      rows.push_back(r);
    }
  const auto c = d500::compare_backends(rows, 0.95, 7), again = d500::compare_backends(rows, 0.95, 7);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].speedup.estimate, c[1].speedup.estimate);                                // the same numbers...
  EXPECT_TRUE(c[0].speedup.lo != c[1].speedup.lo || c[0].speedup.hi != c[1].speedup.hi);  // ...their own resamples
  EXPECT_EQ(c[0].speedup.lo, again[0].speedup.lo);
  EXPECT_EQ(c[1].speedup.hi, again[1].speedup.hi);
  EXPECT_NE(d500::comparison_seed(7, "x", "y"), d500::comparison_seed(7, "y", "x"));
}

// A backend's own settings (set on its points and on none of another backend's: cuda's cudnn_api
// and fusion, which the planner writes into a cuda point's id) do not keep it from being compared
// with another backend on the same work (the GPU campaign's cuda against libtorch-cuda, per math);
// two points of one backend that differ in them are told apart by them, and the group is named
// without them. A parameter both backends set (math) still separates the groups.
TEST(Comparisons, ABackendsOwnSettingsDoNotKeepItFromTheOtherBackendsSameWork) {
  std::vector<d500::PointRow> rows;
  auto add = [&](const char* backend, const char* math, d500::Params own, double median) {
    d500::PointRow r;
    r.workload = "network";
    r.backend = backend;
    r.params = {{"workload", std::string("network")}, {"backend", std::string(backend)}, {"math", std::string(math)}};
    r.params.insert(own.begin(), own.end());
    r.id = r.backend + "/" + math + "/" + std::to_string(rows.size());
    r.outcome = d500::Outcome::Complete;
    for (int i = 0; i < 20; ++i) r.costs.push_back(median * (1 + 0.01 * std::sin(i * 1.3 + median)));
    r.time = summarize(r.costs);
    rows.push_back(r);
  };
  const d500::Params joined{{"cudnn_api", std::string("graph")}, {"fusion", std::string("add_relu+bn_relu")}};
  for (const char* math : {"fp32", "bf16"}) {
    add("cuda", math, {{"cudnn_api", std::string("graph")}, {"fusion", std::string("add_relu")}}, 1.0);
    add("libtorch-cuda", math, {}, 1.2);
  }
  add("cuda", "bf16", joined, 0.9);
  const auto c = d500::compare_backends(rows, 0.95, 7);
  std::vector<std::string> said;
  for (const auto& x : c) said.push_back(x.group + ": " + x.other + " vs " + x.baseline);
  const std::vector<std::string> want{"network math=fp32: libtorch-cuda vs cuda",
                                      "network math=bf16: libtorch-cuda vs cuda (fusion=add_relu)",
                                      "network math=bf16: cuda (fusion=add_relu+bn_relu) vs cuda (fusion=add_relu)"};
  EXPECT_EQ(said, want);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_NEAR(c[0].speedup.estimate, 1 / 1.2, 0.01);
}

// A job may interleave workloads (the quickstart's jobs hold gemm and network points): the
// comparisons keep one workload's groups together, workloads in the order they first appear.
TEST(Comparisons, OneWorkloadsComparisonsStandTogether) {
  std::vector<d500::PointRow> rows;
  auto add = [&](const char* workload, const char* backend, std::int64_t n) {
    d500::PointRow r;
    r.workload = workload;
    r.backend = backend;
    r.params = {{"workload", std::string(workload)}, {"backend", std::string(backend)}, {"n", n}};
    r.id = std::string(workload) + backend + std::to_string(n);
    r.outcome = d500::Outcome::Complete;
    for (int i = 0; i < 12; ++i) r.costs.push_back(1 + 0.01 * i);
    r.time = summarize(r.costs);
    rows.push_back(r);
  };
  for (std::int64_t n : {1, 2})
    for (const char* workload : {"gemm", "network"})
      for (const char* backend : {"reference", "blas"}) add(workload, backend, n);
  std::vector<std::string> said;
  for (const auto& x : d500::compare_backends(rows, 0.95, 7)) said.push_back(x.group);
  EXPECT_EQ(said, (std::vector<std::string>{"gemm n=1", "gemm n=2", "network n=1", "network n=2"}));
}

// A training's seeds are replicates: two backends measured with the same seeds are also compared
// across them, paired by seed, as the exponentiated t interval (seeds - 1 degrees of freedom) on
// the per-seed log ratios of medians: seeds that disagree (0.93x, 1.16x, 2.71x, each significant
// on its own) give an interval that holds 1; seeds that agree, one that excludes it. A campaign of
// one seed has no such comparison.
TEST(Comparisons, SeedsAreReplicatesAndBackendsAreComparedAcrossThem) {
  auto rows_with = [](const std::vector<double>& speedups) {
    std::vector<d500::PointRow> rows;
    for (std::size_t k = 0; k < speedups.size(); ++k)
      for (const char* backend : {"reference", "blas"}) {
        d500::PointRow r;
        r.workload = "train";
        r.backend = backend;
        const auto seed = static_cast<std::int64_t>(k + 1);
        r.params = {{"workload", std::string("train")}, {"backend", std::string(backend)}, {"seed", seed}};
        r.id = std::string(backend) + std::to_string(seed);
        r.outcome = d500::Outcome::Complete;
        const double median = std::string(backend) == "reference" ? 0.02 : 0.02 / speedups[k];
        for (int i = 0; i < 15; ++i) r.costs.push_back(median * (1 + 0.002 * std::sin(i * 1.9)));
        r.time = summarize(r.costs);
        rows.push_back(r);
      }
    return rows;
  };
  const std::vector<double> disagree{0.925, 1.16, 2.71};
  const auto rows = rows_with(disagree);
  const auto c = d500::compare_backends_across(rows, 0.95, "seed");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].replicate, "seed");
  EXPECT_EQ(c[0].group, "train");
  EXPECT_EQ(c[0].baseline, "reference");
  EXPECT_EQ(c[0].other, "blas");
  EXPECT_EQ(c[0].launches, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c[0].speedup.method, "paired by seed: Student's t on the log ratios of the seeds' medians");
  // The interval computed here from the three medians' ratios: t(0.975, 2) = 4.302652729911275.
  std::vector<double> logs;
  for (std::size_t k = 0; k < 3; ++k) logs.push_back(std::log(rows[2 * k].time.median / rows[2 * k + 1].time.median));
  const double mean = (logs[0] + logs[1] + logs[2]) / 3;
  double ss = 0;
  for (double d : logs) ss += (d - mean) * (d - mean);
  const double half = 4.302652729911275 * std::sqrt(ss / 2) / std::sqrt(3.0);
  EXPECT_NEAR(c[0].speedup.estimate, std::exp(mean), 1e-9);
  EXPECT_NEAR(c[0].speedup.lo, std::exp(mean - half), 1e-6);
  EXPECT_NEAR(c[0].speedup.hi, std::exp(mean + half), 1e-6);
  EXPECT_FALSE(c[0].speedup.excludes_one()) << "seeds that disagree: no significant difference";
  for (const auto& each : d500::compare_backends(rows, 0.95, 7))
    EXPECT_TRUE(each.speedup.excludes_one()) << each.group << ": each seed on its own looks significant";
  const auto agree = d500::compare_backends_across(rows_with({2.0, 2.1, 1.9}), 0.95, "seed");
  ASSERT_EQ(agree.size(), 1u);
  EXPECT_TRUE(agree[0].speedup.excludes_one());
  EXPECT_GT(agree[0].speedup.lo, 1.5);
  EXPECT_TRUE(d500::compare_backends_across(rows_with({2.0}), 0.95, "seed").empty()) << "one seed";
  // The report says it under Backend comparisons, with each seed's ratio.
  d500::Report rep;
  rep.campaign = "t";
  rep.rows = rows;
  rep.names = d500::point_names(rep.rows);
  rep.comparisons = d500::compare_backends(rep.rows, 0.95, 7);
  rep.seed_comparisons = c;
  const std::string terminal = d500::render_console(d500::report_document(rep), 0);
  EXPECT_NE(terminal.find("train: blas against reference across 3 seeds: "), std::string::npos) << terminal;
  EXPECT_NE(terminal.find("no significant difference; per seed 1: 0.925, 2: 1.16, 3: 2.71; about "), std::string::npos)
      << terminal;
  const int n = replicates_to_resolve(c[0].baseline_medians, c[0].other_medians, 0.95);
  EXPECT_GT(n, 3) << "three seeds did not resolve it";
  EXPECT_NE(terminal.find("about " + std::to_string(n) + " seeds would tell " +
                          d500::fmt_sig(c[0].speedup.estimate, 3) + " from 1 at the spread these 3 show"),
            std::string::npos)
      << terminal;
}

// How many replicates a paired comparison would need: log ratios 0.1, 0.3, 0.5 (mean 0.3, sd 0.2)
// need n with t(0.975; n-1) 0.2 / sqrt(n) < 0.3: at 4, t(3) = 3.182 gives 0.318; at 5, t(4) =
// 2.776 gives 0.248 (tables). Nothing to resolve without spread or with one pair; a ratio of
// 1.001 at this spread needs more than 200.
TEST(Comparisons, ReplicatesToResolveAComparisonFollowTheTInterval) {
  const std::vector<double> ones{1, 1, 1};
  EXPECT_EQ(replicates_to_resolve({std::exp(0.1), std::exp(0.3), std::exp(0.5)}, ones, 0.95), 5);
  EXPECT_EQ(replicates_to_resolve({2, 2, 2}, ones, 0.95), 0) << "no spread";
  EXPECT_EQ(replicates_to_resolve({2}, {1}, 0.95), 0) << "one pair: no spread to tell";
  EXPECT_EQ(replicates_to_resolve({1.001 * std::exp(0.2), 1.001 * std::exp(-0.2)}, {1, 1}, 0.95), -1);
}

// The mean's t-interval is shown only for samples without Tukey outliers, whatever the normality
// test says: 10% of 10x outliers can pass Anderson-Darling at n = 10-15.
TEST(MeanGate, OutliersKeepTheMeanHiddenEvenWhenNormalityIsNotRejected) {
  d500::PointRow clean, spiked;
  // Normal quantiles at (i + 0.5) / 12, shuffled: as normal as 12 values get.
  for (double z : {0.319, -1.732, 0.812, -0.105, 1.150, -0.549, 0.105, -1.150, 1.732, -0.319, 0.549, -0.812})
    clean.costs.push_back(1 + 0.01 * z);
  spiked.costs = clean.costs;
  spiked.costs[3] = 10;
  for (auto* r : {&clean, &spiked}) {
    r->normality = anderson_darling(r->costs);
    r->outliers = tukey_outliers(r->costs);
  }
  EXPECT_TRUE(clean.mean_trusted());
  EXPECT_EQ(spiked.outliers.high, 1);
  EXPECT_FALSE(spiked.mean_trusted());
  spiked.time = summarize(spiked.costs);
  EXPECT_EQ(d500::mean_text(spiked).rfind("not", 0), 0u) << d500::mean_text(spiked);
}

// The quality table's machine column: the host's load, and on a GPU with NVML whether its power
// or thermal limit held it back over the repetitions.
TEST(MachineText, SaysWhetherTheGpuWasHeldBackWhereNvmlWasRead) {
  d500::PointRow r;
  EXPECT_EQ(d500::machine_text(r), "-");
  r.facts["machine.busy"] = std::int64_t{0};
  r.facts["machine.other_load"] = 0.5;
  r.facts["machine.steal_share"] = 0.0;
  EXPECT_EQ(d500::machine_text(r), "quiet: +0.50 load, 0.0% steal");
  r.facts["machine.other_load"] = -0.35;  // the job's threads did not all run at once
  EXPECT_EQ(d500::machine_text(r), "quiet: no other load, 0.0% steal");
  r.facts["machine.other_load"] = 0.5;
  r.facts["device.throttled"] = std::int64_t{0};
  r.facts["device.capped_s"] = 0.0;
  r.facts["device.span_s"] = 12.5;
  r.facts["device.sm_clock_mhz_end"] = 1980.0;
  r.facts["device.clock_event_reasons"] = std::string("none");
  r.facts["device.energy_j"] = 8125.0;
  EXPECT_EQ(d500::machine_text(r),
            "quiet: +0.50 load, 0.0% steal; GPU at its clocks (capped 0.0 s of 12.5 s, "
            "SM clock at the end 1980 MHz, reasons: none, 8125 J)");
  r.facts["device.throttled"] = std::int64_t{1};
  r.facts["device.capped_s"] = 3.0;
  r.facts["device.sm_clock_mhz_end"] = 1410.0;
  r.facts["device.clock_event_reasons"] = std::string("power cap (software)");
  r.facts.erase("device.energy_j");  // a rank could not read its GPU's energy
  EXPECT_EQ(d500::machine_text(r),
            "quiet: +0.50 load, 0.0% steal; GPU held back (capped 3.0 s of 12.5 s, "
            "SM clock at the end 1410 MHz, reasons: power cap (software)): timings are of a slowed GPU");
  // A span too short for NVML's energy counter to advance: no energy, and why.
  r.facts["device.energy_j"] = std::nan("");
  r.facts["device.energy_note"] =
      std::string("NVML's energy counter did not advance over the 2.1 ms span on 1 of 1 rank(s)");
  EXPECT_EQ(d500::machine_text(r),
            "quiet: +0.50 load, 0.0% steal; GPU held back (capped 3.0 s of 12.5 s, "
            "SM clock at the end 1410 MHz, reasons: power cap (software), energy not resolved: NVML's "
            "counter did not advance): timings are of a slowed GPU");
}
