#include "networks/executor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "backends/device.hpp"
#include "backends/device_ops.hpp"
#include "backends/graph_ops.hpp"
#include "backends/half.hpp"
#include "backends/kernel.hpp"
#include "common/error.hpp"
#include "metrics/metrics.hpp"

namespace d500 {

NodeProblem node_shapes(const Graph& g, const Node& n, bool training) {
  NodeProblem p;
  p.node = &n;
  p.opset = g.opset;
  p.training = training;
  auto view = [&](int t) {
    TensorView v;
    if (t >= 0) v.dtype = g.info(t).dtype, v.shape = &g.tensors[static_cast<std::size_t>(t)].shape;
    return v;
  };
  for (int t : n.in) p.in.push_back(view(t));
  for (int t : n.out) p.out.push_back(view(t));
  return p;
}

std::unique_ptr<GraphRunner> make_runner(const BackendInfo& backend, const RunnerSpec& r, const Params* point) {
  if (backend.make_graph_runner) {
    RunnerSpec own = r;
    if (point) {
      own.math = str_param_or(*point, "math", "");
      own.memory_format = str_param_or(*point, "memory_format", "");
      own.cudnn_algorithms = str_param_or(*point, "cudnn_algorithms", "");
    }
    return backend.make_graph_runner(own);
  }
  ExecutorSpec e;
  static_cast<RunnerSpec&>(e) = r;
  e.backend = &backend;
  e.point = point;
  return std::make_unique<GraphExecutor>(e);
}

std::vector<bool> tensors_needing_gradients(const Graph& g, int loss, const std::vector<int>& params) {
  const std::size_t n = g.tensors.size();
  std::vector<bool> depends(n, false), contributes(n, false), need(n, false);
  for (int p : params) depends[static_cast<std::size_t>(p)] = true;
  auto is_float = [&](int t) { return t >= 0 && g.info(t).dtype == DType::F32; };
  for (const auto& node : g.nodes) {
    const OpSchema* s = find_op(node.op);
    bool any = false;
    for (std::size_t i = 0; i < node.in.size(); ++i)
      any = any || (is_float(node.in[i]) && (s->diff_in >> i & 1u) && depends[static_cast<std::size_t>(node.in[i])]);
    if (any)
      for (int t : node.out)
        if (is_float(t)) depends[static_cast<std::size_t>(t)] = true;
  }
  if (loss >= 0) contributes[static_cast<std::size_t>(loss)] = true;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const OpSchema* s = find_op(it->op);
    bool any = false;
    for (int t : it->out) any = any || (t >= 0 && contributes[static_cast<std::size_t>(t)]);
    if (any)
      for (std::size_t i = 0; i < it->in.size(); ++i)
        if (is_float(it->in[i]) && (s->diff_in >> i & 1u)) contributes[static_cast<std::size_t>(it->in[i])] = true;
  }
  for (std::size_t t = 0; t < n; ++t) need[t] = depends[t] && contributes[t] && g.tensors[t].dtype == DType::F32;
  return need;
}

std::vector<int> trainable_params(const Graph& g, int loss) {
  std::vector<int> candidates;
  for (int t : g.initializers)
    if (g.info(t).dtype == DType::F32) candidates.push_back(t);
  const std::vector<bool> need = tensors_needing_gradients(g, loss, candidates);
  std::vector<int> params;
  for (int t : candidates)
    if (need[static_cast<std::size_t>(t)]) params.push_back(t);
  return params;
}

std::vector<int> running_statistics(const Graph& g) {
  std::map<int, int> uses;
  for (const auto& n : g.nodes)
    for (int t : n.in)
      if (t >= 0) ++uses[t];
  for (int t : g.outputs) ++uses[t];
  std::vector<int> out;
  for (const auto& n : g.nodes) {
    if (!is_batch_norm(n.op) || n.in.size() < 5) continue;
    // A node that writes the updated statistics itself (ONNX's training-mode outputs) keeps them in its graph.
    if (std::any_of(n.out.begin() + 1, n.out.end(), [](int t) { return t >= 0; })) continue;
    const int rm = n.in[3], rv = n.in[4];
    auto own = [&](int t) {
      return t >= 0 && g.initializers.count(t) && g.info(t).dtype == DType::F32 && uses[t] == 1;
    };
    if (own(rm) && own(rv) && rm != rv) out.insert(out.end(), {rm, rv});
  }
  return out;
}

// Buffer, a member type of GraphExecutor::Impl's, and what it needs: a named namespace rather than
// an anonymous one, since a unity build includes this file into another (GCC's -Wsubobject-linkage).
namespace executor_detail {

constexpr std::size_t kAlign = 64;
// A training input of this many bytes or more is page-locked on a device (DeviceMemory::pin).
constexpr std::size_t kPinFrom = std::size_t{1} << 20;
std::size_t round_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// 64-byte aligned, zeroed memory (touched here, so that no page fault happens in a timed region).
struct Buffer {
  std::byte* p = nullptr;
  std::size_t n = 0;
  Buffer() = default;
  explicit Buffer(std::size_t bytes) : n(bytes) {
    p = static_cast<std::byte*>(std::aligned_alloc(kAlign, round_up(std::max<std::size_t>(bytes, 1))));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, round_up(std::max<std::size_t>(bytes, 1)));
  }
  Buffer(Buffer&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~Buffer() { std::free(p); }
};

}  // namespace executor_detail

using namespace executor_detail;  // NOLINT(google-build-using-namespace): this file's own helpers

namespace {

// A request for arena memory, live over steps [def, end].
struct Request {
  std::size_t bytes;
  int def, end;
  std::size_t offset = 0;
};

// Greedy by size (the largest first, each at the lowest offset where it overlaps no placed
// request that is alive at the same time). Returns the arena size.
std::size_t place(std::vector<Request>& reqs) {
  std::vector<std::size_t> order(reqs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return reqs[a].bytes != reqs[b].bytes ? reqs[a].bytes > reqs[b].bytes : reqs[a].def < reqs[b].def;
  });
  std::vector<std::size_t> placed;
  std::size_t total = 0;
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (std::size_t i : order) {
    Request& r = reqs[i];
    busy.clear();
    for (std::size_t j : placed)
      if (reqs[j].def <= r.end && r.def <= reqs[j].end)
        busy.push_back({reqs[j].offset, reqs[j].offset + reqs[j].bytes});
    std::sort(busy.begin(), busy.end());
    std::size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + r.bytes <= b) break;
      at = std::max(at, e);
    }
    r.offset = at;
    total = std::max(total, at + r.bytes);
    placed.push_back(i);
  }
  return total;
}

template <class T>
void add_into(void* target, const void* src, std::int64_t n) {
  T* t = static_cast<T*>(target);
  const T* s = static_cast<const T*>(src);
  for (std::int64_t i = 0; i < n; ++i) t[i] += s[i];
}

// target += src over bfloat16 storage, each sum rounded to nearest even as a bfloat16 add
// writes it (a gradient's contributions, on the host).
void add_into_bf16(std::uint16_t* target, const std::uint16_t* src, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) target[i] = dev::add_bf16(target[i], src[i]);
}

// Bytes of an element as the executor stores it: floats as its float type (`fsz`: 4, or 8 in the
// yardstick), other types as they are.
std::size_t element_bytes(DType t, std::size_t fsz) { return t == DType::F32 ? fsz : dtype_size(t); }

// Storage of a view on a device (float32 there: no yardstick on a device).
std::size_t view_bytes(const TensorView& v) { return static_cast<std::size_t>(v.numel()) * element_bytes(v.dtype, 4); }

// The yardstick with float32's rounding simulated (ExecutorSpec::rounding_noise): every float
// value the node writes, forward and backward, multiplied by 1 + u 2^-24 with u uniform in
// [-1, 1) from a seeded generator (Monte Carlo arithmetic's model of a rounding to nearest).
class RoundingNoise final : public NodeKernel {
 public:
  RoundingNoise(std::unique_ptr<NodeKernel> k, const NodeProblem& p, std::uint64_t seed)
      : k_(std::move(k)), p_(p), state_(seed) {}
  void forward() override {
    k_->forward();
    perturb(p_.out);
  }
  void backward() override {
    k_->backward();
    perturb(p_.din);
  }
  void constants_changed() override { k_->constants_changed(); }
  std::string impl() const override { return k_->impl() + ", rounding noise"; }

 private:
  void perturb(const std::vector<TensorView>& ts) {
    for (const TensorView& t : ts) {
      if (!t.present() || t.dtype != DType::F32) continue;
      auto* v = static_cast<double*>(t.data);
      for (std::int64_t i = 0; i < t.numel(); ++i) v[i] *= 1.0 + uniform() * 0x1p-24;
    }
  }
  double uniform() {  // splitmix64, its top 53 bits as [-1, 1)
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
  }
  std::unique_ptr<NodeKernel> k_;
  NodeProblem p_;
  std::uint64_t state_;
};

// x rounded to `bits` mantissa bits, to nearest, ties to even (bfloat16's 7, TF32's 10).
double rounded_to(double x, int bits) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // |m| in [0.5, 1): bits + 1 significant bits kept
  return std::ldexp(std::nearbyint(std::ldexp(m, bits + 1)), e - bits - 1);
}
void round_all(const TensorView& t, int bits) {
  if (!t.present() || t.dtype != DType::F32) return;
  auto* v = static_cast<double*>(t.data);
  for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = rounded_to(v[i], bits);
}

