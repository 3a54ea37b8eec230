#pragma once
// The metrics path shared by every level. A workload's timed region calls only
// Recorder::record (a store into preallocated memory); flushing to HDF5 happens between
// repetitions, when the buffer is full, and at the end of a point -- never inside a timing.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace d500 {

// One timed phase of one repetition on one rank. Times are CLOCK_MONOTONIC nanoseconds of
// the rank's own host: durations are exact, but start times of ranks on different hosts are
// not on one clock.
struct Sample {
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::int64_t bytes;   // bytes moved by the operation (from the shapes)
  std::int64_t flops;   // floating-point operations (from the shapes)
  std::int32_t rank;
  std::int32_t rep;     // 0-based, warm-ups first
  std::uint8_t warmup;  // 1: a warm-up repetition, recorded but excluded from summaries
};

// One evaluation during training (levels 2 and 3): where the curve stands at `time_ns` after
// the start of the point's timed training (evaluation time excluded by the workload).
struct Event {
  std::int64_t time_ns;
  std::int64_t step;
  double loss;
  double accuracy;
  std::int32_t rank;
};

// The work one repetition does, derived from the point's shapes.
struct Work {
  std::int64_t flops = 0;
  std::int64_t bytes = 0;
};

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Recorder {
 public:
  explicit Recorder(std::size_t capacity) : buf_(capacity) {}
  void record(const Sample& s) { buf_[n_++] = s; }
  bool full() const { return n_ == buf_.size(); }
  std::span<const Sample> pending() const { return {buf_.data(), n_}; }
  void clear() { n_ = 0; }

 private:
  std::vector<Sample> buf_;
  std::size_t n_ = 0;
};

// Runs warm-ups and repetitions with a barrier before each, records one sample per rank per
// repetition, and flushes between repetitions: when the buffer is full, and -- durably, so
// that a killed job keeps the samples -- every `flush_every` repetitions, a count chosen once
// after the first repetition so that durable flushes come about every `flush_interval_ns` of
// wall time, and at the end. Every rank records the same number of
// samples and uses the same count (agreed by one MPI_Allreduce), so the collective flush is
// reached by all ranks at the same repetition and cannot deadlock.
class Harness {
 public:
  using Flush = std::function<void(std::span<const Sample>, bool durable)>;
  static constexpr std::int64_t kDefaultFlushIntervalNs = 2'000'000'000;

  Harness(MPI_Comm comm, Recorder& rec, int warmups, int repetitions, Work work, Flush flush,
          std::int64_t flush_interval_ns = kDefaultFlushIntervalNs)
      : comm_(comm), rec_(rec), warmups_(warmups), reps_(repetitions), work_(work),
        flush_(std::move(flush)), interval_ns_(flush_interval_ns) {
    MPI_Comm_rank(comm_, &rank_);
  }

  template <class Op>
  void repeat(Op&& op) {
    std::int64_t flush_every = 0;
    for (int r = 0; r < warmups_ + reps_; ++r) {
      MPI_Barrier(comm_);
      const std::int64_t t0 = now_ns();
      op();
      const std::int64_t t1 = now_ns();
      rec_.record(Sample{t0, t1, work_.bytes, work_.flops, rank_, r, r < warmups_ ? std::uint8_t{1} : std::uint8_t{0}});
      if (r == 0) flush_every = agree_flush_every(t1 - t0);
      const bool due = (r + 1) % flush_every == 0;
      if (due || rec_.full()) flush(due);
    }
    flush(true);
  }

  void flush(bool durable) {
    flush_(rec_.pending(), durable);
    rec_.clear();
  }

 private:
  std::int64_t agree_flush_every(std::int64_t first_rep_ns) {
    std::int64_t slowest = 0;
    MPI_Allreduce(&first_rep_ns, &slowest, 1, MPI_INT64_T, MPI_MAX, comm_);
    return std::max<std::int64_t>(1, interval_ns_ / std::max<std::int64_t>(1, slowest));
  }

  MPI_Comm comm_;
  Recorder& rec_;
  int warmups_, reps_;
  Work work_;
  Flush flush_;
  std::int64_t interval_ns_;
  int rank_ = 0;
};

}  // namespace d500
