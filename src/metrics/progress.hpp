#pragma once
// The lines a worker prints on rank 0's standard output while a job runs, and their parser:
// the local launcher turns them into progress for a person, and tests read them. The one place
// that spells them.
//   d500:point I/N CANONICAL          point I of N starts
//   d500:flushed I/N ROWS             ROWS samples of point I are durably in the file
//   d500:done I/N OUTCOME SECONDSs    point I ended with OUTCOME after SECONDS
//   d500:checkpoint I/N STEP          point I's training state after STEP steps is durably in the file
//   d500:resumed I/N STEP             point I resumes training from a checkpoint after STEP steps
//   d500:skipped I/N OUTCOME FILE     point I is not run: an earlier attempt's FILE holds it with
//                                     final OUTCOME (a requeued or resumed job measures nothing twice)
#include <cstdint>
#include <optional>
#include <string>

#include "metrics/outcome.hpp"

namespace d500 {

std::string progress_point_line(int index, int count, const std::string& canonical);
std::string progress_flushed_line(int index, int count, long long rows);
std::string progress_done_line(int index, int count, Outcome outcome, double seconds);
std::string progress_checkpoint_line(int index, int count, long long step);
std::string progress_resumed_line(int index, int count, long long step);
std::string progress_skipped_line(int index, int count, Outcome outcome, const std::string& file);

struct ProgressLine {
  enum Kind { Point, Flushed, Done, Checkpoint, Resumed, Skipped } kind = Point;
  int index = 0, count = 0;             // 1-based
  std::string canonical;                // Point; Skipped: the file
  long long rows = 0;                   // Flushed: rows; Checkpoint, Resumed: the step
  Outcome outcome = Outcome::Complete;  // Done, Skipped
  double seconds = 0;                   // Done
};
// nullopt for any other line (the job's own output).
std::optional<ProgressLine> parse_progress_line(const std::string& line);

}  // namespace d500
