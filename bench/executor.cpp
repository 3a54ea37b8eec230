// Executor-overhead benchmark (prints figures; not a test): a network step measured as a point
// measures it -- through the Harness, with every node's forward (and backward) step timed by
// d500's executor -- against the same kernels (another executor over the same plan, built by the
// same code) run back to back with no clock but one pair per step and no harness. Blocks of the
// two alternate so that drift hits both alike.
// Run: mpirun -np 1 --bind-to core build/d500-bench-executor [network] [batch] [backend] [pass] [threads] [blocks]
// [reps] Then, per (operator, direction) and for the slowest node steps, the median time of a step over the harness's
// repetitions (on a GPU, the device's time between CUDA events around each step): where a step's time goes.
// D500_VALIDATE=0 skips validation (its double-precision yardstick takes minutes for ResNet-50 at batch 128);
// D500_CUDNN_ALGORITHMS, D500_MATH, D500_CUDNN_API, D500_MEMORY_FORMAT and D500_FUSION set those parameters on cuda
// (unset: the planner's defaults, fusion = "add_relu" among them).
// D500_SIMULATE_MANTISSA=B (e.g. 10, TF32) only prints how far rounding every Conv, ConvTranspose, Gemm and MatMul
// input to B mantissa bits moves the yardstick's step (each tensor's relative L2 distance, as validation measures it),
// beside math = "tf32"'s formula tolerance, and ends:
//   D500_SIMULATE_MANTISSA=10 mpirun -np 1 build/d500-bench-executor resnet20-cifar 32 reference training
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "analysis/stats.hpp"
#include "analysis/summary.hpp"
#include "backends/registry.hpp"
#include "networks/executor.hpp"
#include "networks/prepare.hpp"
#include "networks/validate.hpp"
#include "point.hpp"
#include "store/reader.hpp"
#include "workloads/harness.hpp"
#include "workloads/level1/network.hpp"
#include "workloads/registry.hpp"

using namespace d500;

