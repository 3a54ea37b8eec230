#pragma once
// d500's graph executor: runs a Graph node by node on one backend's kernels (the reference where
// the backend has none), for inference or a training step (forward, then backpropagation in
// reverse topological order). Everything is prepared once, untimed: kernels and their
// primitives, and one memory plan -- activations, gradients and temporaries placed in a single
// arena by their lifetimes over the step (a buffer is reused once its tensor is dead; forward
// tensors the backward pass reads stay alive until then). Views (Reshape, Flatten, ...) share
// their input's storage. A tensor used by several nodes gets the sum of their gradients: the
// first contribution writes its buffer, later ones are added to it.
//
// With double_precision the same executor runs the reference kernels in double: the yardstick
// every executor's outputs and gradients are validated against.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/graph.hpp"
#include "backends/registry.hpp"
#include "networks/kinks.hpp"

namespace d500 {

// A runner's spec (float inputs as float32, converted for the yardstick) and what d500's own
// executor adds to it.
struct ExecutorSpec : RunnerSpec {
  const BackendInfo* backend = nullptr;  // nullptr: the reference backend
  bool double_precision = false;
  // With double_precision: nonzero seeds float32's rounding simulated on every value a node writes
  // (each multiplied by 1 + u 2^-24, u uniform in [-1, 1)): the yardstick's sensitivity to float
  // rounding (validate.hpp's rounding_spread).
  std::uint64_t rounding_noise = 0;
  // With double_precision: nonzero rounds the two float inputs of every Conv, ConvTranspose, Gemm and MatMul (and,
  // backward, the output gradient they read) to this many mantissa bits, to nearest even, before
  // the node computes (10: TF32 as tensor cores take float32 with math = "tf32"); the values are
  // put back after. At 7 bits or fewer (7: bfloat16, math = "bf16") a Conv's and ConvTranspose's
  // results are rounded too (y forward, dx and dw backward), as cuDNN writes them in bfloat16.
  // The yardstick of reduced-precision arithmetic.
  int reduced_mantissa = 0;
  // With reduced_mantissa: the tensors the simulated step stores in that precision (per tensor;
  // empty: none), as GraphExecutor::bf16_plan() of the step on a backend says: every value a node
  // writes into one of them, or into its gradient, is rounded and stays so, as is the sum of a
  // gradient's contributions.
  std::vector<bool> reduced_storage;
  // With reduced_mantissa <= 7: a Conv's result is rounded before its bias is added (the sum then
  // rounded again where it is stored), as BackendInfo::bf16_bias_after_rounding says the step's
  // backend does; false: rounded once, bias included.
  bool bias_after_rounding = false;
  // With double_precision, training: the branches its Relu, AddRelu and BatchNormRelu nodes take
  // are recorded, measured or chosen there (networks/kinks.hpp); nullptr: none.
  KinkBranches* kinks = nullptr;
  bool keep_all = false;          // no buffer reuse: every tensor stays readable (diagnosis)
  const Params* point = nullptr;  // the point's parameters, handed to the backend's kernels
};

class DeviceOptimizer;

class GraphExecutor final : public GraphRunner {
 public:
  explicit GraphExecutor(const ExecutorSpec& spec);
  ~GraphExecutor() override;
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  void forward(int micro) override;
  void backward(int micro) override;
  void infer() override;
  std::vector<float> buffer(std::size_t k) override;
  void set_buffer(std::size_t k, std::span<const float> v) override;
  std::vector<double> output(std::size_t i) override;
  std::vector<double> gradient(std::size_t k) override;
  std::string describe() const override;
  // Any tensor's current value (keep_all makes every one readable after a step); empty when the
  // tensor has no storage.
  std::vector<double> tensor(int t);
  // Whether tensor t (and its gradient) is stored channels-last: with the point's memory_format =
  // "channels_last", on a backend whose kernels take it (TensorView::channels_last).
  bool channels_last(int t) const;
  // The same plan for every tensor of spec's graph, worked out without making an executor
  // (nothing loaded or allocated): what channels_last(t) of GraphExecutor(spec) would say.
  static std::vector<bool> channels_last_plan(const ExecutorSpec& spec);
  // Whether tensor t (and its gradient) is stored in bfloat16: with the point's math = "bf16", on
  // a backend whose kernels take it (TensorView::bf16); read back as the float it stands for.
  bool bf16(int t) const;
  // The same for every tensor (ExecutorSpec::reduced_storage of the yardstick that simulates it).
  const std::vector<bool>& bf16_plan() const;
  // Whether its backend adds a convolution's bias after rounding the result (math = "bf16":
  // BackendInfo::bf16_bias_after_rounding), as its yardstick's simulation then must.
  bool bias_after_rounding() const;
  // That plan worked out without making an executor, as channels_last_plan (on a device backend
  // its rule may ask the device: the cuda backend's asks cuDNN once per process).
  static std::vector<bool> bf16_storage_plan(const ExecutorSpec& spec);

