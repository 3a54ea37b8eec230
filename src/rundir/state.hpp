#pragma once
// Which points of a run directory are complete, incomplete, failed or missing: the one answer
// that `d500 report`, `d500 run` (resume by point), `d500 submit --resume` and `d500 status` share.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "metrics/outcome.hpp"
#include "rundir/layout.hpp"
#include "store/reader.hpp"

namespace d500 {

// The best record of one point across the results files (see outcome_preference; among equal
// outcomes, the file created last).
struct PointState {
  Outcome outcome = Outcome::Missing;
  std::string reason;  // the file's status_reason, or why the point is missing
  std::string file;    // the results file holding the record; "" when missing
  std::string created_utc;
};

struct RunState {
  std::map<std::string, PointState> points;  // by point id: every point of some readable file
  std::vector<std::string> files;            // results files read
  std::vector<std::string> unreadable;       // "file: why", for files that could not be read
  // The state of a planned point: its record, or Missing.
  PointState of(const std::string& id) const;
};

// Reads every results file of the run directory. `each`, when given, sees every readable file
// whole (the report summarises its points there), in name order.
RunState scan_results(const RunLayout& dir, const std::function<void(const JobResult&)>& each = {});

// What an earlier run measured of a complete point, for estimating it again (packing by time):
// the point's wall time, and how much of it its repetitions took (per repetition the slowest
// rank's whole-step time, warm-ups included), with the work of one repetition.
struct MeasuredPoint {
  int level = 0;
  std::string backend;
  double seconds = 0;  // the whole point: setup, validation, repetitions, writing
  double reps_s = 0;   // its repetitions (training: its steps)
  int reps_run = 0;    // warm-ups included
  std::int64_t work_flops = 0, work_bytes = 0;
};
// The complete points of a run directory, by id (a point measured in several files: the record
// scan_results keeps, see better_record). Unreadable files are listed in `unreadable` and otherwise skipped.
std::map<std::string, MeasuredPoint> measured_points(const RunLayout& dir, std::vector<std::string>& unreadable);

// Whether record `a` of a point is better than `b` (the one a report keeps).
bool better_record(const PointState& a, const PointState& b);

struct PointCounts {
  std::map<Outcome, int> by_outcome;
  int total = 0;
  int count(Outcome o) const;
  std::string text() const;  // "3 complete, 1 incomplete, 2 missing"
};
// Counts the planned points (points.csv) by outcome.
PointCounts count_planned(const std::vector<PlannedPoint>& planned, const RunState& state);

}  // namespace d500
