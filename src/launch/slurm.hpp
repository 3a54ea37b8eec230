#pragma once
// The Slurm launcher: submits a plan's jobs through libslurm (the C API, never a shell), records
// every accepted job id in DIR/slurm/submissions.tsv the moment it is accepted, and answers for
// the campaign: status, cancel, resume. A build without libslurm has these functions: submit and
// cancel say what the build lacks; status still reports every point from the results files.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "rundir/submissions.hpp"

namespace d500 {

struct SubmitOptions {
  bool resume = false;        // submit only points that are neither complete nor queued or running
  bool retry_failed = false;  // resubmit jobs that failed more than max_retries times (their cause fixed)
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