// The yardstick of reduced-precision products (ExecutorSpec::reduced_mantissa): the node's two
// float inputs, and backward its output's gradient, rounded to `bits` mantissa bits (to nearest,
// ties to even) while it computes, as tensor cores round float32 operands with TF32; the exact
// values put back after, so that other readers of those tensors see them unrounded. With
// `results` (a bfloat16 convolution's: cuDNN writes y, dx and dw in bfloat16) the node's results
// are rounded too, and stay so; with `bias_after` as well (ExecutorSpec::bias_after_rounding) y
// is rounded before the bias (input 2) is added to it, per channel.
class ReducedInputs final : public NodeKernel {
 public:
  ReducedInputs(std::unique_ptr<NodeKernel> k, const NodeProblem& p, int bits, bool results, bool bias_after = false)
      : k_(std::move(k)),
        p_(p),
        bits_(bits),
        results_(results),
        bias_after_(results && bias_after && p.in.size() > 2 && p.in[2].present() && p.in[2].dtype == DType::F32) {}
  void forward() override {
    round({p_.in.size() > 0 ? &p_.in[0] : nullptr, p_.in.size() > 1 ? &p_.in[1] : nullptr, nullptr});
    std::vector<double> bias;
    if (bias_after_) {  // the convolution without it
      auto* b = static_cast<double*>(p_.in[2].data);
      bias.assign(b, b + p_.in[2].numel());
      std::fill(b, b + p_.in[2].numel(), 0.0);
    }
    k_->forward();
    restore();
    if (results_) round_all(p_.out[0], bits_);
    if (bias_after_) {
      std::copy(bias.begin(), bias.end(), static_cast<double*>(p_.in[2].data));
      add_per_channel(p_.out[0], bias);
    }
  }
  void backward() override {
    round({p_.in.size() > 0 ? &p_.in[0] : nullptr, p_.in.size() > 1 ? &p_.in[1] : nullptr,
           p_.dout.empty() ? nullptr : &p_.dout[0]});
    k_->backward();
    restore();
    if (results_)
      for (std::size_t i = 0; i < std::min<std::size_t>(2, p_.din.size()); ++i) round_all(p_.din[i], bits_);
  }
  void constants_changed() override { k_->constants_changed(); }
  std::string impl() const override {
    return k_->impl() + ", inputs " + (results_ ? "and results " : "") + "rounded to " + std::to_string(bits_) +
           " mantissa bits";
  }

 private:
  void round(std::initializer_list<const TensorView*> ts) {
    saved_.clear();
    for (const TensorView* t : ts) {
      if (!t || !t->present() || t->dtype != DType::F32) continue;
      auto* v = static_cast<double*>(t->data);
      bool seen = false;  // the same buffer twice (x @ x): rounded once, put back once
      for (const auto& s : saved_) seen = seen || s.first == v;
      if (seen) continue;
      saved_.emplace_back(v, std::vector<double>(v, v + t->numel()));
      round_all(*t, bits_);
    }
  }
  void restore() {
    for (auto& [v, keep] : saved_) std::copy(keep.begin(), keep.end(), v);
    saved_.clear();
  }
  // b[c] added to every element of channel c (axis 1) of y.
  static void add_per_channel(const TensorView& y, const std::vector<double>& b) {
    const std::int64_t n = (*y.shape)[0], c = static_cast<std::int64_t>(b.size()), plane = y.numel() / (n * c);
    auto* v = static_cast<double*>(y.data);
    for (std::int64_t i = 0; i < y.numel(); ++i) v[i] += b[static_cast<std::size_t>(i / plane % c)];
  }
  std::unique_ptr<NodeKernel> k_;
  NodeProblem p_;
  int bits_;
  bool results_, bias_after_;
  std::vector<std::pair<double*, std::vector<double>>> saved_;
};

// The yardstick of a step that stores tensors in reduced precision (ExecutorSpec::
// reduced_storage): what the node writes into such a tensor, forward, or into its gradient,
// backward, rounded to `bits` and left so, as a bfloat16 store rounds it. The views of `p`
// marked are those tensors'.
class RoundedStores final : public NodeKernel {
 public:
  RoundedStores(std::unique_ptr<NodeKernel> k, const NodeProblem& p, std::vector<bool> out, std::vector<bool> din,
                int bits)
      : k_(std::move(k)), p_(p), out_(std::move(out)), din_(std::move(din)), bits_(bits) {}
  void forward() override {
    k_->forward();
    for (std::size_t j = 0; j < p_.out.size(); ++j)
      if (out_[j]) round_all(p_.out[j], bits_);
  }
  void backward() override {
    k_->backward();
    for (std::size_t i = 0; i < p_.din.size(); ++i)
      if (din_[i]) round_all(p_.din[i], bits_);
  }
  void constants_changed() override { k_->constants_changed(); }
  std::string impl() const override { return k_->impl() + ", stores rounded to " + std::to_string(bits_) + " bits"; }

 private:
  std::unique_ptr<NodeKernel> k_;
  NodeProblem p_;
  std::vector<bool> out_, din_;
  int bits_;
};

// The reference's kernel for a node whose tensors are on a device: host mirrors of every tensor
// it touches, downloaded before the kernel runs and its results uploaded after. Correct, and
// slow where it happens; the per-node breakdown names it.
class ThroughHost final : public NodeKernel {
 public:
  ThroughHost(const NodeProblem& p, DeviceMemory& mem) : dev_(p), host_(p), mem_(mem) {
    host_.device = nullptr;
    mirror(dev_.in, host_.in);
    mirror(dev_.out, host_.out);
    mirror(dev_.din, host_.din);
    mirror(dev_.dout, host_.dout);
    ref_ = make_reference_node_kernel(host_);
  }
  void forward() override {
    fetch(dev_.in, host_.in);
    ref_->forward();
    put(dev_.out, host_.out);
  }
  void backward() override {
    // The inputs and outputs the backward pass reads (others may be dead and hold another
    // tensor's data by now: the reference does not read them), and the outputs' gradients.
    fetch(dev_.in, host_.in);
    fetch(dev_.out, host_.out);
    fetch(dev_.dout, host_.dout);
    ref_->backward();
    put(dev_.din, host_.din);
  }
  void constants_changed() override { ref_->constants_changed(); }
  std::string impl() const override { return "reference (fallback, through host)"; }

 private:
  void mirror(const std::vector<TensorView>& d, std::vector<TensorView>& h) {
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (!d[i].present()) continue;
      store_.emplace_back(view_bytes(d[i]));
      h[i].data = store_.back().p;
    }
  }
  void fetch(const std::vector<TensorView>& d, const std::vector<TensorView>& h) {
    for (std::size_t i = 0; i < d.size(); ++i)
      if (d[i].present()) mem_.download(h[i].data, d[i].data, view_bytes(d[i]));
  }
  void put(const std::vector<TensorView>& d, const std::vector<TensorView>& h) {
    for (std::size_t i = 0; i < d.size(); ++i)
      if (d[i].present()) mem_.upload(d[i].data, h[i].data, view_bytes(d[i]));
  }

  NodeProblem dev_, host_;
  DeviceMemory& mem_;
  std::vector<Buffer> store_;
  std::unique_ptr<NodeKernel> ref_;
};

// What the constructor works out before it allocates (construction only): which storage each
// tensor and gradient uses (aliasing), the schedule of steps, and the arena's requests.
struct Schedule {
  // Aliasing: views share their input's storage (root[t]: the tensor whose storage t uses).
  std::vector<int> root, producer;  // producer[t]: the node that writes t, -1: none
  std::vector<const OpSchema*> schema;
  // The schedule: per node its forward and backward step (-1: none).
  std::vector<int> fstep, bstep;
  int seed_step = -1, end = 0;
  // Training: the tensors that get gradients; groot[t]: the tensor whose gradient buffer t's
  // gradient uses; param_index[t]: t's index in spec.params, -1: not a parameter.
  std::vector<bool> need;
  std::vector<int> groot, param_index;
  struct Contribution {
    int step, node;
    std::size_t slot;
    int tensor;
    bool direct = true;  // writes the gradient buffer; else through a temporary, then added
  };
  std::vector<Contribution> contribs;
  std::map<std::pair<int, std::size_t>, std::size_t> contrib_of;  // (node, input slot) -> contribution
  std::vector<bool> view_aliased;  // per node: a view that hands its gradient over in place
  // Placement: the arena's requests, and each tensor's (data, gradient) and contribution's.
  std::vector<Request> reqs;
  std::vector<int> data_req, grad_req, temp_req;
};

}  // namespace

struct GraphExecutor::Impl {
  const Graph& g;
  ExecutorSpec spec;
  std::size_t fsz;  // bytes of a float element: 4, or 8 in the yardstick
  // A device backend's memory (declared first: released last), or null on the host.
  std::unique_ptr<DeviceMemory> dev;
  // Memory the executor owns: on the host, or on the device.
  struct Block {
    std::byte* p = nullptr;
    std::size_t n = 0;
  };
  std::vector<Buffer> host_blocks;
  std::vector<void*> dev_blocks;
  std::map<int, Block> consts;
  std::vector<Block> inputs_all, inputs_cur;
  std::vector<Block> pgrad;
  Block arena, seed;  // seed (device): 1 / micro-batches, copied into the loss's gradient
  std::vector<void*> data, grad;
  // Per tensor: stored channels-last (plan_channels_last), in bfloat16 (plan_bf16); its gradient
  // too.
  std::vector<bool> nhwc, half;
  bool stored_bf16(int t) const { return !half.empty() && half[static_cast<std::size_t>(t)]; }
  // Training on a device: the host's copies of the parameters (the authoritative ones between
  // steps: d500's optimizers, schemes and checkpoints write them, parameters_changed() uploads
  // them) and of their gradients (downloaded when first asked for after a backward pass).
  std::vector<std::vector<float>> host_params, host_grads;
  std::vector<bool> grads_on_host;
  // A host copy of a parameter is current (params_on_host: false once a device optimizer has
  // stepped) and was handed out by parameter() (params_handed: it may have been written since,
  // so it is the newer one: parameters_changed() and the device optimizer upload it).
  std::vector<bool> params_on_host, params_handed;
  // Before work on the device's parameters and gradients: the host copies handed out (written
  // or not, none older than the device's) go up.
  void push_handed() {
    for (std::size_t k = 0; k < host_params.size(); ++k) {
      if (params_handed[k]) dev->upload(param(k), host_params[k].data(), host_params[k].size() * sizeof(float));
      params_handed[k] = false;
    }
  }
  // The storage of spec.params[k].
  void* param(std::size_t k) const { return data[static_cast<std::size_t>(spec.params.at(k))]; }
  // Per-step times on a device: its events between steps (no wait), read once the pass is done;
  // without them, a wait after each step and the host's clock.
  bool marks = false;
  // defer_waits(true) on a device: no wait at a pass's end (unless its steps are timed one by
  // one); the step's marks follow the steps' in the device's events, from phase_marks on.
  bool deferred = false;
  std::size_t phase_marks = 0;
  // records_steps(): capturing between begin_step_capture() and end_step_capture(); recorded
  // once a recording ended (replay_step() runs it).
  bool capturing = false, recorded = false;
  std::vector<Block> staged;  // stage_inputs()' copies of inputs_all, made at its first

