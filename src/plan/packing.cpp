#include "plan/packing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"
#include "plan/stages.hpp"
#include "rundir/layout.hpp"

namespace d500 {

namespace {
// A duration as a person reads it: "45 s", "12.5 min", "3.2 h".
std::string fmt_duration(double s) {
  if (s < 120) return fmt_sig(s, 3) + " s";
  if (s < 2 * 3600) return fmt_sig(s / 60, 3) + " min";
  return fmt_sig(s / 3600, 3) + " h";
}

// The p-th quantile (lower order statistic), 0 for none.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}
}  // namespace

const char* estimate_source_name(EstimateSource s) {
  switch (s) {
    case EstimateSource::None: return "none";
    case EstimateSource::Measured: return "measured";
    case EstimateSource::Calibrated: return "calibrated";
    case EstimateSource::Model: return "model";
    case EstimateSource::Default: return "default";
  }
  return "?";
}

TimeModel::TimeModel(const Campaign& c) : c_(c) {
  std::map<std::string, std::vector<double>> gflops, gbps, setup;
  for (const auto& dir : c.packing.times_from)
    for (auto& [id, m] : measured_points(RunLayout(dir), unreadable_)) {
      if (m.level < 2 && m.reps_run > 0 && m.reps_s > 0) {
        const double per_rep = m.reps_s / m.reps_run;
        if (m.work_flops > 0) gflops[m.backend].push_back(static_cast<double>(m.work_flops) / per_rep * 1e-9);
        if (m.work_bytes > 0) gbps[m.backend].push_back(static_cast<double>(m.work_bytes) / per_rep * 1e-9);
        setup[m.backend].push_back(std::max(0.0, m.seconds - m.reps_s));
      }
      measured_[id] = m;  // a later directory of the list wins
    }
  for (const auto& [b, v] : gflops) rates_[b].gflops = percentile(v, 0.1);
  for (const auto& [b, v] : gbps) rates_[b].gbps = percentile(v, 0.1);
  for (const auto& [b, v] : setup) rates_[b].setup_s = percentile(v, 0.9);
}

double TimeModel::planned_reps_time(double per_rep) const {
  const double all = (c_.warmups + c_.repetitions) * per_rep;
  // Adaptive: no repetition starts once max_time has passed.
  return c_.auto_repetitions.on ? std::min(all, c_.auto_repetitions.max_time_s + per_rep) : all;
}

TimeModel::Estimate TimeModel::estimate(const std::string& id, int level, const WorkloadInfo& w,
                                        const Params& params) const {
  if (auto it = measured_.find(id); it != measured_.end()) {
    const MeasuredPoint& m = it->second;
    if (level >= 2 || m.reps_run == 0) return {m.seconds, EstimateSource::Measured};
    const double per_rep = m.reps_s / m.reps_run;
    return {std::max(0.0, m.seconds - m.reps_s) + planned_reps_time(per_rep), EstimateSource::Measured};
  }
  if (w.work_of && level < 2) {
    const Work work = w.work_of(params);
    const auto b = params.find("backend");
    const std::string backend =
        b != params.end() && std::holds_alternative<std::string>(b->second) ? std::get<std::string>(b->second) : "";
    const auto r = rates_.find(backend);
    const bool calibrated =
        r != rates_.end() && (work.flops == 0 || r->second.gflops > 0) && (work.bytes == 0 || r->second.gbps > 0);
    const double gflops = calibrated ? r->second.gflops : c_.packing.gflops,
                 gbps = calibrated ? r->second.gbps : c_.packing.gbps;
    // The slower of compute and data movement at those rates: a roofline's bound, per repetition.
    const double per_rep = std::max(work.flops > 0 ? static_cast<double>(work.flops) / (gflops * 1e9) : 0.0,
                                    work.bytes > 0 ? static_cast<double>(work.bytes) / (gbps * 1e9) : 0.0);
    const double setup = calibrated ? r->second.setup_s : c_.packing.point_overhead_s;
    return {setup + planned_reps_time(per_rep), calibrated ? EstimateSource::Calibrated : EstimateSource::Model};
  }
  if (c_.packing.default_point_s > 0) return {c_.packing.default_point_s, EstimateSource::Default};
  return {};
}

std::string TimeModel::describe() const {
  std::string o;
  if (!c_.packing.times_from.empty()) {
    o += std::to_string(measured_.size()) + " complete point(s) read from " + join(c_.packing.times_from, ", ");
    std::vector<std::string> r;
    for (const auto& [b, x] : rates_)
      r.push_back(b + " " + (x.gflops > 0 ? fmt_sig(x.gflops, 3) + " GFLOP/s, " : std::string()) +
                  (x.gbps > 0 ? fmt_sig(x.gbps, 3) + " GB/s, " : std::string()) + fmt_sig(x.setup_s, 3) + " s setup");
    if (!r.empty()) o += "; calibrated per backend (rates: 10th percentile, setup: 90th): " + join(r, "; ");
    if (!unreadable_.empty()) o += "; " + std::to_string(unreadable_.size()) + " unreadable file(s) skipped";
    o += ". ";
  }
  o += "Model: " + fmt_sig(c_.packing.point_overhead_s, 3) + " s per point plus the repetitions at " +
       fmt_sig(c_.packing.gflops, 3) + " GFLOP/s and " + fmt_sig(c_.packing.gbps, 3) + " GB/s where not calibrated";
  return o;
}

void pack_by_time(Plan& plan, const PlanOptions& opt, const TimeModel& model) {
  const Campaign& c = plan.campaign;
  const PackingSettings& k = c.packing;
  if (plan.tmpl.launcher == "slurm") {
    if (k.job_time_s > 0)
      throw Error(k.job_time_where,
                  "key 'job_time' in [packing] applies to local plans; template '" + plan.tmpl.name +
                      "' submits to Slurm, whose jobs are packed to [slurm] time_limit: remove job_time");
    plan.job_limit_s = c.slurm.time_limit_min * 60.0;
  } else {
    if (k.job_time_s <= 0)
      throw Error(
          k.where,
          "[packing] with template '" + plan.tmpl.name +
              "' needs job_time, the time one job may take (e.g. job_time = \"1h\"); Slurm templates use [slurm] time_limit");
    plan.job_limit_s = k.job_time_s;
  }
  plan.job_capacity_s = plan.job_limit_s * (1 - k.margin);
  const std::size_t most = static_cast<std::size_t>(c.points_per_job > 0 ? c.points_per_job : kMaxPointsPerJob);

  std::map<EstimateSource, std::size_t> sources;
  long longest = -1;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const Point& p = plan.points[i];
    if (p.estimate_s < 0)
      throw Error(
          k.where,
          "[packing]: point " + planning::point_words(p.canonical, plan.campaign) +
              " has no estimate: no run in times_from measured it" +
              std::string(p.level >= 2 ? " (a training point's time is not modelled)"
                                       : " and its workload has no work model") +
              "; add a run directory that measured it to times_from, or set default_point_s (nothing was written)");
    ++sources[static_cast<EstimateSource>(p.estimate_source)];
    if (longest < 0 || p.estimate_s > plan.points[static_cast<std::size_t>(longest)].estimate_s)
      longest = static_cast<long>(i);
    if (p.estimate_s > plan.job_capacity_s) {
      const std::string why = "point " + planning::point_words(p.canonical, plan.campaign) + " is estimated at " +
                              fmt_duration(p.estimate_s) + " (" +
                              estimate_source_name(static_cast<EstimateSource>(p.estimate_source)) +
                              "), more than a job's " + fmt_duration(plan.job_capacity_s) + " (its limit " +
                              fmt_duration(plan.job_limit_s) + " less the " + fmt_sig(k.margin * 100, 3) + "% margin)";
      if (!opt.force)
        throw Error(k.where,
                    why +
                        "; raise the time limit, lower its repetitions, max_time or size, or plan with --force to "
                        "give it a job of its own (nothing was written)");
      plan.warnings.push_back(why + ": planned in a job of its own (--force); it may hit the time limit");
    }
  }

