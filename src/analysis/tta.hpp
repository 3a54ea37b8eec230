#pragma once
// Time to accuracy (STATISTICS: "Time to accuracy"): per run, the training time of the first
// evaluation that reaches the target; a run that misses it within its budget is censored (its
// time is +infinity), never dropped. Across runs (seeds) of one configuration: the median with
// its exact order-statistic interval, whose upper bound may be "> budget", and the success rate
// with a Clopper-Pearson interval.
#include <string>
#include <vector>

#include "analysis/stats.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

// Seconds to the first evaluation of `rank` with accuracy >= target at or before the budget
// (budget_s <= 0: none); +infinity when there is none.
double time_to_target(const std::vector<Event>& events, double target, double budget_s, int rank = 0);

// Every rank's evaluations of one run, checked against rank 0's: the same steps with the same
// accuracy (to 1e-9). `disagreement` names the first difference ("" when they agree); `time_to`
// is the latest rank's time to the target (the run is there when its slowest rank is);
// `trained_s` the training time every rank's evaluations reached (for a run cut off).
struct RankEvaluations {
  int ranks = 0;
  std::string disagreement;
  double trained_s = 0;
};
RankEvaluations check_rank_evaluations(const std::vector<Event>& events);
double time_to_target_all_ranks(const std::vector<Event>& events, double target, double budget_s);

struct TtaSummary {
  int runs = 0, reached = 0;
  // Runs cut off (their job killed or timed out) before reaching the target or the budget:
  // right-censored at the training time each reached. With any, the median and its interval are
  // Kaplan-Meier's (stats::kaplan_meier_median) rather than exact order statistics.
  std::vector<double> cut_off;
  std::string method;
  double target = 0, budget_s = 0, confidence = 0.95;
  std::vector<double> tta;      // sorted; +infinity for runs that missed
  bool median_defined = false;  // false when half or more of the runs missed
  double median = 0;
  bool has_ci = false;         // false when n is too small, or the lower bound is a miss
  bool beyond_budget = false;  // the lower bound is a miss: the median exceeds the budget, at this confidence
  double lo = 0, hi = 0;       // hi is +infinity when the upper rank lands on a miss
  stats::Proportion success;
  bool hi_censored() const { return has_ci && hi == std::numeric_limits<double>::infinity(); }
};

// tta: runs with a known outcome (+infinity: missed within the budget); cut_off: the training
// seconds reached by runs cut off before either.
TtaSummary summarize_tta(std::vector<double> tta, double target, double budget_s, double confidence,
                         std::vector<double> cut_off = {});

}  // namespace d500