  // The step clock of one pass: lap() after each step adds its duration to the next slot.
  struct Clock {
    Impl& m;
    std::int64_t* slots;  // nullptr: not timed
    std::size_t laps = 0;
    std::int64_t t0 = 0;
    Clock(Impl& impl, std::int64_t* s) : m(impl), slots(s) {
      if (!slots) return;
      if (m.marks)
        m.dev->mark(0);
      else
        t0 = now_ns();
    }
    void lap() {
      if (!slots) return;
      if (m.marks) {
        m.dev->mark(++laps);
        return;
      }
      if (m.dev) m.dev->synchronize();
      const std::int64_t t1 = now_ns();
      slots[laps++] += t1 - t0;
      t0 = t1;
    }
    // Host work between steps that is no step's (a scheme's calls on gradients made ready): the
    // next step's time starts after it.
    void resume() {
      if (slots && !m.marks) t0 = now_ns();
    }
    // The pass's end: waits for the device, then reads its events.
    void end() {
      if (m.dev && (slots || !m.deferred)) m.dev->synchronize();
      if (slots && m.marks)
        for (std::size_t k = 0; k < laps; ++k) slots[k] += m.dev->mark_ns(k, k + 1);
    }
  };
  std::vector<std::unique_ptr<NodeKernel>> kernels;  // per node; null for views
  struct Add {
    void* target;
    const void* temp;
    std::int64_t n;
    bool bf16 = false;     // both stored in bfloat16
    bool rounded = false;  // the yardstick's: the sum rounded as stored (ExecutorSpec::reduced_storage)
  };
  struct Run {
    int node = -1;
    NodeKernel* kernel = nullptr;
    // A view's gradient handed back to its input (no kernel): copied when first, else added.
    void* copy_from = nullptr;
    void* copy_to = nullptr;
    bool copy_adds = false;
    std::int64_t copy_n = 0;
    std::vector<Add> adds;  // contributions written to temporaries, added after the kernel
  };
  std::vector<Run> fwd, bwd;
  // Training: the evaluation's forward pass (infer()): fwd with each BatchNormalization's kernel
  // made for inference (eval_kernels), normalising with the running statistics.
  std::vector<std::unique_ptr<NodeKernel>> eval_kernels;
  std::vector<Run> infer_fwd;
  // Training: the parameters whose gradients are final after bwd[j] (their last contribution).
  std::vector<std::vector<std::size_t>> ready_after;
  void* loss_grad = nullptr;

  explicit Impl(const ExecutorSpec& s) : g(*s.graph), spec(s), fsz(s.double_precision ? 8 : 4) {
    if (!s.double_precision && s.backend && s.backend->make_device_memory) dev = s.backend->make_device_memory();
  }
  ~Impl() {
    fwd.clear();
    bwd.clear();
    infer_fwd.clear();
    eval_kernels.clear();
    kernels.clear();  // a device kernel's resources go before the memory they live in
    for (void* p : dev_blocks) dev->release(p);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Block block(std::size_t bytes) {
    Block b;
    b.n = bytes;
    if (dev) {
      b.p = static_cast<std::byte*>(dev->allocate(std::max<std::size_t>(bytes, 1)));
      dev_blocks.push_back(b.p);
    } else {
      host_blocks.emplace_back(bytes);
      b.p = host_blocks.back().p;
    }
    return b;
  }

  std::size_t tbytes(int t) const {
    const TensorInfo& i = g.info(t);
    return static_cast<std::size_t>(numel(i.shape)) * (stored_bf16(t) ? 2 : element_bytes(i.dtype, fsz));
  }
  // Float32 data as the executor's float type (on a device: float32 as it is).
  void load(Block& b, const void* src, int t, std::size_t count) {
    const std::size_t bytes = count * element_bytes(g.info(t).dtype, 4);  // of the float32 source
    if (dev) {
      if (count) dev->upload(b.p, src, bytes);
    } else if (g.info(t).dtype == DType::F32 && fsz == 8) {
      const float* f = static_cast<const float*>(src);
      double* d = reinterpret_cast<double*>(b.p);
      for (std::size_t i = 0; i < count; ++i) d[i] = f[i];
    } else if (count) {
      std::memcpy(b.p, src, bytes);
    }
  }
  double read(int t, const void* p, std::int64_t i) const {
    if (stored_bf16(t)) return from_bf16(static_cast<const std::uint16_t*>(p)[i]);
    switch (g.info(t).dtype) {
      case DType::F32: return fsz == 8 ? static_cast<const double*>(p)[i] : static_cast<const float*>(p)[i];
      case DType::I64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
      case DType::I32: return static_cast<const std::int32_t*>(p)[i];
      case DType::Bool: return static_cast<const std::uint8_t*>(p)[i];
      default: return 0;
    }
  }
  // A tensor's values (untimed): downloaded first when they are on the device.
  std::vector<double> read_all(int t, const void* p) const {
    std::vector<double> v(static_cast<std::size_t>(numel(g.info(t).shape)));
    if (!p) return v;
    std::vector<std::byte> host;
    if (dev) {
      host.resize(tbytes(t));
      dev->download(host.data(), p, host.size());
      p = host.data();
    }
    if (!nhwc.empty() && nhwc[static_cast<std::size_t>(t)]) {
      // Stored channels-last: element i of the shape is where the device's layout copy back to
      // NCHW reads it.
      const Shape& s = g.info(t).shape;
      const dev::Strides back = dev::layout_copy(s[0], s[1], s[2], s[3], false);
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::int64_t at = 0, unused = 0;
        dev::offsets(back, static_cast<std::int64_t>(i), at, unused);
        v[i] = read(t, p, at);
      }
      return v;
    }
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = read(t, p, static_cast<std::int64_t>(i));
    return v;
  }
  // A contribution added to its gradient: in bfloat16 where both are stored so; in the yardstick
  // of such a step, the sum rounded as the store would round it.
  void add(const Add& a) const {
    if (a.bf16 && dev) return dev->add_bf16(a.temp, a.target, a.n);
    if (a.bf16)
      return add_into_bf16(static_cast<std::uint16_t*>(a.target), static_cast<const std::uint16_t*>(a.temp), a.n);
    add(a.target, a.temp, a.n);
    if (a.rounded)
      for (std::int64_t i = 0; i < a.n; ++i)
        static_cast<double*>(a.target)[i] = rounded_to(static_cast<double*>(a.target)[i], spec.reduced_mantissa);
  }
  void add(void* target, const void* src, std::int64_t n) const {
    if (dev)
      dev->axpy(1.0f, static_cast<const float*>(src), static_cast<float*>(target), n);
    else if (fsz == 8)
      add_into<double>(target, src, n);
    else
      add_into<float>(target, src, n);
  }
  void copy(void* dst, const void* src, std::size_t bytes) const {
    if (dev)
      dev->copy(dst, src, bytes);
    else
      std::memcpy(dst, src, bytes);
  }
  void zero(void* p, std::size_t bytes) const {
    if (dev)
      dev->zero(p, bytes);
    else
      std::memset(p, 0, bytes);
  }

  // The constructor's stages, in order (each below it). Each returns the persistent bytes it
  // allocated, or the arena's size.
  std::int64_t load_constants_and_inputs();
  std::int64_t place_arena(Schedule& sc);
  std::int64_t point_into_arena(const Schedule& sc);
  void make_kernels(const Schedule& sc, std::vector<GraphExecutor::Step>& steps);
  std::unique_ptr<NodeKernel> make_kernel(const NodeProblem& p, std::string& impl) const;
  std::unique_ptr<NodeKernel> rounded_stores(std::unique_ptr<NodeKernel> k, const NodeProblem& p) const;
  bool stored_reduced(int t) const {
    return t >= 0 && static_cast<std::size_t>(t) < spec.reduced_storage.size() &&
           spec.reduced_storage[static_cast<std::size_t>(t)];
  }
  void make_backward_runs(const Schedule& sc, std::vector<GraphExecutor::Step>& steps);
};

// Weights, other constants and inputs, in the executor's float type.
std::int64_t GraphExecutor::Impl::load_constants_and_inputs() {
  Impl& m = *this;
  std::int64_t persistent_bytes_ = 0;
  const int micros = std::max(1, spec.micro_batches);
  for (const auto& [t, bytes] : g.constants) {
    Impl::Block b = m.block(m.tbytes(t));
    m.load(b, bytes.data(), t, static_cast<std::size_t>(numel(g.info(t).shape)));
    m.data[static_cast<std::size_t>(t)] = b.p;
    persistent_bytes_ += static_cast<std::int64_t>(b.n);
    m.consts.emplace(t, b);
  }
  // Inputs: every micro-batch's data; with one micro-batch the graph reads it in place.
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    const int t = g.inputs[k];
    const std::size_t count = static_cast<std::size_t>(numel(g.info(t).shape));
    m.inputs_all.push_back(m.block(m.tbytes(t) * static_cast<std::size_t>(micros)));
    m.load(m.inputs_all.back(), spec.inputs[k], t, count * static_cast<std::size_t>(micros));
    // Training reads this host memory again at every step (inputs_changed): page-locked on a
    // device while the executor (its device memory) lives, a large batch crosses at the link's speed.
    if (const std::size_t bytes = count * static_cast<std::size_t>(micros) * element_bytes(g.info(t).dtype, 4);
        m.dev && spec.training && bytes >= kPinFrom && spec.inputs[k])
      m.dev->pin(spec.inputs[k], bytes);
    persistent_bytes_ += static_cast<std::int64_t>(m.inputs_all.back().n);
    if (micros > 1) {
      m.inputs_cur.push_back(m.block(m.tbytes(t)));
      persistent_bytes_ += static_cast<std::int64_t>(m.inputs_cur.back().n);
      m.data[static_cast<std::size_t>(t)] = m.inputs_cur.back().p;
    } else {
      m.data[static_cast<std::size_t>(t)] = m.inputs_all.back().p;
    }
  }
  return persistent_bytes_;
}

