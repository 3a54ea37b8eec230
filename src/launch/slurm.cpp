#include "launch/slurm.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "plan/jobspec.hpp"
#include "plan/plan.hpp"
#include "plan/template.hpp"
#include "store/reader.hpp"

#ifdef D500_HAVE_SLURM
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#endif

extern char** environ;

namespace fs = std::filesystem;

namespace d500 {

std::vector<int> parse_array_indices(const std::string& expr) {
  std::vector<int> out;
  std::string body = expr.substr(0, expr.find('%'));
  std::stringstream ss(body);
  for (std::string part; std::getline(ss, part, ',');) {
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = std::stoi(part.substr(0, dash)), hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int i = lo; i <= hi; ++i) out.push_back(i);
  }
  return out;
}

namespace {

fs::path log_path(const std::string& dir) { return fs::path(dir) / "slurm" / "submissions.tsv"; }

// Appends one line and forces it to disk before returning: a crash or a full disk after
// Slurm accepted a job must not lose the job's id.
void append_durably(const fs::path& file, const std::string& line) {
  fs::create_directories(file.parent_path());
  const bool fresh = !fs::exists(file);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw Error(file.string() + ": cannot open: " + std::strerror(errno));
  std::string text = (fresh ? "# slurm_id\tkind\ttime_limit_min\tdependency\tsubmitted_utc\tspecs\n" : "") + line + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!ok) throw Error(file.string() + ": cannot record a submission (disk full?): " + std::strerror(e));
}

void record(const std::string& dir, const Submission& s) {
  append_durably(log_path(dir), std::to_string(s.slurm_id) + "\t" + s.kind + "\t" + std::to_string(s.time_limit_min) +
                                    "\t" + (s.dependency.empty() ? "-" : s.dependency) + "\t" + s.submitted_utc + "\t" +
                                    join(s.specs, ","));
}

struct PlanDir {
  std::string dir;
  Campaign campaign;
  std::string launcher;
  std::vector<std::string> jobs;  // original job ids, sorted
};

PlanDir load_plan_dir(const std::string& dir) {
  fs::path plan_file = fs::path(dir) / "plan.toml";
  if (!fs::exists(plan_file))
    throw Error(dir + ": not a d500 plan directory (no plan.toml); create one with `d500 plan CAMPAIGN -o DIR`");
  PlanDir p;
  p.dir = fs::absolute(dir).lexically_normal().string();
  try {
    p.launcher = toml::parse_file(plan_file.string())["plan"]["launcher"].value_or(std::string());
  } catch (const toml::parse_error& e) {
    throw Error(plan_file.string() + ": " + std::string(e.description()));
  }
  p.campaign = load_campaign((fs::path(dir) / "campaign.toml").string());
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "jobs")) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".sh") p.jobs.push_back(e.path().stem().string());
  }
  std::sort(p.jobs.begin(), p.jobs.end());
  return p;
}

// Point ids that no rerun can change: complete, or failed validation, in some results file.
std::set<std::string> finished_points(const std::string& dir, std::map<std::string, std::string>* status = nullptr) {
  std::set<std::string> done;
  fs::path res = fs::path(dir) / "results";
  if (!fs::is_directory(res)) return done;
  for (const auto& e : fs::directory_iterator(res)) {
    if (e.path().extension() != ".h5") continue;
    try {
      JobResult j = read_job_file(e.path().string());
      for (const auto& p : j.points) {
        if (p.status == "complete" || p.status == "failed-validation") done.insert(p.id);
        if (status) {
          auto& s = (*status)[p.id];
          if (s != "done") s = done.count(p.id) ? "done" : "incomplete";
        }
      }
    } catch (const Error&) {
      // An unreadable file holds nothing we can count on; `d500 check` says why.
    }
  }
  return done;
}

// The job a spec belongs to: "jobs/job-0003.r2.toml" -> "job-0003".
std::string base_job(const std::string& spec) {
  std::string stem = fs::path(spec).stem().string();
  return stem.substr(0, stem.find('.'));
}

}  // namespace

