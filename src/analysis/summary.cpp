// The summary: every results file of a run directory read (through rundir/, which picks the
// best record of each point), each point summarised with its intervals, and the comparisons,
// scaling series and time-to-accuracy configurations derived (sections.cpp).
#include "analysis/summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/text.hpp"
#include "rundir/attempts.hpp"
#include "rundir/state.hpp"

namespace d500 {

std::vector<std::string> method_items(const Report& rep) {
  const double confidence = rep.confidence;
  const std::string pct = std::to_string(static_cast<int>(confidence * 100 + 0.5)) + "%";
  std::vector<std::string> items{
      "Timing: each repetition starts when every rank has entered an MPI_Allreduce (MAX) of a few integers (a barrier "
      "that also carries the durable-flush decision and, with adaptive repetitions, the previous repetition's slowest "
      "time; each file states its method in its `sync` attribute); its cost is the maximum over ranks of the rank's own "
      "duration (end - start, std::chrono::steady_clock). Warm-up repetitions are recorded but excluded; repetitions "
      "missing on some rank are excluded and counted. A repetition's cost is its whole-step (op) row; the phases of a "
      "training step (forward, backward) are its other rows, each summarised the same way, and on d500's network "
      "executor every node's step is timed inside the repetition by two clock reads into preallocated memory.",
      "Summary: the median with an exact, distribution-free " + pct +
          " confidence interval from binomial order statistics (none exists for n <= 5). The mean with a Student-t " +
          pct +
          " interval is shown only where an Anderson-Darling test does not reject normality (p >= 0.05) and no value "
          "lies beyond Tukey's fences. Outliers beyond Tukey's fences (1.5 IQR) are counted, never removed.",
      "Rates: work / time (GFLOP/s = flops / s / 1e9; GB/s = bytes / s / 1e9, bytes being for collectives the per-rank "
      "buffer as nccl-tests sizes it: the gathered result for allgather; samples/s = the batch of a network step / "
      "s), per rank (one rank's work over the repetition's time); where every rank does the same work (weak scaling) "
      "the aggregate of all ranks, ranks x that, is given beside it. The rate interval is the time interval mapped "
      "through that function.",
      "Enough repetitions: the median's CI half-width is within 5% of the median with n >= 10; otherwise the "
      "repetitions needed are the smallest count whose exact interval, read off the sample's own quantiles (type 7 "
      "and Harrell-Davis, the narrower) at that count's order-statistic positions, reaches 5% (no normality or "
      "1/sqrt(n) law assumed; capped at 1000).",
      "Checks: ranks are flagged as differing when a paired test of their own durations, blocked by repetition "
      "(Friedman's for 3 or more ranks, the exact sign test for 2), gives p < 0.01. Each point's repetition costs (n "
      ">= 10) are checked for independence: a trend over the repetition index (Spearman, flagged at p < 0.01) and "
      "lag-1 autocorrelation (flagged beyond 2.576 / sqrt(n)); a flag says the interval, which assumes independent "
      "draws, may be too narrow. Each point records the machine's state over it (the 1-minute load beyond the job's "
      "own ranks x threads, the share of CPU time stolen, involuntary context switches, the CPU clock); a point is "
      "flagged busy with another CPU's worth of load or 2% stolen time.",
      "Ratios (speedups, backend comparisons): ratios of medians with seeded percentile bootstrap intervals (" +
          std::to_string(kBootstrapResamples) +
          " resamples; each comparison's own stream, seeded from the report's seed and its two points' ids), each "
          "sample resampled independently; the percentile bootstrap was chosen over BCa by simulated coverage at n = "
          "10 (d500-bench-ratio-coverage: at least 0.96 for lognormal, bimodal and 10%-outlier samples, where BCa fell "
          "to 0.89 on the bimodal ones); a ratio gets no interval where either sample is too small for a median's own "
          "(n <= 5 at 95%); a comparison is significant when its interval excludes 1. Where both samples pass the "
          "normality check, the ratio of means with Fieller's interval is given as well."};
  // Adaptive repetitions: each rule stated once, with how many points stopped why.
  std::map<std::string, std::map<std::string, int>> rules;
  for (const auto& r : rep.rows) {
    auto rule = r.facts.find("repetitions.rule"), why = r.facts.find("repetitions.stopped_by");
    if (rule != r.facts.end() && why != r.facts.end() && std::holds_alternative<std::string>(rule->second) &&
        std::holds_alternative<std::string>(why->second))
      ++rules[std::get<std::string>(rule->second)][std::get<std::string>(why->second)];
  }
  if (!rules.empty()) {
    std::string adaptive = "Repetitions:";
    for (const auto& [rule, why] : rules) {
      std::vector<std::string> counts;
      for (const auto& [w, k] : why) counts.push_back(std::to_string(k) + " by " + w);
      adaptive += " " + rule + " (points stopped: " + join(counts, ", ") + ").";
    }
    items.push_back(adaptive +
                    " A point that stopped by its interval's width has that interval computed after a stop that "
                    "depended on it: its coverage may be somewhat below the nominal level.");
  }
  if (!rep.launches.empty())
    items.push_back(
        "Launches: " + std::to_string(rep.launches.size()) + " point(s) were measured in " +
        std::to_string(rep.launches.front().interval.launches) +
        " or more separate launches (jobs). Their primary interval is two-stage: each launch's median, then Student's "
        "t interval (k - 1 degrees of freedom) on the logarithms of the k launch medians, exponentiated around their "
        "geometric mean; it covers the variation between launches. The share of the variance of log costs between "
        "launches is from a one-way random-effects ANOVA (method of moments). Backends, and a scaling series' rank "
        "counts, measured in the same launches are also compared across them (per launch the ratio of the two "
        "medians, then Student's t on the log ratios, paired by launch), and a scaling series' model is fitted to each "
        "launch and summarised by Student's t over the launches' fits; the Backend comparisons and Scaling sections "
        "pair points launch by launch (within-launch intervals).");
  else
    items.push_back(
        "Launches: every interval covers only the variation within one launch (one job on one allocation): variation "
        "between launches (another allocation, another time) is not measured; set launches = k in [campaign] to "
        "measure it.");
  if (!rep.tta.empty())
    items.push_back(
        "Time to accuracy: per run, the training time of the first evaluation reaching the target within the budget, "
        "taken from the latest rank (every rank's evaluations are checked against rank 0's: the same steps and "
        "accuracies to 1e-9; a difference is reported). Across seeds: the median with the exact order-statistic "
        "interval, misses coded as beyond the budget; where runs were cut off before the target or the budget (their "
        "job killed or timed out), they are right-censored at the training time every rank reached and the median "
        "and its interval are Kaplan-Meier's (Greenwood variance on the log scale; Brookmeyer-Crowley limits, as R's "
        "survfit). The success rate is over the runs whose outcome is known, with a Clopper-Pearson interval.");
  return items;
}

std::string method_statement(const Report& rep) { return join(method_items(rep), " "); }

void add_step_costs(PointRow& r, const PointResult& p, int first_rep, int end_rep, std::size_t top) {
  // Per step: per timed repetition the slowest rank, then the median over repetitions.
  const std::size_t n = p.steps.size();
  std::vector<std::vector<std::int64_t>> worst_of(
      n, std::vector<std::int64_t>(static_cast<std::size_t>(std::max(end_rep, 0)), -1));
  for (const auto& t : p.step_times)
    if (t.step >= 0 && static_cast<std::size_t>(t.step) < n && t.rep >= first_rep && t.rep < end_rep)
      worst_of[static_cast<std::size_t>(t.step)][static_cast<std::size_t>(t.rep)] =
          std::max(worst_of[static_cast<std::size_t>(t.step)][static_cast<std::size_t>(t.rep)], t.ns);
  std::vector<PointRow::StepCost> all;
  std::map<std::pair<std::string, std::string>, std::pair<PointRow::OpCost, double>>
      groups;  // (op, pass) -> cost, flops
  // (op, pass) -> per repetition its steps' durations added; -1 once a step of it has none there.
  std::map<std::pair<std::string, std::string>, std::vector<double>> sums;
  for (std::size_t k = 0; k < n; ++k) {
    auto& sum = sums[{p.steps[k].op, p.steps[k].direction}];
    sum.resize(worst_of[k].size(), 0.0);
    for (std::size_t rep = static_cast<std::size_t>(std::max(first_rep, 0)); rep < sum.size(); ++rep)
      sum[rep] = worst_of[k][rep] < 0 || sum[rep] < 0 ? -1 : sum[rep] + static_cast<double>(worst_of[k][rep]) * 1e-9;
    std::vector<double> v;
    for (auto x : worst_of[k])
      if (x >= 0) v.push_back(static_cast<double>(x) * 1e-9);
    PointRow::StepCost c{
        p.steps[k].name, p.steps[k].op, p.steps[k].direction, p.steps[k].impl, stats::median(v), 0, 0, {}};
    if (n * v.size() <= PointRow::kStepRepetitionsKept) c.reps = std::move(v);
    c.gflops = c.median_s > 0 ? p.steps[k].flops / c.median_s / 1e9 : 0;
    r.steps_total_s += c.median_s;
    if (c.impl == "reference (fallback)") r.fallback_share += c.median_s;
    auto& [g, flops] = groups[{c.op, c.direction}];
    g.op = c.op, g.direction = c.direction;
    ++g.steps;
    g.median_s += c.median_s;
    flops += p.steps[k].flops;
    all.push_back(c);
  }
  for (auto& [key, gf] : groups) {
    auto& [g, flops] = gf;
    const std::vector<double>& sum = sums[key];
    for (std::size_t rep = static_cast<std::size_t>(std::max(first_rep, 0)); rep < sum.size(); ++rep)
      if (sum[rep] >= 0) g.reps.push_back(sum[rep]);
    g.share = r.steps_total_s > 0 ? g.median_s / r.steps_total_s : 0;
    g.gflops = g.median_s > 0 ? flops / g.median_s / 1e9 : 0;
    r.by_operator.push_back(g);
  }
  std::stable_sort(r.by_operator.begin(), r.by_operator.end(),
                   [](const auto& a, const auto& b) { return a.median_s > b.median_s; });
  for (auto& c : all) c.share = r.steps_total_s > 0 ? c.median_s / r.steps_total_s : 0;
  if (r.steps_total_s > 0) r.fallback_share /= r.steps_total_s;
  r.all_steps = all;
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.median_s > b.median_s; });
  r.steps = static_cast<int>(n);
  all.resize(std::min(all.size(), top));
  r.top_steps = std::move(all);
}

