#pragma once
// Splitting a loop between the cores this process may run on, for work outside every timed
// region (validation's double yardstick): plain std::threads, joined before returning.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace d500 {

// The CPUs in this process's affinity mask (a rank that mpirun bound to its cores sees those).
inline std::int64_t rank_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

// Calls f(begin, end) on `parts` contiguous ranges covering [0, n), each on a thread of its own
// (the first on the caller's), and waits for all. f must not throw.
template <class F>
void parallel_ranges(std::int64_t n, std::int64_t parts, F&& f) {
  parts = std::max<std::int64_t>(1, std::min(parts, n));
  std::vector<std::thread> threads;
  for (std::int64_t i = 1; i < parts; ++i) threads.emplace_back([&, i] { f(n * i / parts, n * (i + 1) / parts); });
  f(0, n / parts);
  for (auto& t : threads) t.join();
}

}  // namespace d500