  // One timed step of the schedule: a node's forward or backward pass, or the loss's seed.
  struct Step {
    int node = -1;  // index into graph->nodes; -1: seeding the loss gradient
    bool backward = false;
    std::string impl;  // what computed it: "onednn convolution", "reference", "reference (fallback)"
    double flops = 0;
  };
  const std::vector<Step>& steps() const { return steps_; }
  // When set, each step's duration (ns) of the coming forward/backward calls is added to
  // slots[step index]: one int64 per step, preallocated by the caller.
  void time_steps(std::int64_t* slots) { slots_ = slots; }
  std::int64_t arena_bytes() const { return arena_bytes_; }  // planned activations and gradients
  // The device memory the tensors live in (a device backend's), or nullptr on the host.
  DeviceMemory* device() const;
  std::int64_t persistent_bytes() const { return persistent_bytes_; }  // weights, inputs, parameter gradients
  // The optimizer's view (level 2): a parameter's storage and gradient, in the executor's float type
  // (on a device: device pointers; parameter() and parameter_gradient() give the host's copies).
  void* param_data(std::size_t k);
  void* param_grad(std::size_t k);
  void constants_changed();
  void inputs_changed() override;
  float* parameter(std::size_t k) override;
  const float* parameter_value(std::size_t k) override;
  const float* parameter_gradient(std::size_t k) override;
  // On a device: the host's copies handed out by parameter() since are uploaded first.
  void parameters_changed() override;
  // On a device: SGD, momentum and Nesterov (PyTorch's rules, as d500's reference) on the device
  // through DeviceMemory::axpy and scale, reading the device gradients and leaving the device's
  // parameters the newer ones (parameter() downloads them when asked); nullptr elsewhere.
  std::unique_ptr<Optimizer> native_optimizer(const OptimizerSpec& s) override;
  bool on_gradients_ready(GradientsReady f) override {
    ready_ = std::move(f);
    return true;
  }
  DeviceMemory* device_memory() override { return device(); }
  std::int64_t device_peak_bytes() const override { return device() ? device()->peak_bytes() : -1; }
  float* device_gradient(std::size_t k) override;
  void device_gradients_changed() override;
  float* device_parameter(std::size_t k) override;
  void device_parameters_changed() override;
  // On a device: passes and the device optimizer's step without a wait at their end; the step's
  // marks are the device's events (DeviceMemory::mark) after those of time_steps().
  bool defer_waits(bool on) override;
  bool stage_inputs() override;
  void inputs_from_stage() override;
  void step_mark(std::size_t i) override;
  void finish() override;
  std::int64_t step_mark_ns(std::size_t i, std::size_t j) override;
  // On a device that records its work (DeviceMemory::can_capture), with the point's
  // cuda_graph = "step": the training step's passes and the device optimizer's step recorded
  // once, then replayed (GraphRunner::records_steps).
  bool records_steps() override;
  void begin_step_capture() override;
  void end_step_capture() override;
  void replay_step() override;

 private:
  friend class DeviceOptimizer;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<Step> steps_;
  std::int64_t* slots_ = nullptr;
  GradientsReady ready_;
  std::int64_t arena_bytes_ = 0, persistent_bytes_ = 0;
};

// A node with its tensors' types and shapes but no data: what the op table's work functions read.
NodeProblem node_shapes(const Graph& g, const Node& n, bool training);

// The runner of a point on `backend`: the backend's own executor of whole graphs when it is one
// (libtorch-native), else d500's executor on its kernels.
std::unique_ptr<GraphRunner> make_runner(const BackendInfo& backend, const RunnerSpec& spec,
                                         const Params* point = nullptr);

// What gets gradients in a training step: for each tensor, whether the loss depends on it
// through differentiable inputs and it depends on a parameter.
std::vector<bool> tensors_needing_gradients(const Graph& g, int loss, const std::vector<int>& params);
// The running statistics a training step keeps (RunnerSpec::buffers): each BatchNormalization's
// running mean and variance (inputs 3 and 4) where they are float initializers of its own and
// the node has no outputs of its own for them; in node order, mean then variance.
std::vector<int> running_statistics(const Graph& g);
// The weights a training step updates: the model's float initializers that get a gradient
// (running statistics and class weights, which none of their consumers differentiates, do not).
std::vector<int> trainable_params(const Graph& g, int loss);

}  // namespace d500
