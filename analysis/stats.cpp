#include "stats.hpp"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>

namespace d500::stats {

namespace {
// Smallest m in [0, n] with F(m) >= target; n + 1 when there is none.
int smallest_with_cdf_at_least(const boost::math::binomial_distribution<double>& b, int n, double target) {
  int lo = 0, hi = n + 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (boost::math::cdf(b, mid) >= target) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
}  // namespace

RankInterval quantile_ci_ranks(int n, double p, double confidence) {
  RankInterval r;
  if (n <= 0) return r;
  const double alpha = 1 - confidence;
  boost::math::binomial_distribution<double> b(n, p);
  r.lo = smallest_with_cdf_at_least(b, n, alpha / 2);
  r.hi = smallest_with_cdf_at_least(b, n, 1 - alpha / 2) + 1;
  r.valid = r.lo >= 1 && r.hi <= n;
  if (r.valid) r.coverage = boost::math::cdf(b, r.hi - 1) - boost::math::cdf(b, r.lo - 1);
  return r;
}

double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

Summary summarize(std::vector<double> x, double confidence) {
  Summary s;
  s.n = static_cast<int>(x.size());
  s.confidence = confidence;
  if (x.empty()) return s;
  std::sort(x.begin(), x.end());
  s.min = x.front();
  s.max = x.back();
  std::size_t n = x.size();
  s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  RankInterval r = quantile_ci_ranks(s.n, 0.5, confidence);
  if (r.valid) {
    s.has_ci = true;
    s.lo = x[static_cast<std::size_t>(r.lo - 1)];
    s.hi = x[static_cast<std::size_t>(r.hi - 1)];
    s.coverage = r.coverage;
  }
  return s;
}

}  // namespace d500::stats
