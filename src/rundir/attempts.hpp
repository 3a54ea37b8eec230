#pragma once
// What became of each Slurm task, kept in the run directory because Slurm forgets: a requeue
// reruns a job under the same id, and a job's end is gone once its record is purged
// (MinJobAge). Two records, both append-only:
//   - slurm/attempts/<id>_<task>.<attempt>.tsv, written by the job itself
//     (templates/slurm-attempt.bash): its start (host, output file), a SIGTERM and its verdict
//     (timed-out at the limit, or terminated), its exit code;
//   - slurm/observed.tsv, written by d500 whenever it sees Slurm report a task's final state.
// `resolve_task_end` combines them with Slurm's live answer into one account per task, which
// `d500 status`, `submit --resume` and the report all read.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metrics/outcome.hpp"
#include "rundir/layout.hpp"

namespace d500 {

using TaskKey = std::pair<std::uint32_t, int>;  // (Slurm job or array id, task index; 0 for a job)

struct AttemptRecord {
  TaskKey task;
  int attempt = 0;  // SLURM_RESTART_COUNT
  std::string host, log, started_utc;
  bool terminated = false;  // a SIGTERM was recorded
  bool timed_out = false;   // ... within 10 s of the time limit
  double term_elapsed_s = -1;
  int signal_before_s = 0;       // the signal was asked this long before the limit (0: at the limit)
  std::optional<int> exit_code;  // the script's exit (its `end` line); none: killed outright
};

// Every attempt recorded under slurm/attempts/, sorted by task then attempt. A line that
// cannot be read is skipped (a record cut by a crash still says what it holds).
std::vector<AttemptRecord> read_attempts(const RunLayout& dir);

// A final state of a task as Slurm reported it to d500.
struct ObservedState {
  TaskKey task;
  std::string state;   // Slurm's name: COMPLETED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...
  std::string reason;  // Slurm's reason string
  int exit_code = 0;   // the batch script's exit status, or
  int signal = 0;      // the signal that ended it (0: none)
  int restarts = 0;    // Slurm's restart count (requeues)
  std::string nodes;   // where it ran
  std::string seen_utc;
};

// The last observation of each task.
std::map<TaskKey, ObservedState> read_observed(const RunLayout& dir);
void record_observed(const RunLayout& dir, const ObservedState& s);

// One task's end as far as anything knows it.
struct TaskEnd {
  std::string state;   // Slurm's name, "" when nothing is known
  std::string source;  // "slurm", "observed" (Slurm purged it), "job record" (the attempt's own), ""
  std::string cause;   // "exit 127", "signal SIGABRT", "timed out: SIGTERM at 61 s of a 60 s limit", ...
  std::string nodes;
  int attempts = 0;               // attempts the job recorded
  std::vector<std::string> tail;  // the last lines of the last attempt's output
};

// `live`: what Slurm says now (nullopt: it has no record, or could not be asked). `final_live`:
// whether that state is final. Prefers what Slurm says now (a requeued job runs again under
// its old id), then d500's observation, then the job's own record.
TaskEnd resolve_task_end(const TaskKey& task, const std::optional<ObservedState>& live, bool final_live,
                         const std::map<TaskKey, ObservedState>& observed, const std::vector<AttemptRecord>& attempts,
                         int tail_lines = 5);

// What a point's attempt became when Slurm ended its task in `state` without the point
// finishing: TIMEOUT and DEADLINE timed-out, CANCELLED cancelled, NODE_FAIL, BOOT_FAIL and
// PREEMPTED node-failed, FAILED and OUT_OF_MEMORY job-failed; nullopt for any other.
std::optional<Outcome> outcome_of_slurm_state(const std::string& state);

// Per planned job, how the last Slurm task that ran it ended, from the run directory's records
// alone (no Slurm query; for the report): the outcome its unfinished points take, and the
// task and cause in words ("Slurm job 4 FAILED: exit 127 (command not found); last output:
// ..."). Empty for a run never submitted to Slurm.
struct JobEnd {
  std::optional<Outcome> outcome;
  std::string text;
};
std::map<std::string, JobEnd> slurm_job_ends(const RunLayout& dir);
// Per planned job that `d500 run` ended itself (jobs/<job>.status's `ended_by`: no progress for
// the progress timeout), job-failed and the cause in words. Empty when none was.
std::map<std::string, JobEnd> local_job_ends(const RunLayout& dir);

// The lines an attempt wrote to its output after its own "d500: attempt N of Slurm job ..."
// line up to the next attempt's such line (the whole file when it is absent), at most `n` from the end. Where a rank's
// crash note (common/crash_note.hpp: which rank, which signal, which point) came before those lines, the first one
// leads them: MPI's and srun's lines about the other ranks come last.
std::vector<std::string> attempt_output_tail(const AttemptRecord& a, int n);

// The one line that says most of how a task ended: its crash note, else its last line; "" for none.
std::string last_words(const TaskEnd& e);

// "exit 127 (command not found)", "exit 134 (128 + SIGABRT)", "signal SIGKILL".
std::string exit_text(int exit_code, int signal);

}  // namespace d500
