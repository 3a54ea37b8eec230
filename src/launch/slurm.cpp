#include "launch/slurm.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toml++/toml.h>
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

#include "campaign/campaign.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "launch/submit_plan.hpp"
#include "plan/jobspec.hpp"
#include "plan/plan.hpp"
#include "plan/sbatch.hpp"
#include "plan/template.hpp"
#include "rundir/attempts.hpp"
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
  PlanDir p{layout, layout.root().string(), load_campaign(layout.campaign_file().string(), layout.campaign_dir()),
            layout.launcher(), layout.job_ids()};
  return p;
}

// Slurm's live answer for one task.
struct TaskState {
  ObservedState s;
  bool in_flight = false;  // queued, running, requeued or finishing
};
using LiveStates = std::map<TaskKey, TaskState>;

// What the submissions, Slurm's answers, d500's observations and the jobs' own records say.
struct CampaignFacts {
  RunState results;
  std::set<std::string> in_flight;  // point ids in a queued or running task
  std::map<std::string, int> attempts, timeouts, failures;
  std::map<std::string, std::string> failure_cause, failed_nodes;
  std::map<std::string, Outcome> ended_by;       // point id -> how its last attempt's task ended
  std::map<std::string, std::string> ended_why;  // point id -> that task and its cause, in words
  std::map<TaskKey, TaskEnd> ends;               // every task
};

CampaignFacts gather(const PlanDir& plan, const std::vector<Submission>& subs, const LiveStates& live) {
  CampaignFacts f;
  f.results = scan_results(plan.layout);
  const auto observed = read_observed(plan.layout);
  const auto records = read_attempts(plan.layout);
  for (const auto& s : subs) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, s.specs.size()); ++i) {
      const TaskKey key{s.slurm_id, static_cast<int>(i)};
      auto it = live.find(key);
      std::optional<ObservedState> now;
      if (it != live.end()) now = it->second.s;
      const bool in_flight = it != live.end() && it->second.in_flight;
      const TaskEnd e = resolve_task_end(key, now, now && !in_flight, observed, records);
      f.ends[key] = e;
      if (s.specs.empty()) continue;  // the analysis job
      const std::string job = base_job(s.specs[i]);
      f.attempts[job]++;
      if (in_flight) {
        for (const auto& p : read_job_spec(s.specs[i]).points) f.in_flight.insert(p.id);
        continue;
      }
      const auto ended = outcome_of_slurm_state(e.state);
      if (e.state == "TIMEOUT") f.timeouts[job]++;
      if (ended == Outcome::JobFailed) {
        f.failures[job]++;
        f.failure_cause[job] = e.cause + (e.tail.empty() ? "" : ": " + last_words(e));
      }
      if ((e.state == "NODE_FAIL" || e.state == "BOOT_FAIL") && !e.nodes.empty())
        f.failed_nodes[e.nodes] = "job " + task_name(s, i);
      if (!ended && e.state != "COMPLETED") continue;  // nothing known of its end
      for (const auto& p : read_job_spec(s.specs[i]).points) {
        if (ended) {
          f.ended_by[p.id] = *ended;
          f.ended_why[p.id] = "job " + task_name(s, i) + " " + e.state + (e.cause.empty() ? "" : ": " + e.cause);
        } else {
          f.ended_by.erase(p.id);
          f.ended_why.erase(p.id);
        }
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
LiveStates states_or_why(const PlanDir&, const std::vector<Submission>&, std::string& why) {
  why = no_slurm().what();
  return {};
}
}  // namespace

#else

bool slurm_available() { return true; }

namespace {

// libslurm's own names of states and reasons (what squeue prints). Slurm 22.05 exports them
// without declaring them in slurm.h; later releases declare them just so.
extern "C" char* slurm_job_state_string(std::uint32_t inx);
extern "C" char* slurm_job_reason_string(enum job_state_reason inx);

// This run's tag, carried in every job's comment: "d500:<12 hex digits>:submit-<N>". It is
// made from the run directory and its plan.toml (which holds the campaign's hash and when it
// was planned), so `submit --resume` recognises a job Slurm accepted although the submit that
// sent it never heard back (a hung controller), and a run planned again in the same directory
// has a tag of its own.
std::string run_tag(const PlanDir& plan) {
  return "d500:" + hex64(fnv1a64(plan.dir + "\n" + read_file(plan.layout.plan_file().string()))).substr(0, 12) + ":";
}

// Every libslurm call goes through this check: a failure names the call and what Slurm said,
// with the hint a person needs when the controller cannot be reached.
void check(int rc, const std::string& what) {
  if (rc == SLURM_SUCCESS) return;
  int e = slurm_get_errno();
  std::string msg = what + ": " + slurm_strerror(e);
  if (e == SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR || e == SLURM_COMMUNICATIONS_CONNECTION_ERROR ||
      e == SLURMCTLD_COMMUNICATIONS_SEND_ERROR || e == SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR ||
      e == SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT)
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
                  (std::getenv("SLURM_CONF")
                       ? "SLURM_CONF=" + std::string(std::getenv("SLURM_CONF")) + " does not exist"
                       : "SLURM_CONF is unset and /etc/slurm/slurm.conf is absent") +
                  "): is this a Slurm cluster's login node?");
    slurm_init(nullptr);
  }
  ~Session() { slurm_fini(); }
};