namespace {

// Aliasing: views share their input's storage. A training pass runs each op as its training
// entry says (Dropout drops: no view there).
Schedule aliasing(const Graph& g, bool training) {
  Schedule sc;
  const std::size_t nt = g.tensors.size();
  sc.root.resize(nt);
  sc.producer.assign(nt, -1);
  for (std::size_t t = 0; t < nt; ++t) sc.root[t] = static_cast<int>(t);
  sc.schema.resize(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    sc.schema[i] = find_op(n.op);
    if (!sc.schema[i]) throw Error(n.label() + ": d500 does not run " + n.op);
    if (training && sc.schema[i]->training) sc.schema[i] = sc.schema[i]->training;
    for (int t : n.out)
      if (t >= 0) sc.producer[static_cast<std::size_t>(t)] = static_cast<int>(i);
    if (sc.schema[i]->view) sc.root[static_cast<std::size_t>(n.out[0])] = sc.root[static_cast<std::size_t>(n.in[0])];
  }
  return sc;
}

// A storage choice's plan over the tensors, by a backend's rule for each node (graph.hpp's
// Takes): which tensors are stored so; none where the point does not ask for it (`asked`), the
// backend has no rule, or this is the yardstick. A 4-D float tensor is when its H W > 1, the arena holds it
// (no constant, graph input or output, nor the loss), no view reads it or is it, and its group --
// the tensors that nodes taking Takes::Same tie together -- touches no node that takes Never
// (nor a convolution's weight or bias). The rest stays as declared, and a convolution (Each)
// converts at the groups' borders.
std::vector<bool> plan_storage(const Graph& g, const Schedule& sc, const ExecutorSpec& spec,
                               const std::function<Takes(const NodeProblem&)>& rule, bool asked) {
  const std::size_t nt = g.tensors.size();
  std::vector<bool> chosen(nt, false);
  if (!asked || !rule || spec.double_precision) return chosen;
  auto spatial = [&](int t) {
    if (t < 0) return false;
    const TensorInfo& i = g.info(t);
    return i.dtype == DType::F32 && i.shape.size() == 4 && i.shape[2] * i.shape[3] > 1;
  };
  // The groups: a union-find forest over the tensors, up[t] t's parent (a root is its own).
  std::vector<std::size_t> up(nt);
  for (std::size_t t = 0; t < nt; ++t) up[t] = t;
  auto find = [&](int tensor) {
    auto t = static_cast<std::size_t>(tensor);
    while (up[t] != t) t = up[t] = up[up[t]];
    return t;
  };
  std::vector<bool> blocked(nt, false);
  auto block = [&](int t) {
    if (t >= 0) blocked[static_cast<std::size_t>(t)] = true;
  };
  for (int t : g.inputs) block(t);
  for (int t : g.outputs) block(t);
  if (spec.training) block(spec.loss);
  for (std::size_t t = 0; t < nt; ++t)
    if (g.is_const(static_cast<int>(t)) || sc.producer[t] < 0 || sc.root[t] != static_cast<int>(t))
      block(static_cast<int>(t));
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<int> ts;
    for (const auto* side : {&n.in, &n.out})
      for (int t : *side)
        if (t >= 0 && spatial(t)) ts.push_back(t);
    if (sc.schema[i]->view) {
      for (int t : ts) block(t);
      continue;
    }
    NodeProblem p = node_shapes(g, n, spec.training);
    p.params = spec.point;
    const Takes how = rule(p);
    if (how == Takes::Never)
      for (int t : ts) block(t);
    else if (how == Takes::Same)
      for (int t : ts) up[find(t)] = find(ts.front());
    else  // Each: the data's input and output; a weight, a bias or another output stays as declared
      for (int t : ts)
        if (t != n.in[0] && t != n.out[0]) block(t);
  }
  for (std::size_t t = 0; t < nt; ++t)
    if (blocked[t]) blocked[find(static_cast<int>(t))] = true;
  for (std::size_t t = 0; t < nt; ++t) chosen[t] = spatial(static_cast<int>(t)) && !blocked[find(static_cast<int>(t))];
  return chosen;
}

// With the point's memory_format = "channels_last" on a backend that takes it
// (BackendInfo::channels_last): which tensors are stored channels-last.
std::vector<bool> plan_channels_last(const Graph& g, const Schedule& sc, const ExecutorSpec& spec) {
  return plan_storage(g, sc, spec, spec.backend ? spec.backend->channels_last : nullptr,
                      spec.point && str_param_or(*spec.point, "memory_format", "") == "channels_last");
}

// With the point's math = "bf16" on a backend that takes it (BackendInfo::bf16_storage): which
// activations are stored in bfloat16, as autocast keeps a convolution's output and what follows
// it. A global pooling's [N, C, 1, 1] output is not (its H W is 1): its kernel converts it.
std::vector<bool> plan_bf16(const Graph& g, const Schedule& sc, const ExecutorSpec& spec) {
  return plan_storage(g, sc, spec, spec.backend ? spec.backend->bf16_storage : nullptr,
                      spec.point && bf16_math(*spec.point));
}

// The schedule: forward steps of kernel nodes, then (training) the loss seed and the backward
// steps in reverse order, with each gradient's contributions.
void schedule_steps(const Graph& g, const ExecutorSpec& spec, Schedule& sc, std::vector<GraphExecutor::Step>& steps) {
  using Step = GraphExecutor::Step;
  const std::size_t nt = g.tensors.size();
  const int micros = std::max(1, spec.micro_batches);
  sc.fstep.assign(g.nodes.size(), -1);
  sc.bstep.assign(g.nodes.size(), -1);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (!sc.schema[i]->view) {
      sc.fstep[i] = static_cast<int>(steps.size());
      steps.push_back(Step{static_cast<int>(i), false, "", 0});
    }

  sc.groot.resize(nt);
  for (std::size_t t = 0; t < nt; ++t) sc.groot[t] = static_cast<int>(t);
  sc.param_index.assign(nt, -1);
  sc.view_aliased.assign(g.nodes.size(), false);
  if (spec.training) {
    if (spec.loss < 0 || g.info(spec.loss).dtype != DType::F32 || numel(g.info(spec.loss).shape) != 1)
      throw Error("executor: a training step needs a scalar float loss");
    sc.need = tensors_needing_gradients(g, spec.loss, spec.params);
    for (std::size_t k = 0; k < spec.params.size(); ++k)
      sc.param_index[static_cast<std::size_t>(spec.params[k])] = static_cast<int>(k);
    auto diff = [&](std::size_t node, std::size_t slot) {
      const int t = g.nodes[node].in[slot];
      return t >= 0 && sc.need[static_cast<std::size_t>(t)] && (sc.schema[node]->diff_in >> slot & 1u);
    };
    // How many node inputs send a gradient to each tensor.
    std::vector<int> count(nt, 0);
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      for (std::size_t s = 0; s < g.nodes[i].in.size(); ++s)
        if (diff(i, s)) ++count[static_cast<std::size_t>(g.nodes[i].in[s])];
    // A view that is its input's only consumer hands its gradient over in place.
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (!sc.schema[i]->view || !diff(i, 0)) continue;
      const int x = g.nodes[i].in[0], y = g.nodes[i].out[0];
      if (count[static_cast<std::size_t>(x)] == 1 &&
          !(sc.param_index[static_cast<std::size_t>(x)] >= 0 && micros > 1)) {
        sc.groot[static_cast<std::size_t>(y)] = sc.groot[static_cast<std::size_t>(x)];
        sc.view_aliased[i] = true;
      }
    }
    sc.seed_step = static_cast<int>(steps.size());
    steps.push_back(Step{-1, true, "d500 (loss gradient = 1 / micro-batches)", 0});
    sc.contribs.push_back(Schedule::Contribution{sc.seed_step, -1, 0, spec.loss, true});
    for (std::size_t r = g.nodes.size(); r-- > 0;) {
      bool any = false;
      for (std::size_t s = 0; s < g.nodes[r].in.size(); ++s) any = any || diff(r, s);
      if (!any || sc.view_aliased[r]) continue;
      sc.bstep[r] = static_cast<int>(steps.size());
      steps.push_back(Step{static_cast<int>(r), true, "", 0});
      for (std::size_t s = 0; s < g.nodes[r].in.size(); ++s)
        if (diff(r, s))
          sc.contribs.push_back(Schedule::Contribution{sc.bstep[r], static_cast<int>(r), s, g.nodes[r].in[s], true});
    }
    // The first contribution to a gradient buffer writes it; later ones go through a temporary
    // and are added. Parameters accumulate over micro-batches: with several, every contribution
    // is added (their gradients are zeroed when the step starts).
    std::vector<bool> written(nt, false);
    for (auto& c : sc.contribs) {
      const auto gr = static_cast<std::size_t>(sc.groot[static_cast<std::size_t>(c.tensor)]);
      const bool param = sc.param_index[gr] >= 0;
      c.direct = !written[gr] && !(param && micros > 1);
      written[gr] = true;
    }
    for (std::size_t k = 0; k < sc.contribs.size(); ++k)
      if (sc.contribs[k].node >= 0) sc.contrib_of[{sc.contribs[k].node, sc.contribs[k].slot}] = k;
  }
  sc.end = static_cast<int>(steps.size());
}

}  // namespace

