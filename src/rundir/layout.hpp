#pragma once
// The run directory: the one place that knows its layout. `d500 plan` creates it; `d500 run`,
// `d500 submit/status/cancel`, the worker and `d500 report` read and add to it.
//
//   campaign.toml            the campaign, byte for byte
//   plan.toml                what was planned (launcher, template, counts)
//   points.csv               every planned point in plan order: id, job, level, estimate_s, canonical
//   jobs/<job>.toml          the job spec the worker reads (resubmissions: <job>.r<N>.toml)
//   jobs/<job>.sh            the job script (from the campaign's template)
//   jobs/<job>.list          the spec list a hand-submitted job script reads (D500_SPEC_LIST)
//   jobs/<job>.status        the local launcher's record of the job's last run
//   results/<job>.h5         the job's results file (earlier attempts: .h5.prev-N; Slurm
//                            attempts: <spec>.slurm-<id>.<attempt>.h5, attempt = SLURM_RESTART_COUNT)
//   logs/<job>.log           the job's output under the local launcher (Slurm: *.slurm-*.out,
//                            appended to by each attempt after a "d500: attempt N ..." line)
//   slurm/submissions.tsv    every submission Slurm accepted, fsync'd before the next
//   slurm/cancellations.tsv  every cancellation d500 made
//   slurm/submit-<N>.list    the specs of submission N's tasks (D500_SPEC_LIST)
//   slurm/attempts/<id>_<task>.<attempt>.tsv  what each attempt recorded of itself (start, SIGTERM, exit)
//   slurm/observed.tsv       every final state d500 saw Slurm report, kept after Slurm purges it
//   report.md, report.html, results.csv, results.json, index.h5   written by `d500 report`
#include <filesystem>
#include <string>
#include <vector>

namespace d500 {

class RunLayout {
 public:
  // `dir` is made absolute and normal; nothing is read or created.
  explicit RunLayout(const std::string& dir);
  // The run directory a job spec (job_spec(...)) lies in.
  static RunLayout of_job_spec(const std::string& spec_path) {
    return RunLayout(std::filesystem::absolute(spec_path).parent_path().parent_path().string());
  }
  const std::filesystem::path& root() const { return root_; }

  std::filesystem::path campaign_file() const { return root_ / "campaign.toml"; }
  std::filesystem::path plan_file() const { return root_ / "plan.toml"; }
  std::filesystem::path points_csv() const { return root_ / "points.csv"; }
  std::filesystem::path jobs_dir() const { return root_ / "jobs"; }
  std::filesystem::path job_spec(const std::string& job) const { return jobs_dir() / (job + ".toml"); }
  std::filesystem::path job_script(const std::string& job) const { return jobs_dir() / (job + ".sh"); }
  std::filesystem::path job_list(const std::string& job) const { return jobs_dir() / (job + ".list"); }
  std::filesystem::path job_status(const std::string& job) const { return jobs_dir() / (job + ".status"); }
  std::filesystem::path results_dir() const { return root_ / "results"; }
  std::filesystem::path results_file(const std::string& job) const { return results_dir() / (job + ".h5"); }
  std::filesystem::path logs_dir() const { return root_ / "logs"; }
  std::filesystem::path job_log(const std::string& job) const { return logs_dir() / (job + ".log"); }
  std::filesystem::path slurm_dir() const { return root_ / "slurm"; }
  std::filesystem::path submissions_file() const { return slurm_dir() / "submissions.tsv"; }
  std::filesystem::path cancellations_file() const { return slurm_dir() / "cancellations.tsv"; }
  std::filesystem::path submit_list(int n) const { return slurm_dir() / ("submit-" + std::to_string(n) + ".list"); }
  std::filesystem::path attempts_dir() const { return slurm_dir() / "attempts"; }
  std::filesystem::path observed_file() const { return slurm_dir() / "observed.tsv"; }

  // Throws the error a user sees when `dir` is not a run directory (no plan.toml), or when it
  // holds a link that leads out of it (refuse_links_out).
  void require_plan(const std::string& as_given) const;
  // Throws naming the first symbolic link in the run directory (its top level, its folders and
  // theirs) that leads outside it: d500 writes nothing through such a link.
  void refuse_links_out() const;
  // plan.toml's launcher ("local" or "slurm"); throws naming the file when it cannot be read.
  std::string launcher() const;
  // The directory the campaign was planned from (relative paths in campaign.toml are relative
  // to it); "" for a plan that predates the record.
  std::string campaign_dir() const;
  // The planned campaign's hash ("" for a plan that predates the record): what every results
  // file of this run states as its campaign_hash.
  std::string campaign_hash() const;
  // The planned campaign's name ("" without a plan): the report's title before any file holds it.
  std::string campaign_name() const;
  // plan.toml's count of points (0 when it cannot be read).
  std::int64_t planned_points() const;
  // The planned jobs (jobs/*.sh), sorted.
  std::vector<std::string> job_ids() const;
  // Every results file: results/*.h5 and the earlier attempts kept beside them (*.h5.prev-N),
  // sorted by name.
  std::vector<std::string> results_files() const;

  // The run directory of a job spec (the parent of jobs/).
  static RunLayout of_spec(const std::string& spec_path);

 private:
  std::filesystem::path root_;
};

// One row of points.csv: what was planned, in plan order.
struct PlannedPoint {
  std::string id, job, canonical;
  int level = 0;
  double estimate_s = -1;  // packing by time: the planner's estimate; -1: none (or an older plan)
};
// Reads points.csv (empty when there is none); a damaged row is an error naming file and line.
std::vector<PlannedPoint> read_points_csv(const RunLayout& dir);
// One row of points.csv ("id,job,level,estimate_s,canonical", or without estimate_s in a plan
// that predates it: `estimates` false) into `x`; false when it is damaged.
bool parse_points_csv_row(const std::string& line, bool estimates, PlannedPoint& x);
inline constexpr const char* kPointsCsvHeader = "point_id,job_id,level,estimate_s,canonical";
// Whether points.csv's header line has the estimate_s column (plans since packing by time).
inline bool points_csv_has_estimates(const std::string& header) {
  return header.rfind("point_id,job_id,level,estimate_s,", 0) == 0;
}

}  // namespace d500
