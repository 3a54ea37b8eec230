#pragma once
// Level 1's contract between the network executors and the backends: a network as a static
// graph (every tensor's type and shape known at load time, nodes in topological order, constant
// data), one node as a backend sees it (NodeProblem), a backend's kernel for it (NodeKernel),
// and a framework's own executor of a whole graph (GraphRunner). Nothing here knows protobuf:
// the ONNX loader (networks/onnx.cpp) builds Graphs, d500's executor (networks/executor.cpp)
// runs them node by node on any backend's kernels, and a framework-native executor (LibTorch's,
// in backends/libtorch/) runs them its own way. Level 0's contract is kernel.hpp.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backends/device.hpp"
#include "backends/optimizer.hpp"
#include "common/value.hpp"

namespace d500 {

class DeviceMemory;  // backends/device.hpp

// Element types, numbered as ONNX's TensorProto.DataType. Networks compute in float32; int64,
// int32 and bool tensors carry indices, shapes and masks.
enum class DType : std::uint8_t { Undefined = 0, F32 = 1, U8 = 2, I8 = 3, I32 = 6, I64 = 7, Bool = 9, F64 = 11 };
const char* dtype_name(DType t);
std::size_t dtype_size(DType t);  // 0 for Undefined
bool dtype_supported(DType t);    // F32, I32, I64, Bool: what the executors run

using Shape = std::vector<std::int64_t>;
std::int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[8,3,224,224]"

// An ONNX attribute after loading. Tensor-valued attributes (Constant's `value`) become constant
// tensors of the graph when the node is folded, so they are kept as raw bytes here.
struct Attr {
  enum class Kind { Int, Float, String, Ints, Floats, Tensor } kind = Kind::Int;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  DType tensor_type = DType::Undefined;  // Kind::Tensor
  Shape tensor_shape;
  std::vector<std::byte> tensor_data;
};
// Attributes made in code (by shape inference, by d500's appended nodes, by tests).
inline Attr int_attr(std::int64_t v) {
  Attr a;
  a.kind = Attr::Kind::Int;
  a.i = v;
  return a;
}
inline Attr ints_attr(std::vector<std::int64_t> v) {
  Attr a;
  a.kind = Attr::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
inline Attr float_attr(double v) {
  Attr a;
  a.kind = Attr::Kind::Float;
  a.f = v;
  return a;
}
inline Attr string_attr(std::string v) {
  Attr a;
  a.kind = Attr::Kind::String;
  a.s = std::move(v);
  return a;
}

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

struct Node {
  std::string name, op;      // op: the ONNX op_type (default domain)
  std::vector<int> in, out;  // tensor ids; -1: an optional input or output that is absent
  std::map<std::string, Attr> attrs;

  bool has(const std::string& a) const { return attrs.count(a) > 0; }
  std::int64_t attr_i(const std::string& a, std::int64_t dflt) const;
  double attr_f(const std::string& a, double dflt) const;
  std::string attr_s(const std::string& a, const std::string& dflt) const;
  std::vector<std::int64_t> attr_ints(const std::string& a, std::vector<std::int64_t> dflt = {}) const;
  // "Conv node 'conv1'": how errors name a node.
  std::string label() const;
};

struct Graph {
  std::string name;
  int opset = 0;  // of the default domain
  std::vector<TensorInfo> tensors;
  std::vector<Node> nodes;                          // topological order
  std::vector<int> inputs, outputs;                 // data inputs (initializers excluded), outputs
  std::map<int, std::vector<std::byte>> constants;  // tensor id -> value (initializers, folded nodes)
  std::set<int> initializers;                       // constants that are the model's initializers (its weights)

  int find(const std::string& tensor_name) const;  // -1 when absent
  bool is_const(int t) const { return t >= 0 && constants.count(t) > 0; }
  std::int64_t bytes(int t) const {
    return numel(tensors[static_cast<std::size_t>(t)].shape) *
           static_cast<std::int64_t>(dtype_size(tensors[static_cast<std::size_t>(t)].dtype));
  }
  const TensorInfo& info(int t) const { return tensors[static_cast<std::size_t>(t)]; }
  // Adds a tensor and returns its id.
  int add_tensor(TensorInfo t);
};

// A tensor as a kernel sees it: its logical type, shape and storage. Float tensors hold the
// executor's float type (float; double in the validation yardstick).
struct TensorView {
  DType dtype = DType::Undefined;
  const Shape* shape = nullptr;
  void* data = nullptr;  // nullptr: an absent optional input/output, or no gradient wanted
  // A 4-D float tensor stored channels-last: N, H, W, C in memory, its shape still [N,C,H,W].
  // d500's executor sets it (with the point's memory_format = "channels_last") only on the views
  // of a node whose backend says it reads it (BackendInfo::channels_last); a gradient's view is
  // stored as its tensor is.
  bool channels_last = false;
  // A float tensor stored in bfloat16 (2 bytes an element, rounded to nearest even when written):
  // d500's executor sets it (with the point's math = "bf16", as autocast keeps activations) only
  // on the views of a node whose backend says it takes it (BackendInfo::bf16_storage); a
  // gradient's view is stored as its tensor is. Its dtype stays F32, the tensor's logical type.
  bool bf16 = false;
  std::int64_t numel() const { return shape ? d500::numel(*shape) : 0; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  bool present() const { return data != nullptr; }
};

// One node of a graph, bound to the buffers the executor planned for it.
struct NodeProblem {
  const Node* node = nullptr;
  int opset = 0;
  std::vector<TensorView> in, out;
  // Training only: gradients. din[i] is written by backward() (its data is nullptr when input i
  // needs none); dout[j] is read (nullptr: output j has no gradient, which means zero).
  std::vector<TensorView> din, dout;
  std::vector<bool> const_in;      // input i is a constant (a weight): a kernel may prepare it once
  bool training = false;           // the pass: BatchNormalization uses batch statistics; backward() is called
  const Params* params = nullptr;  // the point's parameters (a custom backend's library), or none
  // Training: the step being run (Dropout draws its masks from it), or nullptr (a fixed mask).
  const std::int64_t* step = nullptr;
  // A device backend's executor memory (backends/device.hpp): every view above points into it,
  // and the kernel enqueues its work on that memory's stream. nullptr on the host.
  DeviceMemory* device = nullptr;
};

// How a backend's kernel for a node takes a storage choice of d500's executor -- channels-last
// tensors (TensorView::channels_last, BackendInfo::channels_last) or bfloat16 ones
// (TensorView::bf16, BackendInfo::bf16_storage) -- as the backend says before the kernel is made:
// Never (every tensor as the graph declares it: NCHW, float32), Same (its 4-D float tensors,
// inputs and outputs and their gradients, stored alike, either way: an element-wise node, a
// normalisation, a pooling; for the layout, a tensor whose H and W are both 1 is the same bytes
// in both and may say either) or Each (each either way, independently: a convolution, which
// converts what is not as it computes).
enum class Takes : std::uint8_t { Never, Same, Each };

// A backend's implementation of one node, created untimed over its buffers: primitives,
// workspaces and weight layouts are prepared at creation, never inside forward()/backward().

class NodeKernel {
 public:
  virtual ~NodeKernel() = default;
  virtual void forward() = 0;   // reads in, writes out (training: also keeps what backward needs)
  virtual void backward() = 0;  // reads dout (and the saved tensors the op declares), writes din
  // The weights (constant inputs) changed: a kernel that prepared them must do so again.
  virtual void constants_changed() {}
  // What computes this node, for the per-node breakdown: "onednn convolution", "reference".
  virtual std::string impl() const = 0;
};

// A framework's own executor of a whole graph (Deep500's "native" executors): the framework's
// operators and its autograd, d500 only feeding inputs and reading results.
struct RunnerSpec {
  const Graph* graph = nullptr;
  bool training = false;
  int loss = -1;            // training: the scalar float tensor whose gradient is 1
  std::vector<int> params;  // training: the float constants whose gradients are wanted
  // Training: the running statistics the training forward pass updates in place, as frameworks
  // keep them (running_statistics(): each BatchNormalization's running mean and variance, inputs
  // 3 and 4, by ONNX's momentum); infer() normalises with them. Empty: none kept (the evaluation
  // batch's own statistics normalise it).
  std::vector<int> buffers;
  // Training: the step being run, read at every forward pass (Dropout's masks are drawn from the
  // node's seed, this step and the pass's number within it: the same in every framework and
  // after a resume); nullptr: every pass draws the same mask.
  const std::int64_t* step = nullptr;
  // Per graph input (in graph.inputs order): the data of all micro-batches, one after another,
  // each the graph input's size. Read again at inputs_changed(): it outlives the runner (d500's
  // executor on a device page-locks a training input of 1 MiB or more while it lives).
  std::vector<const void*> inputs;
  int micro_batches = 1;
  int threads = 1;
  // A framework's own executor on a GPU (libtorch-cuda), from the point's keys: math ("": strict
  // float32, "tf32", "bf16"), memory_format ("": NCHW, "channels_last") and cudnn_algorithms
  // ("": deterministic, "heuristic", "find"). d500's executor reads them from the point itself.
  std::string math, memory_format, cudnn_algorithms;
};

class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // Micro-batch `micro` of the step: inference or the training forward pass (loss included).
  virtual void forward(int micro) = 0;
  // Training: gradients of (loss / micro_batches) added over the micro-batches; micro 0 starts
  // from zero.
  virtual void backward(int micro) = 0;
  // Untimed, after a step: graph output `i` (of the last micro-batch) and the gradient of
  // spec.params[k], as doubles.
  virtual std::vector<double> output(std::size_t i) = 0;
  virtual std::vector<double> gradient(std::size_t k) = 0;
  virtual std::string describe() const = 0;

  // Training (level 2). The data behind spec.inputs was rewritten (the next batch): a runner
  // that copied it at construction copies it again.
  virtual void inputs_changed() {}
  // Float32 storage of spec.params[k] and its gradient after the last backward pass (nullptr
  // when it has none); the gradient's storage may move between steps.
  virtual float* parameter(std::size_t k) = 0;
  // spec.params[k]'s values to read (a snapshot, a checkpoint, a comparison): on a device, a host
  // copy that is not handed out for writing, so the next step has nothing to upload for it.
  virtual const float* parameter_value(std::size_t k) { return parameter(k); }
  virtual const float* parameter_gradient(std::size_t k) = 0;
  // The parameters were written (an optimizer step, a checkpoint restored).
  virtual void parameters_changed() {}
  // Training: the evaluation's forward pass, as a framework's eval mode runs it, on the current
  // inputs: BatchNormalization normalises with the running statistics (spec.buffers; without
  // them, with the batch's), nothing is kept for a backward pass and no buffer changes. output(i)
  // reads its results. A runner built for inference runs forward(0).
  virtual void infer() = 0;
  // Training: spec.buffers[k]'s values as float32 (host copies), and written back (validation
  // and checkpoints restore them; level 3 averages them over the workers).
  virtual std::vector<float> buffer(std::size_t k) = 0;
  virtual void set_buffer(std::size_t k, std::span<const float> v) = 0;
  // The framework's own optimizer over this runner's parameters, or nullptr when it has none.
  virtual std::unique_ptr<Optimizer> native_optimizer(const OptimizerSpec&) { return nullptr; }
  // Level 3: during backward() of the step's last micro-batch, after each backward step, `f`
  // gets the parameters whose gradients that step made final (often none), so that a scheme
  // can start communicating them while the pass goes on (and make progress on what is in
  // flight). Returns false when the runner cannot say: its gradients are final only when
  // backward() returns. Between backward() and the optimizer, the storage behind
  // parameter_gradient(k) may be written (level 3 averages gradients there in place).
  using GradientsReady = std::function<void(std::span<const std::size_t>)>;
  virtual bool on_gradients_ready(GradientsReady) { return false; }
  // A runner whose tensors live on a device (d500's executor on cuda): that memory (nullptr on
  // the host), and spec.params[k]'s gradient there after backward (nullptr: none), which a scheme
  // may rewrite in place between backward and the optimizer (level 3 averaging where the data
  // is) and then says so: parameter_gradient() reads the rewritten values.
  virtual DeviceMemory* device_memory() { return nullptr; }
  // The device memory the runner has held at most (bytes, as DeviceMemory::peak_bytes measures
  // it: device-wide use beyond what it was before the runner's setup), or -1 on the host.
  virtual std::int64_t device_peak_bytes() const { return -1; }
  virtual float* device_gradient(std::size_t) { return nullptr; }
  virtual void device_gradients_changed() {}
  // The same for spec.params[k] itself: its device storage, made current first (a host copy
  // handed out by parameter() goes up), which a scheme may rewrite between steps (model
  // averaging where the data is) and then says so: parameter() then reads the rewritten values.
  virtual float* device_parameter(std::size_t) { return nullptr; }
  virtual void device_parameters_changed() {}
  // A training step on a device as a framework's own loop runs it (level 2 on a GPU): with
  // defer_waits(true), forward(), backward() and the native optimizer's step() enqueue their work
  // and return without waiting for the device; finish() is the step's one wait. step_mark(i)
  // (i < kStepMarks) records a point on the device's stream between the passes, and after
  // finish() step_mark_ns(i, j) is the device's own time between two of them (-1: it cannot
  // say). Everything that reads a result (output(), gradient(), parameter_value(), a copy to
  // the host) still waits for it first. Returns false (and changes nothing) where every call
  // ends with its results there: the host's executors.
  static constexpr std::size_t kStepMarks = 4;
  virtual bool defer_waits(bool) { return false; }
  // With defer_waits: the inputs' host data was rewritten (the next batch) while a step computes;
  // stage_inputs() copies it to the device beside that step (DeviceMemory::upload_beside) and
  // returns true, and the next inputs_from_stage() (instead of inputs_changed()) waits for that
  // copy (long done, unless it was slower than the step) and takes the batch from there on the
  // device; the host data may be written again after it. false where the runner cannot (nothing
  // staged).
  virtual bool stage_inputs() { return false; }
  virtual void inputs_from_stage() { inputs_changed(); }
  virtual void step_mark(std::size_t) {}
  virtual void finish() {}
  virtual std::int64_t step_mark_ns(std::size_t, std::size_t) { return -1; }
  // With defer_waits: a training step recorded once and replayed as one unit on the device (a
  // CUDA Graph; the point's cuda_graph = "step"). records_steps() says whether the point asks for
  // it, and throws, naming why, where it asks and the step cannot be recorded (a node computed on
  // the host, a mask drawn per step). Between begin_step_capture() and end_step_capture() the
  // step's forward(0), backward(0) and native optimizer step() are recorded, not run; every
  // replay_step() then runs the recording (the batch taken before it as before). The optimizer
  // is told of each replay (Optimizer::replayed).
  virtual bool records_steps() { return false; }
  virtual void begin_step_capture() { throw Error(describe() + " records no steps"); }
  virtual void end_step_capture() { throw Error(describe() + " records no steps"); }
  virtual void replay_step() { throw Error(describe() + " records no steps"); }
};

// Multidirectional (numpy) broadcasting of two shapes; throws d500::Error naming `what` when
// they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);
// Row-major strides of a shape, and the strides with which `from` (right-aligned, size-1 axes
// repeated) is read at every position of `to`.
std::vector<std::int64_t> strides_of(const Shape& s);
std::vector<std::int64_t> broadcast_strides(const Shape& from, const Shape& to);

}  // namespace d500
