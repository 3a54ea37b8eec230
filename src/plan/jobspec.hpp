#pragma once
// The job spec: what the planner hands the worker. One TOML file per job, so a user can read
// (and a test can write) exactly what a job will do.
#include <string>
#include <vector>

#include "common/value.hpp"
#include "metrics/stopping.hpp"

namespace d500 {

struct Plan;
struct Job;

struct PointSpec {
  std::string id;
  std::string canonical;
  int level = 0;
  Params params;
};

struct JobSpec {
  std::string id;
  std::string campaign;
  std::string campaign_hash;
  int nodes = 1;
  int ranks_per_node = 1;
  int repetitions = 1;  // with auto_repetitions.on: its max
  AutoRepetitions auto_repetitions;
  int warmups = 0;
  std::vector<PointSpec> points;
};

JobSpec make_job_spec(const Plan& plan, const Job& job);
std::string job_spec_toml(const JobSpec& spec);
// The same text as job_spec_toml(make_job_spec(plan, job)), from the parameter tables the plan
// kept (Plan::params_toml): what d500 plan writes, without deriving any point again.
std::string job_spec_text(const Plan& plan, const Job& job);
// A point's parameters as a TOML inline table's contents ("backend = \"blas\", n = 8"), appended.
void append_toml_params(std::string& out, const Params& params);
JobSpec read_job_spec(const std::string& path);

// A TOML basic string literal (quoted and escaped).
std::string toml_string(const std::string& s);

}  // namespace d500