namespace {

// A parameter left "" as what it stands for on the point (`unset`, from its file): math reads
// "fp32" where the campaign wrote fp32 and the planner normalised it away from the id; a setting of
// another backend's, which changes nothing on it, is absent (a table's "-"). Also a point never
// run, whose parameters come from its canonical text (where "" is absent), with its siblings'.
void apply_unset(PointRow& r, const std::map<std::string, std::string>& unset) {
  for (const auto& [k, means] : unset) {
    auto it = r.params.find(k);
    if (it != r.params.end() && !is_unset(it->second)) continue;
    if (means.empty()) {
      if (it != r.params.end()) r.params.erase(it);
    } else {
      r.params[k] = Value{means};
      r.unset[k] = means;
    }
  }
}

// What a point is, as its file says: its names, parameters, outcome and validation, and its job's.
PointRow point_identity(const PointResult& p, const JobResult& j) {
  PointRow r;
  r.id = p.id;
  r.job_id = j.job_id;
  r.file = j.path;
  r.canonical = p.canonical;
  r.params = p.params;
  apply_unset(r, p.unset);
  r.workload = p.params.count("workload") ? canonical(p.params.at("workload")) : "?";
  r.backend = p.params.count("backend") ? canonical(p.params.at("backend")) : "?";
  r.level = p.level;
  r.ranks = j.ranks;
  r.oversubscribed = j.oversubscribed;
  r.nodes = static_cast<int>(int_param_or(p.params, "nodes", 1));
  r.ranks_per_node = static_cast<int>(int_param_or(p.params, "ranks_per_node", j.ranks));
  r.scaling = p.scaling;
  r.scaling_note = p.scaling_note;
  r.outcome = p.outcome;
  r.status = outcome_name(p.outcome);
  r.status_reason = p.status_reason;
  r.validation_status = p.validation_status;
  r.validation_method = p.validation_method;
  r.validation_max_rel_error = p.validation_max_rel_error;
  r.validation_tolerance = p.validation_tolerance;
  r.peak_rss_bytes = p.peak_rss_bytes;
  r.memory_estimate_bytes = p.memory_estimate_bytes;
  r.threads_oversubscribed = p.threads_oversubscribed;
  r.rate_unit = p.rate_unit;
  std::set<std::string> hosts(j.hosts.begin(), j.hosts.end());
  r.hosts = join(std::vector<std::string>(hosts.begin(), hosts.end()), " ");
  return r;
}

// A training point's time to its target accuracy (and to the report's other targets), its curve.
void add_time_to_accuracy(PointRow& r, const PointResult& p) {
  r.tta_target = p.tta_target;
  r.tta_budget_s = p.tta_budget_s;
  r.eval_interval_steps = p.eval_interval_steps;
  for (const auto& e : p.events)
    if (e.rank == 0) r.curve.push_back({static_cast<double>(e.time_ns) * 1e-9, e.accuracy});
  if (p.tta_target > 0) {
    r.tta_s = time_to_target_all_ranks(p.events, p.tta_target, p.tta_budget_s);
    const RankEvaluations ev = check_rank_evaluations(p.events);
    r.tta_trained_s = ev.trained_s;
    r.eval_disagreement = ev.disagreement;
  }
  if (auto it = p.params.find("report_targets");
      p.tta_target > 0 && it != p.params.end() && std::holds_alternative<std::string>(it->second))
    if (const auto more = parse_number_list(std::get<std::string>(it->second)))
      for (double t : *more) r.tta_more.push_back({t, time_to_target_all_ranks(p.events, t, p.tta_budget_s)});
}

}  // namespace

