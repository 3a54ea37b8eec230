#pragma once
// The local launcher (the embedded default): runs a plan's job scripts one after another on
// this machine with mpirun, shows progress, records each job's exit status, and carries on
// past a failed job.
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "metrics/outcome.hpp"

namespace d500 {

struct JobOutcome {
  std::string job_id;
  int exit_code = 0;  // 128 + signal when killed by a signal
  double seconds = 0;
  std::string log;
  bool skipped = false;           // already complete from an earlier run
  int stopped_by = 0;             // the signal that told d500 run to stop during this job; 0: none
  std::map<Outcome, int> points;  // how its points ended, from the worker's progress lines
};

struct LocalRunOptions {
  bool rerun = false;  // run jobs that already completed, too
};

// Runs every job of the plan in `dir`, holding the run directory's lock (rundir/lock.hpp).
// Resumes by point: a job whose points all have final outcomes in the results files is
// skipped, and one with some is run with a spec of the rest (jobs/<job>.r<N>.toml, passed to
// the script as D500_SPEC); every earlier results file is kept (<job>.h5.prev-N).
// Progress goes to `out`. Returns one outcome per job started or skipped; told to stop
// (SIGINT, SIGTERM, SIGHUP), it stops the running job's process group and returns, the last
// outcome saying `stopped_by`.
std::vector<JobOutcome> run_local(const std::string& dir, const LocalRunOptions& opt, std::ostream& out);

// What a local run directory's state is, for `d500 status`: whether a runner works there now
// (from its lock: command, pid, host, since when, the job and, from the job's log, the point it
// runs, i of n, and how long the run has taken), each job's last exit status, and the points
// by outcome (complete, failed, incomplete, missing).
void local_status(const std::string& dir, std::ostream& out);

// Moves an existing results file aside (name.h5 -> name.h5.prev-N) so nothing is lost.
std::string move_aside(const std::string& path);

}  // namespace d500
