#pragma once
// The timing loop shared by every level (the metrics it records are in metrics/metrics.hpp).
// A workload's timed region calls only Recorder::record (a store into preallocated memory); flushing to HDF5 happens
// between repetitions, when the buffer is full, and at the end of a point -- never inside a timing.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "common/mpi_check.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stopping.hpp"

namespace d500 {

// Runs warm-ups and repetitions, all ranks starting each together, records one sample per rank
// per repetition, and flushes between repetitions: when the buffer is full, and -- durably, so
// that a killed job keeps the samples -- about every `flush_interval_ns` of wall time, and at
// the end. The synchronisation before each repetition is an MPI_Allreduce (MAX) of one integer:
// it waits for every rank as a barrier does, and carries whether any rank's wall clock says a
// durable flush is due, so all ranks flush after the same repetition (the flush is collective)
// without a collective of its own. Every rank records the same number of samples.
//
// Adaptive repetitions (stop_adaptively): the same allreduce also carries each rank's time of
// the previous repetition (MAX: the slowest rank's, the value the report summarises) and whether
// some rank's clock says the point's time is up, so that every rank holds the same values and
// applies AdaptiveStop's rule to them between repetitions, outside any timing: all stop after
// the same repetition, with no collective of their own.
class Harness {
 public:
  using Flush = std::function<void(std::span<const Sample>, bool durable)>;
  static constexpr std::int64_t kDefaultFlushIntervalNs = 2'000'000'000;

  Harness(MPI_Comm comm, Recorder& rec, int warmups, int repetitions, Work work, Flush flush,
          std::int64_t flush_interval_ns = kDefaultFlushIntervalNs)
      : comm_(comm),
        rec_(rec),
        warmups_(warmups),
        reps_(repetitions),
        work_(work),
        flush_(std::move(flush)),
        interval_ns_(flush_interval_ns) {
    mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", "harness");
  }

  template <class Op>
  void repeat(Op&& op) {
    repeat_phased([&](int, const PhaseMark&) { op(); }, 0);
  }

  // As repeat, and `after()` runs after each repetition's sample, outside its timing and before
  // the next repetition's barrier (e.g. to evict the caches, so that each repetition starts as
  // cold as it would inside a training step, as IMB's -off_cache does).
  template <class Op, class After>
  void repeat_then(Op&& op, After&& after) {
    repeat_phased_then([&](int, const auto&) { op(); }, after, 0);
  }

  // repeat_then for a repetition that records phases (op(repetition, mark), as repeat_phased).
  template <class Op, class After>
  void repeat_phased_then(Op&& op, After&& after, int phases) {
    run(
        [&](int r, const PhaseMark& mark) {
          op(r, mark);
          return true;
        },
        [&](int, const PhaseMark&, bool) {
          after();
          return true;
        },
        phases, warmups_ + reps_, nullptr);
  }

  // As repeat_then, for work on a device: op() launches it and returns when it is done, and
  // device_ns() then gives the device's own duration of it (its events), recorded as the
  // repetition's `device` row, placed from the host's start; the host's duration stays the op
  // row. device_ns() is called after the op row has ended, before after(): reading the events'
  // duration (cudaEventElapsedTime) is no part of the host's time, as in a bare loop that reads
  // the clock right after its wait. Recording it is a store into preallocated memory.
  template <class Op, class DeviceNs, class After>
  void repeat_on_device_then(Op&& op, DeviceNs&& device_ns, After&& after) {
    std::int64_t t0 = 0;
    run(
        [&](int, const PhaseMark&) {
          t0 = now_ns();
          op();
          return true;
        },
        [&](int, const PhaseMark& mark, bool) {
          mark(Phase::Device, t0, t0 + device_ns());
          after();
          return true;
        },
        1, warmups_ + reps_, nullptr);
  }

  // A kernel's repetitions: repeat_then, or repeat_on_device_then for a kernel that reports its
  // device's own duration (device_ns() >= 0, a GPU's; -1 on the host, known before the first).
  template <class Op, class DeviceNs, class After>
  void repeat_kernel_then(Op&& op, DeviceNs&& device_ns, After&& after) {
    if (device_ns() < 0) return repeat_then(op, after);
    repeat_on_device_then(op, device_ns, after);
  }

  // Records a phase of the running repetition (its start and end, ns): a training step's data,
  // forward, backward and update phases, beside the whole step's `op` sample.
  using PhaseMark = std::function<void(Phase, std::int64_t, std::int64_t)>;

