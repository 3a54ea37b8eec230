#include "rundir/lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

namespace {

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// The fields of /proc/<pid>/stat from the third (state) on; empty when the process is gone.
std::vector<std::string> stat_fields(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');  // the command name may hold spaces and parentheses
  std::vector<std::string> fields;
  if (close == std::string::npos || close + 2 > all.size()) return fields;
  std::istringstream rest(all.substr(close + 2));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// Field 22: when the process started, in clock ticks since boot; 0 when gone.
long long start_time(long pid) {
  const auto f = stat_fields("/proc/" + std::to_string(pid) + "/stat");
  return f.size() > 19 ? std::atoll(f[19].c_str()) : 0;
}

bool alive(long pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// Whether the job's process group recorded in `h` still runs here: the group exists and, when
// its leader is still there, the leader is the same process (not a reused pid).
bool job_still_runs(const LockHolder& h) {
  if (h.job_pgid <= 0 || h.host != this_host() || !process_group_runs(h.job_pgid)) return false;
  const long long st = start_time(h.job_pgid);
  return st == 0 || h.job_pgid_start == 0 || st == h.job_pgid_start;
}

std::string holder_text(const LockHolder& h) {
  return "`" + h.command + "` (pid " + std::to_string(h.pid) + " on host " + h.host + ", since " + h.started_utc + ")";
}

std::string job_text(const LockHolder& h) {
  return "job " + (h.job.empty() ? std::string("?") : h.job) + ", process group " + std::to_string(h.job_pgid) +
         "; stop them with `kill -TERM -- -" + std::to_string(h.job_pgid) + "` or wait for them to end";
}

// The pids of the ranks holding their byte of the lock file (at most 64).
std::vector<long> ranks_holding(int fd) {
  std::vector<long> pids;
  off_t from = 1;
  while (pids.size() < 64) {
    struct flock q {};
    q.l_type = F_WRLCK;
    q.l_whence = SEEK_SET;
    q.l_start = from;
    q.l_len = 0;  // to the end of every possible offset
    if (fcntl(fd, F_OFD_GETLK, &q) != 0 || q.l_type == F_UNLCK) break;
    pids.push_back(static_cast<long>(q.l_start));
    from = q.l_start + (q.l_len > 0 ? q.l_len : 1);
  }
  return pids;
}

}  // namespace

bool process_group_runs(long pgid) {
  if (pgid <= 0) return false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto f = stat_fields(e.path() / "stat");  // field 3: state; 5: process group
    if (f.size() > 2 && std::atol(f[2].c_str()) == pgid && f[0] != "Z" && f[0] != "X") return true;
  }
  return false;
}

void hold_rank_lock() {
  const char* path = std::getenv("D500_RUN_LOCK");
  if (!path || !*path) return;
  const int fd = ::open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct flock fl {};
  fl.l_type = F_RDLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = ::getpid();
  fl.l_len = 1;
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) ::close(fd);
  // Otherwise kept open, deliberately, until the process ends.
}

LockHolder read_lock_file(const std::string& path) {
  LockHolder h;
  try {
    auto t = toml::parse_file(path);
    h.pid = t["pid"].value_or(0L);
    h.host = t["host"].value_or(std::string("?"));
    h.command = t["command"].value_or(std::string("?"));
    h.started_utc = t["started_utc"].value_or(std::string("?"));
    h.job = t["job"].value_or(std::string());
    h.job_pgid = t["job_pgid"].value_or(0L);
    h.job_pgid_start = t["job_pgid_start"].value_or(0LL);
  } catch (const toml::parse_error&) {
    // Empty (being written, or never written): nothing known of a holder.
  }
  return h;
}

std::optional<LockHolder> lock_holder(const RunLayout& dir) {
  const std::string path = (dir.root() / "run.lock").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;  // never run
  struct flock fl {};
  fl.l_type = F_RDLCK;  // a read lock would conflict with the runner's write lock
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  const bool held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  if (!held) return std::nullopt;
  return read_lock_file(path);
}

RunLock RunLock::acquire(const RunLayout& dir, const std::string& command) {
  const std::string path = (dir.root() / "run.lock").string();
  // Not O_CLOEXEC: the job a runner starts inherits the descriptor and so holds the lock too.
  // O_NOFOLLOW: the lock (and the holder text written into it) never goes through a link.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == ELOOP)
    throw Error(path + ": is a symbolic link; d500 locks and writes no file through a link (remove it)");
  if (fd < 0) throw Error(path + ": cannot open the run directory's lock: " + std::strerror(errno));
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;  // byte 0: the runner's; bytes at the ranks' pids: theirs (hold_rank_lock)
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    ::close(fd);
    if (err != EAGAIN && err != EACCES) throw Error(path + ": cannot lock the run directory: " + std::strerror(err));
    const LockHolder h = read_lock_file(path);
    const std::string d = dir.root().string();
    if (h.host == this_host() && h.pid > 0 && !alive(h.pid))
      throw Error(d + ": still locked although " + holder_text(h) +
                  " is gone: processes it started still run and hold the lock (" + job_text(h) + ")");
    throw Error(d + ": in use by " + holder_text(h) + "; one d500 run or submit at a time works in a run directory (" +
                path + ")");
  }
  // Locked. A job whose runner died while the job's processes let go of the lock (they closed
  // the inherited descriptor) may still run: its ranks' locks, and the group it recorded, tell.
  const LockHolder before = read_lock_file(path);
  const std::vector<long> ranks = ranks_holding(fd);
  if (!ranks.empty()) {
    ::close(fd);
    std::vector<std::string> pids;
    for (long p : ranks) pids.push_back(std::to_string(p));
    throw Error(dir.root().string() + ": ranks of an earlier run still run here (pid " + join(pids, ", ") +
                (before.pid ? ", started by " + holder_text(before) : std::string()) +
                "); stop them with `kill -TERM " + join(pids, " ") + "` or wait for them to end");
  }
  if (job_still_runs(before)) {
    ::close(fd);
    throw Error(dir.root().string() + ": the " + holder_text(before) +
                " that ran here is gone, but its job's processes still run (" + job_text(before) + ")");
  }
  toml::table holder{{"pid", static_cast<std::int64_t>(::getpid())},
                     {"host", this_host()},
                     {"command", command},
                     {"started_utc", utc_now_iso8601()}};
  std::ostringstream t;
  t << holder;
  RunLock lock(fd, path, t.str());
  lock.set_job("", 0);
  return lock;
}

void RunLock::set_job(const std::string& job_id, pid_t pgid) {
  toml::table job{{"job", job_id},
                  {"job_pgid", static_cast<std::int64_t>(pgid)},
                  {"job_pgid_start", static_cast<std::int64_t>(pgid > 0 ? start_time(pgid) : 0)}};
  std::ostringstream t;
  t << "# The lock of this run directory (fcntl OFD lock), held while d500 works here.\n"
    << text_ << "\n"
    << job << "\n";
  const std::string s = t.str();
  // In place (the lock belongs to this open file, not to a name): write, then cut what is left
  // of a longer text, so that a reader never finds the file empty.
  if (pwrite(fd_, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size()) ||
      ftruncate(fd_, static_cast<off_t>(s.size())) != 0)
    throw Error(path_ + ": cannot write the lock file: " + std::strerror(errno));
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  try {
    set_job("", 0);  // nothing runs any more
  } catch (const Error&) {}
  ::close(fd_);
}

}  // namespace d500