std::optional<double> collective_bus_factor(const std::string& workload, double ranks) {
  if (workload == "allreduce") return 2 * (ranks - 1) / ranks;
  if (workload == "allgather" || workload == "reduce_scatter") return (ranks - 1) / ranks;
  if (workload == "broadcast") return 1.0;
  return std::nullopt;
}

bool PointRow::lone_collective() const {
  return level == 0 && ranks == 1 && collective_bus_factor(workload, 1).has_value();
}

double ideal_load(const std::string& kind, const std::string& bus, int base_ranks, double ranks) {
  if (kind != "weak") return base_ranks / ranks;
  if (bus.empty()) return 1;
  const double base = collective_bus_factor(bus, base_ranks).value_or(0);
  return base > 0 ? collective_bus_factor(bus, ranks).value_or(0) / base : 1;
}

namespace {

// The point's work per repetition and its rate at the median time (and at the CI's ends); a
// collective's bus factor (nccl-tests' busbw).
void add_rates(PointRow& r, const PointResult& p) {
  r.work = static_cast<double>(p.rate_unit == "GFLOP/s"     ? p.work_flops
                               : p.rate_unit == "samples/s" ? p.work_items
                                                            : p.work_bytes);
  const double unit = p.rate_unit == "samples/s" ? 1 : 1e9;
  if (r.ranks > 0 && r.level == 0) r.bus_factor = collective_bus_factor(r.workload, r.ranks).value_or(0);
  if (r.time.n > 0 && r.time.median > 0) {
    r.rate = r.work / r.time.median / unit;
    if (r.scaling == "weak" || r.ranks == 1) r.rate_aggregate = r.rate * r.ranks;
    if (r.time.has_ci) {
      r.rate_lo = r.work / r.time.hi / unit;
      r.rate_hi = r.work / r.time.lo / unit;
    }
  }
}

PointRow summarize_point(const PointResult& p, const JobResult& j, double confidence) {
  PointRow r = point_identity(p, j);

  // Per repetition: the slowest rank's duration, if every rank recorded it.
  // Sized by the samples there are, never by the counts a file states (the reader checked them
  // against the samples; an unfinished point's may be far larger than what it ran).
  std::int32_t last_rep = -1;
  for (const auto& s : p.samples) last_rep = std::max(last_rep, s.rep);
  const int total_reps =
      static_cast<int>(std::min<std::int64_t>(std::int64_t{p.warmups} + p.repetitions, std::int64_t{last_rep} + 1));
  std::vector<int> seen(static_cast<std::size_t>(std::max(total_reps, 0)), 0);
  std::vector<std::int64_t> worst(seen.size(), 0);
  std::vector<std::vector<double>> per_rank(static_cast<std::size_t>(std::max(j.ranks, 0)));
  std::map<int, std::vector<double>> by_rep;  // rep -> each rank's duration: the ranks' paired samples
  std::set<int> warm;
  // Other phases (a training step's forward and backward): per repetition, those of the rank
  // whose whole repetition was slowest, so that a repetition's breakdown is one rank's own and
  // its phases add up to at most the whole (each phase's maximum over ranks taken apart need not).
  // Found in a second pass over the samples, once each repetition's slowest rank is known: no
  // map per sample on this path, which a report of 10^7 samples walks.
  std::vector<int> worst_rank(seen.size(), -1);
  for (const auto& s : p.samples) {
    if (s.rep < 0 || s.rep >= total_reps || s.rank < 0 || s.rank >= j.ranks) continue;
    if (s.warmup) {
      warm.insert(s.rep);
      continue;
    }
    if (s.phase != static_cast<std::uint8_t>(Phase::Op)) continue;  // the second pass below
    const auto d = s.end_ns - s.start_ns;
    seen[static_cast<std::size_t>(s.rep)]++;
    if (d > worst[static_cast<std::size_t>(s.rep)] || worst_rank[static_cast<std::size_t>(s.rep)] < 0)
      worst_rank[static_cast<std::size_t>(s.rep)] = s.rank;
    worst[static_cast<std::size_t>(s.rep)] = std::max(worst[static_cast<std::size_t>(s.rep)], d);
    per_rank[static_cast<std::size_t>(s.rank)].push_back(static_cast<double>(d) * 1e-9);
    auto& block = by_rep[s.rep];
    block.resize(static_cast<std::size_t>(j.ranks), std::nan(""));
    block[static_cast<std::size_t>(s.rank)] = static_cast<double>(d) * 1e-9;
  }
  r.warmups_excluded = static_cast<int>(warm.size());
  for (std::size_t rep = 0; rep < seen.size(); ++rep) {
    if (seen[rep] == j.ranks) {
      r.costs.push_back(static_cast<double>(worst[rep]) * 1e-9);
      r.cost_reps.push_back(static_cast<int>(rep));
    } else if (seen[rep] > 0) {
      ++r.reps_incomplete;
    }
  }
  // The summaries that do not depend on the repetitions' order read one sorted copy: each sorts
  // its own, and sorting 10^5 costs again and again took a tenth of a large report.
  std::vector<double> sorted_costs(r.costs);
  std::sort(sorted_costs.begin(), sorted_costs.end());
  r.time = stats::summarize(sorted_costs, confidence);
  if (!r.costs.empty())
    for (double q : {0.9, 0.99}) r.tail.push_back(stats::summarize_quantile(sorted_costs, q, confidence));
  // Per phase and repetition: the slowest rank's duration of it (0 where that rank did not time
  // the phase in a repetition some rank timed it in), and whether any rank timed it.
  std::map<std::uint8_t, std::pair<std::vector<std::int64_t>, std::vector<bool>>> phase_of;
  for (const auto& s : p.samples) {
    if (s.warmup || s.phase == static_cast<std::uint8_t>(Phase::Op) || s.rep < 0 || s.rep >= total_reps || s.rank < 0 ||
        s.rank >= j.ranks)
      continue;
    auto& [ns, timed] = phase_of[s.phase];
    ns.resize(seen.size(), 0);
    timed.resize(seen.size(), false);
    const auto rep = static_cast<std::size_t>(s.rep);
    timed[rep] = true;
    if (s.rank == worst_rank[rep]) ns[rep] += s.end_ns - s.start_ns;
  }
  for (const auto& [ph, by] : phase_of) {
    const auto& [ns, timed] = by;
    std::vector<double> v;
    std::map<int, double> by_rep;
    for (std::size_t rep = 0; rep < seen.size(); ++rep) {
      if (!timed[rep] || seen[rep] != j.ranks) continue;  // as the whole: every rank's repetition
      v.push_back(static_cast<double>(ns[rep]) * 1e-9);
      by_rep[static_cast<int>(rep)] = v.back();
    }
    r.phases.push_back({phase_name(static_cast<Phase>(ph)), stats::summarize(v, confidence), std::move(by_rep)});
  }
  r.work_items = p.work_items;
  r.flops = static_cast<double>(p.work_flops);
  r.work_bytes = static_cast<double>(p.work_bytes);
  r.facts = p.facts;
  if (!p.steps.empty()) add_step_costs(r, p, p.warmups, total_reps);
  r.mean = stats::mean_t_interval(r.costs, confidence);
  r.normality = stats::anderson_darling(sorted_costs);
  r.outliers = stats::tukey_outliers(sorted_costs);
  r.advice = stats::repetition_advice(sorted_costs, r.time);
  r.independence = stats::independence_check(r.costs);
  if (j.ranks > 1) {
    std::vector<std::vector<double>> blocks;
    for (const auto& [rep, b] : by_rep)
      if (std::none_of(b.begin(), b.end(), [](double v) { return std::isnan(v); })) blocks.push_back(b);
    r.ranks_test = stats::paired_ranks_test(blocks);
  }
  for (const auto& v : per_rank) r.rank_medians.push_back(stats::median(v));
  add_time_to_accuracy(r, p);
  add_rates(r, p);
  return r;
}

}  // namespace

