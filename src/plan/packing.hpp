#pragma once
// Packing by time: each point's duration estimated, then the points of one shape packed into
// jobs, in plan order, while their estimates fit a job's time limit less a safety margin.
//
// A point's estimate, best first: (1) measured -- the same point id, complete in an earlier run
// directory ([packing] times_from): its setup time (its wall time less its repetitions) plus the
// planned repetitions at its measured mean time per repetition (warm-ups included); a training
// point (level 2+) takes its earlier wall time as it is. (2) calibrated -- the workload's work
// per repetition (WorkloadInfo::work_of) over the rates its backend reached in those earlier
// runs (the 10th percentile of their GFLOP/s and GB/s: conservative), max of the two (a
// roofline's bound), times the
// planned repetitions, plus the 90th percentile of those points' time beside their repetitions
// (setup, validation, writing). (3) model -- the same with [packing] gflops and
// gbps. (4) default -- [packing] default_point_s. Otherwise the point cannot be packed: an error.
// Adaptive repetitions count `max`, bounded by max_time plus one repetition.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "campaign/campaign.hpp"
#include "rundir/state.hpp"
#include "workloads/registry.hpp"

namespace d500 {

struct Plan;
struct PlanOptions;

enum class EstimateSource : std::uint8_t { None = 0, Measured, Calibrated, Model, Default };
const char* estimate_source_name(EstimateSource s);

class TimeModel {
 public:
  // Reads the earlier runs of c.packing.times_from (nothing when the campaign does not pack by time).
  explicit TimeModel(const Campaign& c);
  struct Estimate {
    double seconds = -1;
    EstimateSource source = EstimateSource::None;
  };
  Estimate estimate(const std::string& id, int level, const WorkloadInfo& w, const Params& params) const;
  // The calibration in words: which runs, how many points measured, each backend's rates.
  std::string describe() const;

 private:
  struct Rates {
    double gflops = 0, gbps = 0;  // 0: not calibrated
    double setup_s = -1;          // a point's time beside its repetitions; -1: not calibrated
  };
  double planned_reps_time(double per_rep) const;
  const Campaign& c_;
  std::map<std::string, MeasuredPoint> measured_;
  std::map<std::string, Rates> rates_;  // by backend
  std::vector<std::string> unreadable_;
};

// Packs plan.points into plan.jobs by their estimates (make_plan calls it when the campaign has
// [packing]); sets plan.job_limit_s, job_capacity_s and packing_text. Throws d500::Error for a
// point without an estimate, or (unless opt.force) one longer than a job's capacity.
void pack_by_time(Plan& plan, const PlanOptions& opt, const TimeModel& model);

}  // namespace d500