// The nodes of a job's node list that Slurm now holds down, draining or failing: the ones a
// NODE_FAIL was about (the list itself names the healthy nodes too). The whole list when none is.
std::string failed_nodes_of(const std::string& nodelist) {
  hostlist_t hl = slurm_hostlist_create(nodelist.c_str());
  if (!hl) return nodelist;
  std::vector<std::string> failed;
  while (char* h = slurm_hostlist_shift(hl)) {
    node_info_msg_t* ni = nullptr;
    if (slurm_load_node_single(&ni, h, SHOW_ALL) == SLURM_SUCCESS && ni && ni->record_count > 0) {
      const std::uint32_t st = ni->node_array[0].node_state;
      if ((st & NODE_STATE_BASE) == NODE_STATE_DOWN || (st & NODE_STATE_DRAIN) || (st & NODE_STATE_FAIL))
        failed.push_back(h);
    }
    if (ni) slurm_free_node_info_msg(ni);
    free(h);
  }
  slurm_hostlist_destroy(hl);
  return failed.empty() ? nodelist : join(failed, ",");
}

// The state of every task of every recorded submission that Slurm still knows. A job Slurm
// has purged (MinJobAge), or whose id now belongs to a job without this run's tag, is absent.
// One query for all of them (this user's jobs: `d500 status` of 10^4 submissions is one RPC,
// not 10^4), its records indexed by the id a submission recorded (an array task's by its array's).
LiveStates query_states(const PlanDir& plan, const std::vector<Submission>& subs) {
  LiveStates out;
  if (subs.empty()) return out;
  const std::string tag = run_tag(plan);
  std::optional<std::set<TaskKey> > started;  // tasks with an attempt record, read when first needed
  job_info_msg_t* msg = nullptr;
  check(slurm_load_job_user(&msg, static_cast<std::uint32_t>(getuid()), SHOW_ALL), "slurm_load_job_user");
  std::map<std::uint32_t, std::vector<const slurm_job_info_t*> > by_id;
  for (std::uint32_t r = 0; r < msg->record_count; ++r) {
    const slurm_job_info_t& j = msg->job_array[r];
    by_id[j.array_job_id ? j.array_job_id : j.job_id].push_back(&j);
  }
  struct Free {
    job_info_msg_t* m;
    ~Free() { slurm_free_job_info_msg(m); }
  } free_msg{msg};
  static const std::vector<const slurm_job_info_t*> kNone;
  for (const auto& s : subs) {
    const auto found = by_id.find(s.slurm_id);
    const auto& records = found == by_id.end() ? kNone : found->second;  // none: purged, the records below know more
    for (const slurm_job_info_t* jp : records) {
      const slurm_job_info_t& j = *jp;
      if (j.comment && std::string(j.comment).rfind("d500:", 0) == 0 && std::string(j.comment).rfind(tag, 0) != 0)
        continue;  // the id was reused by another run's job
      const std::uint32_t base = j.job_state & JOB_STATE_BASE;
      TaskState t;
      t.in_flight = base == JOB_PENDING || base == JOB_RUNNING || base == JOB_SUSPENDED ||
                    (j.job_state & (JOB_COMPLETING | JOB_CONFIGURING | JOB_REQUEUE | JOB_REQUEUE_FED | JOB_RESIZING));
      t.s.state = slurm_job_state_string(t.in_flight ? j.job_state : base);
      t.s.reason = j.state_reason == WAIT_NO_REASON
                       ? ""
                       : slurm_job_reason_string(static_cast<job_state_reason>(j.state_reason));
      if (j.state_desc && *j.state_desc) t.s.reason += (t.s.reason.empty() ? "" : ": ") + std::string(j.state_desc);
      if (!t.in_flight) {
        if (WIFSIGNALED(j.exit_code))
          t.s.signal = WTERMSIG(j.exit_code);
        else
          t.s.exit_code = WEXITSTATUS(j.exit_code);
      }
      t.s.restarts = j.restart_cnt;
      t.s.nodes = j.nodes ? j.nodes : "";
      if (base == JOB_NODE_FAIL && !t.s.nodes.empty()) t.s.nodes = failed_nodes_of(t.s.nodes);
      t.s.seen_utc = utc_now_iso8601();
      std::vector<int> tasks;
      if (s.kind != "array")
        tasks = {0};
      else if (j.array_task_id != NO_VAL)
        tasks = {static_cast<int>(j.array_task_id)};
      else if (j.array_task_str)
        tasks = parse_array_indices(j.array_task_str);
      for (int i : tasks) {
        t.s.task = {s.slurm_id, i};
        out[t.s.task] = t;
      }
    }
    const bool known = !records.empty();
    // A pending array task cancelled (scancel <id>_<task>) leaves no record at all: Slurm just
    // drops its index from the array's. A task the live array no longer lists, and that never
    // started (no record of its own under slurm/attempts/), was cancelled before it started.
    if (s.kind == "array" && known)
      for (std::size_t i = 0; i < s.specs.size(); ++i) {
        const TaskKey key{s.slurm_id, static_cast<int>(i)};
        if (out.count(key)) continue;
        if (!started) {
          started.emplace();
          for (const auto& a : read_attempts(plan.layout)) started->insert(a.task);
        }
        if (started->count(key)) continue;
        TaskState t;
        t.s.task = key;
        t.s.state = "CANCELLED";
        t.s.reason = "cancelled before it started: the array no longer lists it";
        t.s.seen_utc = utc_now_iso8601();
        out[key] = t;
      }
  }
  return out;
}