std::vector<Submission> read_submissions(const std::string& dir) {
  std::vector<Submission> out;
  fs::path f = log_path(dir);
  if (!fs::exists(f)) return out;
  std::istringstream in(read_file(f.string()));
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;  // empty fields kept: the analysis job has no specs
    for (std::size_t at = 0;;) {
      std::size_t tab = line.find('\t', at);
      cols.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    if (cols.size() != 6) throw Error(Location{f.string(), line_no, 1}, "damaged submissions record (expected 6 columns)");
    Submission s;
    s.slurm_id = static_cast<std::uint32_t>(std::stoul(cols[0]));
    s.kind = cols[1];
    s.time_limit_min = std::stoi(cols[2]);
    s.dependency = cols[3] == "-" ? "" : cols[3];
    s.submitted_utc = cols[4];
    std::stringstream sp(cols[5]);
    for (std::string spec; std::getline(sp, spec, ',');) s.specs.push_back(spec);
    out.push_back(s);
  }
  return out;
}

#ifndef D500_HAVE_SLURM

bool slurm_available() { return false; }
static Error no_slurm() {
  return Error("this d500 was built without libslurm (Debian: apt-get install libslurm-dev, then rebuild)");
}
int slurm_submit(const std::string&, const SubmitOptions&, std::ostream&) { throw no_slurm(); }
void slurm_status(const std::string&, std::ostream&) { throw no_slurm(); }
void slurm_cancel(const std::string&, std::ostream&) { throw no_slurm(); }

#else

bool slurm_available() { return true; }

