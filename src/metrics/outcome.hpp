#pragma once
// What became of a point: one enum for the worker that writes it, the store that checks it,
// the launchers that resume by it and the report that shows it. The results file stores the
// worker's outcomes by name in a point's `status` attribute (incomplete as "running": the
// point's record says what the worker was doing when the file was last flushed); the others are
// what the launchers learn about a point that never finished (from Slurm, or from no file at all).
#include <optional>
#include <string>

namespace d500 {

enum class Outcome {
  Complete,          // validated and timed
  Incomplete,        // started, not finished: the job ended (killed, crashed) while it ran
  FailedValidation,  // the backend's result was wrong: never timed
  BackendFailed,     // the backend could not set it up or run it (an error, not a wrong result)
  TimedOut,          // its job hit the scheduler's time limit before the point finished
  Cancelled,         // its job was cancelled before the point finished
  NodeFailed,        // its job's node failed (or it was preempted) before the point finished
  JobFailed,         // its job failed for its own reasons (an exit code, a signal, out of memory)
  Missing,           // no results file holds it: never started
};

// "complete", "incomplete", "failed-validation", "backend-failed", "timed-out", "cancelled",
// "node-failed", "job-failed", "missing": how reports, CSV and JSON spell it.
const char* outcome_name(Outcome o);
std::optional<Outcome> parse_outcome(const std::string& name);

// The value of a point's `status` attribute in a results file for the outcomes the worker
// writes (Complete, Incomplete -> "running", FailedValidation, BackendFailed), and back. A
// status this d500 does not know reads as nullopt.
const char* file_status(Outcome o);
std::optional<Outcome> outcome_from_file_status(const std::string& status);

// An outcome no rerun of the same code changes (complete, failed validation, backend failed):
// resuming skips such points.
bool is_final(Outcome o);
// Which of two records of one point a report keeps: the higher (complete > failed validation
// > backend failed > incomplete > the scheduler's outcomes > missing).
int outcome_preference(Outcome o);

}  // namespace d500
