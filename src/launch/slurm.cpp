#include "launch/slurm.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "launch/submit_plan.hpp"
#include "plan/jobspec.hpp"
#include "plan/plan.hpp"
#include "plan/template.hpp"
#include "rundir/lock.hpp"
#include "rundir/state.hpp"
#include "rundir/submissions.hpp"

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
  auto number = [&](const std::string& t) {
    int v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size() || v < 0)
      throw Error("Slurm reported the array task list \"" + expr + "\", which d500 cannot read (\"" + t +
                  "\" is not a task index)");
    return v;
  };
  std::stringstream ss(body);
  for (std::string part; std::getline(ss, part, ',');) {
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = number(part.substr(0, dash)), hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    for (int i = lo; i <= hi; ++i) out.push_back(i);
  }
  return out;
}

namespace {

struct PlanDir {
  RunLayout layout;
  std::string dir;
  Campaign campaign;
  std::string launcher;
  std::vector<std::string> jobs;  // original job ids, sorted
};

PlanDir load_plan_dir(const std::string& dir) {
  RunLayout layout(dir);
  layout.require_plan(dir);
  PlanDir p{layout, layout.root().string(), load_campaign(layout.campaign_file().string()), layout.launcher(),
            layout.job_ids()};
  return p;
}

struct TaskState {
  std::string state = "UNKNOWN", reason;
  bool in_flight = false;  // queued, running, or finishing
};

// Slurm's final states that end a point's attempt without the point finishing it.
std::optional<Outcome> outcome_of_state(const std::string& state) {
  if (state == "TIMEOUT" || state == "DEADLINE") return Outcome::TimedOut;
  if (state == "CANCELLED") return Outcome::Cancelled;
  if (state == "NODE_FAIL" || state == "PREEMPTED" || state == "BOOT_FAIL") return Outcome::NodeFailed;
  return std::nullopt;
}

// What the submissions, Slurm's answers and the results files say about the campaign.
struct CampaignFacts {
  RunState results;
  std::set<std::string> in_flight;            // point ids in a queued or running task
  std::map<std::string, int> attempts, timeouts;
  std::map<std::string, Outcome> ended_by;    // point id -> how its last attempt's task ended
};

CampaignFacts gather(const PlanDir& plan, const std::vector<Submission>& subs,
                     const std::map<std::pair<std::uint32_t, int>, TaskState>& states) {
  CampaignFacts f;
  f.results = scan_results(plan.layout);
  for (const auto& s : subs) {
    for (std::size_t i = 0; i < s.specs.size(); ++i) {
      const std::string job = base_job(s.specs[i]);
      f.attempts[job]++;
      auto it = states.find({s.slurm_id, static_cast<int>(i)});
      if (it == states.end()) continue;
      if (it->second.state == "TIMEOUT") f.timeouts[job]++;
      const auto ended = outcome_of_state(it->second.state);
      if (!it->second.in_flight && !ended) continue;
      for (const auto& p : read_job_spec(s.specs[i]).points) {
        if (it->second.in_flight) f.in_flight.insert(p.id);
        if (ended) f.ended_by[p.id] = *ended;
        else f.ended_by.erase(p.id);
      }
    }
  }
  return f;
}

}  // namespace

#ifndef D500_HAVE_SLURM

bool slurm_available() { return false; }
static Error no_slurm() {
  return Error("this d500 was built without libslurm (Debian: apt-get install libslurm-dev, then rebuild)");
}
int slurm_submit(const std::string&, const SubmitOptions&, std::ostream&) { throw no_slurm(); }
void slurm_cancel(const std::string&, std::ostream&) { throw no_slurm(); }

namespace {
// Without libslurm the states are unknown; the results files still tell which points are done.
std::map<std::pair<std::uint32_t, int>, TaskState> states_or_why(const std::vector<Submission>&, std::string& why) {
  why = no_slurm().what();
  return {};
}
}  // namespace

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

