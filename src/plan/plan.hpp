#pragma once
// The planner: campaign -> points -> jobs. Deterministic: the same campaign text gives the
// same points, ids and jobs, so a re-plan recognises finished work.
#include <string>
#include <vector>

#include "campaign/campaign.hpp"
#include "workloads/registry.hpp"

namespace d500 {

struct Point {
  std::string id;         // hex FNV-1a of `canonical`
  std::string canonical;  // "gemm:blas m=1024 n=1024 ..." -- one stable text form
  Params params;          // complete: defaults filled, derived values normalised
  int level = 0;
  Location where;         // where the combination's workload value was written
};


struct Job {
  std::string id;  // job-0000, ...
  int nodes = 1;
  int ranks_per_node = 1;
  std::vector<std::size_t> points;  // indices into Plan::points, in plan order
  int ranks() const { return nodes * ranks_per_node; }
};

struct TemplateInfo {
  std::string name;
  std::string path;
  std::string text;
  std::string launcher;  // from the template's "# d500: launcher=..." line
};

struct Plan {
  Campaign campaign;
  TemplateInfo tmpl;
  std::vector<Point> points;
  std::vector<Job> jobs;
};

// Where templates are looked up: $D500_TEMPLATES, else the source tree's templates/.
std::string templates_dir();
TemplateInfo load_template(const std::string& name, const Location& where);

struct PlanOptions {
  bool force = false;  // plan even when the campaign's node-hour budget is exceeded
};

// Expands and checks everything that can be checked without running. Throws d500::Error.
Plan make_plan(const Campaign& c, const WorkloadRegistry& reg, const PlanOptions& opt = {});

// Node-hours a job may use: nodes x its Slurm time limit (0 for local plans).
double job_node_hours(const Plan& plan, const Job& job);
double total_node_hours(const Plan& plan);

// "HH:MM:SS" (or "D-HH:MM:SS") for Slurm from minutes.
std::string slurm_time(int minutes);

// Writes the plan into `dir` (which must not exist, or be empty): campaign.toml, plan.toml,
// points.csv, jobs/<job>.toml and jobs/<job>.sh. Written under a temporary name and renamed,
// so a failure leaves nothing behind. `worker` is the absolute path of d500-worker.
void write_plan(const Plan& plan, const std::string& dir, const std::string& worker);

}  // namespace d500