// Every final state Slurm reported that d500 has not kept yet goes into slurm/observed.tsv:
// it outlives Slurm's record of the job.
void remember(const PlanDir& plan, const LiveStates& live) {
  const auto seen = read_observed(plan.layout);
  for (const auto& [key, t] : live) {
    if (t.in_flight) continue;
    auto it = seen.find(key);
    if (it != seen.end() && it->second.state == t.s.state && it->second.exit_code == t.s.exit_code &&
        it->second.signal == t.s.signal && it->second.restarts == t.s.restarts)
      continue;
    record_observed(plan.layout, t.s);
  }
}

LiveStates query_and_remember(const PlanDir& plan, const std::vector<Submission>& subs) {
  LiveStates live = query_states(plan, subs);
  remember(plan, live);
  return live;
}

// Slurm's answer for every task, or why there is none (the controller is down, say).
LiveStates states_or_why(const PlanDir& plan, const std::vector<Submission>& subs, std::string& why) {
  try {
    Session session;
    return query_and_remember(plan, subs);
  } catch (const Error& e) {
    why = e.what();
    return {};
  }
}

// Jobs carrying this run's tag that submissions.tsv lacks: a submit that timed out (a hung
// controller) although Slurm accepted it. Each is recorded as the submission it is, with the
// specs of the list its tag names, so that nothing is submitted twice. Returns how many.
int adopt_unrecorded(const PlanDir& plan, std::vector<Submission>& subs, std::ostream& out) {
  job_info_msg_t* msg = nullptr;
  check(slurm_load_job_user(&msg, getuid(), SHOW_ALL), "slurm_load_job_user");
  const std::string tag = run_tag(plan);
  std::set<std::uint32_t> known;
  for (const auto& s : subs) known.insert(s.slurm_id);
  int adopted = 0;
  for (std::uint32_t r = 0; r < msg->record_count; ++r) {
    const slurm_job_info_t& j = msg->job_array[r];
    const std::string comment = j.comment ? j.comment : "";
    const std::uint32_t id = j.array_job_id ? j.array_job_id : j.job_id;
    if (comment.rfind(tag, 0) != 0 || known.count(id)) continue;
    known.insert(id);
    const std::string what = comment.substr(tag.size());  // "submit-<N>" or "analysis"
    Submission s;
    s.slurm_id = id;
    s.kind = what == "analysis" ? "analysis" : (j.array_job_id ? "array" : "job");
    s.time_limit_min = static_cast<int>(j.time_limit);
    s.dependency = j.dependency ? j.dependency : "";
    s.submitted_utc = utc_now_iso8601();
    if (what.rfind("submit-", 0) == 0) {
      int n = -1;
      std::from_chars(what.data() + 7, what.data() + what.size(), n);
      const fs::path list = plan.layout.submit_list(n);
      std::istringstream in(fs::exists(list) ? read_file(list.string()) : "");
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) s.specs.push_back(line);
    }
    record_submission(plan.layout, s);
    subs.push_back(s);
    ++adopted;
    out << "found " << s.kind << " " << id << " in Slurm with this run's tag (" << comment
        << ") but not in slurm/submissions.tsv: an earlier submit was accepted without hearing back; recorded now, "
           "not submitted again\n";
  }
  slurm_free_job_info_msg(msg);
  return adopted;
}

