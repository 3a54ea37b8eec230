#pragma once
// Every backend d500 knows, whether this build has it or not. Each backend registers itself
// from its own folder (src/backends/<name>/) through one function, register_backend_<name>,
// that CMake's d500_backend() call lists in a generated file (generated/backends_builtin.cpp);
// a backend missing from the build is listed with the reason, so that asking for it is a
// plan-time error that says why.
//
// A backend whose libraries are heavy to load (LibTorch, CUDA's: together a second of static
// initialisation and 350 MiB in every process) lives in a module of its own, a shared library
// beside libd500core (libd500-<module>.so) that is loaded at its first use: the core holds its
// declaration (`declare`: name, description, operators, flags and which functions it provides),
// the module registers the whole backend, and every function of the declaration forwards to the
// module's. A process that never runs such a backend never loads its libraries; a module that
// does not load (a library missing at run time) makes its backends' points a plan-time error
// that says why. This header depends on nothing above the backends.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/collective.hpp"
#include "backends/device.hpp"
#include "backends/graph.hpp"
#include "backends/kernel.hpp"
#include "backends/nvml.hpp"
#include "common/param_spec.hpp"
#include "common/value.hpp"

namespace d500 {

// Whether plan-time checks may load code that a campaign names (the custom backend's library,
// whose constructors run when it is loaded). `d500 plan --dry-run` turns it off: a check then
// looks at the file alone. On by default: a real plan loads it (docs/trust.md).
void set_plan_loads_code(bool on);
bool plan_loads_code();

// A setting a backend owns: a campaign key that only points on this backend take (cuDNN's
// algorithms, the arithmetic, a library's path). Each backend declares its own in its folder
// (src/backends/<name>/<name>_settings.cpp, listed by d500_backend's SETTINGS, compiled into every
// build, so that a build without the backend still knows the key and says the backend is missing);
// backends/settings.hpp gives the workloads that run on backends their union and the generic
// checks, so that no workload names a backend.
struct BackendSetting {
  // Name, type, choices and help (what it does on this backend). Its default is "": the
  // backend's own choice.
  ParamSpec spec;
  // The workloads whose points it changes; on another workload's point it is cleared (it changes
  // nothing, nor the id). Empty: every workload that runs on backends.
  std::vector<std::string> workloads{};
  // A value that is the backend's own choice, normalised to "" so that the id does not change:
  // `neutral` by default, `neutral_for` by workload where it differs.
  std::string neutral{};
  std::vector<std::pair<std::string, std::string>> neutral_for{};
  // A default that changed: a point of this backend that leaves the key unset is planned with
  // this value, which its id then names, so that the ids of points planned before (unset,
  // or the old default, normalised to "" by `neutral`) keep the meaning they had.
  std::string planned{};
  // Workloads on which the setting left unset follows another key rather than being `neutral`
  // (cuda's math on gemm and conv2d: the dtype's arithmetic): no meaning of "" is recorded there.
  std::vector<std::string> unset_follows{};
  bool required = false;     // a point on this backend must set it
  bool path = false;         // a file's path: made absolute (jobs run elsewhere than `d500 plan`)
  std::string other_note{};  // said when a point on another backend sets it
  // Said when a point on this backend names one of another backend's choices for the key (the
  // campaign's choices are the union of the declaring backends').
  std::string choices_note{};
};

// Registered with designated initializers; what a backend leaves out stays empty.
struct BackendInfo {
  std::string name{};
  std::string description{};
  // The baseline every other backend is validated against (workloads run it as their own
  // implementation); exactly one backend is.
  bool reference = false;
  // Level 0's collectives on the host through MPI itself (workloads/level0/collectives.cpp);
  // a backend with make_collective runs them on its own library instead.
  bool host_collectives = false;
  std::vector<BackendSetting> settings{};  // its own campaign keys (BackendSetting)
  bool built = false;
  std::string not_built_reason{};          // when !built
  std::string module{};                    // its module's file when in one (loaded at first use), else ""
  std::function<std::string()> version{};  // library version(s), when built
  // Level-0 operators: which ones this backend has kernels for, and a kernel for a problem
  // (created untimed over the problem's buffers, running on `threads` threads).
  std::function<bool(const std::string& op)> supports{};
  std::function<std::unique_ptr<OpKernel>(OpProblem&, int threads)> make_kernel{};
  // Optional plan-time check of a point run on this backend: "" when it can run, else why not
  // (the custom backend loads the point's library here).
  std::function<std::string(const Params&)> check_point{};
  // Optional: a bound on the bytes the backend's kernel allocates for a problem beyond its
  // tensors (lowering buffers, reordered copies, results allocated per call), for the plan-time
  // memory estimate. Absent: none (a custom library's own allocations are unknown).
  std::function<std::int64_t(const OpProblem&)> workspace_bytes{};
  // Level 1, d500's executor: a kernel for one node of a graph (created untimed over its
  // buffers, on `threads` threads), or nullptr when this backend has none for that node (the
  // executor then runs the reference's, and says so per node).
  std::function<std::unique_ptr<NodeKernel>(const NodeProblem&, int threads)> make_node_kernel{};
  // Level 1 on a device: the memory d500's executor keeps the graph's tensors in (made untimed,
  // once per executor, on this rank's device). A backend with it gets device pointers in its
  // NodeProblems; without it, host pointers.
  std::function<std::unique_ptr<DeviceMemory>()> make_device_memory{};
  // Level 1, d500's executor with the point's memory_format = "channels_last": how this backend's
  // kernel for a node (its shapes and the point, no data; NodeProblem::training set) takes
  // channels-last tensors (graph.hpp's Takes). It must agree with make_node_kernel: a node
  // said to take them gets a kernel that does (the executor refuses a fallback there). Absent:
  // Never for every node.
  std::function<Takes(const NodeProblem&)> channels_last{};
  // Level 1, d500's executor with the point's math = "bf16": how this backend's kernel for a node
  // takes float tensors stored in bfloat16 (TensorView::bf16), in the same terms and with the same
  // promise. Absent: Never (the activations stay float32; the products round their own copies).
  std::function<Takes(const NodeProblem&)> bf16_storage{};
  // Level 1, a framework's own executor of a whole graph (Deep500's native executors): present
  // on backends that are one (libtorch-native).
  std::function<std::unique_ptr<GraphRunner>(const RunnerSpec&)> make_graph_runner{};
  // Optional plan-time check that this backend's own executor can run a graph ("" when so).
  std::function<std::string(const Graph&)> check_graph{};
  // Its graph runner has optimizers of its own (GraphRunner::native_optimizer): training may
  // take optimizer_impl = "native".
  bool native_optimizer = false;
  // Level 0's GEMM in reduced precision (dtype tf32, bf16, fp16): only such a backend takes them.
  bool reduced_precision = false;
  // Level 1, d500's executor with math = "bf16": a convolution's bias is added after its result is
  // rounded to bfloat16 (cuda: cuDNN writes the bfloat16 result, then the bias is added), not
  // before (oneDNN's primitive adds it to the float32 sums): what the yardstick's simulation of the
  // step does (ExecutorSpec::bias_after_rounding).
  bool bf16_bias_after_rounding = false;
  // Level 0's collectives on this backend's own communication library (NCCL), made (untimed,
  // collectively: every rank of the job at once) for a problem.
  std::function<std::unique_ptr<CollectiveKernel>(CollectiveProblem&)> make_collective{};
  // Level 3's collective on another backend's device memory (a training scheme on d500's
  // executor on cuda averaging gradients where they are), made collectively over `comm`.
  std::function<std::unique_ptr<DeviceCollective>(DeviceMemory&, MPI_Comm)> make_device_collective{};
  // A device backend built without a device to run on: why none is visible ("" when one is).
  // Points on it then fail at setup (backend-failed); `d500 backends` says "built, no device".
  std::function<std::string()> no_device{};
  // A device backend: this rank's device in words (index, model, PCI bus, UUID; "none: <why>"),
  // for the job's rank -> device map, and the device's facts (model, clocks, ECC, driver) for the
  // job's machine record. Read once per job that has a point on such a backend.
  std::function<std::string()> rank_device{};
  std::function<std::vector<std::pair<std::string, std::string>>()> device_facts{};
  // A device backend: the counters of this rank's device (backends/nvml.hpp: energy, time held
  // back by the power or thermal limit, the clock now), read at each of its points' start and
  // end, outside timing, for the point's device.* state.
  std::function<nvml::Reading()> device_reading{};
  // A device backend: this rank's device's arithmetic peak for "fp32", "tf32", "bf16" or "fp16"
  // as a point's facts (device.peak_flops, FLOP/s, 0 when unknown; device.peak_basis, the
  // formula or why there is none), for the report's share of peak.
  std::function<std::vector<std::pair<std::string, Value>>(const std::string& arithmetic)> device_peak{};
};

// Calls `visit(field_name, &BackendInfo::field)` for every function of a BackendInfo: what a
// module's declaration and its registration must agree on. A new function field goes here too.
template <class Visit>
void for_each_backend_function(Visit&& visit) {
  visit("version", &BackendInfo::version);
  visit("supports", &BackendInfo::supports);
  visit("make_kernel", &BackendInfo::make_kernel);
  visit("check_point", &BackendInfo::check_point);
  visit("workspace_bytes", &BackendInfo::workspace_bytes);
  visit("make_node_kernel", &BackendInfo::make_node_kernel);
  visit("make_device_memory", &BackendInfo::make_device_memory);
  visit("channels_last", &BackendInfo::channels_last);
  visit("bf16_storage", &BackendInfo::bf16_storage);
  visit("make_graph_runner", &BackendInfo::make_graph_runner);
  visit("check_graph", &BackendInfo::check_graph);
  visit("make_collective", &BackendInfo::make_collective);
  visit("make_device_collective", &BackendInfo::make_device_collective);
  visit("no_device", &BackendInfo::no_device);
  visit("rank_device", &BackendInfo::rank_device);
  visit("device_facts", &BackendInfo::device_facts);
  visit("device_reading", &BackendInfo::device_reading);
  visit("device_peak", &BackendInfo::device_peak);
}

// The registered backend `name` of its module, loading the module at the first call (once per
// process, thread-safe); throws d500::Error saying why when the module does not load.
const BackendInfo& module_backend(const std::string& name);

class BackendRegistry {
 public:
  void add(BackendInfo info);
  // A backend this build lacks: listed, with the reason, never run.
  void add_missing(std::string name, std::string description, std::string reason);
  // The settings of backend `name` (registered or missing), from its folder's settings file.
  void add_settings(const std::string& name, std::vector<BackendSetting> settings);
  // A backend in module `module` (a file name, found beside libd500core): `declared` holds what
  // is known without loading it (name, description, supports, the flags; a function that needs
  // the module's libraries is left empty), `provided` the functions the module registers. Each
  // of those becomes one that loads the module at its first call and forwards to it.
  template <class... F>
  void declare(const std::string& module, BackendInfo declared, F BackendInfo::*... provided) {
    (forward(declared, provided), ...);
    declared.module = module;
    add(std::move(declared));
  }
  const std::vector<BackendInfo>& all() const { return list_; }

 private:
  template <class R, class... A>
  static void forward(BackendInfo& b, std::function<R(A...)> BackendInfo::*field) {
    b.*field = [name = b.name, field](A... a) -> R { return (module_backend(name).*field)(std::forward<A>(a)...); };
  }
  std::vector<BackendInfo> list_;
};

const std::vector<BackendInfo>& all_backends();
const BackendInfo* find_backend(const std::string& name);
std::vector<std::string> built_backend_names();
// Loads the module of backend `name` if it is in one and not loaded yet: "" when it is ready (or
// needs no module), else why its module did not load. The planner calls it for every point's
// backend, the worker for its job's before the first point.
std::string load_backend(const std::string& name);
// Whether backend `name` can be asked without loading anything (in the core, or its module loaded).
bool backend_loaded(const std::string& name);
// A built backend's version(s); one in a module that this process has not loaded, or that did not
// load, says so instead (never loading it for its version).
std::string backend_version(const BackendInfo& b);
// "name=version" (backend_version) of every built backend, for the results file's environment record.
std::vector<std::pair<std::string, std::string>> built_backend_versions();

}  // namespace d500