// Lifetimes over the schedule, and the arena's plan: each request placed (or, keep_all, laid end to end).
std::int64_t GraphExecutor::Impl::place_arena(Schedule& sc) {
  Impl& m = *this;
  const std::size_t nt = g.tensors.size();
  std::int64_t arena = 0;
  sc.data_req.assign(nt, -1);
  sc.grad_req.assign(nt, -1);
  auto is_arena = [&](int t) { return !g.is_const(t) && sc.producer[static_cast<std::size_t>(t)] >= 0; };
  for (std::size_t t = 0; t < nt; ++t) {
    if (sc.root[t] != static_cast<int>(t) || !is_arena(static_cast<int>(t))) continue;
    const int def = sc.fstep[static_cast<std::size_t>(sc.producer[t])];
    if (def < 0) continue;  // produced by a view of nothing in the arena
    sc.data_req[t] = static_cast<int>(sc.reqs.size());
    sc.reqs.push_back(Request{m.tbytes(static_cast<int>(t)), def, spec.keep_all ? sc.end : def});
  }
  auto extend = [&](int t, int until) {
    if (t < 0) return;
    const int r = sc.data_req[static_cast<std::size_t>(sc.root[static_cast<std::size_t>(t)])];
    if (r >= 0) sc.reqs[static_cast<std::size_t>(r)].end = std::max(sc.reqs[static_cast<std::size_t>(r)].end, until);
  };
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (sc.fstep[i] >= 0)
      for (int t : g.nodes[i].in) extend(t, sc.fstep[i]);
    if (sc.bstep[i] >= 0) {
      for (std::size_t s = 0; s < g.nodes[i].in.size(); ++s)
        if (sc.schema[i]->saved_in >> s & 1u) extend(g.nodes[i].in[s], sc.bstep[i]);
      for (std::size_t s = 0; s < g.nodes[i].out.size(); ++s)
        if (sc.schema[i]->saved_out >> s & 1u) extend(g.nodes[i].out[s], sc.bstep[i]);
    }
  }
  for (int t : g.outputs) extend(t, sc.end);
  if (spec.training) {
    extend(spec.loss, sc.end);
    // Gradient buffers (parameters' are persistent): from the first contribution to the
    // backward step of the node that produced the tensor (which reads it).
    for (const auto& c : sc.contribs) {
      const auto gr = static_cast<std::size_t>(sc.groot[static_cast<std::size_t>(c.tensor)]);
      if (sc.param_index[gr] >= 0) continue;
      if (sc.grad_req[gr] < 0) {
        sc.grad_req[gr] = static_cast<int>(sc.reqs.size());
        sc.reqs.push_back(Request{m.tbytes(static_cast<int>(gr)), c.step, spec.keep_all ? sc.end : c.step});
      }
    }
    for (std::size_t t = 0; t < nt; ++t) {
      const int r = sc.grad_req[static_cast<std::size_t>(sc.groot[t])];
      if (r < 0 || !sc.need[t]) continue;
      const int p = sc.producer[t];
      const int until = p < 0                                        ? sc.end
                        : sc.bstep[static_cast<std::size_t>(p)] >= 0 ? sc.bstep[static_cast<std::size_t>(p)]
                                                                     : sc.end;
      sc.reqs[static_cast<std::size_t>(r)].end = std::max(sc.reqs[static_cast<std::size_t>(r)].end, until);
    }
  }
  // Temporaries for contributions that are added.
  sc.temp_req.assign(sc.contribs.size(), -1);
  for (std::size_t k = 0; k < sc.contribs.size(); ++k)
    if (!sc.contribs[k].direct &&
        !(sc.contribs[k].node >= 0 && sc.schema[static_cast<std::size_t>(sc.contribs[k].node)]->view)) {
      sc.temp_req[k] = static_cast<int>(sc.reqs.size());
      sc.reqs.push_back(Request{m.tbytes(sc.contribs[k].tensor), sc.contribs[k].step, sc.contribs[k].step});
    }
  for (auto& r : sc.reqs) r.bytes = round_up(r.bytes);
  if (spec.keep_all) {
    std::size_t at = 0;
    for (auto& r : sc.reqs) r.offset = at, at += r.bytes;
    arena = static_cast<std::int64_t>(at);
  } else {
    arena = static_cast<std::int64_t>(place(sc.reqs));
  }
  return arena;
}

// Each tensor's data and gradient in the arena (or its root's), the parameters' gradients, and on
// a device the host's copies of the parameters.
std::int64_t GraphExecutor::Impl::point_into_arena(const Schedule& sc) {
  Impl& m = *this;
  const std::size_t nt = g.tensors.size();
  const int micros = std::max(1, spec.micro_batches);
  std::int64_t persistent = 0;
  for (std::size_t t = 0; t < nt; ++t)
    if (sc.data_req[t] >= 0) m.data[t] = m.arena.p + sc.reqs[static_cast<std::size_t>(sc.data_req[t])].offset;
  for (std::size_t t = 0; t < nt; ++t)
    if (!m.data[t] && sc.root[t] != static_cast<int>(t)) m.data[t] = m.data[static_cast<std::size_t>(sc.root[t])];
  if (spec.training) {
    for (std::size_t k = 0; k < spec.params.size(); ++k) {
      m.pgrad.push_back(m.block(m.tbytes(spec.params[k])));
      persistent += static_cast<std::int64_t>(m.pgrad.back().n);
      m.grad[static_cast<std::size_t>(spec.params[k])] = m.pgrad.back().p;
    }
    for (std::size_t t = 0; t < nt; ++t)
      if (sc.grad_req[t] >= 0) m.grad[t] = m.arena.p + sc.reqs[static_cast<std::size_t>(sc.grad_req[t])].offset;
    for (std::size_t t = 0; t < nt; ++t)
      if (sc.need[t] && sc.groot[t] != static_cast<int>(t)) m.grad[t] = m.grad[static_cast<std::size_t>(sc.groot[t])];
    m.loss_grad = m.grad[static_cast<std::size_t>(spec.loss)];
    if (m.dev) {
      const float v = 1.0f / static_cast<float>(micros);
      m.seed = m.block(sizeof v);
      m.dev->upload(m.seed.p, &v, sizeof v);
      for (const int t : spec.params) {
        const auto n = static_cast<std::size_t>(numel(g.info(t).shape));
        m.host_params.emplace_back(n);
        m.host_grads.emplace_back(n);
        m.dev->download(m.host_params.back().data(), m.data[static_cast<std::size_t>(t)], n * sizeof(float));
      }
      m.grads_on_host.assign(spec.params.size(), false);
      m.params_on_host.assign(spec.params.size(), true);
      m.params_handed.assign(spec.params.size(), false);
    }
  }
  return persistent;
}

// The yardstick's kernel `k` for p, its writes into the tensors of spec.reduced_storage rounded (k
// itself where it writes none).
std::unique_ptr<NodeKernel> GraphExecutor::Impl::rounded_stores(std::unique_ptr<NodeKernel> k,
                                                                const NodeProblem& p) const {
  const Node& n = *p.node;
  std::vector<bool> out(p.out.size(), false), din(p.din.size(), false);
  bool any = false;
  for (std::size_t j = 0; j < n.out.size() && j < out.size(); ++j) any |= out[j] = stored_reduced(n.out[j]);
  for (std::size_t i = 0; i < n.in.size() && i < din.size(); ++i) any |= din[i] = stored_reduced(n.in[i]);
  if (!any) return k;
  return std::make_unique<RoundedStores>(std::move(k), p, std::move(out), std::move(din), spec.reduced_mantissa);
}

