#pragma once
// Reads results files (serially, without MPI): what analysis, report and check are built on.
#include <map>
#include <string>
#include <vector>

#include "common/value.hpp"
#include "metrics/metrics.hpp"
#include "metrics/outcome.hpp"

namespace d500 {

struct PointResult {
  Outcome outcome = Outcome::Incomplete;  // from the `status` attribute
  std::string id, canonical, status, status_reason, rate_unit, backend_version;
  std::string validation_status = "not-run", validation_method;
  std::string scaling = "strong", scaling_note;
  double validation_max_rel_error = 0, validation_tolerance = 0, seconds = 0;
  std::int64_t peak_rss_bytes = -1;         // -1: not recorded
  std::int64_t memory_estimate_bytes = -1;  // the planner's estimate per rank; -1: not recorded
  bool threads_oversubscribed = false;
  int index = 0, level = 0, warmups = 0, repetitions = 0;
  Params params;
  std::int64_t work_flops = 0, work_bytes = 0;
  std::vector<Sample> samples;
  std::vector<Event> events;                // training curves (levels 2, 3); may be empty
  double tta_target = 0, tta_budget_s = 0;  // when the point has a time-to-accuracy target
  std::int64_t eval_interval_steps = 0;
  // Level 1 (schema version 3): samples per repetition (the rate is samples/s), the network's,
  // executor's and memory plan's attributes (network.*, executor*, memory.*), and the
  // executor's steps with each rank's time in each.
  std::int64_t work_items = 0;
  std::map<std::string, Value> facts;  // also train.* (level 2)
  // unset.<name>: what a parameter left "" stands for on this point ("" for another backend's setting).
  std::map<std::string, std::string> unset;
  std::vector<StepInfo> steps;
  struct StepTime {
    std::int32_t rank, rep, step;
    std::int64_t ns;
  };
  std::vector<StepTime> step_times;
};

struct JobResult {
  std::string path, job_id, campaign, campaign_hash, status, d500_version, d500_commit, created_utc;
  long schema_version = 0;
  int ranks = 0;
  bool oversubscribed = false;
  std::vector<std::string> hosts;
  // /env's string attributes: version.<library>, machine.<fact>, env.<VARIABLE>.
  std::map<std::string, std::string> env;
  std::vector<PointResult> points;  // in job order
};

// Why sample row `s` contradicts its point's counts ("" when it does not): a rank outside the
// job's, a repetition beyond warmups + repetitions (unless `open_ended`: a training point still
// running has run as many steps as it has), a warm-up flag that disagrees with the repetition.
// The one rule of the reader (which refuses such a point as damaged) and of `d500 check`.
std::string sample_count_problem(const Sample& s, std::int64_t ranks, std::int64_t warmups, std::int64_t repetitions,
                                 bool open_ended);

// Throws d500::Error naming the file for a missing, truncated, foreign or newer-schema file.
JobResult read_job_file(const std::string& path);

// The file's own word on itself alone: its `status` ("running", "complete", ...) and `writer`
// (rank 0's identity, store/liveness.hpp; "" in a file written before d500 recorded it): what is
// left to read of a file whose points cannot be read. Throws d500::Error as read_job_file does.
struct JobStatus {
  std::string status, writer;
};
JobStatus read_job_status(const std::string& path);

}  // namespace d500
