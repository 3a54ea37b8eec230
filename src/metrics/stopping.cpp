#include "metrics/stopping.hpp"

#include <map>
#include <tuple>

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

namespace d500 {

namespace {
// Smallest m in [0, n] with F(m) >= target; n + 1 when there is none.
int smallest_with_cdf_at_least(const boost::math::binomial_distribution<double>& b, int n, double target) {
  int lo = 0, hi = n + 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (boost::math::cdf(b, mid) >= target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
}  // namespace

RankInterval quantile_ci_ranks(int n, double p, double confidence) {
  RankInterval r;
  if (n <= 0) return r;
  // The same few (n, p, confidence) come back for every point of a report (the repetitions
  // advice tries up to ~35 counts per point, each costing dozens of incomplete-beta
  // evaluations): computed once per thread.
  thread_local std::map<std::tuple<int, double, double>, RankInterval> known;
  const auto key = std::make_tuple(n, p, confidence);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() > 100000) known.clear();
  const double alpha = 1 - confidence;
  boost::math::binomial_distribution<double> b(n, p);
  r.lo = smallest_with_cdf_at_least(b, n, alpha / 2);
  r.hi = smallest_with_cdf_at_least(b, n, 1 - alpha / 2) + 1;
  r.valid = r.lo >= 1 && r.hi <= n;
  if (r.valid) r.coverage = boost::math::cdf(b, r.hi - 1) - boost::math::cdf(b, r.lo - 1);
  known.emplace(key, r);
  return r;
}

int smallest_n_with_median_ci(double confidence) {
  int n = 1;
  while (n < 100000 && !quantile_ci_ranks(n, 0.5, confidence).valid) ++n;
  return n;
}

std::string AutoRepetitions::rule() const {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "adaptive: repeated until the %g%% exact CI of the median (per repetition the slowest rank's time) "
                "was at most %g%% of the median wide, looked at after each repetition up to 64 and then after "
                "every 64th more; at least %d and at most %d timed repetitions, and no more once the point's "
                "repetitions (warm-ups included) had taken %g s",
                confidence * 100, ci_rel_width * 100, min, max, max_time_s);
  return buf;
}

const char* stopped_by_name(StoppedBy s) {
  switch (s) {
    case StoppedBy::Count: return "count";
    case StoppedBy::CiWidth: return "ci_width";
    case StoppedBy::Max: return "max";
    case StoppedBy::MaxTime: return "max_time";
  }
  return "?";
}

double median_ci_rel_width(std::vector<std::int64_t>& v, double confidence) {
  const int n = static_cast<int>(v.size());
  const RankInterval r = quantile_ci_ranks(n, 0.5, confidence);
  if (!r.valid) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const auto at = [&](int rank) { return static_cast<double>(v[static_cast<std::size_t>(rank - 1)]); };
  // As the report's summary: the mean of the two middle values for even n.
  const double median = n % 2 ? at(n / 2 + 1) : 0.5 * (at(n / 2) + at(n / 2 + 1));
  if (!(median > 0)) return std::numeric_limits<double>::quiet_NaN();
  return (at(r.hi) - at(r.lo)) / median;
}

AdaptiveStop::AdaptiveStop(const AutoRepetitions& rule)
    : rule_(rule), last_width_(std::numeric_limits<double>::quiet_NaN()) {
  values_.reserve(static_cast<std::size_t>(std::max(rule.max, 0)));
  sorted_.reserve(values_.capacity());
}

bool AdaptiveStop::stop(bool time_up) {
  const int n = count();
  const bool look = n >= rule_.min && n >= next_look_;
  if (look) {
    next_look_ = n < 64 ? n + 1 : n + n / 64;
    sorted_.assign(values_.begin(), values_.end());
    last_width_ = median_ci_rel_width(sorted_, rule_.confidence);
    if (last_width_ <= rule_.ci_rel_width) {
      stopped_by_ = StoppedBy::CiWidth;
      return true;
    }
  }
  if (n < rule_.max && !time_up) return false;
  stopped_by_ = n >= rule_.max ? StoppedBy::Max : StoppedBy::MaxTime;
  if (!look) {  // the width the report will see, unless this call just computed it
    sorted_.assign(values_.begin(), values_.end());
    last_width_ = median_ci_rel_width(sorted_, rule_.confidence);
  }
  return true;
}

}  // namespace d500
