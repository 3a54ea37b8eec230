#include "analysis/tta.hpp"

#include "common/text.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace d500 {

namespace {
// With runs cut off before the target or the budget: Kaplan-Meier, misses censored at the
// budget and cut-off runs at the training time they reached.
TtaSummary summarize_censored(std::vector<double> tta, double target, double budget_s, double confidence,
                              std::vector<double> cut_off) {
  TtaSummary s;
  s.target = target;
  s.budget_s = budget_s;
  s.confidence = confidence;
  s.method =
      "Kaplan-Meier (" + std::to_string(cut_off.size()) +
      " run(s) cut off, censored at the training time reached; misses censored at the budget), Greenwood log interval";
  std::sort(tta.begin(), tta.end());
  std::sort(cut_off.begin(), cut_off.end());
  std::vector<double> time;
  std::vector<bool> event;
  const double horizon = budget_s > 0 ? budget_s : std::numeric_limits<double>::max();
  for (double t : tta) {
    const bool hit = std::isfinite(t);
    s.reached += hit;
    time.push_back(hit ? t : horizon);
    event.push_back(hit);
  }
  for (double t : cut_off) time.push_back(t), event.push_back(false);
  s.runs = static_cast<int>(time.size());
  s.tta = tta;
  s.cut_off = cut_off;
  // The success rate over the runs whose outcome is known (the cut-off ones have none).
  s.success = stats::clopper_pearson(s.reached, static_cast<int>(tta.size()), confidence);
  const stats::KaplanMeierMedian m = stats::kaplan_meier_median(time, event, confidence);
  s.median_defined = m.defined;
  s.median = m.median;
  s.has_ci = m.lo_defined;
  // No lower limit, and some run followed to the budget: the median lies beyond it at this level.
  s.beyond_budget = !m.lo_defined && !tta.empty() && !std::isfinite(tta.back());
  s.lo = m.lo;
  s.hi = m.hi_defined ? m.hi : std::numeric_limits<double>::infinity();
  return s;
}
}  // namespace

double time_to_target(const std::vector<Event>& events, double target, double budget_s, int rank) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& e : events) {
    if (e.rank != rank) continue;
    const double t = static_cast<double>(e.time_ns) * 1e-9;
    if (e.accuracy >= target && (budget_s <= 0 || t <= budget_s)) best = std::min(best, t);
  }
  return best;
}

RankEvaluations check_rank_evaluations(const std::vector<Event>& events) {
  RankEvaluations r;
  std::map<int, std::map<std::int64_t, double>> by_rank;  // rank -> step -> accuracy
  std::map<int, double> last;
  for (const auto& e : events) {
    by_rank[e.rank][e.step] = e.accuracy;
    last[e.rank] = std::max(last[e.rank], static_cast<double>(e.time_ns) * 1e-9);
  }
  r.ranks = static_cast<int>(by_rank.size());
  if (by_rank.empty()) return r;
  r.trained_s = std::numeric_limits<double>::infinity();
  for (const auto& [rank, t] : last) r.trained_s = std::min(r.trained_s, t);
  const auto& first = by_rank.begin()->second;
  for (const auto& [rank, evals] : by_rank) {
    if (rank == by_rank.begin()->first) continue;
    for (const auto& [step, acc] : first) {
      const auto it = evals.find(step);
      if (it == evals.end() && step <= evals.rbegin()->first) {
        r.disagreement = "rank " + std::to_string(rank) + " has no evaluation at step " + std::to_string(step);
        return r;
      }
      if (it != evals.end() && std::fabs(it->second - acc) > 1e-9) {
        r.disagreement = "at step " + std::to_string(step) + " rank " + std::to_string(rank) + " measured accuracy " +
                         fmt_sig(it->second, 6) + ", rank " + std::to_string(by_rank.begin()->first) + " " +
                         fmt_sig(acc, 6);
        return r;
      }
    }
  }
  return r;
}

double time_to_target_all_ranks(const std::vector<Event>& events, double target, double budget_s) {
  std::set<int> ranks;
  for (const auto& e : events) ranks.insert(e.rank);
  if (ranks.empty()) return std::numeric_limits<double>::infinity();
  double latest = 0;
  for (int r : ranks) latest = std::max(latest, time_to_target(events, target, budget_s, r));
  return latest;
}

TtaSummary summarize_tta(std::vector<double> tta, double target, double budget_s, double confidence,
                         std::vector<double> cut_off) {
  TtaSummary s;
  if (!cut_off.empty()) return summarize_censored(std::move(tta), target, budget_s, confidence, std::move(cut_off));
  s.method = "exact order statistics (misses as > budget)";
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
  if (s.median_defined)
    s.median = n % 2 ? tta[static_cast<std::size_t>(n / 2)]
                     : 0.5 * (tta[static_cast<std::size_t>(n / 2 - 1)] + tta[static_cast<std::size_t>(n / 2)]);
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