// Slurm's answer for every task, or why there is none (the controller is down, say).
std::map<std::pair<std::uint32_t, int>, TaskState> states_or_why(const std::vector<Submission>& subs, std::string& why) {
  try {
    Session session;
    return query_states(subs);
  } catch (const Error& e) {
    why = e.what();
    return {};
  }
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
  // One submitter at a time: two concurrent submits would both see nothing submitted yet.
  RunLock lock = RunLock::acquire(plan.layout, "d500 submit");
  std::vector<Submission> subs = read_submissions(plan.layout);
  if (!subs.empty() && !opt.resume)
    throw Error(dir_arg + ": already submitted (" + std::to_string(subs.size()) +
                " submissions recorded in slurm/submissions.tsv); `d500 submit --resume` submits what is neither "
                "complete nor queued or running");
  Session session;
  // What is finished, and what is queued or running, decides what to submit.
  const CampaignFacts facts = gather(plan, subs, query_states(subs));
  for (const auto& u : facts.results.unreadable)
    out << "warning: a results file cannot be read, so its points count as not done: " << u << "\n";
  SubmitFacts in;
  for (const auto& job : plan.jobs) in.jobs.emplace_back(job, read_job_spec(plan.layout.job_spec(job).string()));
  for (const auto& [id, st] : facts.results.points)
    if (is_final(st.outcome)) in.finished.insert(id);
  in.in_flight = facts.in_flight;
  in.attempts = facts.attempts;
  in.timeouts = facts.timeouts;
  in.earlier_submissions = static_cast<int>(subs.size());
  const SubmitPlan todo = plan_submissions(in, plan.campaign, plan.layout);
  for (const auto& n : todo.notes) out << n << "\n";
  if (todo.batches.empty()) {
    out << "nothing to submit: " << todo.finished << " points finished, " << todo.in_flight << " queued or running"
        << (todo.gave_up ? ", " + std::to_string(todo.gave_up) + " given up" : "") << "\n";
    return 0;
  }

  int submitted = 0;
  std::vector<std::uint32_t> ids;
  std::uint32_t previous = 0;
  try {
    for (const auto& batch : todo.batches) {
      std::string lines;
      for (const auto& e : batch.entries) {
        if (e.new_spec) write_file_atomic(e.spec_path, job_spec_toml(e.spec));
        lines += e.spec_path + "\n";
      }
      fs::create_directories(batch.list.parent_path());
      write_file_atomic(batch.list.string(), lines);
      Request r;
      r.name = batch.name;
      r.nodes = batch.nodes;
      r.ranks_per_node = batch.ranks_per_node;
      r.time_limit_min = batch.time_limit_min;
      r.work_dir = dir;
      r.script = read_file(plan.layout.job_script(batch.entries.front().job).string());
      r.spec_list = batch.list.string();
      r.std_out = (plan.layout.logs_dir() / (r.name + (batch.array ? ".slurm-%A_%a.out" : ".slurm-%j.out"))).string();
      r.array = batch.array_expr;
      if (batch.after_previous && previous) r.dependency = "afterany:" + std::to_string(previous);
      const std::uint32_t id = submit_one(r, sl);
      Submission s;
      s.slurm_id = id;
      s.kind = batch.array ? "array" : "job";
      s.time_limit_min = r.time_limit_min;
      s.dependency = r.dependency;
      s.submitted_utc = utc_now_iso8601();
      for (const auto& e : batch.entries) s.specs.push_back(e.spec_path);
      record_submission(plan.layout, s);
      ++submitted;
      ids.push_back(id);
      previous = id;
      out << "submitted " << s.kind << " " << id << ": " << batch.entries.size() << " job spec(s), " << r.nodes
          << " node(s) x " << r.ranks_per_node << " rank(s), time limit " << slurm_time(r.time_limit_min)
          << (r.array.empty() ? "" : ", array " + r.array) << (r.dependency.empty() ? "" : ", after " + r.dependency)
          << "\n";
    }
    if (sl.analysis_job) {
      const TemplateInfo t = load_template("analysis", plan.campaign.template_where);
      std::error_code ec;
      fs::path self = fs::read_symlink("/proc/self/exe", ec);
      Request r;
      r.name = plan.campaign.name + ".analysis";
      r.script = render_template(t.text, t.path, {{"campaign", plan.campaign.name}, {"run_dir", dir}, {"d500", self.string()}});
      r.work_dir = dir;
      r.std_out = (plan.layout.logs_dir() / (r.name + ".slurm-%j.out")).string();
      r.time_limit_min = std::max(10, sl.time_limit_min);
      std::vector<std::string> deps;
      for (auto id : ids) deps.push_back(std::to_string(id));
      r.dependency = "afterany:" + join(deps, ":");
      const std::uint32_t id = submit_one(r, sl);
      record_submission(plan.layout, Submission{id, "analysis", r.time_limit_min, r.dependency, {}, utc_now_iso8601()});
      ++submitted;
      out << "submitted analysis job " << id << " after " << r.dependency << "\n";
    }
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; " + std::to_string(submitted) + " of " +
                std::to_string(todo.batches.size() + (sl.analysis_job ? 1 : 0)) +
                " submission(s) were accepted and recorded in slurm/submissions.tsv; the rest was not submitted: "
                "`d500 submit --resume` submits it once Slurm answers again");
  }
  return submitted;
}

