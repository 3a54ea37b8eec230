#include "common/contain.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.hpp"
#include "common/text.hpp"

namespace d500 {

std::int64_t mapped_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  const int got = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  return got == 1 ? static_cast<std::int64_t>(pages) * sysconf(_SC_PAGESIZE) : 0;
}

std::int64_t address_space_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::int64_t>(r.rlim_cur);
}

Contained run_contained(const std::function<std::string()>& work, const ContainLimits& limits) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);                        // nothing buffered is written twice
  const std::int64_t mapped = mapped_bytes();  // the child's too, at the fork
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw Error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    // The limit is on what the work adds: on top of the address space the child starts with (the
    // parent's at the fork), which differs from node to node -- a GPU node's CUDA, cuDNN and NCCL
    // libraries alone map over 1.5 GiB, and an initialised driver reserves far more.
    const auto cap = static_cast<rlim_t>(mapped + limits.memory_bytes);
    rlimit as{cap, cap};
    setrlimit(RLIMIT_AS, &as);
    rlimit core{0, 0};  // a crash here is expected damage, not a core dump to keep
    setrlimit(RLIMIT_CORE, &core);
    char kind = 'F';
    std::string text;
    try {
      text = work();
      kind = 'O';
    } catch (const std::bad_alloc&) {
      kind = 'M';
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
      text = "unknown exception";
    }
    if (text.size() > limits.max_answer_bytes) text.resize(limits.max_answer_bytes + 1);  // the parent says so
    write_all(fds[1], std::string(1, kind) + text);
    close(fds[1]);
    _exit(0);  // no atexit handlers, no library destructors of the parent's state
  }
  close(fds[1]);
  std::string got;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.seconds);
  char buf[1 << 16];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the loop checks the deadline
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it is exiting
    if (got.size() < limits.max_answer_bytes + 2) got.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  Contained c;
  if (timed_out) {
    c.kind = Contained::TimedOut;
    c.text = "took longer than " + fmt_sig(limits.seconds, 3) + " s and was stopped";
  } else if (WIFSIGNALED(st)) {
    c.kind = Contained::Crashed;
    c.text = "crashed with " + signal_name(WTERMSIG(st));
  } else if (got.empty()) {
    c.kind = Contained::Crashed;
    c.text = "ended with exit status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) + " before it answered";
  } else if (got[0] == 'M') {
    c.kind = Contained::OutOfMemory;
    c.text = "needed more than " + fmt_bytes(limits.memory_bytes) + " of memory and was stopped";
  } else if (got.size() > limits.max_answer_bytes + 1) {
    c.kind = Contained::Failed;
    c.text = "answered more than " + fmt_bytes(static_cast<std::int64_t>(limits.max_answer_bytes)) +
             ", more than its work can mean";
  } else {
    c.kind = got[0] == 'O' ? Contained::Ok : Contained::Failed;
    c.text = got.substr(1);
  }
  // A signal near the memory limit is most likely an allocation that failed inside a library
  // which does not check; say so rather than blame a random crash.
  if (c.kind == Contained::Crashed && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
    c.text += " (an allocation beyond " + fmt_bytes(limits.memory_bytes) + " ends this way too)";
  return c;
}

ContainLimits read_limits(std::int64_t file_bytes) {
  ContainLimits l;
  l.seconds = 60 + static_cast<double>(file_bytes) / (8 << 20);
  l.memory_bytes = (2LL << 30) + 16 * file_bytes;
  l.max_answer_bytes = (64u << 20) + 4 * static_cast<std::size_t>(std::max<std::int64_t>(file_bytes, 0));
  if (const char* e = std::getenv("D500_READ_TIMEOUT_S"); e && std::atof(e) > 0) l.seconds = std::atof(e);
  if (const char* e = std::getenv("D500_READ_MEMORY_MB"); e && std::atoll(e) > 0) l.memory_bytes = std::atoll(e) << 20;
  return l;
}

std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT ? "no such file" : std::strerror(errno);
  if (S_ISREG(st.st_mode)) return "";
  const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                                            : "not a plain file";
  return std::string("not a regular file (") + what + "); only regular files are read";
}

}  // namespace d500
