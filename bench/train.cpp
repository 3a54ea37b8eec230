// d500-bench-train: the cost of d500's training loop around a framework. The same training steps
// -- a synthetic batch read, LibTorch's own forward, autograd backward and torch::optim SGD with
// momentum -- run (a) in a bare loop of those calls and (b) as d500's `train` workload under its
// Harness (phase clock reads, recorder stores, the per-step MPI_Allreduce, the learning-rate
// schedule, the stop checks). Rounds alternate (a) and (b) so that drift hits both; the figure is
// the median step time of each and their ratio. The data read is in both (synthetic samples made
// from the seed: the data phase's cost, the same in (a) and (b)).
//   mpirun -np 1 --map-by slot:PE=$(nproc) --bind-to core build/d500-bench-train [network] [batch] [steps per round]
//   [rounds] [validate] [both|bare|d500]
// validate = 0 skips the workload's validation before each round (its yardstick runs the network
// in double on d500's reference kernels: minutes for ResNet-18 at batch 64 on a small machine);
// the timed loop is the same either way. D500_BACKEND picks the executor (default
// libtorch-native; libtorch-cuda, or cuda for d500's executor on the GPU, whose own optimizer is
// d500's device optimizer), D500_MATH its math on cuda and libtorch-cuda (fp32, tf32 or bf16), D500_MEMORY_FORMAT
// the layout on cuda and libtorch-cuda (nchw or channels_last), D500_CUDA_GRAPH cuda's cuda_graph (step: the workload's
// step recorded once as a CUDA Graph and replayed), D500_CUDNN_API its cudnn_api (legacy or graph),
// D500_CUDNN_ALGORITHMS its cudnn_algorithms on cuda (heuristic, find or deterministic, the executor's default),
// D500_FUSION cuda's fusion (add_relu, the default; off; bn_relu; add_relu+bn_relu); on a
// backend without optimizers of its own, both loops use d500's reference SGD with momentum. The figures include images
// per second (batch / median step), the GPU yardstick's unit.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/optimizer.hpp"
#include "backends/registry.hpp"
#include "backends/settings.hpp"
#include "networks/executor.hpp"
#include "training/data.hpp"
#include "workloads/level1/network.hpp"
#include "workloads/level2/train.hpp"
#include "workloads/registry.hpp"

using namespace d500;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The backend to train on, or nullptr (said on stderr) where this build or host cannot.
const BackendInfo* usable_backend(const std::string& backend, const WorkloadInfo& w) {
  const BackendInfo* b = find_backend(backend);
  if (!b || !b->built || !w.backends.count(backend)) {
    std::fprintf(stderr, "d500-bench-train: this build cannot train on backend '%s'%s%s\n", backend.c_str(),
                 b && !b->built ? ": " : "", b && !b->built ? b->not_built_reason.c_str() : "");
    return nullptr;
  }
  if (b->no_device)
    if (const std::string why = b->no_device(); !why.empty()) {
      std::fprintf(stderr, "d500-bench-train: backend '%s' has no device here: %s\n", backend.c_str(), why.c_str());
      return nullptr;
    }
  return b;
}

// The train workload's point: its defaults, the benchmark's network, batch and steps on synthetic
// data, SGD momentum (the backend's own optimizer where it has one), and the GPU keys the
// environment sets (D500_CUDNN_ALGORITHMS, D500_MATH, D500_CUDNN_API, D500_MEMORY_FORMAT).
Params bench_point(const WorkloadInfo& w, const std::string& backend, const std::string& network, std::int64_t batch,
                   int steps, bool native) {
  Params p;
  for (const auto& s : common_params())
    if (s.dflt) p[s.name] = *s.dflt;
  for (const auto& s : w.params)
    if (s.dflt) p[s.name] = *s.dflt;
  p["workload"] = std::string("train");
  p["backend"] = backend;
  p["network"] = network;
  p["dataset"] = std::string("synthetic");
  p["synthetic_samples"] = std::int64_t{batch * (steps + 1)};
  p["batch"] = batch;
  p["optimizer_impl"] = std::string(native ? "native" : "reference");
  p["optimizer"] = std::string("momentum");
  p["steps"] = std::int64_t{steps};
  p["eval_interval_steps"] = std::int64_t{0};
  p["eval_samples"] = std::int64_t{batch};
  p["shuffle"] = false;
  if (const char* algos = std::getenv("D500_CUDNN_ALGORITHMS"); algos && *algos)
    p["cudnn_algorithms"] = std::string(algos);
  if (const char* math = std::getenv("D500_MATH"); math && *math) p["math"] = std::string(math);
  if (const char* api = std::getenv("D500_CUDNN_API"); api && *api) p["cudnn_api"] = std::string(api);
  if (const char* f = std::getenv("D500_MEMORY_FORMAT"); f && *f) p["memory_format"] = std::string(f);
  if (const char* cg = std::getenv("D500_CUDA_GRAPH"); cg && *cg) p["cuda_graph"] = std::string(cg);
  if (const char* fu = std::getenv("D500_FUSION"); fu && *fu) p["fusion"] = std::string(fu);
  normalize_backend_settings(p, "train");  // as the planner leaves a point: cuda's fusion = add_relu unless set
  return p;
}

