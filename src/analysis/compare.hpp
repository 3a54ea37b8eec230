#pragma once
// Comparisons across runs (`d500 compare BASE OTHER...`): points matched by id (the hash of their
// canonical text, so the same point planned on another day, machine or d500 version matches),
// each other run's time against the base run's as a ratio of medians with a bootstrap interval,
// classified against a threshold so that a CI job can fail on a regression.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/stats.hpp"

namespace d500 {

struct CompareOptions {
  double confidence = 0.95;
  double threshold = 0.05;  // a change smaller than this fraction is not a regression or improvement
  std::uint64_t seed = 1;   // each point's bootstrap seeds from this and the point's id
};

// What a matched point's change is. Regression: the time ratio's interval lies above 1 and the
// ratio is at least 1 + threshold; improvement: the interval lies below 1 and the ratio is at
// most 1 / (1 + threshold); slower / faster: significant but within the threshold.
enum class Change { Regression, Slower, Unchanged, Faster, Improvement, NotComparable };
const char* change_name(Change c);

struct PointChange {
  std::string id, canonical;
  Change change = Change::NotComparable;
  std::string why;  // NotComparable: the reason
  int base_n = 0, other_n = 0;
  double base_median = 0, other_median = 0;  // seconds
  stats::RatioInterval ratio;                // median(other) / median(base): > 1 is slower
};

struct RunComparison {
  std::string base_dir, other_dir;
  std::string base_version, other_version, base_hosts, other_hosts;
  std::vector<PointChange> points;  // matched points, in the base run's order
  int only_base = 0, only_other = 0;
  int count(Change c) const;
};

// Compares each of `others` with `base`. Throws d500::Error when a run has no results or two runs
// share no point.
std::vector<RunComparison> compare_runs(const std::string& base, const std::vector<std::string>& others,
                                        const CompareOptions& opt);

// The console text: a header per pair of runs, the changed points first, the rule stated.
std::string comparison_text(const std::vector<RunComparison>& cmp, const CompareOptions& opt);
// One CSV row per matched point and pair of runs.
std::string comparison_csv(const std::vector<RunComparison>& cmp);

}  // namespace d500
