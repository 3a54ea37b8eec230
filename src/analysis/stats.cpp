#include "analysis/stats.hpp"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <map>
#include <mutex>

namespace d500::stats {

namespace {
double median_inplace(std::vector<double>& x);

// The summaries below sort their copy of the data; a caller that holds it sorted already (a
// report summarises each point's costs several ways: summarize_point) pays O(n) for the check.
void sort_unless_sorted(std::vector<double>& x) {
  if (!std::is_sorted(x.begin(), x.end())) std::sort(x.begin(), x.end());
}
}  // namespace

double median(std::vector<double> x) { return x.empty() ? 0 : median_inplace(x); }

namespace {

// The exact interval of the p-quantile of sorted data (its order statistics at quantile_ci_ranks'
// ranks): false, and nothing set, where this n has none.
bool order_statistic_interval(const std::vector<double>& sorted, double p, double confidence, double& lo, double& hi,
                              double& coverage) {
  const RankInterval r = quantile_ci_ranks(static_cast<int>(sorted.size()), p, confidence);
  if (!r.valid) return false;
  lo = sorted[static_cast<std::size_t>(r.lo - 1)];
  hi = sorted[static_cast<std::size_t>(r.hi - 1)];
  coverage = r.coverage;
  return true;
}

}  // namespace

Summary summarize(std::vector<double> x, double confidence) {
  Summary s;
  s.n = static_cast<int>(x.size());
  s.confidence = confidence;
  if (x.empty()) return s;
  sort_unless_sorted(x);
  s.min = x.front();
  s.max = x.back();
  std::size_t n = x.size();
  s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  s.has_ci = order_statistic_interval(x, 0.5, confidence, s.lo, s.hi, s.coverage);
  return s;
}

QuantileSummary summarize_quantile(std::vector<double> x, double p, double confidence) {
  QuantileSummary q;
  q.p = p;
  q.n = static_cast<int>(x.size());
  // The least n with an interval (the upper rank must fit: P(at most n - 1 below) >= the upper
  // tail), searched once per (p, confidence): a report asks for the same few.
  static std::mutex guard;
  static std::map<std::pair<double, double>, int> least;
  {
    const std::lock_guard<std::mutex> lock(guard);
    auto [it, fresh] = least.try_emplace({p, confidence}, 1);
    if (fresh)
      while (it->second < 100000 && !quantile_ci_ranks(it->second, p, confidence).valid) ++it->second;
    q.least_n_for_ci = it->second;
  }
  if (x.empty()) return q;
  sort_unless_sorted(x);
  q.estimate = quantile_sorted(x, p);
  q.has_ci = order_statistic_interval(x, p, confidence, q.lo, q.hi, q.coverage);
  return q;
}

}  // namespace d500::stats

#include <boost/math/distributions/beta.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace d500::stats {