// The submitting environment with `extra` (NAME=value) set over it, as sbatch passes it.
std::vector<char*> environment_with(const std::vector<std::string>& extra, std::vector<std::string>& storage) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  auto put = [&](const std::string& kv) {
    const std::string name = kv.substr(0, kv.find('='));
    if (!vars.count(name)) order.push_back(name);
    vars[name] = kv;
  };
  for (char** e = environ; e && *e; ++e) put(*e);
  for (const auto& x : extra) put(x);
  storage.clear();
  for (const auto& n : order) storage.push_back(vars[n]);
  std::vector<char*> out;
  for (auto& s : storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A seam for the fault tests, nothing else: D500_TEST_HOOK_BEFORE_SUBMIT names a program run
// (no shell, no arguments) and waited for just before each submission RPC, e.g. one that stops
// slurmctld so that the submission meets a hung controller.
void run_test_hook() {
  const char* hook = std::getenv("D500_TEST_HOOK_BEFORE_SUBMIT");
  if (!hook || !*hook) return;
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>(hook), nullptr};
  if (posix_spawn(&pid, hook, nullptr, nullptr, argv, environ) == 0) waitpid(pid, nullptr, 0);
}

// The controller's MaxArraySize (an array's task ids stay below it); Slurm's default when the
// controller does not say.
int controller_max_array_size() {
  slurm_conf_t* conf = nullptr;
  int most = 1001;
  if (slurm_load_ctl_conf(static_cast<time_t>(0), &conf) == SLURM_SUCCESS && conf) {
    if (conf->max_array_sz > 0 && conf->max_array_sz < (1u << 30)) most = static_cast<int>(conf->max_array_sz);
    slurm_free_ctl_conf(conf);
  }
  return most;
}

struct Request {
  std::string name, script, script_path, work_dir, std_out, array, dependency, spec_list, comment, exclude;
  // Used where the script's #SBATCH lines do not say (the analysis job's script says nothing).
  std::string partition, account, qos, reservation;
  int nodes = 1, ranks_per_node = 1, time_limit_min = 1;
};

