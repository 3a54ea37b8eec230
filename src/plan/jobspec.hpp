#pragma once
// The job spec: what the planner hands the worker. One TOML file per job, so a user can read
// (and a test can write) exactly what a job will do.
#include <cstdint>
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
// A spec that lists its points ([[point]] tables with their parameters): what `d500 submit
// --resume` and `d500 run` write for the points a job has left.
std::string job_spec_toml(const JobSpec& spec);
// What `d500 plan` writes: the job's head and, instead of its points, the range of points.csv
// that holds them (a job's points are consecutive rows there), `count` rows from byte `offset`:
//   [rows]
//   file = "points.csv"
//   offset = 1234
//   count = 100
// so that a plan's files hold each point once (~100 bytes: its id, job, level, estimate and
// canonical text). read_job_spec reads either form into the same JobSpec.
std::string job_spec_text(const Plan& plan, const Job& job, std::uint64_t offset);
// The parameters of a planned point from its canonical text alone (parse_canonical_point), each
// value of the type its workload declares (a string spelled as a number stays a string, an
// integral real stays real) and each declared string parameter the text leaves out set unset
// (""), as the planner resolved them. Throws d500::Error naming `where` for an unknown workload
// or a value its declared type cannot hold.
Params params_of_canonical(const std::string& canonical, const std::string& where);
// A point's parameters as a TOML inline table's contents ("backend = \"blas\", n = 8"), appended.
void append_toml_params(std::string& out, const Params& params);
JobSpec read_job_spec(const std::string& path);

// A TOML basic string literal (quoted and escaped).
std::string toml_string(const std::string& s);

}  // namespace d500