  // Per shape, in the order shapes first appear; within one, next fit in plan order.
  plan.jobs.clear();
  for (const ShapeGroup& shape : points_by_shape(plan.points)) {
    Job j;
    auto close = [&] {
      if (j.points.empty()) return;
      char id[32];
      std::snprintf(id, sizeof id, "job-%04zu", plan.jobs.size());
      j.id = id;
      plan.jobs.push_back(std::move(j));
      j = Job{};
    };
    for (auto i : shape.points) {
      const double e = plan.points[i].estimate_s;
      if (!j.points.empty() && (j.estimate_s + e > plan.job_capacity_s || j.points.size() >= most)) close();
      j.nodes = shape.nodes;
      j.ranks_per_node = shape.ranks_per_node;
      j.estimate_s = (j.points.empty() ? 0 : j.estimate_s) + e;
      j.points.push_back(i);
    }
    close();
  }

  double used = 0;
  for (const auto& j : plan.jobs) used += j.estimate_s;
  std::vector<std::string> src;
  for (const auto& [s, n] : sources) src.push_back(std::to_string(n) + " " + estimate_source_name(s));
  const Point& big = plan.points[static_cast<std::size_t>(longest)];
  plan.packing_text =
      "packed by time: jobs of at most " + fmt_duration(plan.job_capacity_s) + " of estimates (a job's limit " +
      fmt_duration(plan.job_limit_s) + " less a " + fmt_sig(k.margin * 100, 3) + "% margin), next fit in plan order; " +
      std::to_string(plan.jobs.size()) + " jobs hold " + fmt_duration(used) + " in all, filled to " +
      fmt_sig(100 * used / (plan.job_capacity_s * static_cast<double>(plan.jobs.size())), 3) +
      "% on average; estimates: " + join(src, ", ") + "; the longest point " + fmt_duration(big.estimate_s) + " (" +
      big.canonical + "). " + model.describe() + ". The margin also covers each job's start (mpirun, libraries).";
}