  // As repeat, for a step made of phases: op(repetition, mark) calls mark for each phase it
  // times, at most `phases` per repetition (the recorder is flushed before it could overflow).
  // Recording a phase is a store into preallocated memory, as for the whole step.
  template <class Op>
  void repeat_phased(Op&& op, int phases) {
    run(
        [&](int r, const PhaseMark& mark) {
          op(r, mark);
          return true;
        },
        [](int, const PhaseMark&, bool) { return true; }, phases, warmups_ + reps_, nullptr);
  }

  // Training (levels 2, 3): steps until `op` says to stop. op(step, mark) runs and times one
  // step and returns whether training goes on; its `op` sample spans exactly its call. Then
  // between(step, mark, last) runs outside the step's sample (evaluation, which records its own
  // Evaluation phase and events; `last`: op said stop) and may stop training too. The first
  // `warmups` steps are flagged as warm-ups (they are real training steps: they count in a
  // training curve, not in summaries of a step). The stop is agreed: every rank runs the same
  // number of steps, the decision riding on the per-step MPI_Allreduce (then of three integers)
  // that also agrees on durable flushes and checkpoints.
  //
  // Checkpoints: with `cp.state` and a sink (on_checkpoint), when some rank's wall clock says
  // `cp.interval_ns` have passed since the last one (or since training started), all ranks take
  // one before the next step, never when training stops: samples and events are flushed durably
  // first (a checkpoint on disk implies its curve is), then each rank's cp.state() goes to the
  // sink. Its time is a `checkpoint` phase row of the step it follows, outside training time.
  struct Checkpointing {
    std::int64_t interval_ns = 0;  // <= 0: none
    std::function<TrainingState()> state;
  };
  template <class Op, class Between>
  void train(Op&& op, Between&& between, int phases, const Checkpointing& cp = {}) {
    run(op, between, phases + 2, -1, &cp);  // + 2: between's evaluation row, a checkpoint row
  }
  using CheckpointSink = std::function<void(const TrainingState&)>;
  void on_checkpoint(CheckpointSink f) { checkpoint_sink_ = std::move(f); }
  // A termination asked for from outside (SIGTERM: Slurm's warning at the time limit, which it
  // follows with SIGKILL after KillWait): while training, `*seen` set on any rank rides the
  // per-step allreduce, and every rank, before its next step, flushes durably, takes a
  // checkpoint (when checkpoints are on and a step has run) and calls `end`, which does not
  // return (it ends the process as the signal asked). The point stays incomplete, as a killed
  // one does, and its resume starts from that checkpoint: no step since the last one is lost.
  void on_terminate(const volatile std::sig_atomic_t* seen, std::function<void()> end) {
    term_seen_ = seen;
    term_end_ = std::move(end);
  }
  // Checkpoints the last train() took.
  int checkpoints() const { return checkpoints_; }
  // Steps the last train() ran, warm-ups included.
  int trained_steps() const { return trained_; }
  // A training curve's point (after an evaluation): written with the next flush.
  void event(const Event& e) { events_.push_back(e); }
  using EventFlush = std::function<void(std::span<const Event>, bool durable)>;
  void on_events(EventFlush f) { event_flush_ = std::move(f); }

  // Before repeat(): repeat adaptively under `rule` (its max bounds the repetitions).
  void stop_adaptively(const AutoRepetitions& rule) {
    auto_ = rule;
    reps_ = rule.max;
  }
  // The most repetitions repeat() may run, warm-ups included (what to preallocate for).
  int repetitions() const { return warmups_ + reps_; }
  // What the last repeat() ran, warm-ups included, and why it stopped.
  int repetitions_run() const { return trained_; }
  StoppedBy stopped_by() const { return stopped_by_; }
  // The relative width of the median's interval when an adaptive repeat() stopped (NaN: none).
  double stopped_at_width() const { return stopped_width_; }

  // Collective: samples, then (when there is an event sink) every rank's events, possibly none.
  void flush(bool durable) {
    flush_(rec_.pending(), durable);
    rec_.clear();
    if (event_flush_) {
      event_flush_(events_, durable);
      events_.clear();
    }
  }