// The job description of a script: what its #SBATCH lines say (plan/sbatch.hpp reads them as
// sbatch does), with d500's own settings for the name, size, limit, output, array, dependency
// and tag; and the SLURM_* variables sbatch would put into the job's environment for those
// options (SLURM_CPUS_PER_TASK, SLURM_NTASKS, SLURM_HINT, ...), which srun and OpenMP read.
std::uint32_t submit_one(const Request& r) {
  const SbatchOptions o = parse_sbatch_lines(r.script, r.script_path);
  auto opt = [&](const char* name) -> std::string {
    const SbatchOption* x = o.find(name);
    return x ? x->value : "";
  };
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  const int ntasks = o.find("ntasks") ? std::stoi(opt("ntasks")) : r.nodes * r.ranks_per_node;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::error_code ec;
  std::vector<std::string> extra = {"D500_SPEC_LIST=" + r.spec_list,
                                    "D500_TIME_LIMIT_S=" + std::to_string(r.time_limit_min * 60),
                                    "SLURM_NTASKS=" + std::to_string(ntasks),
                                    "SLURM_NPROCS=" + std::to_string(ntasks),
                                    "SLURM_NTASKS_PER_NODE=" + std::to_string(r.ranks_per_node),
                                    "SLURM_JOB_NAME=" + r.name,
                                    "SLURM_SUBMIT_DIR=" + fs::current_path(ec).string(),
                                    "SLURM_SUBMIT_HOST=" + std::string(host)};
  std::string name = r.name, script = r.script, work_dir = r.work_dir, out = r.std_out, err = opt("error"),
              array = r.array, dep = r.dependency, comment = r.comment, partition = opt("partition"),
              account = opt("account"), qos = opt("qos"), features = opt("constraint"),
              reservation = opt("reservation"), nodelist = opt("nodelist"), exclude;
  for (auto [mine, asked] : {std::pair{&partition, &r.partition}, std::pair{&account, &r.account},
                             std::pair{&qos, &r.qos}, std::pair{&reservation, &r.reservation}})
    if (mine->empty()) *mine = *asked;
  std::vector<std::string> excluded;
  for (const std::string& x : {opt("exclude"), r.exclude})
    if (!x.empty()) excluded.push_back(x);
  exclude = join(excluded, ",");
  std::vector<std::string> per_node, per_job, per_task;
  if (!opt("gres").empty())
    for (const auto& g : split(opt("gres"), ',')) per_node.push_back("gres:" + g);
  if (!opt("gpus-per-node").empty()) per_node.push_back("gres:gpu:" + opt("gpus-per-node"));
  if (!opt("gpus").empty()) per_job.push_back("gres:gpu:" + opt("gpus"));
  if (!opt("gpus-per-task").empty()) per_task.push_back("gres:gpu:" + opt("gpus-per-task"));
  std::string tres_node = join(per_node, ","), tres_job = join(per_job, ","), tres_task = join(per_task, ",");
  auto cstr = [](std::string& s) { return s.empty() ? nullptr : s.data(); };
  d.name = cstr(name);
  d.script = script.data();
  d.work_dir = work_dir.data();
  d.std_out = out.data();
  d.std_err = cstr(err);
  d.array_inx = cstr(array);
  d.dependency = cstr(dep);
  d.comment = cstr(comment);
  d.partition = cstr(partition);
  d.account = cstr(account);
  d.qos = cstr(qos);
  d.features = cstr(features);
  d.reservation = cstr(reservation);
  d.req_nodes = cstr(nodelist);
  d.exc_nodes = cstr(exclude);
  d.tres_per_node = cstr(tres_node);
  d.tres_per_job = cstr(tres_job);
  d.tres_per_task = cstr(tres_task);
  d.min_nodes = d.max_nodes = static_cast<std::uint32_t>(r.nodes);
  d.num_tasks = static_cast<std::uint32_t>(ntasks);
  d.ntasks_per_node = static_cast<std::uint16_t>(r.ranks_per_node);
  if (o.find("cpus-per-task")) {
    d.cpus_per_task = static_cast<std::uint16_t>(std::stoi(opt("cpus-per-task")));
    d.pn_min_cpus = d.cpus_per_task;
    extra.push_back("SLURM_CPUS_PER_TASK=" + opt("cpus-per-task"));
  }
  if (o.find("open-mode")) {
    d.open_mode = opt("open-mode") == "append" ? OPEN_MODE_APPEND : OPEN_MODE_TRUNCATE;
    extra.push_back(std::string("SLURM_OPEN_MODE=") + (opt("open-mode") == "append" ? "a" : "t"));
  }
  if (opt("hint") == "nomultithread") {
    d.threads_per_core = 1;
    extra.insert(extra.end(), {"SLURM_HINT=nomultithread", "SLURM_THREADS_PER_CORE=1"});
  } else if (opt("hint") == "multithread") {
    d.ntasks_per_core = INFINITE16;
    extra.insert(extra.end(), {"SLURM_HINT=multithread", "SLURM_NTASKS_PER_CORE=" + std::to_string(INFINITE16)});
  }
  if (o.find("mem")) d.pn_min_memory = static_cast<std::uint64_t>(sbatch_size_mib(opt("mem")));
  if (o.find("mem-per-cpu"))
    d.pn_min_memory = static_cast<std::uint64_t>(sbatch_size_mib(opt("mem-per-cpu"))) | MEM_PER_CPU;
  if (o.find("exclusive")) d.shared = JOB_SHARED_NONE;
  for (const auto& x : o.options) {
    if (x.name == "requeue") d.requeue = 1;
    if (x.name == "no-requeue") d.requeue = 0;
  }
  if (o.find("signal")) {
    // As sbatch: without B:, the job's steps (the worker checkpoints and ends; not srun, whose
    // SIGTERM would kill them, nor the batch shell, which records the step's end:
    // templates/slurm-attempt.bash); with B:, the batch shell only.
    const SbatchSignal sig = *parse_sbatch_signal(opt("signal"));
    d.warn_signal = static_cast<std::uint16_t>(sig.number);
    d.warn_time = static_cast<std::uint16_t>(sig.seconds);
    d.warn_flags = sig.batch_only ? KILL_JOB_BATCH : 0;
    extra.push_back("D500_SIGNAL_BEFORE_S=" + std::to_string(sig.seconds));
  }
  d.time_limit = static_cast<std::uint32_t>(r.time_limit_min);
  d.user_id = getuid();
  d.group_id = getgid();
  std::vector<std::string> env_store;
  std::vector<char*> env = environment_with(extra, env_store);
  d.environment = env.data();
  d.env_size = static_cast<std::uint32_t>(env.size() - 1);
  run_test_hook();
  submit_response_msg_t* resp = nullptr;
  check(slurm_submit_batch_job(&d, &resp), "slurm_submit_batch_job(" + r.name + ")");
  std::uint32_t id = resp->job_id;
  slurm_free_submit_response_response_msg(resp);
  return id;
}

}  // namespace