double quantile_sorted(const std::vector<double>& x, double p) {
  if (x.empty()) return std::numeric_limits<double>::quiet_NaN();
  double h = (static_cast<double>(x.size()) - 1) * p;
  std::size_t lo = static_cast<std::size_t>(std::floor(h));
  std::size_t hi = std::min(lo + 1, x.size() - 1);
  return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

double harrell_davis_sorted(const std::vector<double>& x, double p) {
  const std::size_t n = x.size();
  if (n < 2) return n ? x[0] : std::numeric_limits<double>::quiet_NaN();
  // The weights depend on (n, p) alone: computed once per thread and kept (a report asks the
  // same few of them for thousands of points of one size: repetition advice, per point).
  struct Weights {
    std::size_t first = 0;
    std::vector<double> w;
  };
  thread_local std::map<std::pair<std::size_t, double>, Weights> cache;
  auto [it, fresh] = cache.try_emplace({n, p});
  Weights& W = it->second;
  if (fresh) {
    const double dn = static_cast<double>(n), a = p * (dn + 1), b = (1 - p) * (dn + 1);
    // Weights outside 10 standard deviations of the Beta are below double precision: skip them,
    // so that a large sample costs O(sqrt(n)) incomplete beta evaluations.
    const double sd = std::sqrt(p * (1 - p) / (dn + 2));
    W.first = static_cast<std::size_t>(std::max(0.0, std::floor((p - 10 * sd) * dn)));
    const auto last = static_cast<std::size_t>(std::min(dn, std::ceil((p + 10 * sd) * dn)));
    double prev = W.first == 0 ? 0 : boost::math::ibeta(a, b, static_cast<double>(W.first) / dn);
    for (std::size_t i = W.first; i < last; ++i) {
      const double next = i + 1 == n ? 1 : boost::math::ibeta(a, b, static_cast<double>(i + 1) / dn);
      W.w.push_back(next - prev);
      prev = next;
    }
    if (cache.size() > 4096) {  // bounded: a report of many sample sizes starts afresh
      Weights keep = std::move(W);
      cache.clear();
      it = cache.try_emplace({n, p}, std::move(keep)).first;
    }
  }
  const Weights& use = it->second;
  double sum = 0;
  for (std::size_t k = 0; k < use.w.size(); ++k) sum += use.w[k] * x[use.first + k];
  return sum;
}

static double mean_of(const std::vector<double>& x) {
  return x.empty() ? 0 : std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

static double var_of(const std::vector<double>& x, double m) {
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return x.size() > 1 ? s / static_cast<double>(x.size() - 1) : 0;
}

MeanInterval mean_t_interval(const std::vector<double>& x, double confidence) {
  MeanInterval r;
  r.n = static_cast<int>(x.size());
  r.mean = mean_of(x);
  if (r.n < 2) return r;
  r.sd = std::sqrt(var_of(x, r.mean));
  boost::math::students_t t(r.n - 1);
  double h = boost::math::quantile(t, 1 - (1 - confidence) / 2) * r.sd / std::sqrt(static_cast<double>(r.n));
  r.lo = r.mean - h;
  r.hi = r.mean + h;
  r.valid = true;
  return r;
}

NormalityTest anderson_darling(std::vector<double> x) {
  NormalityTest r;
  const std::size_t n = x.size();
  if (n < 8) return r;
  sort_unless_sorted(x);
  const double m = mean_of(x), sd = std::sqrt(var_of(x, m));
  if (!(sd > 0)) return r;
  boost::math::normal z;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double fi = boost::math::cdf(z, (x[i] - m) / sd);
    double fj = boost::math::cdf(z, (x[n - 1 - i] - m) / sd);
    fi = std::clamp(fi, 1e-300, 1 - 1e-16);
    fj = std::clamp(fj, 1e-300, 1 - 1e-16);
    s += (2.0 * static_cast<double>(i) + 1) * (std::log(fi) + std::log1p(-fj));
  }
  const double dn = static_cast<double>(n);
  r.a2 = -dn - s / dn;
  const double a = r.a2_star = r.a2 * (1 + 0.75 / dn + 2.25 / (dn * dn));
  if (a >= 0.6)
    r.p_value = std::exp(1.2937 - 5.709 * a + 0.0186 * a * a);
  else if (a >= 0.34)
    r.p_value = std::exp(0.9177 - 4.279 * a - 1.38 * a * a);
  else if (a >= 0.2)
    r.p_value = 1 - std::exp(-8.318 + 42.796 * a - 59.938 * a * a);
  else
    r.p_value = 1 - std::exp(-13.436 + 101.14 * a - 223.73 * a * a);
  r.p_value = std::clamp(r.p_value, 0.0, 1.0);
  r.applicable = true;
  return r;
}

Outliers tukey_outliers(std::vector<double> x) {
  Outliers o;
  if (x.empty()) return o;
  sort_unless_sorted(x);
  const double q1 = quantile_sorted(x, 0.25), q3 = quantile_sorted(x, 0.75), iqr = q3 - q1;
  o.lo_fence = q1 - 1.5 * iqr;
  o.hi_fence = q3 + 1.5 * iqr;
  for (double v : x) o.low += v<o.lo_fence, o.high += v> o.hi_fence;
  return o;
}

KruskalWallis kruskal_wallis(const std::vector<std::vector<double>>& groups) {
  KruskalWallis r;
  std::vector<std::pair<double, std::size_t>> all;
  int nonempty = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    nonempty += !groups[g].empty();
    for (double v : groups[g]) all.push_back({v, g});
  }
  if (nonempty < 2) return r;
  std::sort(all.begin(), all.end());
  const double n = static_cast<double>(all.size());
  std::vector<double> rank_sum(groups.size(), 0);
  double ties = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double avg = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2, t = static_cast<double>(j - i);
    ties += t * t * t - t;
    for (std::size_t k = i; k < j; ++k) rank_sum[all[k].second] += avg;
    i = j;
  }
  const double correction = 1 - ties / (n * n * n - n);
  if (!(correction > 0)) return r;
  double h = 0;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (!groups[g].empty()) h += rank_sum[g] * rank_sum[g] / static_cast<double>(groups[g].size());
  r.h = (12 / (n * (n + 1)) * h - 3 * (n + 1)) / correction;
  r.df = nonempty - 1;
  r.p_value = boost::math::cdf(boost::math::complement(boost::math::chi_squared(r.df), std::max(0.0, r.h)));
  r.applicable = true;
  return r;
}

