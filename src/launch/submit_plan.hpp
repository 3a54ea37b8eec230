#pragma once
// What `d500 submit` (and `--resume`) sends to Slurm, decided without touching Slurm or the
// disk: from the planned jobs, what the results files hold as finished, what Slurm reports as
// queued or running, and the earlier attempts' time-outs. slurm.cpp gathers these facts, writes
// the specs and lists this plan names, and submits through libslurm.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "campaign/campaign.hpp"
#include "plan/jobspec.hpp"
#include "rundir/layout.hpp"

namespace d500 {

struct SubmitFacts {
  std::vector<std::pair<std::string, JobSpec>> jobs;  // every planned job and its original spec, in job order
  std::set<std::string> finished;                     // point ids with a final outcome in some results file
  std::set<std::string> in_flight;                    // point ids in a task Slurm reports queued or running
  std::map<std::string, int> attempts, timeouts;      // per planned job: tasks submitted, tasks that timed out
  std::map<std::string, int> failures;                // per planned job: tasks that failed for their own reasons
  std::map<std::string, std::string> failure_cause;   // per planned job: its last failure's cause and last line
  std::map<std::string, std::string> failed_nodes;    // node -> the task that ended NODE_FAIL on it
  bool retry_failed = false;                          // resubmit jobs past max_retries failures (--retry-failed)
  int earlier_submissions = 0;                        // records in submissions.tsv (numbers the new lists)
  int max_array_size = 1001;                          // the controller's MaxArraySize: task ids below it
};

struct SubmitEntry {
  std::string job;        // the planned job
  std::string spec_path;  // the spec the task runs
  bool new_spec = false;  // a resubmission: `spec` must be written to spec_path first
  JobSpec spec;
  int time_limit_min = 0;
};

struct SubmitBatch {
  std::vector<SubmitEntry> entries;  // one job, or the tasks of one array
  bool array = false;
  std::string array_expr;       // "0-N" with "%throttle" when throttled
  bool after_previous = false;  // depends on (afterany) the batch before it: throttled arrays chain
  int nodes = 1, ranks_per_node = 1, time_limit_min = 0;
  std::string name;            // Slurm job name: <campaign>.<job> or <campaign>.array-<N>
  std::filesystem::path list;  // slurm/submit-<N>.list: the specs of its tasks
};

struct SubmitPlan {
  std::vector<SubmitBatch> batches;
  std::string exclude;                           // nodes every batch avoids (Slurm's --exclude), comma-separated
  int finished = 0, in_flight = 0, gave_up = 0;  // points
  std::vector<std::string> notes;                // what a person should know (jobs given up)
};

SubmitPlan plan_submissions(const SubmitFacts& facts, const Campaign& campaign, const RunLayout& dir);

}  // namespace d500