namespace {

const char* kStates[] = {"PENDING", "RUNNING",   "SUSPENDED", "COMPLETED", "CANCELLED",     "FAILED",
                         "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",      "OUT_OF_MEMORY"};
const char* kReasons[] = {"None",          "Priority",        "Dependency",         "Resources",        "PartitionNodeLimit",
                          "PartitionTimeLimit", "PartitionDown", "PartitionInactive", "JobHeldAdmin",   "BeginTime",
                          "Licenses",      "AssocJobLimit",   "AssocResourceLimit", "AssocTimeLimit",   "Reservation",
                          "ReqNodeNotAvail", "JobHeldUser",   "FrontEndDown",       "FailDefer",        "PartitionDown",
                          "NodeDown",      "BadConstraints",  "SystemFailure",      "JobLaunchFailure", "NonZeroExitCode",
                          "TimeLimit",     "InactiveLimit",   "InvalidAccount",     "InvalidQOS",       "QOSUsageThreshold",
                          "QOSJobLimit",   "QOSResourceLimit", "QOSTimeLimit",      "BlockMaxError",    "BlockFreeAction",
                          "Cleaning",      "Prolog",          "QOSNotAllowed",      "AccountNotAllowed", "DependencyNeverSatisfied"};

// Every libslurm call goes through this check: a failure names the call and what Slurm said,
// with the hint a person needs when the controller cannot be reached.
void check(int rc, const std::string& what) {
  if (rc == SLURM_SUCCESS) return;
  int e = slurm_get_errno();
  std::string msg = what + ": " + slurm_strerror(e);
  if (e == SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR || e == SLURM_COMMUNICATIONS_CONNECTION_ERROR ||
      e == SLURMCTLD_COMMUNICATIONS_SEND_ERROR || e == SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR || e == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT)
    msg += " (is slurmctld running and reachable? SLURM_CONF=" +
           std::string(std::getenv("SLURM_CONF") ? std::getenv("SLURM_CONF") : "(default)") + ")";
  throw Error(msg);
}

// The slurm.conf libslurm would read, or "" when there is none. libslurm itself ends the
// process (fatal) when it finds no configuration, so d500 looks first and says what is wrong.
std::string slurm_config() {
  if (const char* env = std::getenv("SLURM_CONF")) return fs::exists(env) ? env : "";
  for (const char* p : {"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"})
    if (fs::exists(p)) return p;
  return "";
}

struct Session {
  Session() {
    if (slurm_config().empty())
      throw Error(std::string("no Slurm configuration found (") +
                  (std::getenv("SLURM_CONF") ? "SLURM_CONF=" + std::string(std::getenv("SLURM_CONF")) + " does not exist"
                                             : "SLURM_CONF is unset and /etc/slurm/slurm.conf is absent") +
                  "): is this a Slurm cluster's login node?");
    slurm_init(nullptr);
  }
  ~Session() { slurm_fini(); }
};

struct TaskState {
  std::string state = "UNKNOWN", reason;
  bool in_flight = false;  // queued, running, or finishing
};

// The state of every task of every recorded submission: (slurm id, task index) -> state.
std::map<std::pair<std::uint32_t, int>, TaskState> query_states(const std::vector<Submission>& subs) {
  std::map<std::pair<std::uint32_t, int>, TaskState> out;
  for (const auto& s : subs) {
    job_info_msg_t* msg = nullptr;
    if (slurm_load_job(&msg, s.slurm_id, SHOW_ALL) != SLURM_SUCCESS) {
      int e = slurm_get_errno();
      if (e == ESLURM_INVALID_JOB_ID) {
        // Purged from the controller (MinJobAge): only the results files know what happened.
        for (std::size_t i = 0; i < s.specs.size(); ++i) out[{s.slurm_id, static_cast<int>(i)}] = {"PURGED", "", false};
        continue;
      }
      check(SLURM_ERROR, "slurm_load_job(" + std::to_string(s.slurm_id) + ")");
    }
    for (std::uint32_t r = 0; r < msg->record_count; ++r) {
      const slurm_job_info_t& j = msg->job_array[r];
      const std::uint32_t base = j.job_state & JOB_STATE_BASE;
      TaskState t;
      t.state = base < sizeof kStates / sizeof *kStates ? kStates[base] : "STATE_" + std::to_string(base);
      t.reason = j.state_reason < sizeof kReasons / sizeof *kReasons ? kReasons[j.state_reason] : std::to_string(j.state_reason);
      if (j.state_desc && *j.state_desc) t.reason += ": " + std::string(j.state_desc);
      t.in_flight = base == JOB_PENDING || base == JOB_RUNNING || base == JOB_SUSPENDED || (j.job_state & JOB_COMPLETING) ||
                    (j.job_state & JOB_CONFIGURING);
      if (s.kind != "array" || j.array_task_id == NO_VAL) {
        if (s.kind == "array" && j.array_task_str) {
          for (int i : parse_array_indices(j.array_task_str)) out[{s.slurm_id, i}] = t;
        } else {
          out[{s.slurm_id, 0}] = t;
        }
      } else {
        out[{s.slurm_id, static_cast<int>(j.array_task_id)}] = t;
      }
    }
    slurm_free_job_info_msg(msg);
  }
  return out;
}

std::vector<char*> environment_with(const std::vector<std::string>& extra, std::vector<std::string>& storage) {
  storage.clear();
  for (char** e = environ; e && *e; ++e) storage.push_back(*e);
  for (const auto& x : extra) storage.push_back(x);
  std::vector<char*> out;
  for (auto& s : storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

struct Request {
  std::string name, script, work_dir, std_out, array, dependency, spec_list;
  int nodes = 1, ranks_per_node = 1, time_limit_min = 1;
};

std::uint32_t submit_one(const Request& r, const SlurmSettings& sl) {
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  std::vector<std::string> env_store;
  std::vector<char*> env = environment_with({"D500_SPEC_LIST=" + r.spec_list}, env_store);
  std::string name = r.name, script = r.script, work_dir = r.work_dir, out = r.std_out, array = r.array,
              dep = r.dependency, partition = sl.partition, account = sl.account, qos = sl.qos,
              features = sl.constraint, tres;
  if (!sl.gres.empty()) {
    std::stringstream ss(sl.gres);
    std::vector<std::string> parts;
    for (std::string g; std::getline(ss, g, ',');) parts.push_back("gres:" + g);
    tres = join(parts, ",");
  }
  auto cstr = [](std::string& s) { return s.empty() ? nullptr : s.data(); };
  d.name = cstr(name);
  d.script = script.data();
  d.work_dir = work_dir.data();
  d.std_out = out.data();
  d.array_inx = cstr(array);
  d.dependency = cstr(dep);
  d.partition = cstr(partition);
  d.account = cstr(account);
  d.qos = cstr(qos);
  d.features = cstr(features);
  d.tres_per_node = cstr(tres);
  d.min_nodes = d.max_nodes = static_cast<std::uint32_t>(r.nodes);
  d.num_tasks = static_cast<std::uint32_t>(r.nodes * r.ranks_per_node);
  d.ntasks_per_node = static_cast<std::uint16_t>(r.ranks_per_node);
  d.cpus_per_task = static_cast<std::uint16_t>(sl.cpus_per_task);
  d.time_limit = static_cast<std::uint32_t>(r.time_limit_min);
  d.user_id = getuid();
  d.group_id = getgid();
  d.environment = env.data();
  d.env_size = static_cast<std::uint32_t>(env.size() - 1);
  submit_response_msg_t* resp = nullptr;
  check(slurm_submit_batch_job(&d, &resp), "slurm_submit_batch_job(" + r.name + ")");
  std::uint32_t id = resp->job_id;
  slurm_free_submit_response_response_msg(resp);
  return id;
}

}  // namespace

int slurm_submit(const std::string& dir_arg, const SubmitOptions& opt, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  const std::string& dir = plan.dir;
  if (plan.launcher != "slurm")
    throw Error(dir_arg + ": this plan uses the '" + plan.launcher +
                "' launcher; plan with a Slurm template (template = \"slurm\" or \"daint\") to submit it");
  const SlurmSettings& sl = plan.campaign.slurm;
  std::vector<Submission> subs = read_submissions(dir);
  if (!subs.empty() && !opt.resume)
    throw Error(dir_arg + ": already submitted (" + std::to_string(subs.size()) +
                " submissions recorded in slurm/submissions.tsv); `d500 submit --resume` submits what is neither "
                "complete nor queued or running");
  Session session;
  // What is finished, and what is queued or running, decides what to submit.
  const std::set<std::string> finished = finished_points(dir);
  std::set<std::string> in_flight;
  std::map<std::string, int> attempts, timeouts;  // per original job
  const auto states = query_states(subs);
  for (const auto& s : subs) {
    for (std::size_t i = 0; i < s.specs.size(); ++i) {
      const std::string job = base_job(s.specs[i]);
      attempts[job]++;
      auto it = states.find({s.slurm_id, static_cast<int>(i)});
      if (it == states.end()) continue;
      if (it->second.state == "TIMEOUT") timeouts[job]++;
      if (it->second.in_flight)
        for (const auto& p : read_job_spec(s.specs[i]).points) in_flight.insert(p.id);
    }
  }

  struct Entry {
    std::string spec;
    int nodes, ranks_per_node, time_limit_min;
    std::string job;
  };
  std::vector<Entry> todo;
  int n_finished = 0, n_flight = 0, n_gave_up = 0;
  for (const auto& job : plan.jobs) {
    const fs::path original = fs::path(dir) / "jobs" / (job + ".toml");
    JobSpec spec = read_job_spec(original.string());
    std::vector<PointSpec> left;
    for (const auto& p : spec.points) {
      if (finished.count(p.id)) ++n_finished;
      else if (in_flight.count(p.id)) ++n_flight;
      else left.push_back(p);
    }
    if (left.empty()) continue;
    int limit = sl.time_limit_min;
    if (timeouts[job] > 0 && sl.retry_time_factor > 1) {
      if (timeouts[job] > sl.max_retries) {
        out << job << ": timed out " << timeouts[job] << " time(s), more than max_retries = " << sl.max_retries
            << "; not resubmitted (" << left.size() << " points left)\n";
        n_gave_up += static_cast<int>(left.size());
        continue;
      }
      limit = static_cast<int>(std::ceil(sl.time_limit_min * std::pow(sl.retry_time_factor, timeouts[job])));
    }
    std::string path = original.string();
    if (left.size() != spec.points.size() || attempts[job] > 0) {
      // A resubmission runs only what is left, under a spec of its own.
      spec.id = job + ".r" + std::to_string(attempts[job]);
      spec.points = left;
      path = (fs::path(dir) / "jobs" / (spec.id + ".toml")).string();
      write_file_atomic(path, job_spec_toml(spec));
    }
    todo.push_back({path, spec.nodes, spec.ranks_per_node, limit, job});
  }
  if (todo.empty()) {
    out << "nothing to submit: " << n_finished << " points finished, " << n_flight << " queued or running"
        << (n_gave_up ? ", " + std::to_string(n_gave_up) + " given up" : "") << "\n";
    return 0;
  }

  // Jobs of one shape and time limit go into one array when the campaign allows (always with a
  // throttle, whose %N limits the array); arrays are chained when throttled, so that at most N of
  // the campaign's jobs are queued or running at once.
  std::map<std::tuple<int, int, int>, std::vector<Entry>> groups;
  std::vector<std::tuple<int, int, int>> order;
  for (const auto& e : todo) {
    auto key = std::make_tuple(e.nodes, e.ranks_per_node, e.time_limit_min);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(e);
  }
  std::vector<std::vector<Entry>> batches;
  for (const auto& k : order) {
    if (sl.array || sl.throttle > 0) batches.push_back(groups[k]);
    else
      for (const auto& e : groups[k]) batches.push_back({e});
  }
  int submitted = 0;
  std::vector<std::uint32_t> ids;
  std::uint32_t previous = 0;
  const int first_list = static_cast<int>(subs.size());
  try {
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const auto& batch = batches[b];
      const bool array = batch.size() > 1 || sl.throttle > 0;
      Request r;
      r.nodes = batch.front().nodes;
      r.ranks_per_node = batch.front().ranks_per_node;
      r.time_limit_min = batch.front().time_limit_min;
      r.work_dir = dir;
      r.script = read_file((fs::path(dir) / "jobs" / (batch.front().job + ".sh")).string());
      const std::string list = (fs::path(dir) / "slurm" / ("submit-" + std::to_string(first_list + static_cast<int>(b)) + ".list")).string();
      std::string lines;
      for (const auto& e : batch) lines += e.spec + "\n";
      fs::create_directories(fs::path(list).parent_path());
      write_file_atomic(list, lines);
      r.spec_list = list;
      r.name = plan.campaign.name + "." + (array ? "array-" + std::to_string(first_list + static_cast<int>(b)) : batch.front().job);
      r.std_out = (fs::path(dir) / "logs" / (r.name + (array ? ".slurm-%A_%a.out" : ".slurm-%j.out"))).string();
      if (array) r.array = "0-" + std::to_string(batch.size() - 1) + (sl.throttle > 0 ? "%" + std::to_string(sl.throttle) : "");
      if (sl.throttle > 0 && previous) r.dependency = "afterany:" + std::to_string(previous);
      const std::uint32_t id = submit_one(r, sl);
      Submission s;
      s.slurm_id = id;
      s.kind = array ? "array" : "job";
      s.time_limit_min = r.time_limit_min;
      s.dependency = r.dependency;
      s.submitted_utc = utc_now_iso8601();
      for (const auto& e : batch) s.specs.push_back(e.spec);
      record(dir, s);
      ++submitted;
      ids.push_back(id);
      previous = id;
      out << "submitted " << s.kind << " " << id << ": " << batch.size() << " job spec(s), " << r.nodes << " node(s) x "
          << r.ranks_per_node << " rank(s), time limit " << slurm_time(r.time_limit_min)
          << (r.array.empty() ? "" : ", array " + r.array) << (r.dependency.empty() ? "" : ", after " + r.dependency) << "\n";
    }
    if (sl.analysis_job) {
      const TemplateInfo t = load_template("analysis", plan.campaign.template_where);
      std::error_code ec;
      fs::path self = fs::read_symlink("/proc/self/exe", ec);
      Request r;
      r.name = plan.campaign.name + ".analysis";
      r.script = render_template(t.text, t.path, {{"campaign", plan.campaign.name}, {"run_dir", dir}, {"d500", self.string()}});
      r.work_dir = dir;
      r.std_out = (fs::path(dir) / "logs" / (r.name + ".slurm-%j.out")).string();
      r.time_limit_min = std::max(10, sl.time_limit_min);
      std::vector<std::string> deps;
      for (auto id : ids) deps.push_back(std::to_string(id));
      r.dependency = "afterany:" + join(deps, ":");
      const std::uint32_t id = submit_one(r, sl);
      record(dir, Submission{id, "analysis", r.time_limit_min, r.dependency, {}, utc_now_iso8601()});
      ++submitted;
      out << "submitted analysis job " << id << " after " << r.dependency << "\n";
    }
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; " + std::to_string(submitted) + " of " +
                std::to_string(batches.size() + (sl.analysis_job ? 1 : 0)) +
                " submission(s) were accepted and recorded in slurm/submissions.tsv; the rest was not submitted: "
                "`d500 submit --resume` submits it once Slurm answers again");
  }
  return submitted;
}