// A node's kernel: the backend's, else through the host on a device, else the reference's (in the
// yardstick: with its reduced inputs or rounding noise); `impl` says which.
std::unique_ptr<NodeKernel> GraphExecutor::Impl::make_kernel(const NodeProblem& p, std::string& impl) const {
  const Node& n = *p.node;
  std::unique_ptr<NodeKernel> k;
  impl.clear();
  if (!spec.double_precision && spec.backend && spec.backend->make_node_kernel) {
    k = spec.backend->make_node_kernel(p, spec.threads);
    if (!k) impl = "reference (fallback)";
  }
  if (!k && dev) {
    k = std::make_unique<ThroughHost>(p, *dev);
    impl = k->impl();
  } else if (!k) {
    k = make_reference_node_kernel(p, spec.double_precision);
    if (spec.double_precision && spec.kinks)
      k = with_kinks(std::move(k), p, static_cast<int>(&n - g.nodes.data()), *spec.kinks);
    if (spec.double_precision && spec.reduced_mantissa > 0 &&
        (n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Gemm" || n.op == "MatMul"))
      k = std::make_unique<ReducedInputs>(std::move(k), p, spec.reduced_mantissa,
                                          spec.reduced_mantissa <= 7 && (n.op == "Conv" || n.op == "ConvTranspose"),
                                          spec.bias_after_rounding && n.op == "Conv");
    if (spec.double_precision && spec.reduced_mantissa > 0 && !spec.reduced_storage.empty())
      k = rounded_stores(std::move(k), p);
    if (spec.double_precision && spec.rounding_noise != 0)
      k = std::make_unique<RoundingNoise>(
          std::move(k), p, spec.rounding_noise * 0x100000001b3ull + static_cast<std::uint64_t>(&n - g.nodes.data()));
    if (impl.empty()) impl = k->impl();
  } else {
    impl = k->impl();
  }
  return k;
}

namespace {

// A node given channels-last or bfloat16 tensors got the backend's kernel, as the backend's
// channels_last() or bf16_storage() promised (a fallback reads NCHW float32 only).
void require_backends_kernel(const Node& n, const std::string& impl, bool nhwc, bool bf16) {
  if (impl.rfind("reference", 0) != 0) return;
  if (nhwc)
    throw Error(n.label() + ": its backend said its kernel takes channels-last tensors (memory_format = " +
                "\"channels_last\"), but it made none for this node (" + impl + "); memory_format = \"nchw\" runs it");
  if (bf16)
    throw Error(n.label() + ": its backend said its kernel takes bfloat16 tensors (math = \"bf16\"), but it made " +
                "none for this node (" + impl + "); math = \"fp32\" runs it");
}

}  // namespace

// The kernels, over the planned buffers.
void GraphExecutor::Impl::make_kernels(const Schedule& sc, std::vector<GraphExecutor::Step>& steps) {
  Impl& m = *this;
  m.kernels.resize(g.nodes.size());
  m.eval_kernels.resize(g.nodes.size());
  const std::set<int> buffers(spec.buffers.begin(), spec.buffers.end());
  auto buffered = [&](int t) { return buffers.count(t) > 0; };
  const auto& contrib_of = sc.contrib_of;
  auto temp_ptr = [&](std::size_t k) {
    return static_cast<void*>(m.arena.p + sc.reqs[static_cast<std::size_t>(sc.temp_req[k])].offset);
  };
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (sc.schema[i]->view) continue;
    // The node's shapes, over the planned buffers; its gradients' views have the same shapes.
    NodeProblem p = node_shapes(g, n, spec.training);
    p.params = spec.point;
    p.step = spec.step;
    p.device = m.dev.get();
    for (std::size_t s = 0; s < n.in.size(); ++s) {
      if (n.in[s] >= 0) p.in[s].data = m.data[static_cast<std::size_t>(n.in[s])];
      p.const_in.push_back(g.is_const(n.in[s]));
    }
    for (std::size_t j = 0; j < n.out.size(); ++j)
      if (n.out[j] >= 0) p.out[j].data = m.data[static_cast<std::size_t>(n.out[j])];
    // A view of the node is channels-last, or bfloat16 (its gradients' views follow).
    bool nhwc = false, half = false;
    for (std::size_t s = 0; s < n.in.size(); ++s)
      if (n.in[s] >= 0) {
        nhwc |= p.in[s].channels_last = m.nhwc[static_cast<std::size_t>(n.in[s])];
        half |= p.in[s].bf16 = m.half[static_cast<std::size_t>(n.in[s])];
      }
    for (std::size_t j = 0; j < n.out.size(); ++j)
      if (n.out[j] >= 0) {
        nhwc |= p.out[j].channels_last = m.nhwc[static_cast<std::size_t>(n.out[j])];
        half |= p.out[j].bf16 = m.half[static_cast<std::size_t>(n.out[j])];
      }
    if (spec.training && sc.bstep[i] < 0) {
      // A training pass's node without a backward step (nothing it reads leads to a weight): no
      // gradients, each absent, so that a kernel may ask any of them.
      for (TensorView d : p.in) d.data = nullptr, p.din.push_back(d);
      for (TensorView d : p.out) d.data = nullptr, p.dout.push_back(d);
    } else if (spec.training) {
      for (std::size_t s = 0; s < n.in.size(); ++s) {
        TensorView d = p.in[s];
        d.data = nullptr;
        const auto it = contrib_of.find({static_cast<int>(i), s});
        if (it != contrib_of.end())
          d.data = sc.contribs[it->second].direct ? m.grad[static_cast<std::size_t>(n.in[s])] : temp_ptr(it->second);
        p.din.push_back(d);
      }
      for (std::size_t j = 0; j < n.out.size(); ++j) {
        TensorView d = p.out[j];
        const int t = n.out[j];
        d.data = t >= 0 && sc.need[static_cast<std::size_t>(t)] ? m.grad[static_cast<std::size_t>(t)] : nullptr;
        p.dout.push_back(d);
      }
    }
    std::string impl;
    // Training: BatchNormalization updates the running statistics the runner keeps
    // (spec.buffers) in place, as its optional outputs 1 and 2, and normalises the evaluation with
    // them through a kernel of its own made for inference; an op whose training pass differs
    // (Dropout) gets such a kernel too.
    const bool running_stats =
        is_batch_norm(n.op) && n.in.size() >= 5 && n.out.size() == 1 && buffered(n.in[3]) && buffered(n.in[4]);
    if (spec.training && (running_stats || find_op(n.op)->training)) {
      NodeProblem e = node_shapes(g, n, false);
      e.params = p.params;
      e.device = p.device;
      e.in = p.in;
      e.const_in = p.const_in;
      e.out[0].data = p.out[0].data;
      e.out[0].channels_last = p.out[0].channels_last;
      e.out[0].bf16 = p.out[0].bf16;
      std::string eval_impl;
      m.eval_kernels[i] = m.make_kernel(e, eval_impl);
      require_backends_kernel(n, eval_impl, nhwc, half);
      if (running_stats) {
        p.out.push_back(p.in[3]);
        p.out.push_back(p.in[4]);
      }
    }
    m.kernels[i] = m.make_kernel(p, impl);
    require_backends_kernel(n, impl, nhwc, half);
    Step& fs = steps[static_cast<std::size_t>(sc.fstep[i])];
    fs.impl = impl;
    fs.flops = sc.schema[i]->flops ? sc.schema[i]->flops(p, false) : 0;
    Impl::Run fr;
    fr.node = static_cast<int>(i);
    fr.kernel = m.kernels[i].get();
    m.fwd.push_back(fr);
    if (spec.training) {
      if (m.eval_kernels[i]) fr.kernel = m.eval_kernels[i].get();
      m.infer_fwd.push_back(std::move(fr));
    }
    if (sc.bstep[i] >= 0) {
      Step& bs = steps[static_cast<std::size_t>(sc.bstep[i])];
      bs.impl = impl;
      bs.flops = sc.schema[i]->flops ? sc.schema[i]->flops(p, true) : 0;
    }
  }
}

// Training: the backward runs in schedule order, each with its additions, and when each
// parameter's gradient is final.
void GraphExecutor::Impl::make_backward_runs(const Schedule& sc, std::vector<GraphExecutor::Step>& steps) {
  Impl& m = *this;
  const auto& contrib_of = sc.contrib_of;
  auto temp_ptr = [&](std::size_t k) {
    return static_cast<void*>(m.arena.p + sc.reqs[static_cast<std::size_t>(sc.temp_req[k])].offset);
  };
  // Backward runs in schedule order; each carries its additions.
  std::vector<Impl::Run> runs(static_cast<std::size_t>(sc.end));
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (sc.bstep[i] < 0) continue;
    Impl::Run& r = runs[static_cast<std::size_t>(sc.bstep[i])];
    r.node = static_cast<int>(i);
    if (sc.schema[i]->view) {
      // A view whose input gets several gradients: its own is handed over by a copy or an add.
      const int x = g.nodes[i].in[0], y = g.nodes[i].out[0];
      const std::size_t k = contrib_of.at({static_cast<int>(i), 0});
      r.copy_from = m.grad[static_cast<std::size_t>(y)];
      r.copy_to = m.grad[static_cast<std::size_t>(x)];
      r.copy_adds = !sc.contribs[k].direct;
      r.copy_n = numel(g.info(x).shape);
      steps[static_cast<std::size_t>(sc.bstep[i])].impl = "d500 (view gradient)";
      continue;
    }
    r.kernel = m.kernels[i].get();
  }
  for (std::size_t k = 0; k < sc.contribs.size(); ++k) {
    const auto& c = sc.contribs[k];
    if (c.direct || c.node < 0 || sc.schema[static_cast<std::size_t>(c.node)]->view) continue;
    runs[static_cast<std::size_t>(c.step)].adds.push_back(
        Impl::Add{m.grad[static_cast<std::size_t>(c.tensor)], temp_ptr(k), numel(g.info(c.tensor).shape),
                  m.stored_bf16(c.tensor), m.stored_reduced(c.tensor)});
  }
  for (int s = sc.seed_step + 1; s < sc.end; ++s) m.bwd.push_back(std::move(runs[static_cast<std::size_t>(s)]));
  // When each parameter's gradient is final: after the backward step of its last contribution
  // (a parameter without one, whose gradient stays zero, at the end).
  std::vector<int> last(spec.params.size(), sc.end - 1);
  std::vector<bool> any(spec.params.size(), false);
  for (const auto& c : sc.contribs) {
    const int k = sc.param_index[static_cast<std::size_t>(sc.groot[static_cast<std::size_t>(c.tensor)])];
    if (k < 0) continue;
    const auto ku = static_cast<std::size_t>(k);
    last[ku] = any[ku] ? std::max(last[ku], c.step) : c.step;
    any[ku] = true;
  }
  m.ready_after.assign(m.bwd.size(), {});
  if (!m.bwd.empty())
    for (std::size_t k = 0; k < last.size(); ++k)
      m.ready_after[static_cast<std::size_t>(std::max(last[k] - sc.seed_step - 1, 0))].push_back(k);
}

GraphExecutor::GraphExecutor(const ExecutorSpec& spec) : impl_(std::make_unique<Impl>(spec)) {
  Impl& m = *impl_;
  const std::size_t nt = m.g.tensors.size();
  if (spec.inputs.size() != m.g.inputs.size())
    throw Error("executor: " + std::to_string(spec.inputs.size()) + " inputs given, the graph has " +
                std::to_string(m.g.inputs.size()));
  m.data.assign(nt, nullptr);
  m.grad.assign(nt, nullptr);
  persistent_bytes_ += m.load_constants_and_inputs();
  Schedule sc = aliasing(m.g, spec.training);
  m.nhwc = plan_channels_last(m.g, sc, spec);
  m.half = plan_bf16(m.g, sc, spec);
  schedule_steps(m.g, spec, sc, steps_);
  arena_bytes_ = m.place_arena(sc);
  m.arena = m.block(static_cast<std::size_t>(arena_bytes_));
  persistent_bytes_ += m.point_into_arena(sc);
  if (m.dev) m.marks = m.dev->reserve_marks(steps_.size() + 1);
  m.phase_marks = steps_.size() + 1;
  m.make_kernels(sc, steps_);
  if (spec.training) m.make_backward_runs(sc, steps_);
}

GraphExecutor::~GraphExecutor() = default;

DeviceMemory* GraphExecutor::device() const { return impl_->dev.get(); }

bool GraphExecutor::defer_waits(bool on) {
  Impl& m = *impl_;
  if (!m.dev) return false;
  if (on && !m.dev->reserve_marks(m.phase_marks + kStepMarks)) return false;
  if (!on) m.dev->synchronize();
  m.deferred = on;
  // The inputs' staging copies (stage_inputs): untimed, here; training only.
  if (on && m.spec.training && m.staged.empty())
    for (const auto& b : m.inputs_all) m.staged.push_back(m.block(b.n));
  return true;
}

bool GraphExecutor::stage_inputs() {
  Impl& m = *impl_;
  if (!m.deferred) return false;
  if (m.staged.size() != m.inputs_all.size()) return false;
  // On a device a block holds its tensor's float32 bytes, as the host's input does.
  for (std::size_t k = 0; k < m.staged.size(); ++k)
    if (m.staged[k].n && !m.dev->upload_beside(m.staged[k].p, m.spec.inputs[k], m.staged[k].n)) return false;
  return true;
}

