#include "plan/plan.hpp"

#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "backends/registry.hpp"
#include "common/parallel.hpp"
#include "common/text.hpp"
#include "d500/version.hpp"
#include "plan/jobspec.hpp"
#include "plan/packing.hpp"
#include "plan/resolve.hpp"
#include "plan/sbatch.hpp"
#include "plan/stages.hpp"
#include "plan/template.hpp"
#include "rundir/layout.hpp"

namespace fs = std::filesystem;

namespace d500 {

namespace {
// A line of /proc/meminfo ("MemTotal:"), in bytes; 0 when absent.
std::int64_t meminfo_bytes(const std::string& wanted) {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == wanted) return kib * 1024;
  return 0;
}
}  // namespace

std::int64_t host_memory_bytes() { return meminfo_bytes("MemTotal:"); }
std::int64_t available_memory_bytes() { return meminfo_bytes("MemAvailable:"); }

int host_cpus() { return static_cast<int>(rank_cores()); }

std::string templates_dir() {
  if (const char* env = std::getenv("D500_TEMPLATES")) return env;
  // An installed d500 (cmake --install) has them in share/d500/templates beside its bin/.
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = self.parent_path().parent_path() / "share" / "d500" / "templates";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return std::string(D500_SOURCE_DIR) + "/templates";
}

TemplateInfo load_template(const std::string& name, const Location& where, const std::string& user_dir) {
  TemplateInfo t;
  t.name = name;
  // The user's directory first (named in the campaign, reported in the plan), then d500's own.
  std::vector<std::string> dirs;
  if (!user_dir.empty()) dirs.push_back(user_dir);
  dirs.push_back(templates_dir());
  for (const auto& d : dirs) {
    const std::string candidate = d + "/" + name + ".sh.in";
    if (fs::is_regular_file(candidate)) {
      t.path = candidate;
      break;
    }
  }
  if (t.path.empty()) {
    std::set<std::string> have;
    for (const auto& d : dirs)
      if (fs::is_directory(d))
        for (const auto& e : fs::directory_iterator(d)) {
          std::string f = e.path().filename().string();
          if (f.size() > 6 && f.ends_with(".sh.in")) have.insert(f.substr(0, f.size() - 6));
        }
    std::vector<std::string> names(have.begin(), have.end());
    throw Error(where, "key 'template': no template '" + name + "' in " + join(dirs, " or ") +
                           did_you_mean(name, names) + " (available: " + join(names, ", ") + ")");
  }
  t.text = read_file(t.path);
  std::istringstream in(t.text);
  for (std::string line; std::getline(in, line);) {
    auto pos = line.find("# d500: launcher=");
    if (pos != std::string::npos) t.launcher = line.substr(pos + 17);
  }
  if (t.launcher.empty()) throw Error(Location{t.path, 1, 1}, "template lacks a '# d500: launcher=local|slurm' line");
  check_placeholder_contexts(t.text, t.path);  // also for a dry run, which renders nothing
  // What its #SBATCH lines ask must reach the job description `d500 submit` makes.
  if (t.launcher == "slurm") parse_sbatch_lines(t.text, t.path);
  return t;
}

std::string slurm_time(int minutes) {
  char buf[32];
  if (minutes >= 1440)
    std::snprintf(buf, sizeof buf, "%d-%02d:%02d:00", minutes / 1440, minutes % 1440 / 60, minutes % 60);
  else
    std::snprintf(buf, sizeof buf, "%02d:%02d:00", minutes / 60, minutes % 60);
  return buf;
}

double job_node_hours(const Plan& plan, const Job& job) {
  return plan.tmpl.launcher == "slurm" ? job.nodes * plan.campaign.slurm.time_limit_min / 60.0 : 0.0;
}

NodeHours node_hours(const Plan& plan) {
  NodeHours h;
  if (plan.tmpl.launcher != "slurm") return h;
  const SlurmSettings& sl = plan.campaign.slurm;
  double retry_minutes = 0;  // per node, over a job's retries
  for (int k = 1; k <= sl.max_retries; ++k)
    retry_minutes += std::ceil(sl.time_limit_min * std::pow(sl.retry_time_factor, k));
  for (const auto& j : plan.jobs) {
    h.jobs += job_node_hours(plan, j);
    h.retries += j.nodes * retry_minutes / 60.0;
  }
  if (sl.analysis_job)
    h.analysis =
        (1 + sl.max_retries) * analysis_time_limit_min(plan.campaign, plan.points.size(), plan.jobs.size()) / 60.0;
  return h;
}