 private:
  // The one timing loop: `count` repetitions (every rank knows when to stop: the allreduce
  // carries the flush decision alone), or with count < 0 until a rank's op or between says stop
  // (the allreduce carries that too, and whether a checkpoint is due). `rows` bounds the samples
  // a repetition records beside its `op` row.
  template <class Op, class Between>
  void run(Op&& op, Between&& between, int rows, int count, const Checkpointing* cp) {
    std::int64_t last_durable = now_ns(), last_checkpoint = last_durable;
    const std::int64_t started = last_durable;
    int rep = 0;
    std::uint8_t warm = 0;
    const PhaseMark mark = [&](Phase ph, std::int64_t t0, std::int64_t t1) {
      rec_.record(Sample{t0, t1, 0, 0, rank_, rep, warm, static_cast<std::uint8_t>(ph)});
    };
    const bool checkpoints = cp && cp->state && checkpoint_sink_ && cp->interval_ns > 0;
    // Adaptive: one more pass than repetitions, whose allreduce brings the last one's time.
    const bool adaptive = auto_.on && count >= 0;
    std::optional<AdaptiveStop> rule;  // only when adaptive: it reserves room for `max` times
    if (adaptive) rule.emplace(auto_);
    const std::int64_t max_ns = static_cast<std::int64_t>(auto_.max_time_s * 1e9);
    // What the allreduce (MAX) agrees on: a durable flush is due, training stops, a checkpoint
    // is due, the point's time is up, the previous repetition's time, a termination was asked
    // for. Fixed counts reduce the first value only, training the first three (all six when it
    // may be terminated), adaptive repetitions the first five.
    const bool terminable = count < 0 && term_seen_ != nullptr && static_cast<bool>(term_end_);
    const int reduced = adaptive ? 5 : count < 0 ? (terminable ? 6 : 3) : 1;
    std::int64_t last_ns = 0;
    int go_on = 1;
    trained_ = 0;
    checkpoints_ = 0;
    stopped_by_ = StoppedBy::Count;
    stopped_width_ = std::nan("");
    for (int r = 0; count < 0 || r < count + (adaptive ? 1 : 0); ++r) {
      if (rec_.room() < static_cast<std::size_t>(rows) + 1) flush(false);  // every rank alike: same sample counts
      const std::int64_t t = now_ns();
      const std::int64_t mine[6] = {t - last_durable >= interval_ns_ ? 1 : 0,
                                    go_on ? 0 : 1,
                                    checkpoints && t - last_checkpoint >= cp->interval_ns ? 1 : 0,
                                    adaptive && t - started >= max_ns ? 1 : 0,
                                    last_ns,
                                    terminable && *term_seen_ ? 1 : 0};
      std::int64_t agreed[6] = {0, 0, 0, 0, 0, 0};
      mpi_check(MPI_Allreduce(mine, agreed, reduced, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce", "harness");
      if (agreed[1]) break;  // training ended by itself: a termination asked for now waits for the point's end
      if (adaptive) {
        if (r > warmups_) rule->add(agreed[4]);  // repetition r - 1 was timed
        if (r >= warmups_ && rule->stop(agreed[3] != 0)) {
          stopped_by_ = rule->stopped_by();
          stopped_width_ = rule->last_width();
          break;
        }
      }
      if ((agreed[2] || (agreed[5] && checkpoints)) && r > 0) {  // after step r - 1, whose repetition the row joins
        flush(true);
        const std::int64_t t0 = now_ns();
        checkpoint_sink_(cp->state());
        ++checkpoints_;
        last_checkpoint = last_durable = now_ns();
        mark(Phase::Checkpoint, t0, last_checkpoint);
      }
      if (agreed[5]) {
        flush(true);
        term_end_();
        return;  // (end does not return)
      }
      rep = r;
      warm = r < warmups_ ? std::uint8_t{1} : std::uint8_t{0};
      trained_ = r + 1;
      const std::int64_t t0 = now_ns();
      const bool more = op(r, mark);
      const std::int64_t t1 = now_ns();
      rec_.record(Sample{t0, t1, work_.bytes, work_.flops, rank_, r, warm, static_cast<std::uint8_t>(Phase::Op)});
      last_ns = t1 - t0;
      go_on = between(r, mark, !more) && more ? 1 : 0;
      if (agreed[0] || rec_.full()) flush(agreed[0] != 0);
      if (agreed[0]) last_durable = now_ns();
    }
    flush(true);
  }
  MPI_Comm comm_;
  Recorder& rec_;
  int warmups_, reps_;
  Work work_;
  Flush flush_;
  std::int64_t interval_ns_;
  int rank_ = 0;
  std::vector<Event> events_;
  EventFlush event_flush_;
  int trained_ = 0, checkpoints_ = 0;
  CheckpointSink checkpoint_sink_;
  const volatile std::sig_atomic_t* term_seen_ = nullptr;
  std::function<void()> term_end_;
  AutoRepetitions auto_;
  StoppedBy stopped_by_ = StoppedBy::Count;
  double stopped_width_ = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace d500
