#pragma once
// Robust summaries for benchmark timings (see docs/statistics.md): the median with an
// exact, distribution-free confidence interval from binomial order statistics.
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "metrics/stopping.hpp"

namespace d500::stats {

// The exact interval's order statistics live with the stopping rule that uses them too.
using ::d500::quantile_ci_ranks;
using ::d500::RankInterval;

// The median (the mean of the two middle values for even n) of unsorted data.
double median(std::vector<double> x);

struct Summary {
  int n = 0;
  double median = 0, lo = 0, hi = 0;  // lo/hi meaningful only when has_ci
  bool has_ci = false;
  double coverage = 0, confidence = 0;
  double min = 0, max = 0;
};
Summary summarize(std::vector<double> x, double confidence = 0.95);

// A tail quantile of a point's costs (rule 8 of Hoefler and Belli: where the tail matters, the
// median is not the measure): the sample p-quantile (type 7, below) with the exact equal-tailed
// order-statistic interval at `confidence` (quantile_ci_ranks), where one exists for this n (at
// 95%: n >= 36 for p = 0.9, n >= 368 for p = 0.99); `least_n_for_ci` says how many it needs.
struct QuantileSummary {
  double p = 0, estimate = 0, lo = 0, hi = 0, coverage = 0;
  bool has_ci = false;
  int n = 0, least_n_for_ci = 0;
};
QuantileSummary summarize_quantile(std::vector<double> x, double p, double confidence);

// Sample quantile, linear interpolation between order statistics (Hyndman-Fan type 7, as R's
// default and numpy's), of sorted data.
double quantile_sorted(const std::vector<double>& sorted, double p);

// The Harrell-Davis estimate of the p-quantile of sorted data: the order statistics weighted by
// the Beta((n+1)p, (n+1)(1-p)) distribution's mass over [(i-1)/n, i/n]. Smooth in p, which the
// repetition advice needs where it reads quantiles between adjacent order statistics.
double harrell_davis_sorted(const std::vector<double>& sorted, double p);

// Mean with Student's t interval: x_bar +- t(1 - alpha/2; n - 1) s / sqrt(n).
struct MeanInterval {
  int n = 0;
  double mean = 0, sd = 0, lo = 0, hi = 0;
  bool valid = false;  // n >= 2
};
MeanInterval mean_t_interval(const std::vector<double>& x, double confidence);

// Anderson-Darling test of normality with mean and variance estimated from the data
// (D'Agostino & Stephens 1986, case 3): A2, the small-sample corrected A2*, and its p-value.
struct NormalityTest {
  double a2 = 0, a2_star = 0, p_value = 0;
  bool applicable = false;  // n >= 8 and the data are not all equal
  bool rejects(double alpha = 0.05) const { return applicable && p_value < alpha; }
};
NormalityTest anderson_darling(std::vector<double> x);

// Tukey's fences [Q1 - 1.5 IQR, Q3 + 1.5 IQR]: how many values lie outside. Counted, never removed.
struct Outliers {
  double lo_fence = 0, hi_fence = 0;
  int low = 0, high = 0;
};
Outliers tukey_outliers(std::vector<double> x);

// Kruskal-Wallis H test (tie-corrected, chi-square approximation): do the groups come from
// one distribution? Used to flag ranks whose timings differ.
struct KruskalWallis {
  double h = 0, p_value = 1;
  int df = 0;
  bool applicable = false;  // >= 2 groups with data, and not all values equal
};
KruskalWallis kruskal_wallis(const std::vector<std::vector<double>>& groups);

// Do the ranks of a job differ? Their durations are paired by repetition (every rank times the
// same repetition, and a slow repetition is slow on all of them), so the test is a paired one:
// Friedman's chi-square (tie-corrected, as SciPy's friedmanchisquare) over the repetitions as
// blocks, for 3 or more ranks; the exact two-sided sign test (SciPy's binomtest) for 2.
struct PairedRanksTest {
  double statistic = 0, p_value = 1;
  int df = 0, blocks = 0;
  std::string method;       // "Friedman" or "sign test"
  bool applicable = false;  // >= 2 treatments, >= 2 blocks (sign test: >= 1 untied pair), not all equal
};
// blocks[i][j]: treatment j's value in block i; every block has the same number of treatments.
PairedRanksTest paired_ranks_test(const std::vector<std::vector<double>>& blocks);

// Are the repetitions independent draws? Spearman's rank correlation of the values with their
// order (a trend: p from the t approximation, as SciPy's spearmanr) and the lag-1
// autocorrelation sum((x_t - m)(x_t+1 - m)) / sum((x_t - m)^2), whose bound under independence
// is about +-z / sqrt(n).
struct IndependenceCheck {
  double trend_rho = 0, trend_p = 1, lag1 = 0;
  bool applicable = false;  // n >= 10 and not all equal
  bool trend(double alpha = 0.01) const { return applicable && trend_p < alpha; }
  bool autocorrelated(int n, double z = 2.576) const {
    return applicable && std::abs(lag1) > z / std::sqrt(static_cast<double>(n));
  }
};
IndependenceCheck independence_check(const std::vector<double>& x);

// A point measured in k separate launches (jobs): the two-stage summary. Stage one, each launch's
// median; stage two, Student's t interval (k - 1 degrees of freedom) on the logarithms of the k
// launch medians, exponentiated: an interval for the typical (geometric mean) launch median that
// covers the variation between launches, not only within one. `between_share` is the share of
// the variance of log costs between launches (one-way random-effects ANOVA, method of moments:
// (MSB - MSW) / n0 over that plus MSW, 0 when negative).
struct LaunchInterval {
  int launches = 0;             // launches with values
  std::vector<double> medians;  // per launch
  double estimate = 0, lo = 0, hi = 0;
  bool has_ci = false;  // k >= 2 and the launch medians are positive
  double between_share = 0;
  double within_sd_log = 0, between_sd_log = 0;
};
LaunchInterval launch_interval(const std::vector<std::vector<double>>& per_launch, double confidence);

// Clopper-Pearson (exact) interval for a binomial proportion k / n.
struct Proportion {
  int k = 0, n = 0;
  double estimate = 0, lo = 0, hi = 0;
};
Proportion clopper_pearson(int k, int n, double confidence);

// The Kaplan-Meier median of right-censored times with its interval, as R's survfit (the
// default conf.type = "log": S(t) exp(+-z sqrt(sum d / (n (n - d)))), Greenwood on the log
// scale; Brookmeyer-Crowley: the lower limit is where the curve's lower band first falls to
// 0.5, the upper limit where its upper band does). Where a curve sits at exactly 0.5 from one
// event time to the next, the midpoint of the two. `defined` false: the curve never falls to
// 0.5 within the data (nor then does the upper limit).
struct KaplanMeierMedian {
  bool defined = false, lo_defined = false, hi_defined = false;
  double median = 0, lo = 0, hi = 0;
};
// time[i] with event[i] (true: observed, false: censored at that time).
KaplanMeierMedian kaplan_meier_median(const std::vector<double>& time, const std::vector<bool>& event,
                                      double confidence);

// A ratio with its interval. `bounded` is false when the interval is unbounded (Fieller with a
// denominator not significantly different from zero).
struct RatioInterval {
  double estimate = 0, lo = 0, hi = 0;
  bool bounded = true;
  std::string method;
  // Why there is no interval at all, when there is none by policy (then bounded is false too):
  // a ratio of medians gets an interval only where each median would get its own.
  std::string withheld;
  bool excludes_one() const { return bounded && (lo > 1 || hi < 1); }
};

// Two configurations measured in the same k launches (launch i of each in the same time slot,
// as a campaign's `launches` orders its jobs): the ratio of their typical launch medians,
// median(a_i) / median(b_i) paired by launch, as the exponentiated Student's t interval (k - 1
// degrees of freedom) on the k log ratios: it covers the variation between launches, which a
// comparison within one launch does not. `a_medians` and `b_medians` are the launches' medians,
// in the same launch order; no interval (bounded false, `withheld` says why) for k < 2 or a
// median that is not positive.
RatioInterval launch_ratio(const std::vector<double>& a_medians, const std::vector<double>& b_medians,
                           double confidence);

// How many replicates (launches, seeds) a paired comparison of this spread would need for its
// launch_ratio interval to exclude 1 at the ratio it found: the least n >= 2 whose half-width
// t(1 - alpha/2; n - 1) s / sqrt(n) on the log ratios falls below |their mean|, s their standard
// deviation; 0 where there is nothing to resolve (fewer than two pairs, no spread, a ratio of
// exactly 1), -1 beyond `most`. A plan, not a verdict: s is itself estimated from the k pairs.
int replicates_to_resolve(const std::vector<double>& a_medians, const std::vector<double>& b_medians, double confidence,
                          int most = 200);

// Two-sample bootstrap of median(a) / median(b): each sample resampled independently,
// `resamples` times, from a fixed seed (reproducible reports). Percentile or BCa limits (see
// bca_levels). One policy for small samples, medians and ratios alike: no interval (`withheld`)
// unless each sample has at least smallest_n_with_median_ci(confidence) values (6 at 95%). Samples larger than
// kDirectBootstrapMax are not resampled value by value: each resample's median is drawn from its exact distribution
// (see ResampledMedian), for a resample of odd size (n, or n - 1 when n is even).
enum class BootstrapMethod { Percentile, BCa };
inline constexpr std::size_t kDirectBootstrapMax = 2000;

// The median of k draws (k odd) with replacement from sorted data x(1) <= ... <= x(n) is x(J),
// where P(J <= j) = P(Binomial(k, j/n) >= (k + 1) / 2). This tabulates that distribution where
// it is neither 0 nor 1 (about 14 sqrt(n) ranks) and draws from it by inversion.
class ResampledMedian {
 public:
  ResampledMedian(const std::vector<double>& sorted, std::size_t k);
  double draw(double u) const;  // u uniform in (0, 1)