double total_node_hours(const Plan& plan) { return node_hours(plan).total(); }

std::string node_hours_text(const Plan& plan, const NodeHours& h) {
  const SlurmSettings& sl = plan.campaign.slurm;
  std::string t = std::to_string(plan.jobs.size()) + (plan.jobs.size() == 1 ? " job" : " jobs") +
                  " at the time limit " + fmt_sig(h.jobs, 3);
  if (sl.max_retries > 0)
    t += " + retries " + fmt_sig(h.retries, 3) + " (max_retries = " + std::to_string(sl.max_retries) +
         ", retry_time_factor = " + fmt_sig(sl.retry_time_factor, 3) + ")";
  if (sl.analysis_job)
    t += " + analysis job " + fmt_sig(h.analysis, 3) + " (1 node, " +
         slurm_time(analysis_time_limit_min(plan.campaign, plan.points.size(), plan.jobs.size())) +
         (sl.max_retries > 0 ? ", once per submission round: " + std::to_string(1 + sl.max_retries) : std::string()) +
         ")";
  return t;
}

int analysis_time_limit_min(const Campaign& c, std::size_t points, std::size_t jobs) {
  if (c.slurm.analysis.time_limit_min > 0) return c.slurm.analysis.time_limit_min;
  const double seconds = 2 * (60 + 0.005 * static_cast<double>(points) + 0.05 * static_cast<double>(jobs));
  return std::max(5, static_cast<int>(std::ceil(seconds / 60)));
}

int signal_before_limit_s(const Campaign& c, bool has_training) {
  if (c.slurm.signal_before_limit_s >= 0) return c.slurm.signal_before_limit_s;
  return has_training ? std::min(120, c.slurm.time_limit_min * 60 / 4) : 0;
}

std::vector<ShapeGroup> points_by_shape(const std::vector<Point>& points) {
  // Launches never share a job, and launch is the slowest-varying axis: the groups, and so the
  // jobs, come launch after launch (all of launch 1, then all of launch 2, ...).
  std::vector<ShapeGroup> groups;
  std::map<std::tuple<int, int, int>, std::size_t> index;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto [it, fresh] =
        index.try_emplace({points[i].launch, points[i].nodes, points[i].ranks_per_node}, groups.size());
    if (fresh) groups.push_back(ShapeGroup{points[i].nodes, points[i].ranks_per_node, {}});
    groups[it->second].points.push_back(i);
  }
  return groups;
}

Plan make_plan(const Campaign& campaign, const WorkloadRegistry& reg, const PlanOptions& opt) {
  // The stages of src/plan/stages.hpp, in order.
  Plan plan;
  plan.campaign = planning::expand_sets(campaign, reg);
  plan.registry = &reg;
  const Campaign& c = plan.campaign;
  plan.tmpl = load_template(c.template_name, c.template_where, c.templates_dir);
  const planning::KeysByName keys = planning::validate_campaign(plan, reg);
  // Packing by time: earlier runs read once, each point estimated as it is resolved.
  std::optional<TimeModel> model;
  if (c.packing.present) model.emplace(c);
  planning::expand_points(plan, keys, opt, model ? &*model : nullptr);
  planning::pack_jobs(plan, opt, model ? &*model : nullptr);
  planning::check_plan_limits(plan, opt);
  return plan;
}

struct PointResolver::Impl {
  const Plan& plan;
  planning::Product product;
  explicit Impl(const Plan& p) : plan(p), product(p.campaign, p.dims) {}
};

PointResolver::PointResolver(const Plan& plan) : impl_(std::make_unique<Impl>(plan)) {}
PointResolver::~PointResolver() = default;

Params PointResolver::params(const Point& p) {
  impl_->product.set(p.combination);
  planning::Resolved r = planning::resolve(impl_->product.raw, *impl_->plan.registry, impl_->plan.campaign);
  if (r.canonical != p.canonical)  // the plan was changed after planning: never write another point
    throw Error("internal: point " + p.id + " (" + p.canonical + ") resolves to " + r.canonical + " again");
  return std::move(r.params);
}