void GraphExecutor::inputs_from_stage() {
  Impl& m = *impl_;
  for (std::size_t k = 0; k < m.inputs_all.size(); ++k)
    m.dev->take_beside(m.inputs_all[k].p, m.staged[k].p, m.inputs_all[k].n);
}

void GraphExecutor::step_mark(std::size_t i) {
  if (impl_->deferred) impl_->dev->mark(impl_->phase_marks + i);
}

void GraphExecutor::finish() {
  if (impl_->dev) impl_->dev->synchronize();
}

std::int64_t GraphExecutor::step_mark_ns(std::size_t i, std::size_t j) {
  const Impl& m = *impl_;
  return m.deferred ? m.dev->mark_ns(m.phase_marks + i, m.phase_marks + j) : -1;
}

bool GraphExecutor::records_steps() {
  const Impl& m = *impl_;
  if (!m.spec.point || str_param_or(*m.spec.point, "cuda_graph", "") != "step") return false;
  std::string why;
  if (!m.dev)
    why = "it computes on the host";
  else if (!m.spec.training)
    why = "only a training step is recorded";
  else if (!m.deferred)
    why = "its passes wait for the device between them (level 3's schemes exchange gradients there)";
  else if (!m.dev->can_capture())
    why = m.dev->describe() + " cannot record its work";
  for (std::size_t i = 0; i < m.g.nodes.size() && why.empty(); ++i) {
    const Node& n = m.g.nodes[i];
    if (dynamic_cast<const ThroughHost*>(m.kernels[i].get()))
      why = "node '" + n.name + "' (" + n.op + ") is computed on the host, through copies a recording cannot hold";
    else if (m.spec.step && find_op(n.op) && find_op(n.op)->training)
      why = "node '" + n.name + "' (" + n.op + ") draws a new mask at every step, which a recording would repeat";
  }
  if (!why.empty()) throw Error("cuda_graph = \"step\": this training step cannot be recorded: " + why);
  return true;
}

void GraphExecutor::begin_step_capture() {
  Impl& m = *impl_;
  if (!records_steps()) throw Error("internal error: a step capture the point did not ask for");
  m.push_handed();  // host copies handed out go up now: an upload cannot be recorded
  m.dev->begin_capture();
  m.capturing = true;
}

void GraphExecutor::end_step_capture() {
  Impl& m = *impl_;
  m.capturing = false;
  m.dev->end_capture();
  m.recorded = true;
}

void GraphExecutor::replay_step() {
  Impl& m = *impl_;
  if (!m.recorded) throw Error("internal error: a step replayed before one was recorded");
  m.push_handed();
  m.dev->replay();
  // What the passes and the optimizer's step say of the host's copies, as when they run.
  m.grads_on_host.assign(m.grads_on_host.size(), false);
  m.params_on_host.assign(m.params_on_host.size(), false);
  constants_changed();
}

void GraphExecutor::forward(int micro) {
  Impl& m = *impl_;
  // The micro-batch's inputs count towards the first step.
  Impl::Clock clock(m, slots_);
  if (m.spec.micro_batches > 1)
    for (std::size_t k = 0; k < m.inputs_cur.size(); ++k)
      m.copy(m.inputs_cur[k].p, m.inputs_all[k].p + static_cast<std::size_t>(micro) * m.inputs_cur[k].n,
             m.inputs_cur[k].n);
  for (const auto& r : m.fwd) {
    r.kernel->forward();
    clock.lap();
  }
  clock.end();
}

void GraphExecutor::backward(int micro) {
  Impl& m = *impl_;
  const int micros = std::max(1, m.spec.micro_batches);
  Impl::Clock clock(m, slots_ ? slots_ + m.fwd.size() : nullptr);
  if (micro == 0 && micros > 1)
    for (auto& b : m.pgrad) m.zero(b.p, b.n);
  m.grads_on_host.assign(m.grads_on_host.size(), false);
  if (m.dev)
    m.dev->copy(m.loss_grad, m.seed.p, sizeof(float));
  else if (m.fsz == 8)
    *static_cast<double*>(m.loss_grad) = 1.0 / micros;
  else
    *static_cast<float*>(m.loss_grad) = 1.0f / static_cast<float>(micros);
  clock.lap();
  for (const auto& r : m.bwd) {
    if (r.kernel) {
      r.kernel->backward();
    } else if (r.copy_adds) {
      m.add(r.copy_to, r.copy_from, r.copy_n);
    } else {
      m.copy(r.copy_to, r.copy_from, static_cast<std::size_t>(r.copy_n) * m.fsz);
    }
    for (const auto& a : r.adds) m.add(a);
    clock.lap();
    if (ready_ && micro == micros - 1) {
      ready_(m.ready_after[static_cast<std::size_t>(&r - m.bwd.data())]);
      clock.resume();
    }
  }
  clock.end();
}

void GraphExecutor::infer() {
  Impl& m = *impl_;
  if (!m.spec.training) return forward(0);
  if (m.spec.micro_batches > 1)
    for (std::size_t k = 0; k < m.inputs_cur.size(); ++k)
      m.copy(m.inputs_cur[k].p, m.inputs_all[k].p, m.inputs_cur[k].n);
  for (const auto& r : m.infer_fwd) r.kernel->forward();
  if (m.dev) m.dev->synchronize();
}

std::vector<float> GraphExecutor::buffer(std::size_t k) {
  Impl& m = *impl_;
  const int t = m.spec.buffers.at(k);
  const void* p = m.data[static_cast<std::size_t>(t)];
  std::vector<float> v(static_cast<std::size_t>(numel(m.g.info(t).shape)));
  if (m.dev)
    m.dev->download(v.data(), p, v.size() * sizeof(float));
  else if (m.fsz == 8)
    std::copy_n(static_cast<const double*>(p), v.size(), v.begin());
  else
    std::memcpy(v.data(), p, v.size() * sizeof(float));
  return v;
}

void GraphExecutor::set_buffer(std::size_t k, std::span<const float> v) {
  Impl& m = *impl_;
  const int t = m.spec.buffers.at(k);
  if (static_cast<std::int64_t>(v.size()) != numel(m.g.info(t).shape))
    throw Error("executor: " + std::to_string(v.size()) + " values for running statistic '" + m.g.info(t).name +
                "' of " + std::to_string(numel(m.g.info(t).shape)));
  Impl::Block b{static_cast<std::byte*>(m.data[static_cast<std::size_t>(t)]), m.tbytes(t)};
  m.load(b, v.data(), t, v.size());
}

std::vector<double> GraphExecutor::output(std::size_t i) {
  const int t = impl_->g.outputs.at(i);
  return impl_->read_all(t, impl_->data[static_cast<std::size_t>(t)]);
}

std::vector<double> GraphExecutor::gradient(std::size_t k) {
  const int t = impl_->spec.params.at(k);
  return impl_->read_all(t, impl_->pgrad.at(k).p);
}

std::vector<double> GraphExecutor::tensor(int t) {
  const void* p = impl_->data[static_cast<std::size_t>(t)];
  return p ? impl_->read_all(t, p) : std::vector<double>{};
}

void GraphExecutor::inputs_changed() {
  Impl& m = *impl_;
  const int micros = std::max(1, m.spec.micro_batches);
  for (std::size_t k = 0; k < m.g.inputs.size(); ++k) {
    const int t = m.g.inputs[k];
    m.load(m.inputs_all[k], m.spec.inputs[k], t,
           static_cast<std::size_t>(numel(m.g.info(t).shape)) * static_cast<std::size_t>(micros));
  }
}

float* GraphExecutor::parameter(std::size_t k) {
  const float* p = parameter_value(k);
  if (Impl& m = *impl_; m.dev) m.params_handed[k] = true;  // it may be written: the newer from here
  return const_cast<float*>(p);                            // the executor's own storage (on a device, its host copy)
}

const float* GraphExecutor::parameter_value(std::size_t k) {
  if (impl_->fsz != 4) throw Error("the yardstick executor has no float32 parameters");
  if (Impl& m = *impl_; m.dev) {
    std::vector<float>& h = m.host_params.at(k);
    if (!m.params_on_host[k]) m.dev->download(h.data(), m.param(k), h.size() * sizeof(float));
    m.params_on_host[k] = true;
    return h.data();
  }
  return static_cast<const float*>(param_data(k));
}

const float* GraphExecutor::parameter_gradient(std::size_t k) {
  if (impl_->fsz != 4) throw Error("the yardstick executor has no float32 gradients");
  if (Impl& m = *impl_; m.dev) {
    if (m.pgrad.empty()) return nullptr;
    std::vector<float>& h = m.host_grads.at(k);
    if (!m.grads_on_host[k]) m.dev->download(h.data(), m.pgrad[k].p, h.size() * sizeof(float));
    m.grads_on_host[k] = true;
    return h.data();
  }
  return impl_->pgrad.empty() ? nullptr : static_cast<const float*>(param_grad(k));
}

float* GraphExecutor::device_gradient(std::size_t k) {
  Impl& m = *impl_;
  if (!m.dev || m.fsz != 4 || m.pgrad.empty()) return nullptr;
  return reinterpret_cast<float*>(m.pgrad.at(k).p);
}

void GraphExecutor::device_gradients_changed() {
  Impl& m = *impl_;
  m.grads_on_host.assign(m.grads_on_host.size(), false);
}

float* GraphExecutor::device_parameter(std::size_t k) {
  Impl& m = *impl_;
  if (!m.dev || m.fsz != 4 || !m.spec.training) return nullptr;
  m.push_handed();  // a host copy handed out may have been written: it is the newer
  return static_cast<float*>(m.param(k));
}

void GraphExecutor::device_parameters_changed() {
  Impl& m = *impl_;
  if (!m.dev) return;
  m.params_on_host.assign(m.params_on_host.size(), false);
  m.params_handed.assign(m.params_handed.size(), false);
  constants_changed();
}

void* GraphExecutor::param_data(std::size_t k) { return impl_->param(k); }
void* GraphExecutor::param_grad(std::size_t k) { return impl_->pgrad.at(k).p; }

void GraphExecutor::parameters_changed() {
  Impl& m = *impl_;
  if (m.dev) m.push_handed();
  constants_changed();
}