std::map<std::string, const PointRow*> rows_by_id(const Report& rep) {
  std::map<std::string, const PointRow*> out;
  for (const auto& r : rep.rows) out[r.id] = &r;
  return out;
}

std::vector<std::string> report_workloads(const Report& rep) {
  std::vector<std::string> out;
  for (const auto& r : rep.rows)
    if (std::find(out.begin(), out.end(), r.workload) == out.end()) out.push_back(r.workload);
  return out;
}

Report analyze_run(const std::string& dir, const AnalysisOptions& opt) {
  Report rep;
  rep.dir = dir;
  rep.confidence = opt.confidence;
  rep.seed = opt.seed;
  const RunLayout layout(dir);
  if (!std::filesystem::is_directory(layout.results_dir()))
    throw Error(dir + ": not a d500 run directory (no results/); create one with `d500 plan CAMPAIGN -o DIR`");
  // Every point of every readable file is summarised; the run state names the record kept.
  std::map<std::pair<std::string, std::string>, PointRow> rows;  // (point id, file) -> summary
  const RunState state = scan_results(layout, [&](const JobResult& j) {
    if (rep.campaign.empty()) {
      rep.campaign = j.campaign;
      rep.campaign_hash = j.campaign_hash;
      rep.d500_version = j.d500_version + " (" + j.d500_commit + ")";
    }
    for (const auto& p : j.points) rows[{p.id, j.path}] = summarize_point(p, j, opt.confidence);
    if (!j.created_utc.empty()) {  // ISO 8601 in UTC: in time order as text
      if (rep.first_started.empty() || j.created_utc < rep.first_started) rep.first_started = j.created_utc;
      if (j.created_utc > rep.last_started) rep.last_started = j.created_utc;
    }
    std::map<std::string, std::string> facts{{"d500", j.d500_version + " (" + j.d500_commit + ")"}};
    for (const auto& [k, v] : j.env)
      if (k.rfind("env.SLURM_JOB_ID", 0) != 0 && k.rfind("env.SLURM_ARRAY", 0) != 0 && k != "env.SLURM_JOB_NODELIST")
        facts[k] = v;
    auto e = std::find_if(rep.environments.begin(), rep.environments.end(),
                          [&](const Environment& x) { return x.facts == facts; });
    if (e == rep.environments.end()) e = rep.environments.insert(rep.environments.end(), Environment{facts, {}, 0});
    e->hosts.insert(j.hosts.begin(), j.hosts.end());
    ++e->files;
  });
  rep.files = state.files;
  rep.unreadable = state.unreadable;
  if (rep.campaign.empty()) {  // no file holds a point yet: the plan names the campaign
    rep.campaign = layout.campaign_name();
    rep.campaign_hash = layout.campaign_hash();
    rep.d500_version = "no results file yet";
  }
  std::map<std::string, PointRow> best;
  for (const auto& [id, st] : state.points) best[id] = std::move(rows.at({id, st.file}));

  std::vector<PlannedPoint> planned = read_points_csv(layout);
  // Beside a point that its Slurm job left unfinished: how that job ended, and its last words.
  std::map<std::string, JobEnd> job_ends = slurm_job_ends(layout);
  job_ends.merge(local_job_ends(layout));  // a job d500 run ended for want of progress
  auto with_job_end = [&](PointRow& r, const std::string& job) {
    auto e = job_ends.find(job);
    if (is_final(r.outcome) || e == job_ends.end() || e->second.text.empty()) return;
    if (e->second.outcome) {
      r.outcome = *e->second.outcome;
      r.status = outcome_name(r.outcome);
    }
    r.status_reason += (r.status_reason.empty() ? "" : "; ") + e->second.text;
  };
  // What a workload's points on a backend left unset stood for, from those that ran: for those that did not.
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::string>> unset_of;
  for (const auto& [id, r] : best) unset_of[{r.workload, r.backend}].insert(r.unset.begin(), r.unset.end());
  std::set<std::string> listed;
  for (const auto& p : planned) {
    listed.insert(p.id);
    auto it = best.find(p.id);
    if (it != best.end()) {
      with_job_end(it->second, p.job);
      rep.rows.push_back(std::move(it->second));
      continue;
    }
    PointRow r;
    r.id = p.id;
    r.job_id = p.job;
    r.canonical = p.canonical;
    r.level = p.level;
    const CanonicalHead head = canonical_head(p.canonical);
    r.workload = head.workload;
    r.backend = head.backend;
    // Never run: its parameters from its canonical text, so that it reads like its neighbours.
    r.params = parse_canonical_point(p.canonical);
    if (auto u = unset_of.find({r.workload, r.backend}); u != unset_of.end()) apply_unset(r, u->second);
    r.nodes = static_cast<int>(int_param_or(r.params, "nodes", 1));
    r.ranks_per_node = static_cast<int>(int_param_or(r.params, "ranks_per_node", 1));
    r.ranks = r.nodes * r.ranks_per_node;
    const PointState missing = state.of(p.id);
    r.outcome = missing.outcome;
    r.status = outcome_name(missing.outcome);
    r.status_reason = missing.reason;
    r.validation_status = "not-run";
    with_job_end(r, p.job);
    rep.rows.push_back(r);
  }
  for (auto& [id, b] : best)
    if (!listed.count(id)) rep.rows.push_back(std::move(b));  // results without a plan listing
  rep.names = point_names(rep.rows);
  rep.campaign_keys = opt.campaign_keys;
  rep.comparisons = compare_backends(rep.rows, opt.confidence, opt.seed);
  rep.launch_comparisons = compare_backends_across(rep.rows, opt.confidence, "launch");
  rep.seed_comparisons = compare_backends_across(rep.rows, opt.confidence, "seed");
  for (auto& c : scaling_across_launches(rep.rows, opt.confidence)) rep.launch_comparisons.push_back(std::move(c));
  rep.launch_scaling = scaling_models_across_launches(rep.rows, opt.confidence);
  rep.scaling = scaling_series(rep.rows, opt.confidence, opt.seed);
  rep.tta = tta_configs(rep.rows, opt.confidence);
  rep.launches = launch_groups(rep.rows, opt.confidence);
  rep.overlap = overlap_comparisons(rep.rows, opt.confidence, opt.seed);
  return rep;
}

}  // namespace d500
