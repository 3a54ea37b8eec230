#pragma once
// The run directory's record of what Slurm accepted (slurm/submissions.tsv) and of what d500
// cancelled (slurm/cancellations.tsv). Each line is appended and fsync'd before the next
// submission is attempted: nothing Slurm accepted is ever unrecorded.
#include <cstdint>
#include <string>
#include <vector>

#include "rundir/layout.hpp"

namespace d500 {

// One accepted submission: a job, a job array (one task per spec), or the analysis job.
struct Submission {
  std::uint32_t slurm_id = 0;
  std::string kind;  // "job", "array" or "analysis"
  int time_limit_min = 0;
  std::string dependency;          // as given to Slurm; "" for none
  std::vector<std::string> specs;  // task i runs specs[i]
  std::string submitted_utc;
};

// A damaged line is an error naming the file, the line and the column that is wrong.
std::vector<Submission> read_submissions(const RunLayout& dir);
void record_submission(const RunLayout& dir, const Submission& s);
void record_cancellation(const RunLayout& dir, std::uint32_t slurm_id, const std::string& utc);

// How Slurm names task i of a submission: "41" for a job, "40_3" for an array's task.
std::string task_name(const Submission& s, std::size_t i);

// Appends one line and forces it to disk before returning; a new file starts with `header`.
void append_line_durably(const std::filesystem::path& file, const std::string& header, const std::string& line);

// The job a spec belongs to: "jobs/job-0003.r2.toml" -> "job-0003".
std::string base_job(const std::string& spec);

}  // namespace d500
