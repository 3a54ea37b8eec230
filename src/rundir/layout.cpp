#include "rundir/layout.hpp"

#include <toml++/toml.h>
#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace fs = std::filesystem;

namespace d500 {

RunLayout::RunLayout(const std::string& dir) : root_(fs::absolute(dir).lexically_normal()) {
  if (root_.has_filename() == false && root_.has_parent_path()) root_ = root_.parent_path();  // "runs/x/" -> "runs/x"
}

RunLayout RunLayout::of_spec(const std::string& spec_path) {
  return RunLayout(fs::absolute(spec_path).parent_path().parent_path().string());
}

void RunLayout::require_plan(const std::string& as_given) const {
  if (!fs::exists(plan_file()))
    throw Error(as_given + ": not a d500 plan directory (no plan.toml); create one with `d500 plan CAMPAIGN -o DIR`");
  refuse_links_out();
}

void RunLayout::refuse_links_out() const {
  std::error_code ec;
  const fs::path real_root = fs::canonical(root_, ec);
  if (ec) return;  // nothing there yet
  auto check = [&](const fs::path& p) {
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return;
    const fs::path to = fs::weakly_canonical(p, ec);
    const auto rel = to.lexically_relative(real_root);
    if (!ec && !rel.empty() && *rel.begin() != ".." && !rel.is_absolute()) return;  // a link within the run directory
    throw Error(p.string() + ": is a symbolic link to " + (ec ? std::string("?") : to.string()) +
                ", outside the run directory; d500 writes nothing through a link that leads out of it: remove the link "
                "(a run directory holds its own files)");
  };
  for (const auto& e : fs::directory_iterator(root_, ec)) {
    check(e.path());
    if (e.is_symlink() || !e.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(e.path(), ec)) {
      check(f.path());
      if (!f.is_symlink() && f.is_directory())  // slurm/attempts
        for (const auto& g : fs::directory_iterator(f.path(), ec)) check(g.path());
    }
  }
}

namespace {
std::string plan_value(const fs::path& plan_file, const char* key) {
  try {
    return toml::parse_file(plan_file.string())["plan"][key].value_or(std::string());
  } catch (const toml::parse_error& e) {
    throw Error(Location{plan_file.string(), static_cast<int>(e.source().begin.line),
                         static_cast<int>(e.source().begin.column)},
                std::string(e.description()));
  }
}
}  // namespace

std::string RunLayout::launcher() const { return plan_value(plan_file(), "launcher"); }
std::string RunLayout::campaign_dir() const { return plan_value(plan_file(), "campaign_dir"); }
std::string RunLayout::campaign_hash() const {
  return std::filesystem::exists(plan_file()) ? plan_value(plan_file(), "campaign_hash") : std::string();
}

std::string RunLayout::campaign_name() const {
  return std::filesystem::exists(plan_file()) ? plan_value(plan_file(), "campaign") : std::string();
}

std::int64_t RunLayout::planned_points() const {
  try {
    return toml::parse_file(plan_file().string())["plan"]["points"].value_or(std::int64_t{0});
  } catch (const toml::parse_error&) {
    return 0;
  }
}

std::vector<std::string> RunLayout::job_ids() const {
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(jobs_dir(), ec))
    if (e.path().extension() == ".sh") jobs.push_back(e.path().stem().string());
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

std::vector<std::string> RunLayout::results_files() const {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(results_dir(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".h5") || name.find(".h5.prev-") != std::string::npos) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool parse_points_csv_row(const std::string& line, bool estimates, PlannedPoint& x) {
  const std::size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
  const std::size_t d = estimates && c != std::string::npos ? line.find(',', c + 1) : c;
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos || d == std::string::npos)
    return false;
  x.id = line.substr(0, a);
  x.job = line.substr(a + 1, b - a - 1);
  x.level = std::atoi(line.substr(b + 1, c - b - 1).c_str());
  x.estimate_s = estimates && d > c + 1 ? std::atof(line.substr(c + 1, d - c - 1).c_str()) : -1;
  x.canonical = line.substr(d + 1);
  if (x.canonical.size() >= 2 && x.canonical.front() == '"') {  // csv_field's quoting undone
    std::string u;
    for (std::size_t i = 1; i + 1 < x.canonical.size(); ++i) {
      if (x.canonical[i] == '"' && x.canonical[i + 1] == '"') ++i;
      u += x.canonical[i];
    }
    x.canonical = u;
  }
  return true;
}

std::vector<PlannedPoint> read_points_csv(const RunLayout& dir) {
  std::vector<PlannedPoint> out;
  const fs::path p = dir.points_csv();
  if (!fs::exists(p)) return out;
  std::istringstream in(read_file(p.string()));
  std::string line;
  std::getline(in, line);  // header
  // Since packing by time, an estimate column before the canonical text (which may hold commas).
  const bool estimates = points_csv_has_estimates(line);
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    PlannedPoint x;
    if (!parse_points_csv_row(line, estimates, x))
      throw Error(Location{p.string(), line_no, 1},
                  std::string("damaged row (expected id,job,level,") + (estimates ? "estimate_s," : "") + "canonical)");
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace d500