namespace {

// Parses what was just written and compares it with what was meant: a plan file that d500 run
// could not read, or that says something else, is never moved into place.
void read_back_plan_file(const std::string& path, const toml::table& meant) {
  toml::table got;
  try {
    got = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ": the plan file just written does not parse (" + std::string(e.description()) +
                "); nothing was written");
  }
  const toml::table* p = got["plan"].as_table();
  if (!p || *p != meant)
    throw Error(path + ": the plan file just written does not read back as written; nothing was written");
}

// plan.toml, written by the TOML library's serializer and read back before the plan moves into
// place: no path or name can change what the file says.
void write_plan_file(const Plan& plan, const RunLayout& at) {
  toml::table pt{{"campaign", plan.campaign.name},
                 {"campaign_hash", plan.campaign.hash},
                 {"campaign_path", plan.campaign.path},
                 {"campaign_dir", fs::absolute(plan.campaign.path).parent_path().lexically_normal().string()},
                 {"template", plan.tmpl.name},
                 {"template_path", plan.tmpl.path},
                 {"launcher", plan.tmpl.launcher},
                 {"d500_version", std::string(kVersion)},
                 {"d500_commit", std::string(kGitCommit)},
                 {"created_utc", utc_now_iso8601()},
                 {"points", static_cast<std::int64_t>(plan.points.size())},
                 {"jobs", static_cast<std::int64_t>(plan.jobs.size())},
                 {"node_hours", total_node_hours(plan)}};
  if (plan.job_capacity_s > 0) {
    pt.insert("packing", "time");
    pt.insert("job_limit_s", plan.job_limit_s);
    pt.insert("job_capacity_s", plan.job_capacity_s);
  }
  std::ostringstream pt_text;
  pt_text << "# Written by d500 plan; do not edit.\n" << toml::table{{"plan", pt}} << "\n";
  write_file_atomic(at.plan_file().string(), pt_text.str());
  read_back_plan_file(at.plan_file().string(), pt);
}

// points.csv, each job's rows consecutive (its spec names their byte range), streamed: 10^6
// points are ~100 MB of text, never held whole. Returns each job's first byte.
std::vector<std::uint64_t> write_points_csv(const Plan& plan, const RunLayout& at) {
  std::vector<std::uint64_t> job_offset(plan.jobs.size());
  std::ofstream csv(at.points_csv(), std::ios::binary | std::ios::trunc);
  std::string line = std::string(kPointsCsvHeader) + "\n";
  csv.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::uint64_t offset = line.size();
  for (std::size_t k = 0; k < plan.jobs.size(); ++k) {
    const Job& j = plan.jobs[k];
    job_offset[k] = offset;
    for (auto i : j.points) {
      const Point& p = plan.points[i];
      line = p.id + "," + j.id + "," + std::to_string(p.level) + "," +
             (p.estimate_s >= 0 ? fmt_sig(p.estimate_s, 4) : "") + "," + csv_field(p.canonical) + "\n";
      csv.write(line.data(), static_cast<std::streamsize>(line.size()));
      offset += line.size();
    }
  }
  csv.close();
  if (!csv) throw Error(at.points_csv().string() + ": write failed (disk full?); nothing was written");
  return job_offset;
}

// What the job script's template fills in for job `j` (paths: the plan's final ones).
std::map<std::string, std::string> job_template_vars(const Plan& plan, const Job& j, const RunLayout& final_dir,
                                                     const std::string& run_dir, const std::string& worker) {
  const SlurmSettings& sl = plan.campaign.slurm;
  const int signal_s = signal_before_limit_s(
      plan.campaign,
      std::any_of(j.points.begin(), j.points.end(), [&](std::size_t i) { return plan.points[i].level >= 2; }));
  return {
      {"job_id", j.id},
      {"job_name", plan.campaign.name + "." + j.id},
      {"cpus_per_task", std::to_string(sl.cpus_per_task)},
      {"time_limit", sl.time_limit_min > 0 ? slurm_time(sl.time_limit_min) : ""},
      {"partition", sl.partition},
      {"account", sl.account},
      {"qos", sl.qos},
      {"constraint", sl.constraint},
      {"gres", sl.gres},
      {"reservation", sl.reservation},
      {"modules", join(sl.modules, " ")},
      {"module_init", sl.module_init},
      {"signal", signal_s > 0 ? "TERM@" + std::to_string(signal_s) : ""},
      {"mpi", sl.mpi},
      {"log", (final_dir.logs_dir() / (j.id + ".slurm-%j.out")).string()},
      {"spec_list", final_dir.job_list(j.id).string()},
      {"campaign", plan.campaign.name},
      {"points", std::to_string(j.points.size())},
      {"nodes", std::to_string(j.nodes)},
      {"ranks", std::to_string(j.ranks())},
      {"ranks_per_node", std::to_string(j.ranks_per_node)},
      {"run_dir", run_dir},
      {"worker", worker},
      {"spec", final_dir.job_spec(j.id).string()},
      {"output", final_dir.results_file(j.id).string()},
      {"slurm_attempt", templates_dir() + "/slurm-attempt.bash"},
  };
}

}  // namespace

