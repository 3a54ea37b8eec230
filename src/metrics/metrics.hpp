#pragma once
// The metrics every level records, below the store and above nothing: what one timed phase of a
// repetition is (Sample), where a training curve stands (Event), the work one repetition does
// (Work), the clock, and the recorder whose record() is the only call inside a timed region.
// No MPI, no HDF5: workloads fill these, the store writes and reads them, analysis summarises.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace d500 {

// A network step's validation (levels 1, 2), beside its error and tolerance: the tensor that
// decided it, that tensor's error and allowance, and in how many of the step's `tensors` the same
// step with that one tensor 2% off fails (the judgement's power); tensors 0: none. The workloads
// fill it, the store writes it (validation.* attributes).
struct StepVerdict {
  std::string decisive;
  double error = 0, allowed = 0;
  std::int64_t tensors = 0, caught_2pct = 0;
};

// What part of a repetition (or training step) a sample times. `op` is a whole repetition of a
// level-0 operator or collective; training (levels 2 and 3) times several phases per step. The
// codes are stored in the results file (schema v2, `samples.phase`) and listed, in this order,
// in the root attribute `phase_names`: never renumber, only append.
enum class Phase : std::uint8_t {
  Op = 0,
  Data = 1,  // loading and preparing a batch
  Forward = 2,
  Backward = 3,
  Update = 4,         // the optimizer step
  Communication = 5,  // time inside communication calls (allreduce, send, ...)
  Wait = 6,           // time blocked on other ranks
  Evaluation = 7,
  Checkpoint = 8,  // writing a training checkpoint (between steps, outside training time)
  Device = 9,      // a device kernel's own duration (GPU: CUDA events on its stream), beside the host's op row
};
inline constexpr int kPhaseCount = 10;
const char* phase_name(Phase p);
// "op,data,forward,...": the value of the `phase_names` attribute.
std::string phase_names_csv();
// The phase called `name`, or false when there is none.
bool parse_phase(const std::string& name, Phase& out);

// One timed phase of one repetition on one rank. Times are CLOCK_MONOTONIC nanoseconds of
// the rank's own host: durations are exact, but start times of ranks on different hosts are
// not on one clock.
struct Sample {
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::int64_t bytes;  // bytes moved by the operation (from the shapes)
  std::int64_t flops;  // floating-point operations (from the shapes)
  std::int32_t rank;
  std::int32_t rep;        // 0-based, warm-ups first
  std::uint8_t warmup;     // 1: a warm-up repetition, recorded but excluded from summaries
  std::uint8_t phase = 0;  // a Phase; 0 (op) in files of schema version 1, which had no phase
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

// One rank's training state at a checkpoint (levels 2 and 3): what a run killed at its time
// limit resumes from. Written by the store (ResultWriter::checkpoint) between steps, read back
// by the worker of a later attempt (store/checkpoint.hpp).
struct TrainingState {
  std::int64_t step = 0;                 // steps done
  std::int64_t epoch = 0, position = 0;  // the sampler's next batch: epoch, batches taken in it
  std::int64_t training_ns = 0;          // training time so far (the budget's clock)
  std::int64_t evaluation_ns = 0, evaluations = 0;
  double loss = 0, accuracy = 0;     // the last evaluation's (NaN: none yet)
  std::vector<float> parameters;     // every trainable parameter, in the network's order
  std::vector<std::byte> optimizer;  // the optimizer's own state (Optimizer::save)
  std::vector<Event> events;         // reading back: this rank's events up to `step`
};

// The work one repetition does, derived from the point's shapes.
struct Work {
  std::int64_t flops = 0;
  std::int64_t bytes = 0;
  std::int64_t items = 0;  // samples of a batch processed (networks: the rate is samples/s)
};

// Where a repetition's time goes, step by step (level 1: d500's graph executor runs a node's
// forward or backward pass per step). Durations are measured inside the timed repetitions, one
// clock read before and after each step, into preallocated memory.
struct StepInfo {
  std::string name;       // the node's name
  std::string op;         // its operator
  std::string direction;  // forward, backward, or seed (the loss gradient)
  std::string impl;       // what computed it: "onednn convolution", "reference (fallback)"
  double flops = 0;       // of one run of the step
};
struct StepTimes {
  std::vector<StepInfo> steps;
  int repetitions = 0;           // warm-ups included, in repetition order
  std::vector<std::int64_t> ns;  // repetitions x steps: this rank's duration of each step
};

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Preallocated storage for samples between flushes: record() is a store, never an allocation.
class Recorder {
 public:
  explicit Recorder(std::size_t capacity) : buf_(capacity) {}
  void record(const Sample& s) { buf_[n_++] = s; }
  bool full() const { return n_ == buf_.size(); }
  std::size_t room() const { return buf_.size() - n_; }
  std::span<const Sample> pending() const { return {buf_.data(), n_}; }
  void clear() { n_ = 0; }

 private:
  std::vector<Sample> buf_;
  std::size_t n_ = 0;
};

}  // namespace d500
