#pragma once
// The stages make_plan (plan.cpp) runs, in this order, each in its own file:
//   validate.cpp   the template suits the campaign; every key means something to one of its
//                  workloads; the exclude rules name keys and values the campaign has
//   expand.cpp     the axes' combinations in plan order, exclude rules applied, each point
//                  resolved, checked and estimated (on several threads), duplicates planned once
//   resources.cpp  what each new point needs of a node (memory, CPUs, GPUs) against what its
//                  jobs get: refusals and warnings
//   packing.cpp    the points into jobs (by time, or by points_per_job), then the plan's limits:
//                  job size, node-hour budget, signal before the time limit
// Inside plan/ only; the rest of d500 sees plan.hpp.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "plan/packing.hpp"
#include "plan/plan.hpp"
#include "plan/resolve.hpp"

namespace d500::planning {

// Every key of [fixed] and [axes], by name.
using KeysByName = std::map<std::string, const Axis*>;

// validate.cpp. Throws d500::Error at the line of the first key, value or rule that means nothing.
KeysByName validate_campaign(const Plan& plan, const WorkloadRegistry& reg);

// What planning costs in memory: about kPlanBytesPerPoint a point and kSpecBytesPerPoint a point
// of the largest job; what is refused when that is over half of `available` ("" when it fits).
double plan_cost(double points, double largest_job);
std::string too_big_for_memory(double cost, std::int64_t available);

// resources.cpp. Checks each new point as expansion takes it, in plan order: the first refusal of
// each kind is kept (throw_refusals throws them once every point is known, in the order of the
// checks), each kind of warning is said once. Sets plan.node_memory_bytes and its source.
class ResourceChecks {
 public:
  ResourceChecks(Plan& plan, const PlanOptions& opt);
  // Point p (not yet in plan.points) runs `threads` threads a rank on `backend`; `product` is the
  // calling thread's own, set again to p's combination when a refusal needs its words.
  void check(const Point& p, std::int64_t threads, const std::string& backend, Product& product);
  void throw_refusals() const;

 private:
  void check_memory(const Point& p, Product& product);
  void check_threads(const Point& p, std::int64_t threads);
  void check_gpus(const Point& p, const std::string& backend);
  Resolved resolve_again(const Point& p, Product& product) const;

  Plan& plan_;
  const PlanOptions& opt_;
  int cpus_ = 1;
  std::int64_t gpus_asked_ = -1;  // GPUs per node the Slurm jobs' gres asks for; -1: none
  std::int64_t largest_per_node_ = -1;
  std::set<std::pair<std::int64_t, std::int64_t>> threads_said_;  // (ranks per node, threads) already warned of
  std::set<std::string> gpus_said_;                               // backends whose GPU request was warned of
  std::optional<Error> nodes_refusal_, memory_refusal_;
};

// expand.cpp. Fills plan.dims, plan.points and plan.value_counts; `model` (packing by time)
// estimates each point. Throws d500::Error for a campaign too large to plan, a point that does not
// resolve, an exclude rule that matches nothing, no point left, or a resource refusal.
void expand_points(Plan& plan, const KeysByName& keys, const PlanOptions& opt, const TimeModel* model);

// packing.cpp. Fills plan.jobs: by time when `model` is given, else points_per_job points of one
// shape a job; throws d500::Error (unless opt.force) for a job over kMaxPointsPerJob points.
void pack_jobs(Plan& plan, const PlanOptions& opt, const TimeModel* model);
// The whole plan against the campaign's node-hour budget and its signal before the time limit.
void check_plan_limits(const Plan& plan, const PlanOptions& opt);

}  // namespace d500::planning