namespace {

// Where the step's time goes, as the report breaks it down (add_step_costs): the last measure()'s
// repetitions of this one rank, added by operator and pass, and the twelve slowest steps.
void print_breakdown(const StepTimes* t) {
  if (!t || t->steps.empty() || t->repetitions <= 0) return;
  PointResult p;
  p.steps = t->steps;
  const std::size_t n = t->steps.size();
  for (int r = 0; r < t->repetitions; ++r)
    for (std::size_t k = 0; k < n; ++k)
      p.step_times.push_back({0, r, static_cast<std::int32_t>(k), t->ns[static_cast<std::size_t>(r) * n + k]});
  PointRow row;
  add_step_costs(row, p, 0, t->repetitions, 12);
  std::printf("node steps: %d, their medians summed: %.3f ms\n%9s %6s %5s %9s  %s\n", row.steps,
              row.steps_total_s * 1e3, "ms", "share", "steps", "TFLOP/s", "operator direction");
  for (const auto& g : row.by_operator)
    std::printf("%9.3f %5.1f%% %5d %9.2f  %s %s\n", g.median_s * 1e3, 100 * g.share, g.steps, g.gflops * 1e-3,
                g.op.c_str(), g.direction.c_str());
  std::printf("slowest steps:\n");
  for (const auto& c : row.top_steps)
    std::printf("%9.3f ms %9.2f TFLOP/s  %s %s (%s) | %s\n", c.median_s * 1e3, c.gflops * 1e-3, c.name.c_str(),
                c.direction.c_str(), c.op.c_str(), c.impl.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string network = argc > 1 ? argv[1] : "resnet50", backend = argc > 3 ? argv[3] : "onednn",
                    pass = argc > 4 ? argv[4] : "inference";
  const std::int64_t batch = argc > 2 ? std::atoll(argv[2]) : 8;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1, blocks = argc > 6 ? std::atoi(argv[6]) : 6,
            reps = argc > 7 ? std::atoi(argv[7]) : 5;
  const BackendInfo* b = find_backend(backend);
  if (!b || !b->built) {
    std::printf("%s: not in this build\n", backend.c_str());
    MPI_Finalize();
    return 0;
  }
  const WorkloadInfo& w = *builtin_workloads().find("network");
  Params p = default_point(w, backend);
  p["network"] = network;
  p["batch"] = Value{batch};
  p["pass"] = pass;
  p["threads"] = Value{std::int64_t{threads}};
  for (const auto& [env, key] : {std::pair{"D500_CUDNN_ALGORITHMS", "cudnn_algorithms"},
                                 {"D500_MATH", "math"},
                                 {"D500_CUDNN_API", "cudnn_api"},
                                 {"D500_MEMORY_FORMAT", "memory_format"},
                                 {"D500_FUSION", "fusion"}})
    if (const char* v = std::getenv(env); v && *v) p[key] = std::string(v);
  w.normalize(p);
  const char* validate_env = std::getenv("D500_VALIDATE");
  const bool validate = !(validate_env && std::string(validate_env) == "0");
  const bool training = pass == "training";
  if (const char* bits = std::getenv("D500_SIMULATE_MANTISSA"); bits && std::atoi(bits) > 0) {
    const auto net = load_point_network(network, batch, training, true, str_param_or(p, "fusion", ""));
    const InputData inputs = make_inputs(net->graph, 1, 1);
    const int loss = training ? net->loss.loss : -1;
    const StepValues exact = yardstick_step(net->graph, training, loss, net->params, inputs.pointers(), 1);
    const std::vector<double> d = reduced_precision_distance(net->graph, training, loss, net->params, inputs.pointers(),
                                                             1, exact, std::atoi(bits));
    const ToleranceBasis tf32 = with_point_math(net->tolerance, Params{{"math", std::string("tf32")}});
    std::size_t worst = 0;
    for (std::size_t k = 0; k < d.size(); ++k)
      if (d[k] > d[worst]) worst = k;
    std::printf(
        "%s, batch %lld, %s: products' inputs rounded to %s mantissa bits move the step by up to %.4g (%s); math = tf32's "
        "formula tolerance %.4g; %zu of %zu tensors beyond it\n",
        network.c_str(), static_cast<long long>(batch), pass.c_str(), bits, d.empty() ? 0.0 : d[worst],
        d.empty() ? "-" : exact.names[worst].c_str(), tf32.tolerance,
        static_cast<std::size_t>(std::count_if(d.begin(), d.end(), [&](double x) { return x > tf32.tolerance; })),
        d.size());
    MPI_Finalize();
    return 0;
  }
  std::printf("%s, batch %lld, %s, %s, %d thread(s); %d alternating blocks of %d repetitions\n", network.c_str(),
              static_cast<long long>(batch), pass.c_str(), backend.c_str(), threads, blocks, reps);

  RunContext ctx{MPI_COMM_WORLD, 0, 1, p, 1};
  auto wl = w.backends.at(backend)(ctx);
  if (validate) {
    const Validation v = wl->validate();
    std::printf("validation: relative error %.3g (tolerance %.3g)\n", v.rel_error, v.tolerance);
  } else {
    std::printf("validation: skipped (D500_VALIDATE=0)\n");
  }

  // The bare loop's kernels: a second executor over the same graph and inputs.
  const auto net = load_point_network(network, batch, training, true, str_param_or(p, "fusion", ""));
  const InputData inputs = make_inputs(net->graph, 1, 1);
  ExecutorSpec spec;
  spec.graph = &net->graph;
  spec.backend = b;
  spec.training = training;
  spec.loss = net->loss.loss;
  spec.params = net->params;
  spec.inputs = inputs.pointers();
  spec.threads = threads;
  spec.point = &p;
  GraphExecutor bare(spec);
  bare.forward(0);  // warm, as the harness's validation warmed the other
  if (training) bare.backward(0);

  std::vector<double> d500_s, bare_s;
  Recorder rec(static_cast<std::size_t>(reps) * 4 + 4);
  for (int k = 0; k < blocks; ++k) {
    Harness h(MPI_COMM_WORLD, rec, 0, reps, wl->work(), [&](std::span<const Sample> s, bool) {
      for (const auto& x : s)
        if (x.phase == static_cast<std::uint8_t>(Phase::Op))
          d500_s.push_back(static_cast<double>(x.end_ns - x.start_ns) * 1e-9);
    });
    wl->measure(h);
    for (int i = 0; i < reps; ++i) {
      const std::int64_t t0 = now_ns();
      bare.forward(0);
      if (training) bare.backward(0);
      bare_s.push_back(static_cast<double>(now_ns() - t0) * 1e-9);
    }
  }
  const double m1 = stats::median(d500_s), m2 = stats::median(bare_s);
  const auto ci = stats::bootstrap_median_ratio(d500_s, bare_s, 0.95, stats::BootstrapMethod::BCa, 2000, 1);
  std::printf(
      "d500 (harness, every step timed) median %.3f ms (n=%zu); the same kernels back to back %.3f ms (n=%zu): overhead %+.3f%% "
      "[95%% CI %+.3f%%, %+.3f%%]\n",
      m1 * 1e3, d500_s.size(), m2 * 1e3, bare_s.size(), (m1 / m2 - 1) * 100, (ci.lo - 1) * 100, (ci.hi - 1) * 100);
  print_breakdown(wl->step_times());
  MPI_Finalize();
  return 0;
}