 private:
  const std::vector<double>& x_;
  std::size_t first_ = 0;    // rank (0-based) of cdf_[0]
  std::vector<double> cdf_;  // P(J <= first_ + i + 1)
};

// The medians of bootstrap resamples of one sample, drawn one after another from `gen`: value by
// value (a resample of the sample's size, then its median) unless `exact`; with `exact`, each from
// ResampledMedian's exact distribution for a resample of odd size (n, or n - 1 when n is even), one
// draw from `gen` each, which costs O(log n) instead of O(n). What every bootstrap of a median in
// the analysis draws from (bootstrap_median_ratio's, the scaling model's). Not copyable: the
// exact distribution refers to the sorted copy held here.
class MedianResampler {
 public:
  MedianResampler(const std::vector<double>& x, bool exact);
  MedianResampler(const MedianResampler&) = delete;
  MedianResampler& operator=(const MedianResampler&) = delete;
  double draw(std::mt19937_64& gen);
  bool exact() const { return exact_.has_value(); }

 private:
  std::vector<double> x_, resample_;
  std::optional<ResampledMedian> exact_;
};

// Efron's bias-corrected and accelerated levels (Efron & Tibshirani 1993, 14.3 and 15.4; as
// SciPy's `bootstrap`): z0 from the share of replicates below the estimate, ties counting half;
// the acceleration from the jackknife of each sample in turn, the other held whole:
// a = sum_j sum_i U_ji^3 / n_j^3 / (6 (sum_j sum_i U_ji^2 / n_j^2)^1.5), with
// U_ji = (n_j - 1)(mean_i theta_ji - theta_ji). The limits are the replicates' quantiles (type 7)
// at p_lo and p_hi.
struct BcaLevels {
  double z0 = 0, acceleration = 0, p_lo = 0, p_hi = 1;
};
// replicates: the bootstrap statistics, sorted; jackknife[j]: the statistic with each value of
// sample j left out in turn.
BcaLevels bca_levels(const std::vector<double>& replicates, double estimate,
                     const std::vector<std::vector<double>>& jackknife, double confidence);

RatioInterval bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                                     BootstrapMethod method, int resamples = 2000, std::uint64_t seed = 1);

