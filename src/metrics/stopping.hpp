#pragma once
// When a point has been measured often enough: the fixed count, or an adaptive rule that stops
// once the median's exact confidence interval is narrow enough. Below the harness (which applies
// the rule between repetitions) and the analysis (which states it and recomputes the interval
// the same way), hence here: no MPI, no HDF5.
#include <cstdint>
#include <string>
#include <vector>

namespace d500 {

// 1-based ranks [lo, hi] of the order statistics x(lo) <= q_p <= x(hi) that cover the
// p-quantile with probability >= confidence, equal-tailed (exact, from the binomial
// distribution). `valid` is false when no such interval exists at that level (for the median at
// 95%: n <= 5).
struct RankInterval {
  int lo = 0, hi = 0;
  bool valid = false;
  double coverage = 0;  // the exact coverage F(hi-1) - F(lo-1)
};
RankInterval quantile_ci_ranks(int n, double p, double confidence);

// The smallest number of values with an exact interval for the median at `confidence` (6 at 95%).
int smallest_n_with_median_ci(double confidence);

// `repetitions = "auto"` and its [auto_repetitions] settings: repeat until the width of the
// median's exact interval, relative to the median, is at most `ci_rel_width`, after at least
// `min` and at most `max` timed repetitions, and stop anyway when the point's repetitions
// (warm-ups included) have taken `max_time_s`. The value judged is the one the report
// summarises: per repetition, the slowest rank's time.
struct AutoRepetitions {
  bool on = false;
  double ci_rel_width = 0.02;  // (hi - lo) / median
  double confidence = 0.95;
  int min = 10;
  int max = 1000;
  double max_time_s = 60;
  // The rule in words, as the results file and the report state it.
  std::string rule() const;
};

// Why a point's repetitions ended: as the results file spells it (`repetitions.stopped_by`).
enum class StoppedBy { Count, CiWidth, Max, MaxTime };
const char* stopped_by_name(StoppedBy s);

// The adaptive rule's state over one point: values are added in repetition order, `due` says
// whether the interval is looked at after this one (every repetition up to 64, then each time
// the count has grown by a 64th: at most ~1.6% more repetitions than needed, and the sort
// stays cheap), `stop` applies the rule. Every rank holds the same values (the slowest rank's
// time, agreed by the harness's allreduce) and so reaches the same decision.
class AdaptiveStop {
 public:
  explicit AdaptiveStop(const AutoRepetitions& rule);
  void add(std::int64_t ns) { values_.push_back(ns); }
  int count() const { return static_cast<int>(values_.size()); }
  // Whether to stop now; `time_up`: some rank says max_time has passed.
  bool stop(bool time_up);
  StoppedBy stopped_by() const { return stopped_by_; }
  // The relative width at the last look (NaN before any, or without an interval).
  double last_width() const { return last_width_; }

 private:
  AutoRepetitions rule_;
  std::vector<std::int64_t> values_, sorted_;
  int next_look_ = 0;
  double last_width_;
  StoppedBy stopped_by_ = StoppedBy::Count;
};

// (hi - lo) / median of the median's exact interval over `values` (sorted in place); NaN when
// there is no interval at `confidence` or the median is not positive.
double median_ci_rel_width(std::vector<std::int64_t>& values, double confidence);

}  // namespace d500