void slurm_cancel(const std::string& dir_arg, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  const std::vector<Submission> subs = read_submissions(plan.layout);
  if (subs.empty()) {
    out << "nothing to cancel: no submissions recorded in " << plan.layout.submissions_file().string() << "\n";
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
    record_cancellation(plan.layout, s.slurm_id, utc_now_iso8601());
    out << "cancelled " << s.kind << " " << s.slurm_id << "\n";
    ++cancelled;
  }
  out << cancelled << " submission(s) cancelled\n";
}

#endif

void slurm_status(const std::string& dir_arg, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  const std::vector<Submission> subs = read_submissions(plan.layout);
  std::string controller_error;  // the results files still tell which points are done
  const auto states = subs.empty() ? std::map<std::pair<std::uint32_t, int>, TaskState>{} : states_or_why(subs, controller_error);
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

  const CampaignFacts facts = gather(plan, subs, states);
  for (const auto& u : facts.results.unreadable) out << "  unreadable results file: " << u << "\n";
  PointCounts counts;
  std::vector<std::string> not_done;
  for (const auto& p : read_points_csv(plan.layout)) {
    PointState st = facts.results.of(p.id);
    // A point its last task left unfinished carries what Slurm said of that task.
    if (!is_final(st.outcome) && facts.ended_by.count(p.id)) st.outcome = facts.ended_by.at(p.id);
    counts.by_outcome[st.outcome]++;
    ++counts.total;
    if (!is_final(st.outcome)) not_done.push_back("  " + p.id + "  " + outcome_name(st.outcome) + "  " + p.canonical);
  }
  const int done = counts.count(Outcome::Complete) + counts.count(Outcome::FailedValidation) +
                   counts.count(Outcome::BackendFailed);
  const int missing = counts.count(Outcome::Missing), incomplete = counts.total - done - missing;
  out << "points: " << done << " done, " << incomplete << " incomplete, " << missing << " missing\n";
  out << "outcomes: " << counts.text() << "\n";
  for (const auto& n : not_done) out << n << "\n";
  std::vector<std::string> parts;
  for (const auto& [k, v] : by_state) parts.push_back(std::to_string(v) + " " + k);
  out << "summary: jobs " << (parts.empty() ? "none submitted" : join(parts, ", ")) << "; points " << done << "/"
      << counts.total << " done\n";
}

}  // namespace d500