Proportion clopper_pearson(int k, int n, double confidence) {
  Proportion p;
  p.k = k;
  p.n = n;
  if (n <= 0) return p;
  const double alpha = 1 - confidence;
  p.estimate = static_cast<double>(k) / n;
  p.lo = k == 0 ? 0 : boost::math::quantile(boost::math::beta_distribution<double>(k, n - k + 1), alpha / 2);
  p.hi = k == n ? 1 : boost::math::quantile(boost::math::beta_distribution<double>(k + 1, n - k), 1 - alpha / 2);
  return p;
}

namespace {

// Uniform integer in [0, n) from a 64-bit generator, without modulo bias (Lemire 2019);
// unlike std::uniform_int_distribution, the same on every standard library.
std::size_t bounded(std::mt19937_64& g, std::size_t n) {
  unsigned __int128 m = static_cast<unsigned __int128>(g()) * n;
  std::uint64_t l = static_cast<std::uint64_t>(m);
  if (l < n) {
    const std::uint64_t t = (0 - static_cast<std::uint64_t>(n)) % n;
    while (l < t) {
      m = static_cast<unsigned __int128>(g()) * n;
      l = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::size_t>(m >> 64);
}

double median_inplace(std::vector<double>& x) {
  const std::size_t n = x.size(), h = n / 2;
  std::nth_element(x.begin(), x.begin() + static_cast<long>(h), x.end());
  if (n % 2) return x[h];
  const double upper = x[h];
  return 0.5 * (*std::max_element(x.begin(), x.begin() + static_cast<long>(h)) + upper);
}

// Medians of a sorted sample with each element left out in turn, in O(n).
std::vector<double> leave_one_out_medians(const std::vector<double>& s) {
  const std::size_t n = s.size();
  std::vector<double> out(n);
  if (n < 2) return std::vector<double>(n, n ? s[0] : 0);
  const std::size_t m = n - 1;  // size after removal
  auto at = [&](std::size_t k, std::size_t removed) { return k < removed ? s[k] : s[k + 1]; };
  for (std::size_t i = 0; i < n; ++i) out[i] = m % 2 ? at(m / 2, i) : 0.5 * (at(m / 2 - 1, i) + at(m / 2, i));
  return out;
}

}  // namespace

ResampledMedian::ResampledMedian(const std::vector<double>& sorted, std::size_t k) : x_(sorted) {
  const double n = static_cast<double>(sorted.size());
  const double a = static_cast<double>((k + 1) / 2), b = static_cast<double>(k) - a + 1;
  // P(J <= j) = P(Bin(k, j/n) >= a) = I_{j/n}(a, b), the regularised incomplete beta.
  auto cdf = [&](std::size_t j) {
    return j >= sorted.size() ? 1.0 : boost::math::ibeta(a, b, static_cast<double>(j) / n);
  };
  auto first_at_least = [&](double target) {
    std::size_t lo = 0, hi = sorted.size();
    while (lo < hi) {
      std::size_t mid = lo + (hi - lo) / 2;
      if (cdf(mid) >= target)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  first_ = first_at_least(1e-15);
  const std::size_t last = first_at_least(1 - 1e-15);
  for (std::size_t j = first_; j <= last; ++j) cdf_.push_back(cdf(j));
  cdf_.back() = 1.0;
}

double ResampledMedian::draw(double u) const {
  // J = the smallest j with P(J <= j) >= u; cdf_[i] is P(J <= first_ + i).
  const std::size_t i = static_cast<std::size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  const std::size_t j = std::max<std::size_t>(first_ + i, 1);
  return x_[std::min(j, x_.size()) - 1];
}

MedianResampler::MedianResampler(const std::vector<double>& x, bool exact) : x_(x) {
  if (!exact || x_.empty()) {
    resample_.resize(x_.size());
    return;
  }
  std::sort(x_.begin(), x_.end());
  exact_.emplace(x_, x_.size() % 2 ? x_.size() : x_.size() - 1);
}

double MedianResampler::draw(std::mt19937_64& gen) {
  if (exact_) return exact_->draw((static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0);  // uniform in (0, 1)
  if (x_.empty()) return 0;
  for (auto& v : resample_) v = x_[bounded(gen, x_.size())];
  return median_inplace(resample_);
}

BcaLevels bca_levels(const std::vector<double>& replicates, double estimate,
                     const std::vector<std::vector<double>>& jackknife, double confidence) {
  BcaLevels l;
  const double alpha = 1 - confidence;
  l.p_lo = alpha / 2;
  l.p_hi = 1 - alpha / 2;
  const double count = static_cast<double>(replicates.size());
  if (replicates.empty()) return l;
  // The share below the estimate, ties counting half; kept within (0, 1) so that z0 is finite
  // when every replicate lies on one side (half a replicate's share from the edge).
  const auto less = std::lower_bound(replicates.begin(), replicates.end(), estimate);
  const auto not_more = std::upper_bound(less, replicates.end(), estimate);
  const double below = static_cast<double>(less - replicates.begin()) + 0.5 * static_cast<double>(not_more - less);
  const double share = std::clamp(below / count, 0.5 / count, 1 - 0.5 / count);
  boost::math::normal z;
  l.z0 = boost::math::quantile(z, share);
  double num = 0, den = 0;
  for (const auto& jack : jackknife) {
    const double n = static_cast<double>(jack.size());
    if (jack.size() < 2) continue;
    const double mean = mean_of(jack);
    double cubes = 0, squares = 0;
    for (double t : jack) {
      const double u = (n - 1) * (mean - t);
      cubes += u * u * u;
      squares += u * u;
    }
    num += cubes / (n * n * n);
    den += squares / (n * n);
  }
  l.acceleration = den > 0 ? num / (6 * std::pow(den, 1.5)) : 0;
  auto adjust = [&](double p) {
    const double zp = boost::math::quantile(z, p);
    return boost::math::cdf(z, l.z0 + (l.z0 + zp) / (1 - l.acceleration * (l.z0 + zp)));
  };
  l.p_lo = adjust(l.p_lo);
  l.p_hi = adjust(l.p_hi);
  return l;
}

RatioInterval bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                                     BootstrapMethod method, int resamples, std::uint64_t seed) {
  RatioInterval r;
  r.estimate = median(a) / median(b);
  const bool direct = a.size() <= kDirectBootstrapMax && b.size() <= kDirectBootstrapMax;
  r.method = std::string(method == BootstrapMethod::BCa ? "BCa" : "percentile") +
             " bootstrap of the ratio of medians, " + std::to_string(resamples) + " resamples, seed " +
             std::to_string(seed) +
             (direct ? "" : ", resample medians drawn from their exact distribution (odd resample size)");
  const int least = smallest_n_with_median_ci(confidence);
  if (a.size() < static_cast<std::size_t>(least) || b.size() < static_cast<std::size_t>(least)) {
    r.bounded = false;
    r.withheld = "fewer than " + std::to_string(least) + " repetitions in a sample (n = " + std::to_string(a.size()) +
                 " and " + std::to_string(b.size()) +
                 "): no median has an exact interval there, so no ratio of medians gets one";
    return r;
  }
  std::mt19937_64 gen(seed);
  std::vector<double> theta(static_cast<std::size_t>(resamples));
  MedianResampler ra(a, !direct), rb(b, !direct);
  for (int k = 0; k < resamples; ++k) {
    const double num = ra.draw(gen);
    theta[static_cast<std::size_t>(k)] = num / rb.draw(gen);
  }
  std::sort(theta.begin(), theta.end());
  const double alpha = 1 - confidence;
  double p_lo = alpha / 2, p_hi = 1 - alpha / 2;
  if (method == BootstrapMethod::BCa) {
    std::vector<double> sa(a), sb(b);
    std::sort(sa.begin(), sa.end());
    std::sort(sb.begin(), sb.end());
    const double ma = median(a), mb = median(b);
    std::vector<std::vector<double>> jack(2);
    for (double m : leave_one_out_medians(sa)) jack[0].push_back(m / mb);
    for (double m : leave_one_out_medians(sb)) jack[1].push_back(ma / m);
    const BcaLevels l = bca_levels(theta, r.estimate, jack, confidence);
    p_lo = l.p_lo;
    p_hi = l.p_hi;
  }
  r.lo = quantile_sorted(theta, p_lo);
  r.hi = quantile_sorted(theta, p_hi);
  return r;
}

RatioInterval exact_median_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  RatioInterval r;
  r.estimate = median(a) / median(b);
  r.method = "exact order-statistic intervals of both medians at sqrt(confidence), divided crosswise";
  const double each = std::sqrt(confidence);
  const Summary sa = summarize(a, each), sb = summarize(b, each);
  if (!sa.has_ci || !sb.has_ci || !(sb.lo > 0)) {
    r.bounded = false;
    r.withheld = "a sample too small for its median's exact interval at " + std::to_string(each);
    return r;
  }
  r.lo = sa.lo / sb.hi;
  r.hi = sa.hi / sb.lo;
  return r;
}

RatioInterval fieller_ratio(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  RatioInterval r;
  r.method = "Fieller interval for the ratio of means";
  const double ma = mean_of(a), mb = mean_of(b);
  r.estimate = ma / mb;
  if (a.size() < 2 || b.size() < 2) return r.bounded = false, r;
  const double v11 = var_of(a, ma) / static_cast<double>(a.size()), v22 = var_of(b, mb) / static_cast<double>(b.size());
  // Degrees of freedom of the smaller sample: conservative for unequal sizes.
  const double t = boost::math::quantile(boost::math::students_t(static_cast<double>(std::min(a.size(), b.size()) - 1)),
                                         1 - (1 - confidence) / 2);
  const double qa = mb * mb - t * t * v22, qb = -2 * ma * mb, qc = ma * ma - t * t * v11;
  const double disc = qb * qb - 4 * qa * qc;
  if (qa <= 0 || disc < 0) return r.bounded = false, r;
  r.lo = (-qb - std::sqrt(disc)) / (2 * qa);
  r.hi = (-qb + std::sqrt(disc)) / (2 * qa);
  return r;
}

namespace {
// Average ranks (1-based) of x, ties sharing their mean rank; adds sum(t^3 - t) over tie groups.
std::vector<double> average_ranks(const std::vector<double>& x, double* ties = nullptr) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && x[order[j]] == x[order[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + 1 + j);
    for (std::size_t k = i; k < j; ++k) r[order[k]] = avg;
    const double t = static_cast<double>(j - i);
    if (ties) *ties += t * t * t - t;
    i = j;
  }
  return r;
}
}  // namespace

PairedRanksTest paired_ranks_test(const std::vector<std::vector<double>>& blocks) {
  PairedRanksTest r;
  const std::size_t n = blocks.size(), k = n ? blocks.front().size() : 0;
  r.blocks = static_cast<int>(n);
  if (n < 2 || k < 2) return r;
  if (k == 2) {
    int pos = 0, neg = 0;
    for (const auto& b : blocks) pos += b[0] > b[1], neg += b[0] < b[1];
    const int m = pos + neg;
    r.method = "sign test";
    r.statistic = pos;
    r.df = m;
    if (m == 0) return r;
    r.applicable = true;
    boost::math::binomial_distribution<double> bin(m, 0.5);
    r.p_value = std::min(1.0, 2 * boost::math::cdf(bin, std::min(pos, neg)));
    return r;
  }
  double ties = 0;
  std::vector<double> sums(k, 0);
  for (const auto& b : blocks) {
    const auto rk = average_ranks(b, &ties);
    for (std::size_t j = 0; j < k; ++j) sums[j] += rk[j];
  }
  const double dn = static_cast<double>(n), dk = static_cast<double>(k);
  double ss = 0;
  for (double s : sums) ss += s * s;
  const double c = 1 - ties / (dk * (dk * dk - 1) * dn);
  r.method = "Friedman";
  r.df = static_cast<int>(k) - 1;
  if (c <= 0) return r;  // every block all ties
  r.applicable = true;
  r.statistic = (12 / (dk * dn * (dk + 1)) * ss - 3 * dn * (dk + 1)) / c;
  r.p_value = boost::math::cdf(boost::math::complement(boost::math::chi_squared(r.df), std::max(0.0, r.statistic)));
  return r;
}

IndependenceCheck independence_check(const std::vector<double>& x) {
  IndependenceCheck c;
  const std::size_t n = x.size();
  if (n < 10) return c;
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  if (*lo == *hi) return c;
  c.applicable = true;
  // Spearman: Pearson's correlation of the ranks with the index (ties averaged).
  const std::vector<double> rx = average_ranks(x);
  const double mean = (static_cast<double>(n) + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(i + 1) - mean, b = rx[i] - mean;
    sxy += a * b, sxx += a * a, syy += b * b;
  }
  c.trend_rho = sxy / std::sqrt(sxx * syy);
  const double df = static_cast<double>(n) - 2;
  if (std::abs(c.trend_rho) >= 1) {
    c.trend_p = 0;
  } else {
    const double t = c.trend_rho * std::sqrt(df / (1 - c.trend_rho * c.trend_rho));
    c.trend_p = 2 * boost::math::cdf(boost::math::complement(boost::math::students_t(df), std::abs(t)));
  }
  const double m = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    den += (x[i] - m) * (x[i] - m);
    if (i + 1 < n) num += (x[i] - m) * (x[i + 1] - m);
  }
  c.lag1 = num / den;
  return c;
}

RepetitionAdvice repetition_advice(const std::vector<double>& x, const Summary& s, double target, int floor, int cap) {
  RepetitionAdvice a;
  const double confidence = s.confidence > 0 ? s.confidence : 0.95;
  floor = std::max(floor, smallest_n_with_median_ci(confidence));
  a.rel_half_width = s.has_ci && s.median > 0 ? std::max(s.median - s.lo, s.hi - s.median) / s.median
                                              : std::numeric_limits<double>::infinity();
  a.enough = a.rel_half_width <= target && s.n >= floor;
  if (a.enough) return a.needed = s.n, a;
  if (x.size() < 2 || !(s.median > 0)) return a.needed = floor, a;
  std::vector<double> sorted(x);
  sort_unless_sorted(sorted);
  // Two readings of the quantile function, each biased upwards where it fails: the sample's own
  // (type 7) quantiles follow its shape mode by mode but take single spacings at face value; the
  // Harrell-Davis ones resist that noise but smooth across a gap between modes. The smaller wins.
  const double med7 = quantile_sorted(sorted, 0.5), med_hd = harrell_davis_sorted(sorted, 0.5);
  auto predicted = [&](int m) {
    const RankInterval r = quantile_ci_ranks(m, 0.5, confidence);
    if (!r.valid) return std::numeric_limits<double>::infinity();
    const double p_lo = r.lo / (m + 1.0), p_hi = r.hi / (m + 1.0);
    const double w7 = std::max(med7 - quantile_sorted(sorted, p_lo), quantile_sorted(sorted, p_hi) - med7) / med7;
    const double w_hd =
        std::max(med_hd - harrell_davis_sorted(sorted, p_lo), harrell_davis_sorted(sorted, p_hi) - med_hd) / med_hd;
    return std::min(w7, w_hd);
  };
  // Grow geometrically to the first count that reaches the target, then bisect back to the
  // smallest one (the predicted width falls with m, up to the ranks' integer steps).
  int below = floor - 1, m = floor;
  while (predicted(m) > target) {
    if (m >= cap) return a.needed = cap, a.capped = true, a;
    below = m;
    m = std::min(cap, std::max(m + 1, static_cast<int>(m * 1.25)));
  }
  while (m - below > 1) {
    const int mid = below + (m - below) / 2;
    (predicted(mid) > target ? below : m) = mid;
  }
  a.needed = std::max(m, s.n + 1);
  return a;
}

KaplanMeierMedian kaplan_meier_median(const std::vector<double>& time, const std::vector<bool>& event,
                                      double confidence) {
  KaplanMeierMedian m;
  std::vector<std::size_t> order(time.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return time[a] < time[b]; });
  const double z = boost::math::quantile(boost::math::normal(), 1 - (1 - confidence) / 2);
  // The curve and its bands at each distinct event time.
  std::vector<double> t, est, lower, upper;
  double at_risk = static_cast<double>(time.size()), surv = 1, greenwood = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    double deaths = 0;
    while (j < order.size() && time[order[j]] == time[order[i]]) deaths += event[order[j]] ? 1 : 0, ++j;
    if (deaths > 0) {
      surv *= 1 - deaths / at_risk;
      greenwood += at_risk > deaths ? deaths / (at_risk * (at_risk - deaths)) : std::numeric_limits<double>::infinity();
      t.push_back(time[order[i]]);
      est.push_back(surv);
      const double w =
          std::isfinite(greenwood) ? std::exp(z * std::sqrt(greenwood)) : std::numeric_limits<double>::infinity();
      lower.push_back(surv > 0 ? surv / w : 0);
      upper.push_back(surv > 0 ? std::min(1.0, surv * w) : 0);
    }
    at_risk -= static_cast<double>(j - i);
    i = j;
  }
  // Where `curve` first falls to 0.5; on a plateau at exactly 0.5, the midpoint to the next drop.
  auto crossing = [&](const std::vector<double>& curve, bool& defined) {
    constexpr double eps = 1e-12;
    for (std::size_t k = 0; k < curve.size(); ++k) {
      if (curve[k] > 0.5 + eps) continue;
      defined = true;
      if (curve[k] >= 0.5 - eps && k + 1 < t.size()) return 0.5 * (t[k] + t[k + 1]);
      return t[k];
    }
    return 0.0;
  };
  m.median = crossing(est, m.defined);
  m.lo = crossing(lower, m.lo_defined);
  m.hi = crossing(upper, m.hi_defined);
  return m;
}

