#pragma once
// Formatting shared by the reporters: numbers with their intervals in words, the report's
// tables, its plots, and the escapes of each output format. Presentation only: every figure
// comes from the summary (summary.hpp).
#include <sstream>
#include <string>
#include <vector>

#include "analysis/summary.hpp"
#include "analysis/svg.hpp"

namespace d500 {

using Table = std::vector<std::vector<std::string>>;

std::string fmt_time(double s);
std::string fmt_p(double p);
// "p=0.034", or "p < 0.0001"
constexpr int kMostAdvisedRepetitions = 1000;  // repetition advice beyond this reads "too noisy"
std::string params_text(const Params& params, bool with_backend);
// A point by workload:backend and what varies among the report's points of its workload.
std::string point_label(const Report& rep, const PointRow& r);
std::string ci_text(const PointRow& r);
std::string rate_text(const PointRow& r);
std::string rate_ci_text(const PointRow& r);
std::string validation_text(const PointRow& r);
std::string mean_text(const PointRow& r);
std::string reps_text(const PointRow& r);
std::string ranks_text(const PointRow& r);
// Whether the repetitions look like independent draws (trend, lag-1 autocorrelation), and what to try.
std::string independence_text(const PointRow& r);
// The machine's state over the point (machine.* facts): quiet or busy, with the load and steal;
// on a GPU with NVML (device.* facts), whether its power or thermal limit held it back.
std::string machine_text(const PointRow& r);
std::string ratio_text(const stats::RatioInterval& x);
std::string comparison_sentence(const Comparison& c);
std::string tta_median_text(const TtaSummary& s);
std::string tta_ci_text(const TtaSummary& s);
std::string tta_success_text(const TtaSummary& s);
Table results_table(const Report& rep);
// The Measurement quality table of one workload's points (the Results tables' order), a row each,
// named by point_label.
Table quality_table(const Report& rep, const std::string& workload);
// What the Measurement quality table's columns are, and what to do about a flag in one.
std::string quality_note(const Report& rep);
// A network's step judged against the yardstick (the validation.* facts): per point, the
// decisive tensor, its error and allowance, and in how many tensors a 2% error would have shown.
// No rows where no point has them.
Table validation_table(const Report& rep);
std::string validation_note();
// The environments the files were measured in: a row per fact, a column per environment.
Table environment_table(const Report& rep);
Table comparison_table(const Report& rep);
Table scaling_table(const ScalingSeries& s);
Table tta_table(const Report& rep);
Table launches_table(const Report& rep);
// Backends compared across their launches (Report::launch_comparisons), with the note that says
// how, and that the comparisons within one launch do not cover launch-to-launch variation.
// Each paired launch's (or seed's) ratio T(baseline) / T(other), to `digits` significant digits:
// "1: 0.923", "2: 1.16", ...
std::vector<std::string> paired_ratios(const LaunchComparison& c, int digits);
// Where a comparison across launches or seeds finds no significant difference: how many of them
// would resolve the ratio it found at the spread they show (stats::replicates_to_resolve), in
// words ("about 13 seeds", "over 200 launches"); "" where it is significant or nothing is to resolve.
std::string replicates_needed(const LaunchComparison& c);
Table launch_comparison_table(const Report& rep);
std::string launch_comparison_note(const Report& rep);
// Scaling series' models fitted across their launches (Report::launch_scaling), and how.
Table launch_scaling_table(const Report& rep);
std::string launch_scaling_note(const Report& rep);
// Level 1: one row per network point (rates, the step's phases, memory, what ran where), and
// per point on d500's executor its costliest steps.
Table network_table(const Report& rep);
// Level 2: each training point's step and its phases, the data phase's share and the input
// pipeline's own rate.
Table training_table(const Report& rep);
std::string training_note();
Table distributed_table(const Report& rep);
std::string distributed_note();
// Level 0's collectives: algorithm and bus bandwidth (nccl-tests' definitions), per point.
// Points timed on a device (a `device` phase: CUDA events): the host's and the device's medians.
Table device_table(const Report& rep);
std::string device_note();
// A point's device-phase summary, or nullptr when it has none.
const PointRow::PhaseTime* device_phase(const PointRow& r);
// A GPU point's device rate against its device's arithmetic peak (device.peak_flops, which the
// cuda backend records with its basis, device.peak_basis): the FLOPs per repetition over the
// device median, over the peak; NaN without a device phase, a FLOP rate or a known peak.
double peak_fraction(const PointRow& r);
Table collectives_table(const Report& rep);
std::string collectives_note();
// Level 3's overlap: the bucketed allreduce against the plain one, per pair of points.
Table overlap_table(const Report& rep);
std::string overlap_note(const Report& rep);
Table steps_table(const PointRow& r);
std::string steps_caption(const Report& rep, const PointRow& r);
// Every step of the point added by operator and pass: steps, summed medians, share, GFLOP/s.
Table operators_table(const PointRow& r);
std::string operators_caption(const Report& rep, const PointRow& r);
std::string network_note();
// A plot of accuracy curves (its series so far): each (name, target)'s dashed line, and the
// budget's, which is left out where it lies beyond twice the last evaluation (it would squeeze the
// curves into the axis' first part) and named in the title instead.
void add_target_lines(svg::Plot& p, const std::vector<std::pair<std::string, double>>& targets, double budget_s);
// One configuration's runs, accuracy against training time, with each of its `targets` (the same
// runs' TtaConfig per target) and its median time to accuracy marked.
std::string tta_svg(const std::vector<const TtaConfig*>& targets, const Report& rep);
std::string scaling_caption(const ScalingSeries& s);
// A fitted serial share with its interval; "0 (at or above ideal)" where every resample's fit is 0.
std::string serial_share_text(double s, double lo, double hi);
// A scaling law as the report names it for a series of `kind`: "USL", "Amdahl" (strong), and in
// weak scaling "USL (k = 0)": Amdahl's form there describes contention, the time growing as
// T(base) (1 + s (n-1)), and no serial share, which weak scaling does not see.
std::string law_words(const std::string& kind, const std::string& law);
// A collective's ideal in weak scaling, in words: nccl-tests' bus bandwidth constant.
std::string bus_ideal_words(const std::string& collective);
std::string scaling_model_text(const ScalingSeries& s);
std::string scaling_svg(const ScalingSeries& s);
// A confidence level as the report writes it ("95%").
std::string pct(double confidence);
// How a ratio of medians gets its interval, in words ("percentile bootstrap").
std::string ratio_method_words();
// A scaling model fitted across launches in words: its law, s, k and predicted efficiency.
std::string launch_model_words(const LaunchScalingModel& m);
void markdown_table(std::ostringstream& o, const Table& t);
void html_table(std::ostringstream& o, const Table& t, const std::vector<std::string>& row_class = {});
std::vector<std::string> attention(const Report& rep);
// The same items as the terminal prints them: a failed validation's reason (its whole judgement,
// a paragraph) cut to its verdict and decisive tensor, which report.md's item and Validation
// section have whole; every other item as attention() has it.
std::vector<std::string> attention_brief(const Report& rep);
// Both at once, item for item (the document shows the one and the terminal the other).
struct AttentionItems {
  std::vector<std::string> whole, brief;
};
AttentionItems attention_items(const Report& rep);
std::string js(const std::string& s);
std::string jn(double v);
std::string jratio(const stats::RatioInterval& r);

}  // namespace d500
