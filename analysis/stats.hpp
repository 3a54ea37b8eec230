#pragma once
// Robust summaries for benchmark timings (see STATISTICS in the README): the median with an
// exact, distribution-free confidence interval from binomial order statistics.
#include <vector>

namespace d500::stats {

// 1-based ranks [lo, hi] of the order statistics x(lo) <= q_p <= x(hi) that cover the
// p-quantile with probability >= confidence, equal-tailed. `valid` is false when no such
// interval exists at that level (for the median at 95%: n <= 5).
struct RankInterval {
  int lo = 0, hi = 0;
  bool valid = false;
  double coverage = 0;  // the exact coverage F(hi-1) - F(lo-1)
};
RankInterval quantile_ci_ranks(int n, double p, double confidence);

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

}  // namespace d500::stats