void slurm_status(const std::string& dir_arg, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  const std::vector<Submission> subs = read_submissions(plan.dir);
  std::map<std::pair<std::uint32_t, int>, TaskState> states;
  std::string controller_error;
  if (!subs.empty()) {
    try {
      Session session;
      states = query_states(subs);
    } catch (const Error& e) {
      controller_error = e.what();  // the results files still tell which points are done
    }
  }
  std::map<std::string, int> by_state;
  out << "jobs (" << subs.size() << " submission(s)):\n";
  for (const auto& s : subs) {
    const std::size_t tasks = std::max<std::size_t>(1, s.specs.size());
    for (std::size_t i = 0; i < tasks; ++i) {
      auto it = states.find({s.slurm_id, static_cast<int>(i)});
      TaskState t = it != states.end() ? it->second : TaskState{};
      by_state[t.state]++;
      std::string id = std::to_string(s.slurm_id) + (s.kind == "array" ? "_" + std::to_string(i) : "");
      out << "  " << id << "  " << (s.specs.empty() ? "analysis" : fs::path(s.specs[i]).stem().string()) << "  " << t.state
          << (t.reason.empty() || t.reason == "None" ? "" : " (" + t.reason + ")") << "  limit "
          << slurm_time(s.time_limit_min) << "\n";
    }
  }
  if (!controller_error.empty()) out << "  Slurm states unknown: " << controller_error << "\n";

  std::map<std::string, std::string> point_status;
  finished_points(plan.dir, &point_status);
  int done = 0, incomplete = 0, missing = 0;
  std::vector<std::string> not_done;
  for (const auto& p : read_points_csv(plan.dir)) {
    auto it = point_status.find(p.id);
    if (it != point_status.end() && it->second == "done") ++done;
    else {
      const bool inc = it != point_status.end();
      (inc ? incomplete : missing)++;
      not_done.push_back("  " + p.id + "  " + (inc ? "incomplete" : "missing") + "  " + p.canonical);
    }
  }
  out << "points: " << done << " done, " << incomplete << " incomplete, " << missing << " missing\n";
  for (const auto& n : not_done) out << n << "\n";
  std::vector<std::string> parts;
  for (const auto& [k, v] : by_state) parts.push_back(std::to_string(v) + " " + k);
  out << "summary: jobs " << (parts.empty() ? "none submitted" : join(parts, ", ")) << "; points " << done << "/"
      << (done + incomplete + missing) << " done\n";
}

void slurm_cancel(const std::string& dir_arg, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  const std::vector<Submission> subs = read_submissions(plan.dir);
  if (subs.empty()) {
    out << "nothing to cancel: no submissions recorded in " << plan.dir << "/slurm/submissions.tsv\n";
    return;
  }
  Session session;
  const auto states = query_states(subs);
  int cancelled = 0;
  for (const auto& s : subs) {
    bool active = false;
    for (const auto& [key, t] : states) active = active || (key.first == s.slurm_id && t.in_flight);
    if (!active) continue;
    check(slurm_kill_job(s.slurm_id, SIGKILL, 0), "slurm_kill_job(" + std::to_string(s.slurm_id) + ")");
    append_durably(fs::path(plan.dir) / "slurm" / "cancellations.tsv", std::to_string(s.slurm_id) + "\t" + utc_now_iso8601());
    out << "cancelled " << s.kind << " " << s.slurm_id << "\n";
    ++cancelled;
  }
  out << cancelled << " submission(s) cancelled\n";
}

#endif

}  // namespace d500