namespace {

// What decides what to submit: the plan's jobs and specs, the points finished, what is queued or
// running, each job's attempts, time-outs, failures and failed nodes (a results file that cannot
// be read is warned of: its points count as not done).
SubmitFacts submit_facts(const PlanDir& plan, const std::vector<Submission>& subs, const SubmitOptions& opt,
                         std::ostream& out) {
  const CampaignFacts facts = gather(plan, subs, query_and_remember(plan, subs));
  for (const auto& u : facts.results.unreadable)
    out << "warning: a results file cannot be read, so its points count as not done: " << u << "\n";
  SubmitFacts in;
  for (const auto& job : plan.jobs) in.jobs.emplace_back(job, read_job_spec(plan.layout.job_spec(job).string()));
  for (const auto& [id, st] : facts.results.points)
    if (is_final(st.outcome)) in.finished.insert(id);
  in.in_flight = facts.in_flight;
  in.attempts = facts.attempts;
  in.timeouts = facts.timeouts;
  in.failures = facts.failures;
  in.failure_cause = facts.failure_cause;
  in.failed_nodes = facts.failed_nodes;
  in.retry_failed = opt.retry_failed;
  in.earlier_submissions = static_cast<int>(subs.size());
  in.max_array_size = controller_max_array_size();
  return in;
}

// Submits one batch (a job, or an array of jobs of one shape) after writing its new specs and its
// list, records it and says so; its Slurm id.
std::uint32_t submit_batch(const PlanDir& plan, const SubmitBatch& batch, const std::string& exclude,
                           const std::string& tag, std::uint32_t previous, std::ostream& out) {
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
  r.work_dir = plan.dir;
  r.script_path = plan.layout.job_script(batch.entries.front().job).string();
  r.script = read_file(r.script_path);
  r.comment = tag + batch.list.stem().string();
  r.exclude = exclude;
  r.spec_list = batch.list.string();
  r.std_out = (plan.layout.logs_dir() / (r.name + (batch.array ? ".slurm-%A_%a.out" : ".slurm-%j.out"))).string();
  r.array = batch.array_expr;
  if (batch.after_previous && previous) r.dependency = "afterany:" + std::to_string(previous);
  const std::uint32_t id = submit_one(r);
  Submission s;
  s.slurm_id = id;
  s.kind = batch.array ? "array" : "job";
  s.time_limit_min = r.time_limit_min;
  s.dependency = r.dependency;
  s.submitted_utc = utc_now_iso8601();
  for (const auto& e : batch.entries) s.specs.push_back(e.spec_path);
  record_submission(plan.layout, s);
  out << "submitted " << s.kind << " " << id << ": " << batch.entries.size() << " job spec(s), " << r.nodes
      << " node(s) x " << r.ranks_per_node << " rank(s), time limit " << slurm_time(r.time_limit_min)
      << (r.array.empty() ? "" : ", array " + r.array) << (r.dependency.empty() ? "" : ", after " + r.dependency)
      << "\n";
  return id;
}

// The analysis job, after every job just submitted (`ids`): `d500 report` where the campaign's
// jobs ran, unless [slurm.analysis] says otherwise, for the time the report needs.
void submit_analysis(const PlanDir& plan, const std::vector<std::uint32_t>& ids, const std::string& tag,
                     std::ostream& out) {
  const SlurmSettings& sl = plan.campaign.slurm;
  const std::string& dir = plan.dir;
  const TemplateInfo t = load_template("analysis", plan.campaign.template_where);
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  Request r;
  r.name = plan.campaign.name + ".analysis";
  r.script =
      render_template(t.text, t.path, {{"campaign", plan.campaign.name}, {"run_dir", dir}, {"d500", self.string()}});
  r.script_path = t.path;
  r.comment = tag + "analysis";
  r.work_dir = dir;
  r.std_out = (plan.layout.logs_dir() / (r.name + ".slurm-%j.out")).string();
  // Where the campaign's jobs run, unless [slurm.analysis] says otherwise; for the time the
  // report needs (estimated from the plan's size, or [slurm.analysis] time_limit).
  r.partition = sl.analysis.partition.empty() ? sl.partition : sl.analysis.partition;
  r.account = sl.analysis.account.empty() ? sl.account : sl.analysis.account;
  r.qos = sl.analysis.qos.empty() ? sl.qos : sl.analysis.qos;
  r.reservation = sl.analysis.reservation.empty() ? sl.reservation : sl.analysis.reservation;
  r.time_limit_min =
      analysis_time_limit_min(plan.campaign, static_cast<std::size_t>(plan.layout.planned_points()), plan.jobs.size());
  std::vector<std::string> deps;
  for (auto id : ids) deps.push_back(std::to_string(id));
  r.dependency = "afterany:" + join(deps, ":");
  const std::uint32_t id = submit_one(r);
  record_submission(plan.layout, Submission{id, "analysis", r.time_limit_min, r.dependency, {}, utc_now_iso8601()});
  out << "submitted analysis job " << id << " after " << r.dependency << "\n";
}

}  // namespace

