#include "launch/local.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/crash_note.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "common/value.hpp"
#include "metrics/metrics.hpp"
#include "metrics/progress.hpp"
#include "plan/jobspec.hpp"
#include "rundir/layout.hpp"
#include "rundir/lock.hpp"
#include "rundir/state.hpp"

namespace fs = std::filesystem;

namespace d500 {

std::string move_aside(const std::string& path) {
  if (!fs::exists(path)) return "";
  for (int k = 1;; ++k) {
    std::string dest = path + ".prev-" + std::to_string(k);
    if (!fs::exists(dest)) {
      fs::rename(path, dest);
      return dest;
    }
  }
}

namespace {

// Stopping: SIGINT, SIGTERM or SIGHUP to `d500 run` is passed on to the running job's whole
// process group (mpirun and every rank), with SIGKILL if it has not ended 10 s later; then
// `d500 run` records the job as stopped and runs no further job.
volatile sig_atomic_t g_stop_signal = 0;
volatile pid_t g_job_pgid = 0;
constexpr unsigned kStopGraceSeconds = 10;
constexpr double kDefaultProgressTimeoutS = 900;

void on_stop_signal(int sig) {
  const bool again = g_stop_signal != 0;
  g_stop_signal = sig;
  if (g_job_pgid > 0) {
    kill(-g_job_pgid, again ? SIGKILL : SIGTERM);
    if (!again) alarm(kStopGraceSeconds);
  }
}

void on_grace_over(int) {
  if (g_job_pgid > 0) kill(-g_job_pgid, SIGKILL);
}

// Installs the handlers for the life of run_local and restores the old ones after.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;  // the output loop goes on reading until the job has ended
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
    sa.sa_handler = on_grace_over;
    sigaction(SIGALRM, &sa, &old_[3]);
    g_stop_signal = 0;
  }
  ~StopSignals() {
    alarm(0);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
    sigaction(SIGALRM, &old_[3], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[4]{};
};

std::string clock_text(double s) {
  char buf[32];
  int t = static_cast<int>(s);
  std::snprintf(buf, sizeof buf, "%02d:%02d", t / 60, t % 60);
  return buf;
}

bool completed_before(const fs::path& status_file) {
  if (!fs::exists(status_file)) return false;
  try {
    auto t = toml::parse_file(status_file.string());
    return t["exit_code"].value_or(-1) == 0 && !t.contains("stopped_by");
  } catch (const toml::parse_error&) {
    return false;
  }
}

// The whole campaign's progress: how many of its points have ended (here or in an earlier run),
// each point named by what varies among its workload's points, and the time left: the plan's
// estimates of the points not yet ended where it has them (packing by time), else the mean time
// of the points ended in this run.
class CampaignProgress {
 public:
  CampaignProgress(const RunLayout& layout, const RunState& state) {
    std::map<std::string, std::vector<const Params*>> by_workload;
    std::vector<Params> all;
    const auto planned = read_points_csv(layout);
    all.reserve(planned.size());
    for (const auto& p : planned) all.push_back(parse_canonical_point(p.canonical));
    for (std::size_t i = 0; i < planned.size(); ++i) {
      by_workload[str_param_or(all[i], "workload", "?")].push_back(&all[i]);
      if (is_final(state.of(planned[i].id).outcome))
        ++ended_;
      else if (planned[i].estimate_s >= 0)
        estimates_[planned[i].canonical] = planned[i].estimate_s, left_estimate_ += planned[i].estimate_s;
      else
        all_estimated_ = false;
    }
    for (const auto& [w, points] : by_workload) varying_[w] = param_spread(points).varying;
    total_ = static_cast<int>(planned.size());
  }
  std::string name(const std::string& canonical) const {
    const Params p = parse_canonical_point(canonical);
    auto it = varying_.find(str_param_or(p, "workload", "?"));
    return it == varying_.end() ? canonical : short_point_text(p, it->second);
  }
  void started(const std::string& canonical) { running_ = canonical; }
  // After a point ended: "campaign 5/24 ended, about 03:10 left".
  std::string ended(double seconds) {
    ++ended_, ++ended_here_, seconds_here_ += seconds;
    if (auto it = estimates_.find(running_); it != estimates_.end()) left_estimate_ -= it->second, estimates_.erase(it);
    const int left = std::max(0, total_ - ended_);
    std::string eta;
    if (left > 0 && all_estimated_ && !estimates_.empty())
      eta = ", about " + clock_text(std::max(0.0, left_estimate_)) + " left (the plan's estimates)";
    else if (left > 0)
      eta = ", about " + clock_text(seconds_here_ / ended_here_ * left) + " left (at this run's mean per point)";
    return "campaign " + std::to_string(std::min(ended_, total_)) + "/" + std::to_string(total_) + " ended" + eta;
  }
  int total() const { return total_; }

 private:
  std::map<std::string, std::vector<std::string>> varying_;
  std::map<std::string, double> estimates_;  // canonical -> seconds, for the points not yet ended
  double left_estimate_ = 0, seconds_here_ = 0;
  bool all_estimated_ = true;
  int total_ = 0, ended_ = 0, ended_here_ = 0;
  std::string running_;
};

// The job's signs of progress: its output (the worker prints a line per point, resumed step and
// checkpoint) and its results file, which the worker flushes durably at least every 2 s while it
// times repetitions or steps. A job showing neither for the progress timeout has a rank that
// stopped (SIGSTOP, a dead node) or hangs in a collective: it is ended, not waited for forever.
double progress_timeout_s() {
  const char* e = std::getenv("D500_PROGRESS_TIMEOUT_S");
  const double v = e ? std::atof(e) : 0;
  return v > 0 ? v : kDefaultProgressTimeoutS;
}

// A stamp of a file that changes when it is written: its modification time and size; 0 when absent.
std::int64_t stamp_of(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec + st.st_size : 0;
}

// mpirun keeps a few descriptors per rank (its output pipes, PMIx's sockets) beside its own;
// with too few it crashed in PMIx_Finalize and hung (ulimit -n 32, two ranks). The soft limit is
// raised to the hard one where that is lower; a hard limit that is still too low is refused
// before the job starts.
void require_open_files(int ranks) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t need = 40 + 4 * static_cast<rlim_t>(std::max(ranks, 1));
  if (r.rlim_cur < need && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = std::min<rlim_t>(r.rlim_max, std::max<rlim_t>(need, 1024));
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  if (r.rlim_cur < need)
    throw Error(
        "the open-file limit (ulimit -n) is " + std::to_string(r.rlim_cur) + "; mpirun needs about " +
        std::to_string(need) + " for a job of " + std::to_string(ranks) +
        " rank(s) on this host (with fewer it crashes and hangs): raise it, e.g. `ulimit -n 1024`; nothing was started");
}

struct JobEnded {
  int code = 0;
  double stalled_s = 0;  // > 0: ended by d500 run after this long without progress
};

// Copies the job's output (read from `from`) to its log and hands each line to `show` until the
// job closes it; meanwhile ends the job's group `pid` when it shows no progress for the progress
// timeout (SIGTERM, SIGKILL kStopGraceSeconds later). Returns how long it had been without
// progress when ended, 0 when it was not.
double pump_output(int from, int logfd, pid_t pid, const fs::path& results, const std::string& prefix,
                   std::ostream& out, const std::function<void(const std::string&)>& show) {
  const double timeout_s = progress_timeout_s();
  std::int64_t last_progress = now_ns(), last_stamp = stamp_of(results), killed_at = 0;
  double stalled_s = 0;
  std::string pending;
  char buf[1 << 14];
  for (bool open = true; open;) {
    pollfd pfd{from, POLLIN, 0};
    const int ready = poll(&pfd, 1, 1000);
    if (ready < 0 && errno != EINTR) break;
    const std::int64_t now = now_ns();
    if (ready <= 0) {  // quiet for a second: has the results file moved on?
      if (const std::int64_t stamp = stamp_of(results); stamp != last_stamp) last_stamp = stamp, last_progress = now;
      if (!killed_at && static_cast<double>(now - last_progress) * 1e-9 > timeout_s) {
        stalled_s = static_cast<double>(now - last_progress) * 1e-9;
        out << prefix << " no progress for " << fmt_sig(stalled_s, 3) << " s (no output, no write to "
            << results.filename().string()
            << "): a rank has stopped or hangs; ending the job (D500_PROGRESS_TIMEOUT_S = " << fmt_sig(timeout_s, 3)
            << ")\n";
        out.flush();
        kill(-pid, SIGTERM);
        killed_at = now;
      } else if (killed_at && now - killed_at > static_cast<std::int64_t>(kStopGraceSeconds) * 1'000'000'000LL) {
        kill(-pid, SIGKILL);  // a stopped rank takes no SIGTERM
        killed_at = now;
      }
      continue;
    }
    const ssize_t got = ::read(from, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      open = false;
      if (pending.empty()) break;
      pending += '\n';  // a last line without its newline
    } else {
      pending.append(buf, static_cast<std::size_t>(got));
      // A failed write to the log (a full disk) is let go: the job's progress still comes here.
      write_all(logfd, std::string_view(buf, static_cast<std::size_t>(got)));
      last_progress = now;
    }
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      show(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  return stalled_s;
}

// Runs `bash script` in `dir`, copying every output line into `log` and turning the worker's
// progress lines into progress for a person.
// The job runs in its own process group (so that stopping it reaches mpirun and every rank,
// and a terminal's Ctrl-C reaches d500 run first), and is sent SIGTERM by the kernel should
// d500 run die without a chance to stop it (kill -9).
JobEnded run_script(const fs::path& dir, const std::string& script, const fs::path& log, const fs::path& results,
                    const std::string& prefix, std::int64_t t0, std::ostream& out, std::map<Outcome, int>& points,
                    RunLock& lock, const std::string& job_id, const std::string& resume_spec,
                    CampaignProgress& campaign) {
  // Opened before anything starts, refusing a link planted at its name.
  const int logfd = open_for_append(log.string());
  int fds[2];
  if (pipe(fds) != 0) {
    ::close(logfd);
    throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    ::close(logfd);
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot start the job (fork: ") + std::strerror(e) +
                "); is a memory or process limit (ulimit -v, ulimit -u) too tight for d500 run?");
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(143);  // d500 run died before the line above
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    ::close(logfd);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (chdir(dir.c_str()) != 0) _exit(127);
    setenv("D500_RUN_LOCK", lock.path().c_str(), 1);  // each rank holds its byte of it (hold_rank_lock)
    // The points still to run, when resuming (the template reads D500_SPEC); never inherited.
    if (resume_spec.empty())
      unsetenv("D500_SPEC");
    else
      setenv("D500_SPEC", resume_spec.c_str(), 1);
    if (geteuid() == 0) {
      // Open MPI refuses root unless told; containers and CI run as root.
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    execlp("bash", "bash", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that the group exists before anyone signals it
  g_job_pgid = pid;
  if (g_stop_signal) kill(-pid, SIGTERM);  // told to stop while starting it
  lock.set_job(job_id, pid);
  close(fds[1]);
  // A line of the job's output: a worker's progress line becomes progress for a person.
  auto show = [&](const std::string& s) {
    double el = static_cast<double>(now_ns() - t0) * 1e-9;
    if (auto p = parse_progress_line(s)) {
      if (p->kind == ProgressLine::Point) {
        campaign.started(p->canonical);
        out << prefix << " " << clock_text(el) << "  point " << p->index << "/" << p->count << " "
            << campaign.name(p->canonical) << "\n";
      } else if (p->kind == ProgressLine::Done) {
        ++points[p->outcome];
        out << prefix << " " << clock_text(el) << "    " << outcome_name(p->outcome) << " " << fmt_sig(p->seconds, 3)
            << "s; " << campaign.ended(p->seconds) << "\n";
      } else if (p->kind == ProgressLine::Skipped) {
        ++points[p->outcome];
        out << prefix << " " << clock_text(el) << "  point " << p->index << "/" << p->count << " already "
            << outcome_name(p->outcome) << " in " << fs::path(p->canonical).filename().string() << ": not run again\n";
      } else if (p->kind == ProgressLine::Resumed) {
        out << prefix << " " << clock_text(el) << "    resumed from a checkpoint after step " << p->rows << "\n";
      }
    } else if (is_crash_note(s) || ((s.find("error") != std::string::npos || s.find("Error") != std::string::npos) &&
                                    s.find("*** End of error message ***") == std::string::npos))  // MPI's
      out << prefix << " " << s << "\n";
    out.flush();
  };
  const double stalled_s = pump_output(fds[0], logfd, pid, results, prefix, out, show);
  ::close(fds[0]);
  ::close(logfd);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  // The script has ended; anything left in its group (a rank mpirun lost) is ended with it.
  kill(-pid, SIGKILL);
  g_job_pgid = 0;
  alarm(0);
  lock.set_job("", 0);
  if (WIFEXITED(st)) return {WEXITSTATUS(st), stalled_s};
  if (WIFSIGNALED(st)) return {128 + WTERMSIG(st), stalled_s};
  return {255, stalled_s};
}

}  // namespace

std::vector<JobOutcome> run_local(const std::string& dir_arg, const LocalRunOptions& opt, std::ostream& out) {
  const RunLayout layout(dir_arg);
  const fs::path& dir = layout.root();
  layout.require_plan(dir_arg);
  const std::string launcher = layout.launcher();
  if (launcher != "local")
    throw Error(layout.plan_file().string() + ": this plan uses the '" + launcher +
                "' launcher; `d500 run` runs local plans only (plan with template = \"local\")");
  const std::vector<std::string> jobs = layout.job_ids();
  RunLock lock = RunLock::acquire(layout, "d500 run");
  StopSignals stop_signals;
  // Resume by point: what the results files already hold with a final outcome is not run again
  // (their files are kept; the report takes the best record of each point).
  const RunState state = opt.rerun ? RunState{} : scan_results(layout);
  // The worker skips points an earlier attempt of its job finished (worker.cpp); --rerun runs them.
  if (opt.rerun) setenv("D500_RERUN", "1", 1);

  std::vector<JobOutcome> outcomes;
  CampaignProgress campaign(layout, state);
  out << "d500 run: " << jobs.size() << " job(s), " << campaign.total() << " point(s) in the campaign\n";
  const std::int64_t t0 = now_ns();
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    JobOutcome o;
    o.job_id = jobs[j];
    o.log = layout.job_log(jobs[j]).string();
    const fs::path status = layout.job_status(jobs[j]);
    std::string prefix = "[" + std::to_string(j + 1) + "/" + std::to_string(jobs.size()) + " " + jobs[j] + "]";
    if (!opt.rerun && completed_before(status)) {
      o.skipped = true;
      out << prefix << " already complete (d500 run --rerun runs it again)\n";
      outcomes.push_back(o);
      continue;
    }
    std::string resume_spec;
    JobSpec spec = read_job_spec(layout.job_spec(jobs[j]).string());
    if (!opt.rerun) {
      std::vector<PointSpec> left;
      for (const auto& p : spec.points)
        if (!is_final(state.of(p.id).outcome)) left.push_back(p);
      const std::size_t n = spec.points.size();
      if (left.empty()) {
        o.skipped = true;
        out << prefix << " all " << n << " points already have final results (d500 run --rerun runs the job again)\n";
        outcomes.push_back(o);
        continue;
      }
      if (left.size() < n) {
        if (read_file(layout.job_script(jobs[j]).string()).find("D500_SPEC") == std::string::npos) {
          out << prefix
              << " note: its script (from a template that does not read D500_SPEC) runs the job's own spec of " << n
              << " points; the worker skips the " << (n - left.size())
              << " that this job's earlier results files hold with final results\n";
        } else {
          int k = 1;
          while (fs::exists(layout.job_spec(jobs[j] + ".r" + std::to_string(k)))) ++k;
          spec.id = jobs[j] + ".r" + std::to_string(k);
          spec.points = left;
          resume_spec = layout.job_spec(spec.id).string();
          write_file_atomic(resume_spec, job_spec_toml(spec));
          out << prefix << " resuming: " << (n - left.size()) << " of " << n
              << " points already have final results; running the other " << left.size() << " (spec " << spec.id
              << ")\n";
        }
      }
    }
    require_open_files(spec.nodes * spec.ranks_per_node);
    const fs::path result = layout.results_file(jobs[j]);
    std::string aside = move_aside(result.string());
    if (!aside.empty()) out << prefix << " earlier results kept as " << fs::path(aside).filename().string() << "\n";
    out << prefix << " starting\n";
    out.flush();
    const std::int64_t tj = now_ns();
    const JobEnded ended = run_script(dir, layout.job_script(jobs[j]).string(), o.log, result, prefix, t0, out,
                                      o.points, lock, jobs[j], resume_spec, campaign);
    o.exit_code = ended.code;
    o.seconds = static_cast<double>(now_ns() - tj) * 1e-9;
    o.stopped_by = g_stop_signal;
    toml::table rec{{"exit_code", o.exit_code},
                    {"seconds", o.seconds},
                    {"ended_utc", utc_now_iso8601()},
                    {"log", fs::relative(layout.job_log(jobs[j]), dir).string()}};
    const std::string sig = signal_name(o.stopped_by);
    if (o.stopped_by) rec.insert("stopped_by", sig);
    if (ended.stalled_s > 0)
      rec.insert("ended_by",
                 "d500 run after " + fmt_sig(ended.stalled_s, 3) +
                     " s without progress (no output, no write to its results file): a rank had stopped or hung");
    std::ostringstream rec_text;
    rec_text << "# Written by d500 run.\n" << rec << "\n";
    write_file_atomic(status.string(), rec_text.str());
    if (o.stopped_by)
      out << prefix << " STOPPED (d500 run got " << sig << ") after " << fmt_sig(o.seconds, 3)
          << " s: its processes were stopped; later jobs were not started\n";
    else
      out << prefix << " " << (o.exit_code == 0 ? "finished" : "FAILED with exit code " + std::to_string(o.exit_code))
          << " after " << fmt_sig(o.seconds, 3) << " s" << (o.exit_code ? "; log: " + o.log : "") << "\n";
    out.flush();
    outcomes.push_back(o);
    if (o.stopped_by) break;
  }
  return outcomes;
}

void local_status(const std::string& dir_arg, std::ostream& out) {
  const RunLayout layout(dir_arg);
  layout.require_plan(dir_arg);
  const RunState state = scan_results(layout);
  CampaignProgress campaign(layout, state);
  const std::optional<LockHolder> holder = lock_holder(layout);
  if (!holder) {
    out << "not running: no d500 run holds " << layout.root().string() << "\n";
  } else {
    double elapsed = -1;
    std::tm tm{};
    if (strptime(holder->started_utc.c_str(), "%Y-%m-%dT%H:%M:%S", &tm))
      elapsed = std::difftime(std::time(nullptr), timegm(&tm));
    out << "running: `" << holder->command << "` (pid " << holder->pid << " on host " << holder->host << ", since "
        << holder->started_utc << (elapsed >= 0 ? ", " + clock_text(elapsed) + " ago" : std::string()) << ")\n";
    if (!holder->job.empty()) {
      // The job's log: its last point started, and whether it ended.
      std::ifstream log(layout.job_log(holder->job));
      std::optional<ProgressLine> last_start, last_done;
      for (std::string line; std::getline(log, line);)
        if (auto p = parse_progress_line(line)) {
          if (p->kind == ProgressLine::Point) last_start = p;
          if (p->kind == ProgressLine::Done) last_done = p;
        }
      out << "  job " << holder->job;
      if (last_start && (!last_done || last_done->index < last_start->index))
        out << ": point " << last_start->index << "/" << last_start->count << " "
            << campaign.name(last_start->canonical);
      else if (last_done)
        out << ": " << last_done->index << "/" << last_done->count << " points ended";
      out << "\n";
    }
  }
  out << "jobs:\n";
  for (const auto& job : layout.job_ids()) {
    const fs::path status = layout.job_status(job);
    std::string what = holder && holder->job == job ? "running" : "not run";
    if (!(holder && holder->job == job) && fs::exists(status)) {
      try {
        const auto t = toml::parse_file(status.string());
        const auto code = t["exit_code"].value_or(std::int64_t{-1});
        what = t.contains("stopped_by") ? "stopped by " + t["stopped_by"].value_or(std::string("?"))
               : code == 0              ? "finished"
                                        : "failed (exit code " + std::to_string(code) + ")";
        what += " after " + fmt_sig(t["seconds"].value_or(0.0), 3) + " s, " + t["ended_utc"].value_or(std::string("?"));
      } catch (const toml::parse_error& e) {
        what = "status unreadable: " + std::string(e.what());
      }
    }
    out << "  " << job << "  " << what << "\n";
  }
  std::map<Outcome, int> by;
  for (const auto& p : read_points_csv(layout)) ++by[state.of(p.id).outcome];
  std::vector<std::string> parts;
  for (const auto& [k, n] : by) parts.push_back(std::to_string(n) + " " + outcome_name(k));
  out << "points: " << (parts.empty() ? std::string("none planned") : join(parts, ", ")) << " (of " << campaign.total()
      << ")\n";
}

}  // namespace d500
