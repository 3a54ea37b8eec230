#pragma once
// A campaign file (TOML) parsed and checked for shape: which settings, which axes, how they
// combine. Whether a parameter means anything to a workload is the planner's business; this
// module guarantees that every key is known, every type right, and every error located.
#include <cstdint>
#include <string>
#include <vector>

#include "common/value.hpp"
#include "metrics/stopping.hpp"

namespace d500 {

// One swept (or fixed) parameter: its values in file order and where each was written.
struct Axis {
  std::string name;
  std::vector<LocatedValue> values;
  Location where;  // the key
};

// A [[exclude]] rule: a point is dropped when, for every key of the rule, the point's value
// is one of the rule's values.
struct Rule {
  std::vector<Axis> match;
  Location where;
};

struct ZipGroup {
  std::vector<std::string> axes;
  Location where;
};

// Slurm settings ([slurm] table), checked for shape here; every string is restricted to the
// characters its Slurm option allows, so that no value can break a job script or #SBATCH line.
// The analysis job's own settings ([slurm.analysis]); each empty one is the jobs' ([slurm]).
struct SlurmAnalysisSettings {
  std::string partition, account, qos, reservation;
  int time_limit_min = 0;  // 0: estimated from the plan (analysis_time_limit_min)
};

struct SlurmSettings {
  bool present = false;
  Location where;
  std::string partition, account, qos, reservation, constraint, gres, mpi = "pmix";
  std::string module_init;         // the site's script defining `module` ("": d500's list of usual places)
  int signal_before_limit_s = -1;  // SIGTERM this long before the limit (--signal); -1: the default (plan.hpp)
  Location signal_where;
  SlurmAnalysisSettings analysis;
  int time_limit_min = 0;  // required by Slurm templates
  int cpus_per_task = 1;
  std::vector<std::string> modules;
  bool array = true;               // jobs of one shape and limit become one job array
  int throttle = 0;                // at most this many of the campaign's jobs queued or running; 0: no limit
  bool analysis_job = false;       // a job running `d500 report` after all others
  double retry_time_factor = 1.0;  // a job that timed out is resubmitted with its limit times this
  int max_retries = 0;
  double budget_node_hours = 0;         // refuse to submit more than this (0: no budget)
  std::int64_t mem_per_node_bytes = 0;  // memory of one node, for the plan's memory check (0: unknown)
  Location mem_where;
};

// Packing points into jobs by estimated time ([packing] table): each job of one shape takes points
// in plan order while their estimates fit its time limit less the margin.
struct PackingSettings {
  bool present = false;
  Location where;
  double margin = 0.2;    // fraction of the time limit kept free
  double job_time_s = 0;  // a job's limit for local plans (Slurm plans use [slurm] time_limit)
  Location job_time_where;
  std::vector<std::string> times_from;  // earlier run directories (absolute), measured times by point id
  std::vector<Location> times_from_at;  // where each is named (the planner checks it is a run directory)
  Location times_from_where;
  double gflops = 1, gbps = 1;  // the model's rates where no earlier run calibrates a backend
  double point_overhead_s = 2;  // per point: process-side setup, validation, writing
  double default_point_s = 0;   // points without any estimate (0: refuse them)
};

struct Campaign {
  std::string path;  // as given by the user
  std::string text;  // the file's exact bytes: stored in every result file
  std::string hash;  // FNV-1a of text, hex
  std::string name;
  std::string description;
  int repetitions = 10;              // with auto_repetitions.on: its max
  AutoRepetitions auto_repetitions;  // repetitions = "auto" and [auto_repetitions]
  Location repetitions_where;        // the key, or the [campaign] table when it is not set
  int warmups = 2;
  int points_per_job = 0;         // 0: every point of one shape in one job
  int launches = 1;               // each point measured in this many separate jobs (axis `launch`)
  Location points_per_job_where;  // the key, or the [campaign] table when it is not set
  std::string template_name = "local";
  Location template_where;
  // A directory of the user's own templates (absolute; "" for none), searched before d500's.
  std::string templates_dir;
  Location templates_dir_where;
  std::vector<Axis> fixed;  // one value each
  std::vector<Axis> axes;   // swept; cartesian product unless zipped
  std::vector<ZipGroup> zips;
  std::vector<Rule> excludes;
  SlurmSettings slurm;
  PackingSettings packing;
};

// "HH:MM:SS", "MM:SS", "D-HH:MM:SS", "D-HH" or minutes as an integer: Slurm's forms. Returns
// minutes (rounded up), or -1 when `text` is none of them.
int parse_time_limit(const std::string& text);

// A memory size as Slurm writes it ("64G", "512000M", "1T", "2048" = MiB) in bytes; -1 if not one.
std::int64_t parse_memory_size(const std::string& text);

// Parses and shape-checks a campaign. Throws d500::Error naming file:line:column and key.
// Relative paths in it are relative to `base_dir`, by default the directory of `path` (a run
// directory's copy passes the directory its original was planned from).
Campaign parse_campaign_text(const std::string& text, const std::string& path, const std::string& base_dir = "");
Campaign load_campaign(const std::string& path, const std::string& base_dir = "");

}  // namespace d500
