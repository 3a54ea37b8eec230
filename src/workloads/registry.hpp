#pragma once
// The one workload interface for all four levels, and the registry that maps a workload name
// to its parameters and to its implementation on each backend.
//
// Level 0 (operators) and level 1 (networks) time repetitions through Harness::repeat; levels 2
// and 3 (training) time steps through Harness::train and record events (an evaluation: step,
// training time, loss, accuracy) through the same recorder and store. Adding a workload touches
// its own file and the list in builtin.cpp.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/param_spec.hpp"
#include "common/random.hpp"  // fill_uniform: the inputs of every workload
#include "common/value.hpp"
#include "metrics/metrics.hpp"
#include "workloads/harness.hpp"

namespace d500 {

// Parameters every point has, whatever its workload.
const std::vector<ParamSpec>& common_params();

struct RunContext {
  MPI_Comm comm;
  int rank = 0;
  int size = 1;
  const Params& params;
  std::uint64_t seed = 1;
};

// What a backend's result was compared with, and how far it was.
struct Validation {
  double rel_error = 0;  // this rank's relative error norm
  double tolerance = 0;
  std::string method;  // how the reference was computed and the norm taken
  StepVerdict step{};  // a network's step (levels 1, 2): what decided it, and what it could see
};

class Workload {
 public:
  virtual ~Workload() = default;
  // Run once and compare with the reference. Called before any timing ("validate, then time").
  virtual Validation validate() = 0;
  // Time the workload: level 0 calls h.repeat(op); a training step h.repeat_phased(op).
  virtual void measure(Harness& h) = 0;
  virtual Work work() const = 0;
  // Optional, known once the workload is made: facts recorded with the point (level 1: the
  // network, its loss, the executor and its memory plan), as point attributes.
  virtual std::vector<std::pair<std::string, Value>> attributes() const { return {}; }
  // Optional, after measure(): this rank's per-step durations (level 1: d500's executor).
  virtual const StepTimes* step_times() const { return nullptr; }
  // Training (levels 2, 3): the target and budget its time to accuracy is judged by, or nullptr.
  struct TimeToAccuracy {
    double target = 0, budget_s = 0;
    std::int64_t eval_interval_steps = 0;
  };
  virtual const TimeToAccuracy* time_to_accuracy() const { return nullptr; }
  // Optional, after measure(): facts known only once it ran (steps, why training stopped).
  virtual std::vector<std::pair<std::string, Value>> final_attributes() const { return {}; }
  // Training with checkpoints (levels 2, 3): whether measure() takes checkpoints (through
  // Harness::train's Checkpointing), and resuming from one, between validate() and measure().
  // why_not_resume says, without changing anything, why this rank cannot continue from `s`
  // ("" if it can: the parameters and optimizer state fit); resume then continues from it.
  virtual bool checkpoints() const { return false; }
  virtual std::string why_not_resume(const TrainingState&) const { return "this workload does not resume"; }
  virtual void resume(const TrainingState&) {}
};

// A device kernel's memory as the point's final attributes: the largest of the ranks' peaks
// (`mine`, bytes; every rank calls it), with how it was measured; none for a host kernel
// (mine < 0, on every rank alike: the ranks run one kernel).
std::vector<std::pair<std::string, Value>> device_memory_attributes(MPI_Comm comm, std::int64_t mine);

struct BackendInfo;

// d500's executor on a device backend (levels 1-3): the device's arithmetic peak for the point's
// math (float32; TF32 with math = "tf32"; bfloat16 with "bf16"), as the point's facts; none on the host or on a
// backend without a peak.
std::vector<std::pair<std::string, Value>> executor_peak_attributes(const BackendInfo& b, const Params& p,
                                                                    bool on_device);

using WorkloadFactory = std::function<std::unique_ptr<Workload>(const RunContext&)>;

struct WorkloadInfo {
  std::string name;
  int level = 0;
  std::string description;
  std::vector<ParamSpec> params;                    // beyond common_params()
  std::map<std::string, WorkloadFactory> backends;  // backend name -> implementation
  std::string rate_unit;                            // "GFLOP/s" or "GB/s"
  // What a series over rank counts means: "strong" (fixed total work split over the ranks) or
  // "weak" (fixed work per rank), and in words what grows with the ranks.
  std::string scaling = "strong";
  std::string scaling_note;
  // Optional: the scaling of one point when it depends on its parameters (level 3's global_batch).
  std::function<std::string(const Params&)> scaling_of;
  // Optional: fills parameters derived from others (gemm: m = n when m is -1), so that the
  // canonical form of a point is explicit and equal problems get equal ids.
  std::function<void(Params&)> normalize;
  // Optional check of a complete point; returns an error text, or "" when the point is valid.
  std::function<std::string(const Params&)> check;
  // Optional: the bytes one rank of a point allocates for its data, at its peak: inputs and
  // outputs, their staging while they are made, the validation reference, and a bound on the
  // backend's workspace. Not the process's baseline (libraries, MPI, the recorder), which the
  // measured peak_rss_bytes includes. The planner refuses points that cannot fit a node.
  std::function<std::int64_t(const Params&)> memory_bytes;
  // Optional: the work of one repetition of a point, from its parameters alone (no data): what
  // the planner's time model divides by a rate when it packs points into jobs by time.
  std::function<Work(const Params&)> work_of;
};

class WorkloadRegistry {
 public:
  void add(WorkloadInfo info);
  const WorkloadInfo* find(const std::string& name) const;
  const std::vector<WorkloadInfo>& all() const { return list_; }
  std::vector<std::string> names() const;

 private:
  std::vector<WorkloadInfo> list_;
};

// The registry with every workload built into d500 (see builtin.cpp).
const WorkloadRegistry& builtin_workloads();

// What each parameter point `p` of workload `w` leaves unset ("") stands for, for its results
// file (`unset.<name>`): the workload's own (ParamSpec::unset_means) and its backend's settings'
// (unset_settings: "" for another backend's), so that a report says "fp32" where a campaign wrote
// it and the planner normalised it away from the id.
std::vector<std::pair<std::string, std::string>> unset_meanings(const WorkloadInfo& w, const Params& p);

template <class T>
T param(const Params& p, const std::string& name) {
  return std::get<T>(p.at(name));
}

}  // namespace d500
