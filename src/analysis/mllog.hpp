#pragma once
// `d500 export mllog RUN`: every training run of a run directory (each level-2 point's best
// record) as an MLPerf-style log, `:::MLLOG {json}` lines, one file per run, so that tools
// built for MLPerf training logs read d500 runs. The mapping is in docs/level2-training.md ("MLPerf-style
// logs"): time_ms is d500's training clock (run_start at the results file's creation, each
// later line at run_start + training time, evaluation excluded), so run_stop - run_start is
// the run's time to accuracy when it reached its target (status success), else its training
// time (status aborted).
#include <string>
#include <vector>

#include "store/reader.hpp"

namespace d500 {

// The log of one training point of a results file.
std::string mllog_text(const JobResult& job, const PointResult& p);

// Writes <out_dir>/<point id>.log for every training point of the run directory `dir` (its
// best record); returns the files written. Throws naming the directory when it holds no
// training run.
std::vector<std::string> export_mllogs(const std::string& dir, const std::string& out_dir);

}  // namespace d500
