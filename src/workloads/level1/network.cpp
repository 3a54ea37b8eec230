// Level 1: a whole network -- a built-in one or a user's .onnx file -- executed for inference or
// one training step (forward, backpropagation) by an executor: d500's graph executor on a
// backend's kernels (the reference where the backend has none), or a framework's own executor
// (libtorch-native). Validated against d500's reference executor in double precision before
// timing; timed per repetition, with the forward and backward phases and, on d500's executor,
// every node's time.
#include "workloads/level1/network.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>

#include "backends/graph_ops.hpp"
#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "common/error.hpp"
#include "common/recent.hpp"
#include "common/text.hpp"
#include "networks/builtin.hpp"
#include "networks/executor.hpp"
#include "networks/fuse.hpp"
#include "networks/prepare.hpp"
#include "networks/validate.hpp"
#include "workloads/level0/operator.hpp"

namespace fs = std::filesystem;

namespace d500 {
namespace {

struct NetworkPoint {
  std::string network;
  std::int64_t batch = -1, microbatch = 0;
  bool training = false;
  int threads = 1;
  std::uint64_t seed = 1;
  std::string fusion;  // cuda's and onednn's setting (networks/fuse.hpp)
  explicit NetworkPoint(const Params& p)
      : network(std::get<std::string>(p.at("network"))),
        batch(std::get<std::int64_t>(p.at("batch"))),
        microbatch(std::get<std::int64_t>(p.at("microbatch"))),
        training(std::get<std::string>(p.at("pass")) == "training"),
        threads(static_cast<int>(std::get<std::int64_t>(p.at("threads")))),
        seed(static_cast<std::uint64_t>(int_param_or(p, "seed", 1))),
        fusion(str_param_or(p, "fusion", "")) {}
  int micro_batches() const { return microbatch > 0 ? static_cast<int>(batch / microbatch) : 1; }
  std::int64_t graph_batch() const { return microbatch > 0 ? microbatch : batch; }
};

}  // namespace

std::shared_ptr<const LoadedNetwork> load_point_network(const std::string& network, std::int64_t batch, bool training,
                                                        bool weights, const std::string& fusion) {
  static Recent<LoadedNetwork> cache(3);
  const bool add_relu = fuses_add_relu(fusion), bn_relu = fuses_bn_relu(fusion);
  const std::string key = network + "\n" + std::to_string(batch) + "\n" + (training ? "training" : "inference") +
                          (weights ? "" : "\nshapes only") + (add_relu ? "\nadd_relu" : "") +
                          (bn_relu ? "\nbn_relu" : "");
  return cache.get(key, [&] {
    LoadedNetwork n;
    n.graph = load_network(network, LoadOptions{batch, {}, weights}, &n.facts);
    if (training) {
      n.loss = add_training_loss(n.graph);
      n.params = trainable_params(n.graph, n.loss.loss);
    }
    n.work = graph_work(n.graph, n.loss.loss);
    n.tolerance = network_tolerance(n.graph, n.loss.loss);
    n.model_hash = find_builtin_network(network) ? "built-in" : n.facts.file_hash;
    if (add_relu) n.fused_add_relu = fuse_add_relu(n.graph);
    if (bn_relu) n.fused_bn_relu = fuse_bn_relu(n.graph);
    return n;
  });
}

NetworkBytes network_bytes(const LoadedNetwork& n) {
  const Graph& g = n.graph;
  NetworkBytes b;
  for (const auto& [t, bytes] : g.constants) b.weights += static_cast<double>(bytes.size());
  for (std::size_t t = 0; t < g.tensors.size(); ++t)
    if (!g.is_const(static_cast<int>(t))) b.activations += static_cast<double>(g.bytes(static_cast<int>(t)));
  for (int t : g.inputs) b.inputs += static_cast<double>(g.bytes(t));
  for (int t : n.params) b.params += static_cast<double>(g.bytes(t));
  return b;
}

std::int64_t memory_figure(double bytes) {
  return bytes >= 9e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(bytes);
}

void absolute_network_path(std::string& network) {
  if (!find_builtin_network(network) &&
      (network.find('/') != std::string::npos || network.find(".onnx") != std::string::npos))
    network = fs::absolute(network).lexically_normal().string();
}

namespace {

// The yardstick's step, shared by the points of a job that run the same network, batch,
// micro-batches, pass and seed on different executors.
std::string yardstick_key(const NetworkPoint& pt) {
  return pt.network + "\n" + std::to_string(pt.batch) + "\n" + std::to_string(pt.microbatch) + "\n" +
         (pt.training ? "t" : "i") + "\n" + std::to_string(pt.seed);
}
std::shared_ptr<const StepValues> yardstick(const NetworkPoint& pt, const LoadedNetwork& n, const InputData& inputs) {
  static Recent<StepValues> cache(2);
  return cache.get(yardstick_key(pt), [&] {
    return yardstick_step(n.graph, pt.training, n.loss.loss, n.params, inputs.pointers(), pt.micro_batches());
  });
}

class NetworkWorkload final : public Workload {
 public:
  NetworkWorkload(const RunContext& ctx, const BackendInfo& backend)
      : pt_(ctx.params),
        params_(ctx.params),
        backend_(backend),
        comm_(ctx.comm),
        net_(load_point_network(pt_.network, pt_.graph_batch(), pt_.training, true, pt_.fusion)) {
    inputs_ = make_inputs(net_->graph, pt_.micro_batches(), ctx.seed);
    RunnerSpec spec;
    spec.graph = &net_->graph;
    spec.training = pt_.training;
    spec.loss = net_->loss.loss;
    spec.params = net_->params;
    spec.inputs = inputs_.pointers();
    spec.micro_batches = pt_.micro_batches();
    spec.threads = pt_.threads;
    // Kernels, primitives and the memory plan are made here, untimed.
    runner_ = make_runner(backend, spec, &params_);
    executor_ = dynamic_cast<GraphExecutor*>(runner_.get());
    const double flops = (pt_.training ? net_->work.training_flops : net_->work.forward_flops) * pt_.micro_batches();
    work_ = Work{static_cast<std::int64_t>(flops), 0, pt_.batch};
  }

