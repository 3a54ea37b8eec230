#pragma once
// The analysis stage's numbers: reads every results file of a run directory, summarises each
// point, compares backends and scaling series, and summarises time to accuracy. The outputs
// (console, Markdown, HTML, CSV, JSON) are reporters (reporters.hpp) over this summary.
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/names.hpp"
#include "analysis/stats.hpp"
#include "analysis/tta.hpp"
#include "common/value.hpp"
#include "metrics/outcome.hpp"

namespace d500 {

struct PointRow {
  Outcome outcome = Outcome::Missing;
  std::string id, job_id, file, canonical, workload, backend, status, status_reason;  // status: outcome_name(outcome)
  std::string validation_status, validation_method, rate_unit, hosts;
  std::string scaling = "strong", scaling_note;  // what a series over ranks means for this workload
  bool oversubscribed = false;
  int level = 0, ranks = 0, nodes = 1, ranks_per_node = 1, warmups_excluded = 0, reps_incomplete = 0;
  // Its parameters; one its file says stands for a value when left "" (PointResult::unset: math
  // "fp32", cuda's cudnn_api "legacy") holds that value, and another backend's setting is absent.
  Params params;
  std::map<std::string, std::string> unset;  // what those parameters stood for, as the file says
  double validation_max_rel_error = 0, validation_tolerance = 0;
  std::int64_t peak_rss_bytes = -1;         // largest peak resident set of a rank during the point; -1: unknown
  std::int64_t memory_estimate_bytes = -1;  // the planner's estimate of the point's data per rank; -1: none
  bool threads_oversubscribed = false;      // ranks x threads beyond some host's CPUs
  std::vector<double> costs;                // timed repetitions, seconds, max over ranks, in repetition order
  std::vector<int> cost_reps;               // the repetition each of `costs` is
  stats::Summary time;                      // of costs
  // The tail of costs: the 90th and 99th percentiles with their exact intervals where n allows.
  std::vector<stats::QuantileSummary> tail;
  double rate = 0, rate_lo = 0, rate_hi = 0;  // per rank: one rank's work over the median and CI bounds of time
  // All ranks together: ranks x rate where every rank does the same work (weak scaling); NaN
  // where the work is split (strong scaling), which a per-rank work figure cannot sum.
  double rate_aggregate = std::nan("");
  // Collectives: nccl-tests' bus bandwidth, the rate (its algorithm bandwidth) times the factor
  // that makes it comparable across rank counts (allreduce 2(n-1)/n, allgather and
  // reduce_scatter (n-1)/n, broadcast 1); 0 for other workloads.
  double bus_factor = 0;
  double work = 0;           // flops, bytes or samples per repetition (the rate's unit)
  double flops = 0;          // per repetition (level 1: the network's, for GFLOP/s beside samples/s)
  double work_bytes = 0;     // per repetition: the operands' bytes (level 0: the roofline's traffic)
  stats::MeanInterval mean;  // shown only when normality is not rejected
  stats::NormalityTest normality;
  stats::Outliers outliers;
  stats::RepetitionAdvice advice;
  stats::PairedRanksTest ranks_test;      // do the ranks' own durations differ (paired by repetition)?
  stats::IndependenceCheck independence;  // trend and lag-1 autocorrelation of `costs`
  std::vector<double> rank_medians;       // per rank, seconds
  // Training points (levels 2, 3): the target, budget and rank 0's curve.
  double tta_target = 0, tta_budget_s = 0;
  std::int64_t eval_interval_steps = 0;
  std::vector<std::pair<double, double>> curve;  // (seconds, accuracy)
  double tta_s = 0;                              // +infinity when the target was missed; the latest rank's
  double tta_trained_s = 0;                      // training time every rank's evaluations reached
  std::string eval_disagreement;                 // ranks' evaluations differ ("" when they agree)
  // The point's report_targets (target, seconds to it on the same curve; +infinity: missed).
  std::vector<std::pair<double, double>> tta_more;
  // Phases of a repetition other than the whole (training: forward, backward), each summarised
  // as the whole is: per timed repetition the slowest rank's duration.
  struct PhaseTime {
    std::string phase;
    stats::Summary time;
    std::map<int, double> by_rep;  // repetition -> the slowest rank's duration, seconds
  };
  std::vector<PhaseTime> phases;
  // Level 1 on d500's executor: the steps that cost most (median over timed repetitions of the
  // slowest rank's duration), their share of the summed step medians, and what computed them.
  struct StepCost {
    std::string name, op, direction, impl;
    double median_s = 0, share = 0, gflops = 0;
    // Per timed repetition the slowest rank's duration, seconds (the breakdown's ratio of two
    // points, with its interval); empty where the point's steps x repetitions exceed
    // kStepRepetitionsKept.
    std::vector<double> reps;
  };
  // The most step durations a point keeps (8 MB): ResNet-50's 350 steps over 2800 repetitions.
  static constexpr std::size_t kStepRepetitionsKept = 1'000'000;
  std::vector<StepCost> top_steps;  // the costliest, costliest first
  std::vector<StepCost> all_steps;  // every step, in the executor's order
  // Every step, added by operator and pass (Conv forward, Conv backward, ...): where the step's
  // time goes, as a framework's profiler groups it; costliest first. gflops: the group's work
  // over its summed medians (0 where it counts none).
  struct OpCost {
    std::string op, direction;
    int steps = 0;
    double median_s = 0, share = 0, gflops = 0;
    // Per timed repetition with every one of its steps recorded: their slowest-rank durations
    // added, seconds (the breakdown's ratio of two points, with its interval).
    std::vector<double> reps;
  };
  std::vector<OpCost> by_operator;
  double steps_total_s = 0;   // the medians of every step, added
  double fallback_share = 0;  // of that, the steps the backend left to the reference
  int steps = 0;
  std::int64_t work_items = 0;         // samples per repetition (rate unit samples/s)
  std::map<std::string, Value> facts;  // network.*, executor*, memory.* as recorded
  // Complete, with timed repetitions: what comparisons, scaling series and `d500 compare` use.
  bool has_timings() const { return outcome == Outcome::Complete && time.n > 0; }
  // A level-0 collective on one rank: no data crosses between ranks (a local copy, or nothing in
  // place), so its GB/s is no bandwidth and its time no base for scaling.
  bool lone_collective() const;
  // Ran with more ranks, or more threads, than a host's CPUs: its times measure core sharing.
  bool shares_cores() const { return oversubscribed || threads_oversubscribed; }
  // Whether the mean and its t-interval (and Fieller's ratio of means) may be shown: normality
  // not rejected and no Tukey outlier (a few 10x outliers pass Anderson-Darling at n = 10-15
  // often, and then the t-interval never covers the mean).
  bool mean_trusted() const {
    return normality.applicable && !normality.rejects() && outliers.low + outliers.high == 0;
  }
};

struct PointResult;
// Level 1 on d500's executor: where a step's time goes, from `p`'s node steps and each rank's
// time in each: per step the median over repetitions [first_rep, end_rep) of the slowest rank's
// duration, into r's by_operator (added by operator and pass), all_steps, top_steps (the `top` costliest),
// steps_total_s, fallback_share and steps. The report's breakdown, and d500-bench-executor's.
void add_step_costs(PointRow& r, const PointResult& p, int first_rep, int end_rep, std::size_t top = 10);

// Resamples of every bootstrap interval of a report or a comparison of runs.
constexpr int kBootstrapResamples = 2000;
// How every ratio of medians (backend comparisons, scaling speedups, overlap) gets its interval:
// chosen by its simulated coverage at n = 10 (d500-bench-ratio-coverage; docs/statistics.md).
constexpr stats::BootstrapMethod kRatioMethod = stats::BootstrapMethod::Percentile;

// One training configuration across its runs (points that differ only in seed).
struct TtaConfig {
  std::string group;
  std::vector<std::string> ids;
  std::vector<std::int64_t> seeds;
  std::int64_t eval_interval_steps = 0;
  int cut_off = 0;                         // runs whose job ended before they did: censored at the time reached
  std::vector<std::string> disagreements;  // "seed S: ..." where a run's ranks evaluated differently
  TtaSummary summary;
};

// One point measured in several launches (campaign.launches: points that differ only in `launch`).
struct LaunchGroup {
  std::string group;             // the point without its launch
  std::vector<std::string> ids;  // per launch with timings, in launch order
  std::vector<int> launch_numbers;
  std::vector<stats::Summary> within;  // each launch's own median and exact CI
  stats::LaunchInterval interval;
};

// Two configurations measured in the same launches (campaign.launches): backend B against
// backend A, or a scaling series' rank count p against its smallest: the typical launch's
// median(A) / median(B), paired by launch (stats::launch_ratio), an interval that covers the
// variation between launches, which Comparison and ScalingSeries (one launch's points) do not.
struct LaunchComparison {
  std::string varies = "backend";  // "backend", or "ranks" (a scaling series)
  std::string group;               // the shared parameters, without what varies and launch
  std::string baseline, other;     // backends, or rank counts ("1 rank", "4 ranks")
  double ideal = 0;  // ranks: the ideal speedup (strong p / p_base, weak 1, a collective f(base) / f(p): ideal_load); 0
                     // for backends
  // What pairs the two configurations' medians: "launch" (a campaign's launches), or "seed" (a
  // training's seeds: replicates of one configuration, Report::seed_comparisons).
  std::string replicate = "launch";
  std::vector<int> launches;                            // the launches (or seeds) both were measured in, paired
  std::vector<double> baseline_medians, other_medians;  // per paired launch, seconds
  stats::RatioInterval speedup;
  double confidence = 0.95;
};

// Backend B against backend A on points identical but for the backend and its own settings
// (PointNames::own): speedup = median(A) / median(B). `baseline` and `other` name the
// backends, with those settings where they tell two points of one backend apart.
struct Comparison {
  std::string group;            // the shared parameters
  std::string baseline, other;  // backends ("cuda (fusion=add_relu)" where needed)
  std::string baseline_id, other_id;
  stats::RatioInterval speedup;
  // Ratio of means with Fieller's interval, only when neither sample rejects normality.
  bool has_mean_ratio = false;
  stats::RatioInterval mean_ratio;
  double confidence = 0.95;
};

// The bucketed, overlapped allreduce against the plain one on otherwise identical points (level
// 3): is the step faster, and how much of the plain scheme's exposed communication is hidden?
struct OverlapComparison {
  std::string group, plain_id, overlap_id;
  int workers = 0;
  double plain_step = 0, overlap_step = 0;  // medians of the step (slowest rank), seconds
  double plain_exposed = 0;                 // median of the plain scheme's communication + wait per step
  stats::RatioInterval speedup;             // median(plain step) / median(overlap step), kRatioMethod's bootstrap
  // (median(plain step) - median(overlap step)) / median(plain exposed): 1 = all of it hidden,
  // 0 = none, < 0 = the overlapped step is slower. Percentile bootstrap over the repetitions
  // (the plain point's step and exposed time resampled together, by repetition).
  double hidden = 0, hidden_lo = 0, hidden_hi = 0;
  std::string hidden_withheld;  // why there is no interval, when there is none
};

struct ScalingPoint {
  std::string id;
  int ranks = 0, nodes = 0;
  stats::Summary time;
  stats::RatioInterval speedup;  // T(base) / T(p), bootstrap
  double efficiency = 0, efficiency_lo = 0, efficiency_hi = 0;
};

// nccl-tests' bus factor of a level-0 collective workload at `ranks` ranks (allreduce 2(n-1)/n,
// allgather and reduce_scatter (n-1)/n, broadcast 1); nothing for any other workload.
std::optional<double> collective_bus_factor(const std::string& workload, double ranks);

// A scaling series' ideal time at `ranks` over its base's: strong scaling base / ranks; weak 1;
// a collective's weak scaling (bus = its workload) its bus factor's growth f(ranks) / f(base),
// nccl-tests' bus bandwidth held constant (a ring allreduce's 4 ranks ideally take 1.5x its 2's).
double ideal_load(const std::string& kind, const std::string& bus, int base_ranks, double ranks);

struct ScalingSeries {
  std::string workload;
  std::string group;       // the parameters shared by the series
  std::string kind, note;  // "strong" or "weak", and what grows
  std::string bus;         // a collective's workload: its efficiency is on bus bandwidth (ideal_load)
  int base_ranks = 0;
  double base_time = 0;  // median, seconds
  std::vector<ScalingPoint> points;
  double ideal_load(double ranks) const { return d500::ideal_load(kind, bus, base_ranks, ranks); }
  // A scaling model fitted to the capacity C(n) = speedup (strong) or n x T(base)/T(p) (weak),
  // n = p / base ranks: the Universal Scalability Law C(n) = n / (1 + s (n-1) + k n (n-1)),
  // Amdahl's law its k = 0 case. Least squares on the linear form n/C - 1 = s (n-1) + k n (n-1)
  // over the medians; intervals from a bootstrap of every point's repetitions (percentile).
  struct Model {
    std::string law;       // "Amdahl" or "USL"; empty when there are too few rank counts
    std::string why;       // why this law
    std::string left_out;  // points not fitted (oversubscribed), in words; "" when none
    // Why no model is reported although enough rank counts were measured: the fit left the
    // law's physical range (s in [0, 1]); law is then empty.
    std::string failed;
    double s = 0, s_lo = 0, s_hi = 0, k = 0, k_lo = 0, k_hi = 0;
    int at2 = 0, at4 = 0;  // ranks: 2x and 4x the largest measured
    double eff2 = 0, eff2_lo = 0, eff2_hi = 0, eff4 = 0, eff4_lo = 0, eff4_hi = 0;
    // Whether the resample medians of a point of more than stats::kDirectBootstrapMax
    // repetitions were drawn from their exact distribution (stats::MedianResampler).
    bool exact_medians = false;
  } model;
};

// A scaling series measured in the same k >= 2 launches: the series' model (ScalingSeries::Model's
// law) fitted to each launch's medians on its own, then Student's t interval (k - 1 degrees of
// freedom) on the k launches' s, k and predicted efficiencies: the typical launch's model, with
// intervals that cover the variation between launches (the per-launch series' bootstrap covers
// only the repetitions within one). The USL when three or more rank counts are measured and its
// coherency term's interval lies above 0; else Amdahl's form (k = 0).
struct LaunchScalingModel {
  std::string group, kind, bus;  // as ScalingSeries
  int base_ranks = 0;
  std::vector<int> ranks;  // the rank counts fitted, measured in every launch listed (oversubscribed ones left out)
  std::vector<int> launches;
  std::string law, why;
  std::string failed;                      // why no model is reported: the launches' typical s lies outside [0, 1]
  std::vector<double> launch_s, launch_k;  // each launch's fit of `law`, in launch order
  double s = 0, s_lo = 0, s_hi = 0, k = 0, k_lo = 0, k_hi = 0;
  int at2 = 0, at4 = 0;  // ranks: 2x and 4x the largest fitted
  double eff2 = 0, eff2_lo = 0, eff2_hi = 0, eff4 = 0, eff4_lo = 0, eff4_hi = 0;
  double confidence = 0.95;
};

// One hardware and software environment the run's files were measured in: the machine facts,
// library versions and performance-relevant variables rank 0 recorded (/env), d500's version,
// and which hosts and files share it. Job-specific variables (Slurm job ids, node lists) are
// not part of it.
struct Environment {
  std::map<std::string, std::string> facts;  // "d500", "machine.cpu_model", "version.blas", "env.OMP_NUM_THREADS", ...
  std::set<std::string> hosts;
  int files = 0;
};

struct Report {
  std::string dir, campaign, campaign_hash, d500_version;
  std::vector<PointRow> rows;  // in plan order
  PointNames names;            // what tells the rows apart, per workload
  std::vector<Comparison> comparisons;
  std::vector<ScalingSeries> scaling;
  std::vector<TtaConfig> tta;
  std::vector<LaunchGroup> launches;                 // points measured in 2 or more launches
  std::vector<LaunchComparison> launch_comparisons;  // backends compared across their launches
  std::vector<LaunchComparison> seed_comparisons;    // backends compared across their seeds
  std::set<std::string> campaign_keys;               // AnalysisOptions::campaign_keys
  std::vector<LaunchScalingModel> launch_scaling;    // scaling series' models across their launches
  std::vector<OverlapComparison> overlap;            // level 3: allreduce-overlap against allreduce
  std::vector<std::string> files;                    // files read
  std::string first_started, last_started;           // the earliest and latest file's created_utc (ISO 8601)
  std::vector<std::string> unreadable;               // "file: reason"
  std::vector<Environment> environments;             // in the order first seen
  double confidence = 0.95;
  std::uint64_t seed = 1;  // of every bootstrap
};

struct AnalysisOptions {
  double confidence = 0.95;
  std::uint64_t seed = 1;
  // The point parameters the run's campaign file names ([fixed], [axes]), read by the caller (the
  // analysis does not parse campaigns): the Results tables say the shared ones apart from those
  // left at their defaults. Empty: unknown, every shared parameter said alike.
  std::set<std::string> campaign_keys;
};

// Analyses a run directory (the output of `d500 plan`, after `d500 run`).
Report analyze_run(const std::string& dir, const AnalysisOptions& opt = {});

// Each of the report's points by its id.
std::map<std::string, const PointRow*> rows_by_id(const Report& rep);
// The report's workloads in the order their points first appear: the Results tables' order, in
// which every list of points by workload (Measurement quality, Points needing attention) follows.
std::vector<std::string> report_workloads(const Report& rep);

// Each comparison's own bootstrap seed, from the report's seed and its two points' ids.
std::uint64_t comparison_seed(std::uint64_t seed, const std::string& base_id, const std::string& other_id);
std::vector<Comparison> compare_backends(const std::vector<PointRow>& rows, double confidence, std::uint64_t seed);
std::vector<ScalingSeries> scaling_series(const std::vector<PointRow>& rows, double confidence, std::uint64_t seed);
std::vector<TtaConfig> tta_configs(const std::vector<PointRow>& rows, double confidence);
std::vector<LaunchGroup> launch_groups(const std::vector<PointRow>& rows, double confidence);
// Backends compared across the replicates (`replicate`: "launch" or "seed") both were measured
// in, paired by replicate: a comparison per group of points identical but for the backend and the
// replicate, where two backends share two replicates or more.
std::vector<LaunchComparison> compare_backends_across(const std::vector<PointRow>& rows, double confidence,
                                                      const std::string& replicate);
std::vector<LaunchComparison> scaling_across_launches(const std::vector<PointRow>& rows, double confidence);
std::vector<LaunchScalingModel> scaling_models_across_launches(const std::vector<PointRow>& rows, double confidence);
std::vector<OverlapComparison> overlap_comparisons(const std::vector<PointRow>& rows, double confidence,
                                                   std::uint64_t seed);

// How the figures of `rep` were measured and summarised, in words, a topic an item ("Timing: ...",
// "Summary: ...", "Rates: ...", ...); with adaptive repetitions, each rule the run's points stopped
// by and how many stopped for which reason; launches and time to accuracy where the run has them.
// Every report carries it: the Method section lists the items, results.json joins them (method).
std::vector<std::string> method_items(const Report& rep);
std::string method_statement(const Report& rep);

}  // namespace d500
