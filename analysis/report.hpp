#pragma once
// The report: reads every results file of a run directory, summarises each point, and writes
// report.md, report.html and results.csv.
#include <string>
#include <vector>

#include "common/value.hpp"
#include "stats.hpp"

namespace d500 {

struct PointRow {
  std::string id, job_id, file, canonical, workload, backend, status, status_reason;
  std::string validation_status, validation_method, rate_unit, hosts;
  int level = 0, ranks = 0, warmups_excluded = 0, reps_incomplete = 0;
  Params params;
  double validation_max_rel_error = 0, validation_tolerance = 0;
  stats::Summary time;  // seconds per repetition (max over ranks)
  double rate = 0, rate_lo = 0, rate_hi = 0;  // from the median and CI bounds of time
  double work = 0;                           // flops or bytes per repetition
};

struct Report {
  std::string dir, campaign, campaign_hash, d500_version;
  std::vector<PointRow> rows;                  // in plan order
  std::vector<std::string> files;              // files read
  std::vector<std::string> unreadable;         // "file: reason"
  double confidence = 0.95;
};

// Analyses a run directory (the output of `d500 plan`, after `d500 run`).
Report analyze_run(const std::string& dir, double confidence = 0.95);

std::string report_text_table(const Report& r);
std::string report_markdown(const Report& r);
std::string report_html(const Report& r);
std::string report_csv(const Report& r);
// Writes report.md, report.html and results.csv into the run directory.
void write_reports(const Report& r);

// A one-paragraph statement of how the numbers were obtained; every report carries it.
std::string method_statement(double confidence);

}  // namespace d500