// Synthetic training data of the network's input and class count, `samples` of them.
DatasetRequest synthetic_request(const Graph& g, std::int64_t samples) {
  DatasetRequest dr;
  dr.dataset = "synthetic";
  dr.split = "train";
  const Shape& in = g.info(g.inputs[0]).shape;
  dr.sample_shape.assign(in.begin() + 1, in.end());
  dr.classes = static_cast<int>(g.info(g.outputs[0]).shape[1]);
  dr.samples = samples;
  return dr;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string network = argc > 1 ? argv[1] : "lenet5";
  const std::int64_t batch = argc > 2 ? std::stoll(argv[2]) : 64;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 200;
  const int rounds = argc > 4 ? std::stoi(argv[4]) : 5;
  const bool validate = argc > 5 ? std::stoi(argv[5]) != 0 : true;
  // both (default), or one loop alone ("bare", "d500"): the other's runner never exists, so that
  // the two can be compared from separate processes, free of each other's memory.
  const std::string only = argc > 6 ? argv[6] : "both";
  const bool run_bare = only != "d500", run_d500 = only != "bare";
  const char* env_backend = std::getenv("D500_BACKEND");
  const std::string backend = env_backend && *env_backend ? env_backend : "libtorch-native";
  const WorkloadInfo* w = builtin_workloads().find("train");
  const BackendInfo* b = usable_backend(backend, *w);
  if (!b) {
    MPI_Finalize();
    return 2;
  }
  const bool native = b->native_optimizer;
  const Params p = bench_point(*w, backend, network, batch, steps, native);

  // (a) The bare loop: the same data, runner and optimizer calls, nothing else.
  const auto net = load_point_network(network, batch, true, true, str_param_or(p, "fusion", ""));
  Graph g = net->graph;
  seeded_weights(g, net->params, 1);
  auto data = open_dataset(synthetic_request(g, batch * (steps + 1)));
  InputData inputs = make_inputs(g, 1, 1);
  // The point's keys reach the bare loop's runner too (math, memory_format, cudnn_algorithms).
  auto runner = run_bare ? make_runner(*b, training_spec(g, *net, inputs, 1), &p) : nullptr;
  // d500's reference optimizer where the backend has none of its own: over the runner's float32
  // parameters, as the workload's.
  std::unique_ptr<RunnerParams> access = run_bare ? std::make_unique<RunnerParams>(*runner, g, net->params) : nullptr;
  std::unique_ptr<Optimizer> opt;
  if (run_bare)
    opt = native ? runner->native_optimizer(optimizer_spec(p, steps))
                 : make_reference_optimizer(optimizer_spec(p, steps), *access);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(batch));
  auto* x = reinterpret_cast<float*>(inputs.bytes[0].data());
  auto* y = reinterpret_cast<std::int64_t*>(inputs.bytes[1].data());

  // Per step: each round's first step of each loop is its cold step (d500's workload is made
  // anew every round: a fresh runner's first step allocates what later steps reuse) and is
  // reported apart; the comparison is between the medians of the other steps.
  std::vector<double> bare, d500, bare_cold, d500_cold, walls;
  std::map<int, std::vector<double>>
      phases;  // d500's phase rows (data, forward, backward, ...), the first round's first left out
  Recorder rec(1 << 16);
  for (int r = 0; r < rounds; ++r) {
    for (int s = 0; run_bare && s < steps; ++s) {
      const std::int64_t t0 = now_ns();
      for (std::int64_t i = 0; i < batch; ++i) idx[static_cast<std::size_t>(i)] = s * batch + i;
      data->read(idx, x, y);
      runner->inputs_changed();
      runner->forward(0);
      runner->backward(0);
      opt->step(0.02);
      (r == 0 && s == 0 ? bare_cold : bare).push_back(static_cast<double>(now_ns() - t0) * 1e-9);
    }
    if (run_d500) {
      RunContext ctx{MPI_COMM_WORLD, 0, 1, p, 1};
      auto wl = w->backends.at(backend)(ctx);
      if (validate) wl->validate();
      std::vector<double> mine;
      Harness h(
          MPI_COMM_WORLD, rec, 0, 1, wl->work(),
          [&](std::span<const Sample> s, bool) {
            for (const auto& row : s) {
              const double d = static_cast<double>(row.end_ns - row.start_ns) * 1e-9;
              if (row.phase == 0)
                mine.push_back(d);
              else if (r > 0 || !phases[row.phase].empty())
                phases[row.phase].push_back(d);
            }
          },
          std::int64_t{1} << 62);
      h.on_events([](std::span<const Event>, bool) {});
      const std::int64_t t0 = now_ns();
      wl->measure(h);
      walls.push_back(static_cast<double>(now_ns() - t0) * 1e-9 / steps);
      for (std::size_t k = 0; k < mine.size(); ++k) (k == 0 ? d500_cold : d500).push_back(mine[k]);
    }
  }
  const double a = bare.empty() ? 0 : median(bare), c = d500.empty() ? 0 : median(d500),
               wl = walls.empty() ? 0 : median(walls);
  std::printf("network %s, batch %lld, %d steps per round, %d rounds, %s with %s SGD momentum%s\n", network.c_str(),
              static_cast<long long>(batch), steps, rounds, backend.c_str(), native ? "its own" : "d500's reference",
              validate ? "" : " (validation skipped)");
  const auto per_s = [&](double step) { return step > 0 ? static_cast<double>(batch) / step : 0.0; };
  if (!bare.empty())
    std::printf(
        "  bare loop of the same calls: %.4f ms a step, %.1f images/s (median of %zu steps; its first, cold step: %.4f ms)\n",
        a * 1e3, per_s(a), bare.size(), bare_cold.empty() ? 0.0 : bare_cold[0] * 1e3);
  std::printf(
      "  d500's train workload:       %.4f ms a step, %.1f images/s (median of %zu steps' op rows, each round's first left out: median %.4f ms)\n",
      c * 1e3, per_s(c), d500.size(), d500_cold.empty() ? 0.0 : median(d500_cold) * 1e3);
  std::printf(
      "  d500's train workload:       %.4f ms a step (median of rounds; wall time of the whole loop, cold step and one final evaluation of one batch included)\n",
      wl * 1e3);
  if (!bare.empty() && !d500.empty()) std::printf("  overhead: %+.2f%% (median step, op rows)\n", (c / a - 1) * 100);
  // Where d500's step goes, phase by phase (each phase's median; on a GPU forward and backward
  // are the host's launch and, where the executor waits, the device's time).
  double compute = 0;  // forward, backward and update: what a loop over a batch kept on the device times
  for (const auto& [ph, v] : phases) {
    if (v.empty()) continue;
    std::printf("  d500's phase %-12s %.4f ms (median of %zu)\n", phase_name(static_cast<Phase>(ph)), median(v) * 1e3,
                v.size());
    const auto p = static_cast<Phase>(ph);
    if (p == Phase::Forward || p == Phase::Backward || p == Phase::Update) compute += median(v);
  }
  if (compute > 0)
    std::printf(
        "  d500 without its data phase: %.4f ms a step, %.1f images/s (forward + backward + update, each phase's median)\n",
        compute * 1e3, per_s(compute));
  MPI_Finalize();
  return 0;
}