LaunchInterval launch_interval(const std::vector<std::vector<double>>& per_launch, double confidence) {
  LaunchInterval r;
  std::vector<const std::vector<double>*> used;
  for (const auto& x : per_launch)
    if (!x.empty()) used.push_back(&x), r.medians.push_back(median(x));
  r.launches = static_cast<int>(r.medians.size());
  if (r.launches == 0) return r;
  const bool positive = std::all_of(used.begin(), used.end(), [](const auto* x) {
    return std::all_of(x->begin(), x->end(), [](double v) { return v > 0; });
  });
  if (!positive) return r.estimate = median(r.medians), r;
  std::vector<std::vector<double>> logs;
  for (const auto* x : used) {
    logs.emplace_back();
    for (double v : *x) logs.back().push_back(std::log(v));
  }
  std::vector<double> lm;
  for (double m : r.medians) lm.push_back(std::log(m));
  const double k = static_cast<double>(r.launches);
  const MeanInterval t = mean_t_interval(lm, confidence);
  r.estimate = std::exp(t.mean);
  if (!t.valid) return r;
  r.has_ci = true;
  r.lo = std::exp(t.lo);
  r.hi = std::exp(t.hi);
  // Variance components of the log costs.
  double total = 0, count = 0, sum_sq_n = 0, ssb = 0, ssw = 0;
  for (const auto& l : logs) total += std::accumulate(l.begin(), l.end(), 0.0), count += static_cast<double>(l.size());
  const double grand = total / count;
  for (const auto& l : logs) {
    const double n = static_cast<double>(l.size()), m = mean_of(l);
    ssb += n * (m - grand) * (m - grand);
    for (double v : l) ssw += (v - m) * (v - m);
    sum_sq_n += n * n;
  }
  if (count > k) {
    const double msb = ssb / (k - 1), msw = ssw / (count - k), n0 = (count - sum_sq_n / count) / (k - 1);
    const double between = std::max(0.0, (msb - msw) / n0);
    r.within_sd_log = std::sqrt(msw);
    r.between_sd_log = std::sqrt(between);
    r.between_share = between + msw > 0 ? between / (between + msw) : 0;
  }
  return r;
}

