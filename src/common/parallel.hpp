#pragma once
// Splitting a loop between the cores this process may run on, for work outside every timed
// region (validation's double yardstick, planning): plain std::threads, joined before returning.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
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

// Makes items 0..n-1 on up to `threads` threads of their own (make(i) returns an R) and hands
// each to take(i, R&&) on the calling thread in the order of i, with at most `window` items
// made ahead of take: whatever depends on order (which duplicate is kept, which error comes
// first, the order of warnings) comes out as one thread would make it. An exception from
// make(i) is rethrown on the calling thread when i's turn comes, after take has had every item
// before it; one from take stops the threads (an item under way is finished, then dropped) and
// is rethrown once they are joined. threads <= 1, or no thread to be had, runs both in turn on
// the calling thread.
template <class R, class Make, class Take>
void ordered_parallel(std::size_t n, unsigned threads, std::size_t window, Make&& make, Take&& take) {
  window = std::max<std::size_t>(window, 1);
  struct Slot {
    std::optional<R> value;
    std::exception_ptr error;
    bool ready = false;
  };
  std::vector<Slot> slots(threads > 1 && n > 1 ? window : 0);  // item i waits in slots[i % window]
  std::mutex m;
  std::condition_variable made, taken;
  std::size_t next = 0, consumed = 0;
  bool stop = false;
  auto work = [&] {
    for (;;) {
      std::size_t i = 0;
      {
        std::unique_lock<std::mutex> lock(m);
        taken.wait(lock, [&] { return stop || next >= n || next < consumed + window; });
        if (stop || next >= n) return;
        i = next++;
      }
      Slot s;
      try {
        s.value.emplace(make(i));
      } catch (...) {
        s.error = std::current_exception();
      }
      s.ready = true;
      {
        std::lock_guard<std::mutex> lock(m);
        slots[i % window] = std::move(s);
      }
      made.notify_one();  // the calling thread is the one waiter on `made`
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads && !slots.empty(); ++t) try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: those started carry on
    }
  if (pool.empty()) {
    for (std::size_t i = 0; i < n; ++i) take(i, make(i));
    return;
  }
  auto join_all = [&] {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    taken.notify_all();
    for (auto& t : pool) t.join();
  };
  try {
    for (std::size_t i = 0; i < n; ++i) {
      Slot s;
      {
        std::unique_lock<std::mutex> lock(m);
        made.wait(lock, [&] { return slots[i % window].ready; });
        s = std::move(slots[i % window]);
        slots[i % window] = Slot{};
        ++consumed;
      }
      taken.notify_all();
      if (s.error) std::rethrow_exception(s.error);
      take(i, std::move(*s.value));
    }
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
}

// One thread of its own, made once, that runs one job at a time beside the caller's (a training
// step's next batch, made while the caller launches the step's work): start(f) hands it f and
// returns at once; wait() returns once f has run, and rethrows what it threw. Handing a job over
// allocates nothing (f is a function reference, which must live until wait()).
class Beside {
 public:
  Beside() : thread_([this] { loop(); }) {}
  ~Beside() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Beside(const Beside&) = delete;
  Beside& operator=(const Beside&) = delete;
  template <class F>
  void start(F& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &f;
    call_ = [](void* p) { (*static_cast<F*>(p))(); };
    busy_ = true;
    wake_.notify_one();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return quit_ || busy_; });
      if (quit_) return;
      lock.unlock();
      std::exception_ptr e;
      try {
        call_(job_);
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      error_ = e;
      busy_ = false;
      done_.notify_one();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  void* job_ = nullptr;
  void (*call_)(void*) = nullptr;
  bool busy_ = false, quit_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once the rest is made
};

}  // namespace d500
