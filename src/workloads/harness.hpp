#pragma once
// The timing loop shared by every level (the metrics it records are in metrics/metrics.hpp).
// A workload's timed region calls only Recorder::record (a store into preallocated memory); flushing to HDF5 happens between
// repetitions, when the buffer is full, and at the end of a point -- never inside a timing.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>

#include "common/mpi_check.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

// Runs warm-ups and repetitions, all ranks starting each together, records one sample per rank
// per repetition, and flushes between repetitions: when the buffer is full, and -- durably, so
// that a killed job keeps the samples -- about every `flush_interval_ns` of wall time, and at
// the end. The synchronisation before each repetition is an MPI_Allreduce (MAX) of one integer:
// it waits for every rank as a barrier does, and carries whether any rank's wall clock says a
// durable flush is due, so all ranks flush after the same repetition (the flush is collective)
// without a collective of its own. Every rank records the same number of samples.
class Harness {
 public:
  using Flush = std::function<void(std::span<const Sample>, bool durable)>;
  static constexpr std::int64_t kDefaultFlushIntervalNs = 2'000'000'000;

  Harness(MPI_Comm comm, Recorder& rec, int warmups, int repetitions, Work work, Flush flush,
          std::int64_t flush_interval_ns = kDefaultFlushIntervalNs)
      : comm_(comm), rec_(rec), warmups_(warmups), reps_(repetitions), work_(work),
        flush_(std::move(flush)), interval_ns_(flush_interval_ns) {
    mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", "harness");
  }

  template <class Op>
  void repeat(Op&& op) {
    repeat_phased([&](int, const PhaseMark&) { op(); }, 0);
  }

  // Records a phase of the running repetition (its start and end, ns): a training step's data,
  // forward, backward and update phases, beside the whole step's `op` sample.
  using PhaseMark = std::function<void(Phase, std::int64_t, std::int64_t)>;

  // As repeat, for a step made of phases: op(repetition, mark) calls mark for each phase it
  // times, at most `phases` per repetition (the recorder is flushed before it could overflow).
  // Recording a phase is a store into preallocated memory, as for the whole step.
  template <class Op>
  void repeat_phased(Op&& op, int phases) {
    std::int64_t last_durable = now_ns();
    int rep = 0;
    std::uint8_t warm = 0;
    const PhaseMark mark = [&](Phase ph, std::int64_t t0, std::int64_t t1) {
      rec_.record(Sample{t0, t1, 0, 0, rank_, rep, warm, static_cast<std::uint8_t>(ph)});
    };
    for (int r = 0; r < warmups_ + reps_; ++r) {
      rep = r;
      warm = r < warmups_ ? std::uint8_t{1} : std::uint8_t{0};
      if (rec_.room() < static_cast<std::size_t>(phases) + 1) flush(false);  // every rank alike: same sample counts
      const int mine = now_ns() - last_durable >= interval_ns_ ? 1 : 0;
      int due = 0;
      mpi_check(MPI_Allreduce(&mine, &due, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce", "harness");
      const std::int64_t t0 = now_ns();
      op(r, mark);
      const std::int64_t t1 = now_ns();
      rec_.record(Sample{t0, t1, work_.bytes, work_.flops, rank_, r, warm, static_cast<std::uint8_t>(Phase::Op)});
      if (due || rec_.full()) flush(due != 0);
      if (due) last_durable = now_ns();
    }
    flush(true);
  }

  int repetitions() const { return warmups_ + reps_; }  // warm-ups included

  void flush(bool durable) {
    flush_(rec_.pending(), durable);
    rec_.clear();
  }

 private:
  MPI_Comm comm_;
  Recorder& rec_;
  int warmups_, reps_;
  Work work_;
  Flush flush_;
  std::int64_t interval_ns_;
  int rank_ = 0;
};

}  // namespace d500
