#pragma once
// The Slurm launcher: submits a plan's jobs through libslurm (the C API, never a shell), records
// every accepted job id in DIR/slurm/submissions.tsv the moment it is accepted, and answers for
// the campaign: status, cancel, resume. A build without libslurm has these functions and says
// so when called.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace d500 {

// One accepted submission: a job, a job array (one task per spec), or the analysis job.
struct Submission {
  std::uint32_t slurm_id = 0;
  std::string kind;                // "job", "array" or "analysis"
  int time_limit_min = 0;
  std::string dependency;          // as given to Slurm, or "-"
  std::vector<std::string> specs;  // task i runs specs[i]
  std::string submitted_utc;
};

std::vector<Submission> read_submissions(const std::string& dir);

struct SubmitOptions {
  bool resume = false;  // submit only points that are neither complete nor queued or running
};

// Returns the number of submissions made.
int slurm_submit(const std::string& dir, const SubmitOptions& opt, std::ostream& out);
// Prints per job the Slurm state and reason, per point done/incomplete/missing, and a summary.
void slurm_status(const std::string& dir, std::ostream& out);
// Cancels every job of the campaign that is still queued or running.
void slurm_cancel(const std::string& dir, std::ostream& out);

bool slurm_available();  // built with libslurm

// "0-3,7,9-10%2" -> {0,1,2,3,7,9,10}: Slurm's array index expressions.
std::vector<int> parse_array_indices(const std::string& expr);

}  // namespace d500
