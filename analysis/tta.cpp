#include "tta.hpp"

#include <algorithm>
#include <limits>

namespace d500 {

double time_to_target(const std::vector<Event>& events, double target, double budget_s, int rank) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& e : events) {
    if (e.rank != rank) continue;
    const double t = static_cast<double>(e.time_ns) * 1e-9;
    if (e.accuracy >= target && (budget_s <= 0 || t <= budget_s)) best = std::min(best, t);
  }
  return best;
}

TtaSummary summarize_tta(std::vector<double> tta, double target, double budget_s, double confidence) {
  TtaSummary s;
  s.target = target;
  s.budget_s = budget_s;
  s.confidence = confidence;
  std::sort(tta.begin(), tta.end());
  s.runs = static_cast<int>(tta.size());
  for (double t : tta) s.reached += t != std::numeric_limits<double>::infinity();
  s.tta = tta;
  s.success = stats::clopper_pearson(s.reached, s.runs, confidence);
  const int n = s.runs;
  if (n == 0) return s;
  // Half or more missed: the middle order statistic(s) would be a miss.
  s.median_defined = 2 * s.reached > n;
  if (s.median_defined) s.median = n % 2 ? tta[static_cast<std::size_t>(n / 2)] : 0.5 * (tta[static_cast<std::size_t>(n / 2 - 1)] + tta[static_cast<std::size_t>(n / 2)]);
  // Coding misses as +infinity keeps the order statistics, so the exact interval still holds.
  stats::RankInterval r = stats::quantile_ci_ranks(n, 0.5, confidence);
  // The lower rank a miss: the whole interval lies beyond the budget, which is a finding.
  s.beyond_budget = r.valid && tta[static_cast<std::size_t>(r.lo - 1)] == std::numeric_limits<double>::infinity();
  if (r.valid && !s.beyond_budget) {
    s.has_ci = true;
    s.lo = tta[static_cast<std::size_t>(r.lo - 1)];
    s.hi = tta[static_cast<std::size_t>(r.hi - 1)];
  }
  return s;
}

}  // namespace d500