namespace planning {

namespace {

// points_per_job points of one shape a job (0: every point of the shape in one).
void pack_by_count(Plan& plan) {
  const Campaign& c = plan.campaign;
  for (const ShapeGroup& shape : points_by_shape(plan.points)) {
    const auto& pts = shape.points;
    std::size_t per = c.points_per_job > 0 ? static_cast<std::size_t>(c.points_per_job) : pts.size();
    for (std::size_t s = 0; s < pts.size(); s += per) {
      Job j;
      char id[32];
      std::snprintf(id, sizeof id, "job-%04zu", plan.jobs.size());
      j.id = id;
      j.nodes = shape.nodes;
      j.ranks_per_node = shape.ranks_per_node;
      j.points.assign(pts.begin() + static_cast<long>(s),
                      pts.begin() + static_cast<long>(std::min(pts.size(), s + per)));
      plan.jobs.push_back(std::move(j));
    }
  }
}

// A job of over kMaxPointsPerJob points is one spec every rank reads whole, one results file, one
// allocation lost to one failure: refused with the split that keeps each job under the limit.
void check_job_size(Plan& plan, const PlanOptions& opt) {
  const Campaign& c = plan.campaign;
  std::size_t largest = 0;
  for (const auto& j : plan.jobs) largest = std::max(largest, j.points.size());
  if (static_cast<std::int64_t>(largest) <= kMaxPointsPerJob) return;
  const std::int64_t jobs_needed = (static_cast<std::int64_t>(largest) + kMaxPointsPerJob - 1) / kMaxPointsPerJob;
  const std::int64_t suggest = (static_cast<std::int64_t>(largest) + jobs_needed - 1) / jobs_needed;
  const std::string what =
      "a job of " + std::to_string(largest) + " points (" +
      (c.points_per_job > 0 ? "points_per_job = " + std::to_string(c.points_per_job)
                            : std::string("points_per_job = 0 puts every point of one shape in one job")) +
      ")";
  if (!opt.force)
    throw Error(c.points_per_job_where, "the plan has " + what + ", over the " + std::to_string(kMaxPointsPerJob) +
                                            " points a job may hold: set points_per_job = " + std::to_string(suggest) +
                                            " (" + std::to_string(jobs_needed) +
                                            " jobs of that shape), or plan with --force");
  const std::int64_t avail = opt.available_memory_bytes > 0 ? opt.available_memory_bytes : available_memory_bytes();
  if (const std::string why =
          too_big_for_memory(plan_cost(static_cast<double>(plan.points.size()), static_cast<double>(largest)), avail);
      !why.empty())
    throw Error(c.points_per_job_where, "the plan has " + what + "; writing its spec " + why +
                                            ", even with --force: set points_per_job = " + std::to_string(suggest));
  plan.warnings.push_back("a job of " + std::to_string(largest) + " points (over " + std::to_string(kMaxPointsPerJob) +
                          ", planned because of --force); points_per_job = " + std::to_string(suggest) +
                          " would split it");
}

}  // namespace

void pack_jobs(Plan& plan, const PlanOptions& opt, const TimeModel* model) {
  if (model)
    pack_by_time(plan, opt, *model);
  else
    pack_by_count(plan);
  check_job_size(plan, opt);
}

void check_plan_limits(const Plan& plan, const PlanOptions& opt) {
  const Campaign& c = plan.campaign;
  const NodeHours nh = node_hours(plan);
  if (c.slurm.budget_node_hours > 0 && nh.total() > c.slurm.budget_node_hours && !opt.force)
    throw Error(c.slurm.where, "the campaign may use " + fmt_sig(nh.total(), 4) + " node-hours (" +
                                   node_hours_text(plan, nh) +
                                   "), over its budget_node_hours = " + fmt_sig(c.slurm.budget_node_hours, 4) +
                                   "; lower the time limit, sizes or max_retries, or plan with --force");
  if (plan.tmpl.launcher == "slurm" && c.slurm.signal_before_limit_s > 0 && c.slurm.time_limit_min > 0 &&
      c.slurm.signal_before_limit_s >= c.slurm.time_limit_min * 60)
    throw Error(c.slurm.signal_where, "key 'signal_before_limit' in [slurm] is " +
                                          std::to_string(c.slurm.signal_before_limit_s) +
                                          " s, not less than the time limit (" + slurm_time(c.slurm.time_limit_min) +
                                          "): the signal would come at the start; valid: 0 (no signal) to " +
                                          std::to_string(c.slurm.time_limit_min * 60 - 1) + " s");
}

}  // namespace planning

}  // namespace d500
