#pragma once
// Time to accuracy (STATISTICS: "Time to accuracy"): per run, the training time of the first
// evaluation that reaches the target; a run that misses it within its budget is censored (its
// time is +infinity), never dropped. Across runs (seeds) of one configuration: the median with
// its exact order-statistic interval, whose upper bound may be "> budget", and the success rate
// with a Clopper-Pearson interval.
#include <vector>

#include "stats.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

// Seconds to the first evaluation of `rank` with accuracy >= target at or before the budget
// (budget_s <= 0: none); +infinity when there is none.
double time_to_target(const std::vector<Event>& events, double target, double budget_s, int rank = 0);

struct TtaSummary {
  int runs = 0, reached = 0;
  double target = 0, budget_s = 0, confidence = 0.95;
  std::vector<double> tta;        // sorted; +infinity for runs that missed
  bool median_defined = false;    // false when half or more of the runs missed
  double median = 0;
  bool has_ci = false;            // false when n is too small, or the lower bound is a miss
  bool beyond_budget = false;     // the lower bound is a miss: the median exceeds the budget, at this confidence
  double lo = 0, hi = 0;          // hi is +infinity when the upper rank lands on a miss
  stats::Proportion success;
  bool hi_censored() const { return has_ci && hi == std::numeric_limits<double>::infinity(); }
};

TtaSummary summarize_tta(std::vector<double> tta, double target, double budget_s, double confidence);

}  // namespace d500