  Validation validate() override {
    step(nullptr);
    const StepValues got = step_values(*runner_, net_->graph, net_->params, pt_.training);
    const auto ref = yardstick(pt_, *net_, inputs_);
    const ToleranceBasis tolerance = with_point_math(net_->tolerance, params_, runner_.get());
    const StepJudgement j = judge_step(got, *ref, tolerance, net_->graph, pt_.training, net_->loss.loss, net_->params,
                                       inputs_.pointers(), pt_.micro_batches(), yardstick_key(pt_));
    std::string what =
        pt_.training ? "the loss and the gradient of each of the " + std::to_string(net_->params.size()) + " weights"
                     : "every graph output";
    if (pt_.micro_batches() > 1) what += ", over " + std::to_string(pt_.micro_batches()) + " micro-batches";
    std::string where;
    if (!(j.error <= j.tolerance))
      where = "; " + first_divergence(net_->graph, backend_, &params_, inputs_.pointers(), pt_.micro_batches(),
                                      pt_.threads, tolerance.tolerance);
    return Validation{
        j.error, j.tolerance,
        "relative L2 error of " + what + where + " (worst: " + j.where +
            ", each against max(|reference|, 1e-4 x the RMS of the references' norms)), against d500's reference executor in "
            "double precision on the same float32 weights and inputs; tolerance " +
            j.words,
        j.verdict()};
  }

  void measure(Harness& h) override {
    if (executor_) {
      times_.steps.clear();
      for (const auto& s : executor_->steps()) {
        const Node* n = s.node >= 0 ? &net_->graph.nodes[static_cast<std::size_t>(s.node)] : nullptr;
        times_.steps.push_back(StepInfo{n ? n->name : "loss", n ? n->op : "-",
                                        s.node < 0   ? "seed"
                                        : s.backward ? "backward"
                                                     : "forward",
                                        s.impl, s.flops * pt_.micro_batches()});
      }
      times_.repetitions = h.repetitions();
      times_.ns.assign(times_.steps.size() * static_cast<std::size_t>(times_.repetitions),
                       0);  // preallocated: the timed region writes only
    }
    DeviceMemory* dev = executor_ ? executor_->device() : nullptr;
    if (!dev) {
      h.repeat_phased([this](int rep, const Harness::PhaseMark& mark) { step(&mark, rep); }, pt_.training ? 2 : 0);
    } else {
      // On a device: its own duration of the step (events around all of it on the stream) as the
      // repetition's `device` row, placed from the host's start.
      h.repeat_phased(
          [this, dev](int rep, const Harness::PhaseMark& mark) {
            const std::int64_t t0 = now_ns();
            dev->start_timing();
            step(&mark, rep);
            const std::int64_t ns = dev->stop_timing();
            if (ns >= 0) mark(Phase::Device, t0, t0 + ns);
          },
          pt_.training ? 3 : 1);
    }
    device_peak_ = runner_->device_peak_bytes();  // d500's executor or a framework's on a GPU; -1 on the host
  }