// The device optimizer: PyTorch's rules (backends/optimizer.hpp) on the executor's stream, state in
// device memory. Where the device has a fused optimizer kernel (DeviceMemory::optimizer_step: the
// cuda backend's), every rule, one pass per parameter, each element as the reference computes it;
// elsewhere SGD's family, composed from axpy and scale.
namespace {
// Whether two steps of a rule compute alike: the coefficients apply_rule reads for it
// (step_rule fills Adam's bias corrections for every rule).
bool same_coefficients(const StepRule& a, const StepRule& b) {
  if (a.rule != b.rule || a.lr != b.lr || a.wd != b.wd) return false;
  switch (a.rule) {
    case UpdateRule::Sgd: return true;
    case UpdateRule::Momentum:
    case UpdateRule::Nesterov: return a.mu == b.mu && a.first == b.first;
    case UpdateRule::Adam:
    case UpdateRule::AdamW:
      return a.b1 == b.b1 && a.b2 == b.b2 && a.eps == b.eps && a.step_size == b.step_size && a.bc2_sqrt == b.bc2_sqrt;
    case UpdateRule::Adagrad: return a.eps == b.eps;
    case UpdateRule::RmsProp: return a.alpha == b.alpha && a.eps == b.eps && a.mu == b.mu;
  }
  return false;
}
}  // namespace

class DeviceOptimizer final : public Optimizer {
 public:
  DeviceOptimizer(const OptimizerSpec& s, GraphExecutor& e)
      : s_(s), e_(e), m_(*e.impl_), fused_(m_.dev->has_optimizer_step()) {
    if (const std::string why = check_optimizer(s); !why.empty()) throw Error(why);
    // The state the rule keeps, as the reference's (SGD's family, all the axpy path has, keeps no
    // second state).
    const UpdateRule r = rule_of(s.name);
    const std::size_t count = m_.host_params.size();
    state_.assign(2 * count, nullptr);
    for (std::size_t j = 0; j < state_.size(); ++j)
      if (j < count ? rule_has_a(r) : rule_has_b(r, static_cast<float>(s.momentum)))
        state_[j] = static_cast<float*>(m_.dev->allocate(bytes(j)));
  }
  ~DeviceOptimizer() override {
    for (float* x : state_)
      if (x) m_.dev->release(x);
  }
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  void step(double lr_d) override {
    ++t_;
    DeviceMemory& d = *m_.dev;
    m_.push_handed();
    const StepRule rule = step_rule(s_, lr_d, t_);
    if (m_.capturing) recorded_ = rule;  // what every replay of the recording computes
    for (std::size_t k = 0; k < m_.host_params.size(); ++k) {
      if (m_.pgrad.empty()) break;
      auto* p = static_cast<float*>(m_.param(k));
      auto* g = reinterpret_cast<float*>(m_.pgrad[k].p);
      const auto n = static_cast<std::int64_t>(m_.host_params[k].size());
      // A gradient the host was handed (a scheme over MPI averages there in place) is the newer.
      if (m_.grads_on_host[k]) d.upload(g, m_.host_grads[k].data(), static_cast<std::size_t>(n) * sizeof(float));
      if (fused_)
        d.optimizer_step(rule, p, g, state_[k], state_[m_.host_params.size() + k], n);
      else
        axpy_step(rule, p, g, state_[k], n);
    }
    if (!m_.deferred) d.synchronize();  // else the step's finish() waits
    m_.params_on_host.assign(m_.params_on_host.size(), false);
    e_.constants_changed();
  }

  // A replay of the recorded step (GraphExecutor::replay_step): the device ran the recorded
  // coefficients, which must be this step's.
  void replayed(double lr) override {
    ++t_;
    const StepRule now = step_rule(s_, lr, t_);
    auto num = [](float v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.7g", static_cast<double>(v));
      return std::string(b);
    };
    if (!recorded_ || !same_coefficients(now, *recorded_))
      throw Error("cuda_graph = \"step\": step " + std::to_string(t_) + " of " + describe_optimizer(s_) +
                  " has other coefficients than the recorded step (learning rate " + num(now.lr) + " against " +
                  (recorded_ ? num(recorded_->lr) : std::string("none recorded")) +
                  "; a replay repeats the recorded ones): a recorded step needs a constant learning rate and a rule "
                  "without per-step terms (not adam or adamw), recorded after the first step");
  }

  std::string describe() const override {
    return "d500's device optimizer on " + m_.dev->describe() +
           (fused_ ? " (one fused kernel per parameter on the executor's stream, state in device memory): "
                   : " (axpy and scale on the executor's stream, state in device memory): ") +
           describe_optimizer(s_);
  }

  // The reference optimizer's layout: the step count, then every first state, then every second.
  std::vector<std::byte> save() const override {
    std::vector<std::vector<float>> host(state_.size());
    std::vector<const std::vector<float>*> buffers;
    for (std::size_t j = 0; j < state_.size(); ++j) {
      if (state_[j]) {
        host[j].resize(bytes(j) / sizeof(float));
        m_.dev->download(host[j].data(), state_[j], bytes(j));
      }
      buffers.push_back(&host[j]);
    }
    return pack_optimizer_state(t_, buffers);
  }
  void load(const std::vector<std::byte>& state) override {
    std::vector<std::vector<float>> host(state_.size());
    std::vector<std::vector<float>*> buffers;
    for (std::size_t j = 0; j < state_.size(); ++j) {
      if (state_[j]) host[j].resize(bytes(j) / sizeof(float));
      buffers.push_back(&host[j]);
    }
    t_ = unpack_optimizer_state(state, buffers, describe());
    for (std::size_t j = 0; j < state_.size(); ++j)
      if (state_[j]) m_.dev->upload(state_[j], host[j].data(), bytes(j));
  }

 private:
  // Bytes of state buffer j (of parameter j modulo the parameters' count).
  std::size_t bytes(std::size_t j) const { return m_.host_params[j % m_.host_params.size()].size() * sizeof(float); }

  // SGD's family from axpy and scale (a device without a fused kernel): the same rules, rounded
  // otherwise (PyTorch's multi-tensor path is not the reference's loop either).
  void axpy_step(const StepRule& r, float* p, const float* g, float* b, std::int64_t n) {
    DeviceMemory& d = *m_.dev;
    if (r.rule == UpdateRule::Sgd) {  // p -= lr (g + wd p)
      if (r.wd != 0) d.scale(1 - r.lr * r.wd, p, n);
      d.axpy(-r.lr, g, p, n);
      return;
    }
    // b = mu b + (g + wd p), b = g + wd p at the first step
    if (r.first)
      d.copy(b, g, static_cast<std::size_t>(n) * sizeof(float));
    else {
      d.scale(r.mu, b, n);
      d.axpy(1, g, b, n);
    }
    if (r.wd != 0) d.axpy(r.wd, p, b, n);
    if (r.rule == UpdateRule::Momentum) {  // p -= lr b
      d.axpy(-r.lr, b, p, n);
    } else {  // nesterov: p -= lr ((g + wd p) + mu b)
      if (r.wd != 0) d.scale(1 - r.lr * r.wd, p, n);
      d.axpy(-r.lr, g, p, n);
      d.axpy(-r.lr * r.mu, b, p, n);
    }
  }

  OptimizerSpec s_;
  GraphExecutor& e_;
  GraphExecutor::Impl& m_;
  bool fused_;
  // The rule's state in device memory, in the reference's order: every parameter's first state,
  // then every parameter's second (nullptr: the rule keeps none).
  std::vector<float*> state_;
  std::int64_t t_ = 0;
  std::optional<StepRule> recorded_;  // the coefficients of the step a recording holds
};

std::unique_ptr<Optimizer> GraphExecutor::native_optimizer(const OptimizerSpec& s) {
  if (!impl_->dev || impl_->fsz != 4) return nullptr;
  const auto& rules = axpy_optimizer_names();
  if (!impl_->dev->has_optimizer_step() && std::ranges::find(rules, s.name) == rules.end()) return nullptr;
  return std::make_unique<DeviceOptimizer>(s, *this);
}

void GraphExecutor::constants_changed() {
  for (auto& k : impl_->kernels)
    if (k) k->constants_changed();
}

bool GraphExecutor::channels_last(int t) const { return impl_->nhwc.at(static_cast<std::size_t>(t)); }

bool GraphExecutor::bf16(int t) const { return impl_->half.at(static_cast<std::size_t>(t)); }

const std::vector<bool>& GraphExecutor::bf16_plan() const { return impl_->half; }
bool GraphExecutor::bias_after_rounding() const {
  return impl_->spec.backend && impl_->spec.backend->bf16_bias_after_rounding;
}

std::vector<bool> GraphExecutor::channels_last_plan(const ExecutorSpec& spec) {
  return plan_channels_last(*spec.graph, aliasing(*spec.graph, spec.training), spec);
}

std::vector<bool> GraphExecutor::bf16_storage_plan(const ExecutorSpec& spec) {
  return plan_bf16(*spec.graph, aliasing(*spec.graph, spec.training), spec);
}

std::string GraphExecutor::describe() const {
  const Impl& m = *impl_;
  std::string b = m.spec.double_precision ? "reference in double (yardstick)"
                  : m.spec.backend        ? m.spec.backend->name
                                          : "reference";
  std::string where;
  if (m.dev)
    where = " on " + m.dev->describe() +
            (m.deferred ? " (a training step's passes and device optimizer enqueued without waits between them, one "
                          "wait at the step's end)"
                        : " (each forward and backward call waits for the device before it returns)");
  const auto nhwc = std::count(m.nhwc.begin(), m.nhwc.end(), true);
  const auto half = std::count(m.half.begin(), m.half.end(), true);
  return "d500 graph executor on " + b + where + ": " + std::to_string(m.fwd.size()) + " forward and " +
         std::to_string(m.bwd.size()) + " backward steps, " + std::to_string(arena_bytes_) + " bytes planned" +
         (nhwc ? ", " + std::to_string(nhwc) + " activations channels-last (NHWC)" : "") +
         (half ? ", " + std::to_string(half) + " activations and their gradients in bfloat16" : "");
}

}  // namespace d500
