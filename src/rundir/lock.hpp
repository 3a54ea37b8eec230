#pragma once
// One runner per run directory. `d500 run` and `d500 submit` hold an advisory lock on byte 0
// of <run>/run.lock (an open-file-description lock, fcntl F_OFD_SETLK: released by the kernel
// when the last descriptor of it closes, also on SIGKILL; honoured over NFS) for as long as they
// work there. The lock file says who holds it: host, pid, command, since when, and the job
// running now with its process group. The descriptor is inherited by the job the runner
// starts, so a job that outlives its runner (kill -9) still holds the lock: a second runner is
// refused with the names of what still runs, instead of starting the same job beside it.
#include <sys/types.h>

#include <optional>
#include <string>

#include "rundir/layout.hpp"

namespace d500 {

class RunLock {
 public:
  // Takes the lock for `command` (e.g. "d500 run") or throws d500::Error naming the holder:
  // its command, pid, host and start, or -- when the holder is gone but processes it started
  // still hold the lock or still run -- the job and its process group, and how to stop them.
  static RunLock acquire(const RunLayout& dir, const std::string& command);

  RunLock(RunLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)), text_(std::move(o.text_)) { o.fd_ = -1; }
  RunLock& operator=(RunLock&&) = delete;
  ~RunLock();

  // Records the job now running and its process group (0: none), for a later runner to find.
  void set_job(const std::string& job_id, pid_t pgid);
  const std::string& path() const { return path_; }

 private:
  RunLock(int fd, std::string path, std::string text) : fd_(fd), path_(std::move(path)), text_(std::move(text)) {}
  int fd_ = -1;
  std::string path_;
  std::string text_;  // the holder lines (pid, host, command, since)
};

// For d500-worker: when started by a runner (D500_RUN_LOCK names its lock file), hold a shared
// lock on the byte at offset getpid() of that file for the life of the process. mpirun does not
// pass the runner's descriptor on to the ranks, so without this a rank that outlives both its
// runner and mpirun would hold nothing; with it, the next runner finds the rank's pid (F_OFD_GETLK)
// and refuses to start beside it. Best effort: a file system without locks changes nothing.
void hold_rank_lock();

// Whether a process of group `pgid` still runs on this host (zombies, which wait to be reaped,
// do not count).
bool process_group_runs(long pgid);

// What a lock file says, for messages and tests.
struct LockHolder {
  long pid = 0;
  std::string host, command, started_utc, job;
  long job_pgid = 0;
  long long job_pgid_start = 0;  // the group leader's start time (/proc/<pid>/stat, clock ticks)
};
LockHolder read_lock_file(const std::string& path);
// Who holds the run directory's lock now (F_OFD_GETLK on byte 0, nothing taken), or nullopt
// when no runner holds it.
std::optional<LockHolder> lock_holder(const RunLayout& dir);

}  // namespace d500