  Work work() const override { return work_; }

  std::vector<std::pair<std::string, Value>> attributes() const override {
    std::vector<std::pair<std::string, Value>> a;
    const Graph& g = net_->graph;
    std::int64_t weights = 0, params = 0;
    for (const auto& [t, b] : g.constants) weights += static_cast<std::int64_t>(b.size());
    for (int t : net_->params) params += numel(g.info(t).shape);
    a.push_back({"network.model", std::string(find_builtin_network(pt_.network) ? "built-in" : "file")});
    a.push_back({"network.model_hash", net_->model_hash});
    a.push_back({"network.opset", std::int64_t{net_->facts.opset}});
    if (net_->facts.converted_from)
      a.push_back({"network.converted_from_opset", std::int64_t{net_->facts.converted_from}});
    // The model's nodes after folding: a joined pair counts two, as in an unfused point.
    a.push_back({"network.nodes", static_cast<std::int64_t>(g.nodes.size()) + net_->joined()});
    a.push_back({"network.weight_bytes", weights});
    if (pt_.training) a.push_back({"network.trainable_parameters", params});
    a.push_back({"network.flops_per_sample", (pt_.training ? net_->work.training_flops : net_->work.forward_flops) /
                                                 static_cast<double>(pt_.graph_batch())});
    a.push_back({"network.inputs", join(inputs_.descriptions, "; ")});
    if (pt_.training) a.push_back({"network.loss", net_->loss.description});
    a.push_back({"network.micro_batches", std::int64_t{pt_.micro_batches()}});
    a.push_back({"executor", runner_->describe()});
    if (executor_) {
      a.push_back({"memory.planned_bytes", executor_->arena_bytes()});
      a.push_back({"memory.persistent_bytes", executor_->persistent_bytes()});
      const auto f = fallback_attributes(*executor_, g);
      a.insert(a.end(), f.begin(), f.end());
      a.push_back({"executor.fused_add_relu", std::int64_t{net_->fused_add_relu}});
      a.push_back({"executor.fused_bn_relu", std::int64_t{net_->fused_bn_relu}});
    }
    const auto peak = executor_peak_attributes(backend_, params_, executor_ && runner_->device_memory());
    a.insert(a.end(), peak.begin(), peak.end());
    return a;
  }

  // After the repetitions: the device memory the runner held at most (none on the host, -1).
  // attributes() comes before them, when nothing has been measured yet.
  std::vector<std::pair<std::string, Value>> final_attributes() const override {
    return device_memory_attributes(comm_, device_peak_);
  }

  const StepTimes* step_times() const override { return executor_ ? &times_ : nullptr; }

 private:
  // One step: every micro-batch's forward (and backward) pass. `mark` records the phases.
  void step(const Harness::PhaseMark* mark, int rep = 0) {
    if (executor_)
      executor_->time_steps(mark && !times_.ns.empty()
                                ? times_.ns.data() + static_cast<std::size_t>(rep) * times_.steps.size()
                                : nullptr);
    std::int64_t fwd = 0, bwd = 0, fwd_start = 0, bwd_start = 0;
    for (int m = 0; m < pt_.micro_batches(); ++m) {
      const std::int64_t t0 = now_ns();
      runner_->forward(m);
      const std::int64_t t1 = now_ns();
      if (m == 0) fwd_start = t0;
      fwd += t1 - t0;
      if (!pt_.training) continue;
      runner_->backward(m);
      const std::int64_t t2 = now_ns();
      if (m == 0) bwd_start = t1;
      bwd += t2 - t1;
    }
    // A phase's rows give its total duration (end - start); with micro-batches it ran in pieces,
    // and start is its first piece's.
    if (mark && pt_.training) {
      (*mark)(Phase::Forward, fwd_start, fwd_start + fwd);
      (*mark)(Phase::Backward, bwd_start, bwd_start + bwd);
    }
  }