void write_plan(const Plan& plan, const std::string& dir, const std::string& worker) {
  // Every path that reaches a job script, a job list or a plan file: no control characters.
  refuse_control_chars(fs::absolute(dir).string(), "the run directory");
  refuse_control_chars(plan.campaign.path, "the campaign file's path");
  refuse_control_chars(worker, "the worker's path");
  refuse_control_chars(plan.tmpl.path, "the template path");
  fs::path target = fs::absolute(dir).lexically_normal();
  if (fs::exists(target) && !(fs::is_directory(target) && fs::is_empty(target)))
    throw Error(dir + ": exists and is not empty; plan into a new directory (nothing was written)");
  fs::path tmp = target;
  tmp += ".planning-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // The outermost directory this call creates (runs/ on a first plan): removed on failure, so
  // that a refusal leaves nothing behind.
  fs::path created = target.parent_path();
  while (!created.empty() && created.has_parent_path() && !fs::exists(created.parent_path()))
    created = created.parent_path();
  if (fs::exists(created)) created.clear();
  auto clean_up = [&] {
    fs::remove_all(tmp, ec);
    if (!created.empty()) fs::remove_all(created, ec);
  };
  try {
    // Built under the temporary name, naming the final paths in what it writes.
    const RunLayout at(tmp.string()), final_dir(target.string());
    fs::create_directories(at.jobs_dir());
    fs::create_directories(at.results_dir());
    fs::create_directories(at.logs_dir());
    write_file_atomic(at.campaign_file().string(), plan.campaign.text);

    write_plan_file(plan, at);

    const std::vector<std::uint64_t> job_offset = write_points_csv(plan, at);
    // Each job's files (item: its index), written on the CPUs this process may use; a failure is
    // rethrown in that order once every thread has stopped.
    auto write_item = [&](std::size_t item) {
      const Job& j = plan.jobs[item];
      // The spec names its rows of points.csv; read_job_spec derives each point's parameters from
      // its canonical text there (params_of_canonical, whose agreement with the planner's own
      // parameters is tested for every workload) and checks the id and text of each row.
      // Not fsync'd one by one (10^4 jobs would take seconds): the directory is synced once below,
      // before it is renamed into place.
      write_file_atomic(at.job_spec(j.id).string(), job_spec_text(plan, j, job_offset[item]), false);
      write_file_atomic(at.job_list(j.id).string(), final_dir.job_spec(j.id).string() + "\n", false);
      const auto vars = job_template_vars(plan, j, final_dir, target.string(), worker);
      std::string script = render_template(plan.tmpl.text, plan.tmpl.path, vars);
      fs::path sp = at.job_script(j.id);
      write_file_atomic(sp.string(), script, false);
      fs::permissions(sp, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
      return true;
    };
    const unsigned threads = planning::planning_threads(plan.jobs.size(), 4);
    // Any window: what is made ahead is a bool, and no thread waits on the long points' list.
    ordered_parallel<bool>(plan.jobs.size(), threads, plan.jobs.size(), write_item, [](std::size_t, bool) {});
    sync_file_system(tmp);                       // every file above on disk before the plan appears under its name
    if (fs::exists(target)) fs::remove(target);  // the empty directory checked above
    fs::rename(tmp, target);
  } catch (const fs::filesystem_error& e) {
    clean_up();
    throw Error(dir + ": cannot write the plan: " + e.code().message() + " (nothing was written)");
  } catch (...) {
    clean_up();
    throw;
  }
}

}  // namespace d500
