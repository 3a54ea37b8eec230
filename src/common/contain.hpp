#pragma once
// Running untrusted work -- reading a results file that may be damaged -- in a child process,
// so that a crash, a hang or a runaway allocation inside a library (HDF5 on a corrupted heap)
// ends the child, never the caller. The caller learns what happened and goes on.
#include <cstdint>
#include <functional>
#include <string>

namespace d500 {

struct ContainLimits {
  double seconds = 120;  // wall-clock limit; the child is killed (SIGKILL) past it
  // The address space the work may add (RLIMIT_AS of the child, set to what the child maps at the
  // fork plus this).
  std::int64_t memory_bytes = 4LL << 30;
  // The most the work may answer; a longer answer is Failed ("answered more than ...").
  std::size_t max_answer_bytes = 16u << 20;
};

struct Contained {
  enum Kind { Ok, Failed, Crashed, TimedOut, OutOfMemory };
  Kind kind = Ok;
  // Ok: what the work returned; Failed: the exception's message; otherwise the reason in words
  // ("crashed with SIGSEGV", "took longer than 120 s and was stopped",
  // "needed more than 4 GiB of memory and was stopped").
  std::string text;
  bool ok() const { return kind == Ok; }
};

// Runs `work` in a forked child under `limits` and returns its result text (at most
// limits.max_answer_bytes).
// An exception in the child is Failed with its what(); std::bad_alloc, or a signal while the
// child was near its memory limit, is OutOfMemory. The caller must not be multi-threaded or
// inside MPI (fork's rules); the d500 CLI is neither.
Contained run_contained(const std::function<std::string()>& work, const ContainLimits& limits);

// The limits for reading a file of `file_bytes`: D500_READ_TIMEOUT_S and D500_READ_MEMORY_MB
// when set, else 60 s + 1 s per 8 MiB and 2 GiB + 16 times the file's size (beyond what the
// process maps at the fork); an answer of at most 64 MiB + 4 times the file's size.
ContainLimits read_limits(std::int64_t file_bytes);

// The address space this process maps now (/proc/self/statm's first field, in pages): the
// libraries it loaded, its threads' stacks, and what a GPU driver reserved; 0 where unknown.
// What counts against an address-space limit (RLIMIT_AS, ulimit -v).
std::int64_t mapped_bytes();

// The address-space limit this process runs under (RLIMIT_AS, ulimit -v); 0 for none.
std::int64_t address_space_limit();

// Why `path` may not be opened as a data file: "" for a regular file (a symbolic link to one
// included), else "not a regular file (a FIFO)", "no such file", ... Opening a FIFO blocks.
std::string not_a_regular_file(const std::string& path);

}  // namespace d500