int replicates_to_resolve(const std::vector<double>& a_medians, const std::vector<double>& b_medians, double confidence,
                          int most) {
  std::vector<double> logs;
  for (std::size_t i = 0; i < std::min(a_medians.size(), b_medians.size()); ++i)
    if (a_medians[i] > 0 && b_medians[i] > 0) logs.push_back(std::log(a_medians[i] / b_medians[i]));
  if (logs.size() < 2) return 0;
  const double m = mean_of(logs), sd = std::sqrt(var_of(logs, m));
  if (!(sd > 0) || !(std::fabs(m) > 0)) return 0;
  for (int n = 2; n <= most; ++n) {
    boost::math::students_t t(n - 1);
    if (boost::math::quantile(t, 1 - (1 - confidence) / 2) * sd / std::sqrt(static_cast<double>(n)) < std::fabs(m))
      return n;
  }
  return -1;
}

RatioInterval launch_ratio(const std::vector<double>& a_medians, const std::vector<double>& b_medians,
                           double confidence) {
  RatioInterval r;
  r.method = "paired by launch: Student's t on the log ratios of the launch medians";
  r.bounded = false;
  const std::size_t k = std::min(a_medians.size(), b_medians.size());
  std::vector<double> logs;
  for (std::size_t i = 0; i < k; ++i) {
    if (!(a_medians[i] > 0) || !(b_medians[i] > 0)) {
      r.withheld = "a launch median is not positive";
      return r;
    }
    logs.push_back(std::log(a_medians[i] / b_medians[i]));
  }
  if (k == 0) {
    r.withheld = "no launch of both";
    return r;
  }
  const MeanInterval t = mean_t_interval(logs, confidence);
  r.estimate = std::exp(t.mean);
  if (!t.valid) {
    r.withheld = "one launch of both: no interval across launches";
    return r;
  }
  r.bounded = true;
  r.lo = std::exp(t.lo);
  r.hi = std::exp(t.hi);
  return r;
}

}  // namespace d500::stats