// A distribution-free interval for median(a) / median(b) of independent samples: each median's
// exact order-statistic interval at the level sqrt(confidence), divided crosswise
// ([lo_a / hi_b, hi_a / lo_b]); since the two cover independently, with at least sqrt(confidence)
// each, the ratio's covers with at least `confidence` whatever the distributions. Withheld (bounded
// false) where a sample is too small for its median's interval at that level.
RatioInterval exact_median_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence);

// Fieller's interval for mean(a) / mean(b) of independent samples.
RatioInterval fieller_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence);

// Whether the median's CI is within `target` (relative half-width) and, if not, about how many
// repetitions would make it so. No normality is assumed, nor the 1/sqrt(n) law: for each
// candidate count m, the exact interval's ranks (l, u) at m are mapped to the sample's own
// (Harrell-Davis) quantiles at l/(m+1) and u/(m+1), the expected positions of those order
// statistics, against the Harrell-Davis median, so the
// predicted half-width follows the shape of the data (for bimodal samples it falls steeply once
// both limits sit in the median's mode). The smallest m that reaches the target is advised;
// beyond `cap` the advice is only "more than cap" (`capped`).
struct RepetitionAdvice {
  bool enough = false;
  double rel_half_width = 0;  // max(median - lo, hi - median) / median; inf without a CI
  int needed = 0;             // suggested total repetitions (cap when capped)
  bool capped = false;        // the target is not reached by `cap` repetitions
};
RepetitionAdvice repetition_advice(const std::vector<double>& x, const Summary& s, double target = 0.05, int floor = 10,
                                   int cap = 1000);

}  // namespace d500::stats
