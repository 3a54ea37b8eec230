#include "rundir/submissions.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {

constexpr const char* kSubmissionsHeader = "# slurm_id\tkind\ttime_limit_min\tdependency\tsubmitted_utc\tspecs";
constexpr const char* kCancellationsHeader = "# slurm_id\tcancelled_utc";

}  // namespace

// A crash or a full disk after Slurm accepted a job must not lose the job's id.
void append_line_durably(const fs::path& file, const std::string& header, const std::string& line) {
  fs::create_directories(file.parent_path());
  const bool fresh = !fs::exists(file);
  const int fd = open_for_append(file.string());  // never through a link
  std::string text = (fresh ? header + "\n" : "") + line + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!ok) throw Error(file.string() + ": cannot record (disk full?): " + std::strerror(e));
}

namespace {

// A whole non-negative number in `text`, or an error naming the place and what was found.
template <class T>
T parse_number(const std::string& text, const Location& where, const char* column) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw Error(where, std::string("damaged submissions record: column '") + column + "' is \"" + text +
                           "\", not a whole number");
  return v;
}

}  // namespace

std::string task_name(const Submission& s, std::size_t i) {
  return std::to_string(s.slurm_id) + (s.kind == "array" ? "_" + std::to_string(i) : "");
}

std::string base_job(const std::string& spec) {
  std::string stem = fs::path(spec).stem().string();
  return stem.substr(0, stem.find('.'));
}

void record_submission(const RunLayout& dir, const Submission& s) {
  append_line_durably(dir.submissions_file(), kSubmissionsHeader,
                      std::to_string(s.slurm_id) + "\t" + s.kind + "\t" + std::to_string(s.time_limit_min) + "\t" +
                          (s.dependency.empty() ? "-" : s.dependency) + "\t" + s.submitted_utc + "\t" +
                          join(s.specs, ","));
}

void record_cancellation(const RunLayout& dir, std::uint32_t slurm_id, const std::string& utc) {
  append_line_durably(dir.cancellations_file(), kCancellationsHeader, std::to_string(slurm_id) + "\t" + utc);
}

std::vector<Submission> read_submissions(const RunLayout& dir) {
  std::vector<Submission> out;
  const fs::path f = dir.submissions_file();
  if (!fs::exists(f)) return out;
  std::istringstream in(read_file(f.string()));
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;  // empty fields kept: the analysis job has no specs
    std::vector<int> starts;
    for (std::size_t at = 0;;) {
      std::size_t tab = line.find('\t', at);
      starts.push_back(static_cast<int>(at) + 1);
      cols.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    if (cols.size() != 6)
      throw Error(Location{f.string(), line_no, 1}, "damaged submissions record: " + std::to_string(cols.size()) +
                                                        " columns, expected 6 (" + std::string(kSubmissionsHeader + 2) +
                                                        ")");
    Submission s;
    s.slurm_id = parse_number<std::uint32_t>(cols[0], {f.string(), line_no, starts[0]}, "slurm_id");
    s.kind = cols[1];
    if (s.kind != "job" && s.kind != "array" && s.kind != "analysis")
      throw Error(Location{f.string(), line_no, starts[1]},
                  "damaged submissions record: kind \"" + s.kind + "\"; valid: job, array, analysis");
    s.time_limit_min = parse_number<int>(cols[2], {f.string(), line_no, starts[2]}, "time_limit_min");
    s.dependency = cols[3] == "-" ? "" : cols[3];
    s.submitted_utc = cols[4];
    std::stringstream sp(cols[5]);
    for (std::string spec; std::getline(sp, spec, ',');) s.specs.push_back(spec);
    out.push_back(s);
  }
  return out;
}

}  // namespace d500