  NetworkPoint pt_;
  Params params_;
  const BackendInfo& backend_;
  MPI_Comm comm_;
  std::shared_ptr<const LoadedNetwork> net_;
  InputData inputs_;
  std::unique_ptr<GraphRunner> runner_;
  GraphExecutor* executor_ = nullptr;
  std::int64_t device_peak_ = -1;
  Work work_;
  StepTimes times_;
};

std::string network_check(const Params& p) {
  std::string why = operator_common_check(p);
  if (!why.empty()) return why;
  const NetworkPoint pt(p);
  if (pt.microbatch < 0) return "microbatch must be 0 (none) or a positive divisor of batch";
  if (pt.microbatch > 0 && (pt.batch <= 0 || pt.batch % pt.microbatch != 0))
    return "microbatch " + std::to_string(pt.microbatch) + " does not divide batch " + std::to_string(pt.batch) +
           " (micro-batches run one after another, their gradients added)";
  try {
    const auto n = load_point_network(pt.network, pt.graph_batch(), pt.training, false, pt.fusion);
    if (pt.batch <= 0) {
      // The model's own batch: its inputs' first axis.
      if (n->facts.declared_batch <= 0) return "the model's batch is symbolic: set 'batch'";
    }
    make_inputs(n->graph, 1, 1);  // refuses inputs d500 cannot make data for
    const BackendInfo* b = find_backend(std::get<std::string>(p.at("backend")));
    if (b && b->built && b->check_graph) return b->check_graph(n->graph);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Bytes one rank allocates for a point: the graph's weights, the executor's copy of them and of
// the inputs, its planned activations and gradients (bounded by every tensor of the step, twice
// in training), parameter gradients, and the yardstick's the same in double.
std::int64_t network_memory(const Params& p) {
  const NetworkPoint pt(p);
  try {
    const NetworkBytes b =
        network_bytes(*load_point_network(pt.network, pt.graph_batch(), pt.training, false, pt.fusion));
    const double step = b.activations * (pt.training ? 2 : 1) + b.params;
    const double runner = b.weights + b.inputs * pt.micro_batches() + step;
    return memory_figure(b.weights + runner + 2 * runner);  // the graph, the runner, the yardstick in double
  } catch (const Error&) {
    return 0;  // check() says what is wrong
  }
}

}  // namespace

std::vector<std::pair<std::string, Value>> fallback_attributes(const GraphExecutor& e, const Graph& g) {
  std::int64_t steps = 0;
  std::vector<std::string> ops;
  for (const auto& s : e.steps()) {
    if (s.impl.rfind("reference (fallback", 0) != 0) continue;
    ++steps;
    const std::string& op = g.nodes[static_cast<std::size_t>(s.node)].op;
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  return {{"executor.reference_fallback_steps", steps}, {"executor.reference_fallback_ops", join(ops, ", ")}};
}

void register_network(WorkloadRegistry& r) {
  WorkloadInfo w;
  w.name = "network";
  w.level = 1;
  w.description = "a whole network (built-in, or an .onnx file) for inference or one training step, on an executor";
  w.rate_unit = "samples/s";
  w.scaling = "weak";
  w.scaling_note = "total work: every rank runs the network on its own batch";
  // A table: one entry a line, as written.
  // clang-format off
  w.params = {
      {"network", ValueType::String, std::nullopt, 0, 0, {}, "a built-in network (d500 networks) or the path of an .onnx file"},
      {"batch", ValueType::Int, Value{std::int64_t{-1}}, -1, 1 << 24, {},
       "batch size: replaces the model's batch axis when it is symbolic or 1; default: the model's own"},
      {"pass", ValueType::String, Value{std::string("inference")}, 0, 0, {"inference", "training"},
       "inference, or a training step (forward and backward; d500 appends a loss if the model has none)"},
      {"microbatch", ValueType::Int, Value{std::int64_t{0}}, 0, 1 << 24, {},
       "run the batch as micro-batches of this size, gradients added; 0: the whole batch at once"},
  };
  // clang-format on
  for (const auto& s : operator_common_params()) w.params.push_back(s);
  w.normalize = [](Params& p) {
    auto& net = std::get<std::string>(p.at("network"));
    absolute_network_path(net);
    normalize_backend_settings(p, "network");
    // The model's own batch made explicit, so that equal problems get equal ids.
    if (std::get<std::int64_t>(p.at("batch")) <= 0) {
      try {
        const auto n = load_point_network(net, -1, false, false);
        if (n->facts.declared_batch > 0) p["batch"] = Value{n->facts.declared_batch};
      } catch (const Error&) {  // check() reports it
      }
    }
  };
  w.check = network_check;
  w.memory_bytes = network_memory;
  auto add = [&](const BackendInfo& b) {
    w.backends[b.name] = [&b](const RunContext& c) { return std::make_unique<NetworkWorkload>(c, b); };
  };
  for (const auto& b : all_backends())
    if (b.built && (b.reference || b.make_node_kernel || b.make_graph_runner)) add(b);
  r.add(std::move(w));
}

}  // namespace d500