int slurm_submit(const std::string& dir_arg, const SubmitOptions& opt, std::ostream& out) {
  PlanDir plan = load_plan_dir(dir_arg);
  if (plan.launcher != "slurm")
    throw Error(dir_arg + ": this plan uses the '" + plan.launcher +
                "' launcher; plan with a Slurm template (template = \"slurm\" or \"daint\") to submit it");
  const SlurmSettings& sl = plan.campaign.slurm;
  // One submitter at a time: two concurrent submits would both see nothing submitted yet.
  RunLock lock = RunLock::acquire(plan.layout, "d500 submit");
  std::vector<Submission> subs = read_submissions(plan.layout);
  Session session;
  // A job Slurm holds with this run's tag is recorded before anything else is decided.
  try {
    adopt_unrecorded(plan, subs, out);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) +
                "; nothing was submitted (d500 asks Slurm for this run's jobs before it submits)");
  }
  if (!subs.empty() && !opt.resume)
    throw Error(dir_arg + ": already submitted (" + std::to_string(subs.size()) +
                " submissions recorded in slurm/submissions.tsv); `d500 submit --resume` submits what is neither "
                "complete nor queued or running");
  const SubmitFacts in = submit_facts(plan, subs, opt, out);
  const SubmitPlan todo = plan_submissions(in, plan.campaign, plan.layout);
  for (const auto& n : todo.notes) out << n << "\n";
  if (todo.batches.empty()) {
    out << "nothing to submit: " << todo.finished << " points finished, " << todo.in_flight << " queued or running"
        << (todo.gave_up ? ", " + std::to_string(todo.gave_up) + " given up" : "") << "\n";
    return 0;
  }

  const std::string tag = run_tag(plan);
  int submitted = 0;
  std::vector<std::uint32_t> ids;
  std::uint32_t previous = 0;
  try {
    for (const auto& batch : todo.batches) {
      const std::uint32_t id = submit_batch(plan, batch, todo.exclude, tag, previous, out);
      ++submitted;
      ids.push_back(id);
      previous = id;
    }
    if (sl.analysis_job) {
      submit_analysis(plan, ids, tag, out);
      ++submitted;
    }
  } catch (const Error& e) {
    const bool timed_out = std::string(e.what()).find("timed out") != std::string::npos;
    throw Error(std::string(e.what()) + "; " + std::to_string(submitted) + " of " +
                std::to_string(todo.batches.size() + (sl.analysis_job ? 1 : 0)) +
                " submission(s) were accepted and recorded in slurm/submissions.tsv; the rest was not submitted" +
                (timed_out
                     ? " as far as d500 knows (the controller did not answer in time: it may have accepted the "
                       "last one, which `d500 submit --resume` finds by this run's tag in its comment and records "
                       "instead of submitting it again)"
                     : "") +
                ": `d500 submit --resume` submits it once Slurm answers again");
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
  const auto states = query_and_remember(plan, subs);
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
  std::string controller_error;  // the results files and the jobs' own records still tell a lot
  const LiveStates states = subs.empty() ? LiveStates{} : states_or_why(plan, subs, controller_error);
  const CampaignFacts facts = gather(plan, subs, states);
  std::map<std::string, int> by_state;
  int in_flight_tasks = 0;  // queued, running, or still finishing (COMPLETING): not settled yet
  out << "jobs (" << subs.size() << " submission(s)):\n";
  for (const auto& s : subs) {
    const std::size_t tasks = std::max<std::size_t>(1, s.specs.size());
    for (std::size_t i = 0; i < tasks; ++i) {
      const TaskKey key{s.slurm_id, static_cast<int>(i)};
      const TaskEnd& e = facts.ends.at(key);
      auto it = states.find(key);
      const std::string state = e.state.empty() ? (controller_error.empty() ? "PURGED" : "UNKNOWN") : e.state;
      const std::string reason = it != states.end() ? it->second.s.reason : "";
      by_state[state]++;
      out << "  " << task_name(s, i) << "  " << (s.specs.empty() ? "analysis" : fs::path(s.specs[i]).stem().string())
          << "  " << state << (reason.empty() ? "" : " (" + reason + ")") << "  limit " << slurm_time(s.time_limit_min);
      if (!e.cause.empty()) out << "  " << e.cause;
      if (e.attempts > 1) out << "  [" << e.attempts << " attempts]";
      if (e.source == "observed") out << "  [purged by Slurm: as d500 saw it end]";
      if (e.source == "job record") out << "  [not known to Slurm: from the job's own record]";
      if (e.state.empty() && controller_error.empty())
        out << "  [Slurm purged it and nothing recorded its end: it never started, or ran without d500's job record]";
      out << "\n";
      // The last words of an attempt that did not end well.
      const bool in_flight = it != states.end() && it->second.in_flight;
      in_flight_tasks += in_flight;
      if (!e.cause.empty() && e.state != "COMPLETED" && !in_flight)
        for (const auto& line : e.tail) out << "      | " << line << "\n";
    }
  }
  if (!controller_error.empty()) out << "  Slurm states unknown: " << controller_error << "\n";

  for (const auto& u : facts.results.unreadable) out << "  unreadable results file: " << u << "\n";
  PointCounts counts;
  std::vector<std::string> not_done;
  for (const auto& p : read_points_csv(plan.layout)) {
    PointState st = facts.results.of(p.id);
    // A point its last task left unfinished carries what Slurm said of that task.
    if (!is_final(st.outcome) && facts.ended_by.count(p.id)) st.outcome = facts.ended_by.at(p.id);
    counts.by_outcome[st.outcome]++;
    ++counts.total;
    if (st.outcome != Outcome::Complete)
      not_done.push_back(
          "  " + p.id + "  " + outcome_name(st.outcome) + "  " + p.canonical +
          (!is_final(st.outcome) && facts.ended_why.count(p.id) ? "  (" + facts.ended_why.at(p.id) + ")" : ""));
  }
  // A point that failed validation or whose backend failed is final (a rerun of the same code
  // changes nothing) but not done: it is counted apart.
  const int complete = counts.count(Outcome::Complete);
  const int failed = counts.count(Outcome::FailedValidation) + counts.count(Outcome::BackendFailed);
  const int missing = counts.count(Outcome::Missing), incomplete = counts.total - complete - failed - missing;
  out << "points: " << complete << " complete, " << failed << " failed (validation or backend), " << incomplete
      << " incomplete, " << missing << " missing\n";
  out << "outcomes: " << counts.text() << "\n";
  for (const auto& n : not_done) out << n << "\n";
  std::vector<std::string> parts;
  for (const auto& [k, v] : by_state) parts.push_back(std::to_string(v) + " " + k);
  out << "summary: jobs " << (parts.empty() ? "none submitted" : join(parts, ", ")) << "; in flight "
      << (controller_error.empty() ? std::to_string(in_flight_tasks) : "unknown") << "; points " << complete << "/"
      << counts.total << " complete" << (failed ? ", " + std::to_string(failed) + " failed" : "") << "\n";
}

}  // namespace d500
