#pragma once
// The planner: campaign -> points -> jobs. Deterministic: the same campaign text gives the
// same points, ids and jobs, so a re-plan recognises finished work.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "campaign/campaign.hpp"
#include "workloads/registry.hpp"

namespace d500 {

// One planned point, compact: a campaign of 10^6 points is planned in well under 1 GB, so a
// point keeps its identity and what grouping and reporting need, not its parameters; those are
// derived again from `combination` (PointResolver) where a check needs them, and by the worker
// from the canonical text (params_of_canonical) that its job's rows of points.csv hold.
struct Point {
  std::string id;         // hex FNV-1a of `canonical`
  std::string canonical;  // "gemm:blas m=1024 n=1024 ..." -- one stable text form
  int level = 0;
  int nodes = 1;
  int ranks_per_node = 1;
  std::uint8_t launch = 1;           // campaign.launches: which launch (1..k); launches never share a job
  std::int64_t memory_bytes = -1;    // estimated per rank (WorkloadInfo::memory_bytes); -1: unknown
  std::uint64_t combination = 0;     // its ordinal in the product of the plan's dimensions
  float estimate_s = -1;             // packing by time: its estimated duration; -1: not estimated
  std::uint8_t estimate_source = 0;  // an EstimateSource (plan/packing.hpp)
};

struct Job {
  std::string id;  // job-0000, ...
  int nodes = 1;
  int ranks_per_node = 1;
  std::vector<std::size_t> points;  // indices into Plan::points, in plan order
  double estimate_s = -1;           // packing by time: the sum of its points' estimates
  int ranks() const { return nodes * ranks_per_node; }
};

struct TemplateInfo {
  std::string name;
  std::string path;
  std::string text;
  std::string launcher;  // from the template's "# d500: launcher=..." line
};

struct Plan {
  Campaign campaign;  // with named sets ("resnet50/*") expanded
  const WorkloadRegistry* registry = nullptr;
  // The product's dimensions in combination order (the last varies fastest): each lists the
  // indices into campaign.axes it sets together (one axis, or a zip group's axes).
  std::vector<std::vector<std::size_t>> dims;
  TemplateInfo tmpl;
  std::vector<Point> points;
  std::vector<Job> jobs;
  // The memory check: a node's memory (0: unknown, not checked), where that figure comes from,
  // and the point whose ranks need the most of one node (-1: none has an estimate).
  std::int64_t node_memory_bytes = 0;
  std::string node_memory_source;
  long largest_memory_point = -1;
  std::vector<std::string> warnings;  // what a person should know before running (oversubscription)
  // Per axis (index into campaign.axes), per value: how many points have that value (a point
  // whose workload does not take the key counts for none): the plan's summary.
  std::vector<std::vector<std::int64_t>> value_counts;
  // Packing by time ([packing]): a job's time limit, what the points of one may add up to (the
  // limit less the margin), and how the estimates were made, in words. 0 / "": not packed by time.
  double job_limit_s = 0, job_capacity_s = 0;
  std::string packing_text;
};

// The points of each job shape (nodes, ranks per node), shapes in the order they first appear,
// points in plan order: what jobs are cut from, by count or by time.
struct ShapeGroup {
  int nodes = 1, ranks_per_node = 1;
  std::vector<std::size_t> points;  // indices into the points
};
std::vector<ShapeGroup> points_by_shape(const std::vector<Point>& points);

// Derives points' complete parameters (defaults filled, normalised) again from their
// combinations, exactly as planning did. One resolver serves many points cheaply.
class PointResolver {
 public:
  explicit PointResolver(const Plan& plan);
  ~PointResolver();
  PointResolver(const PointResolver&) = delete;
  PointResolver& operator=(const PointResolver&) = delete;
  Params params(const Point& p);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where templates are looked up: $D500_TEMPLATES, else the source tree's templates/.
std::string templates_dir();
// The template `name` (a name, checked by the campaign loader: never a path), from `user_dir`
// when it has one, else from templates_dir().
TemplateInfo load_template(const std::string& name, const Location& where, const std::string& user_dir = "");

struct PlanOptions {
  bool force = false;  // plan even when the node-hour budget or a node's memory is exceeded
  // This machine, for local plans: memory in bytes and CPUs; 0 reads /proc/meminfo and the CPUs
  // this process may run on.
  std::int64_t host_memory_bytes = 0;
  int host_cpus = 0;
  // Memory free for planning itself (MemAvailable); 0 reads /proc/meminfo.
  std::int64_t available_memory_bytes = 0;
  // Threads that expand and check the points (the plan is the same whatever the count); 0: the
  // CPUs this process may use, at most 8, and 1 for a campaign of under 8192 combinations.
  int threads = 0;
};

// The size guards of planning itself. A job's spec is one TOML file that every rank of the job
// reads whole: a job of more points than this is refused unless forced (then its
// points_per_job is suggested). Planning costs at most about kPlanBytesPerPoint per point and
// kSpecBytesPerPoint per point of the largest job (measured with launchers/bench-plan.sh:
// 10^6 GEMM points, ~420 bytes a point beyond the process's own ~170 MB, a spec ~330 bytes a
// point); a campaign whose estimate exceeds half the memory available is refused, forced or
// not, before it is expanded.
constexpr std::int64_t kMaxPointsPerJob = 10000;
constexpr std::int64_t kPlanBytesPerPoint = 1024;
constexpr std::int64_t kSpecBytesPerPoint = 1024;
std::int64_t available_memory_bytes();

// This machine's memory (MemTotal) and the CPUs this process may run on.
std::int64_t host_memory_bytes();
int host_cpus();

// Expands and checks everything that can be checked without running. Throws d500::Error.
Plan make_plan(const Campaign& c, const WorkloadRegistry& reg, const PlanOptions& opt = {});

// Node-hours a job may use: nodes x its Slurm time limit (0 for local plans).
double job_node_hours(const Plan& plan, const Job& job);

// What a Slurm plan may spend at most, in node-hours (all 0 for local plans): its jobs at their
// limits; the retries `d500 submit --resume` may make of each job (max_retries of them, the k-th
// at its limit x retry_time_factor^k, rounded up to a minute as submit rounds it); and the
// analysis job on one node (analysis_job = true), once per submission round (1 + max_retries).
struct NodeHours {
  double jobs = 0, retries = 0, analysis = 0;
  double total() const { return jobs + retries + analysis; }
};
NodeHours node_hours(const Plan& plan);
double total_node_hours(const Plan& plan);  // node_hours(plan).total()
// "3 jobs at their time limits 1.5 + retries 1.5 (max_retries = 1, ...) + analysis job 0.083 (...)"
std::string node_hours_text(const Plan& plan, const NodeHours& h);

// The analysis job's time limit in minutes: [slurm.analysis] time_limit, else estimated from the
// plan's size (`d500 report` reads ~10^4 points' files in well under a minute: 60 s + 5 ms a
// point + 50 ms a job, doubled, at least 5 minutes).
int analysis_time_limit_min(const Campaign& c, std::size_t points, std::size_t jobs);

// Seconds before the time limit at which Slurm sends SIGTERM (--signal=TERM@s; 0: none): [slurm]
// signal_before_limit, else for a plan with training points (level 2 and up, which checkpoint
// and end cleanly on it) 120 s, or a quarter of the limit when that is shorter.
int signal_before_limit_s(const Campaign& c, bool has_training);

// "HH:MM:SS" (or "D-HH:MM:SS") for Slurm from minutes.
std::string slurm_time(int minutes);

// Writes the plan into `dir` (which must not exist, or be empty): campaign.toml, plan.toml,
// points.csv, jobs/<job>.toml and jobs/<job>.sh. Written under a temporary name and renamed,
// so a failure leaves nothing behind. `worker` is the absolute path of d500-worker.
void write_plan(const Plan& plan, const std::string& dir, const std::string& worker);

}  // namespace d500
