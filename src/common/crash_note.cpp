#include "common/crash_note.hpp"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace d500 {
namespace {

constexpr int kFaults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kNumFaults = sizeof kFaults / sizeof kFaults[0];
struct sigaction g_before[kNumFaults];
std::atomic<bool> g_warmed{false};

// Two buffers for each text: the handler reads the one `current` names, which ordinary code
// switches only after it has filled the other. 512 bytes: a host name and a point's id fit.
struct Text {
  char buf[2][512] = {{0}, {0}};
  std::atomic<int> current{0};
  void set(const std::string& s) {
    const int next = 1 - current.load();
    const std::size_t n = std::min(s.size(), sizeof buf[next] - 1);
    std::memcpy(buf[next], s.data(), n);
    buf[next][n] = '\0';
    current.store(next);
  }
  const char* get() const { return buf[current.load()]; }
};
Text g_who, g_what;
static_assert(std::atomic<int>::is_always_lock_free, "the handler reads the index without a lock");

const char* fault_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "SIGABRT";
  }
}

void put(const char* s) {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void on_fault(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  put(g_who.get());
  put(" crashed with ");
  put(fault_name(sig));
  if (*g_what.get()) {
    put(" ");
    put(g_what.get());
  }
  put("\n");
  errno = saved;
  int k = 0;
  while (k < kNumFaults && kFaults[k] != sig) ++k;
  const struct sigaction& before = g_before[k];
  if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction) {
    before.sa_sigaction(sig, info, context);
  } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN && before.sa_handler != nullptr) {
    before.sa_handler(sig);
  } else {
    // No handler before this one to print a backtrace (MPI_Init installs none where it finds
    // the note there already): its own, symbols as the dynamic tables name them.
    void* frames[48];
    put("backtrace:\n");
    backtrace_symbols_fd(frames, backtrace(frames, 48), STDERR_FILENO);
  }
  // The handler before (if any) returned: die of the signal by its default action.
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_crash_note(const std::string& who) {
  g_who.set(who);
  if (!g_warmed.exchange(true)) {
    // backtrace() loads libgcc's unwinder on its first call, which allocates: not in a handler.
    void* frame[1];
    backtrace(frame, 1);
  }
  for (int k = 0; k < kNumFaults; ++k) {
    struct sigaction now {};
    sigaction(kFaults[k], nullptr, &now);
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_fault) continue;  // still the note's
    g_before[k] = now;  // before the note replaces it: a fault meanwhile meets the old handler
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sigemptyset(&sa.sa_mask);
    // SA_RESETHAND: a fault inside the note itself ends the process by the default action.
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(kFaults[k], &sa, nullptr);
  }
}

void set_crash_context(const std::string& what) { g_what.set(what); }

std::string crash_context() { return g_what.get(); }

bool is_crash_note(const std::string& line) {
  return line.rfind("d500-worker: ", 0) == 0 && line.find(" crashed with SIG") != std::string::npos;
}

const char kInsideMpiInit[] = "inside MPI_Init (the MPI library's start-up), before the job's first point";

bool crashed_inside_mpi_init(const std::string& output) {
  const std::string tail = std::string(" ") + kInsideMpiInit;
  for (std::size_t at = 0; at < output.size();) {
    std::size_t end = output.find('\n', at);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(at, end - at);
    const auto note = line.find("d500-worker: ");
    if (note != std::string::npos && is_crash_note(line.substr(note)) && line.ends_with(tail)) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace d500
