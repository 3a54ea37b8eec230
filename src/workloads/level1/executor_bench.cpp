// Executor-overhead benchmark (prints figures; not a test): a network step measured as a point
// measures it -- through the Harness, with every node's forward (and backward) step timed by
// d500's executor -- against the same kernels (another executor over the same plan, built by the
// same code) run back to back with no clock but one pair per step and no harness. Blocks of the
// two alternate so that drift hits both alike.
// Run: mpirun -np 1 --bind-to core build/d500-bench-executor [network] [batch] [backend] [pass] [threads] [blocks] [reps]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/registry.hpp"
#include "networks/executor.hpp"
#include "stats.hpp"
#include "workloads/harness.hpp"
#include "workloads/level1/network.hpp"
#include "workloads/registry.hpp"

using namespace d500;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string network = argc > 1 ? argv[1] : "resnet50", backend = argc > 3 ? argv[3] : "onednn", pass = argc > 4 ? argv[4] : "inference";
  const std::int64_t batch = argc > 2 ? std::atoll(argv[2]) : 8;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1, blocks = argc > 6 ? std::atoi(argv[6]) : 6, reps = argc > 7 ? std::atoi(argv[7]) : 5;
  const BackendInfo* b = find_backend(backend);
  if (!b || !b->built) {
    std::printf("%s: not in this build\n", backend.c_str());
    MPI_Finalize();
    return 0;
  }
  const WorkloadInfo& w = *builtin_workloads().find("network");
  Params p{{"workload", std::string("network")}, {"backend", backend}, {"seed", std::int64_t{1}}, {"nodes", std::int64_t{1}},
           {"ranks_per_node", std::int64_t{1}}};
  for (const auto& s : w.params)
    if (s.dflt) p[s.name] = *s.dflt;
  p["network"] = network;
  p["batch"] = Value{batch};
  p["pass"] = pass;
  p["threads"] = Value{std::int64_t{threads}};
  w.normalize(p);
  const bool training = pass == "training";
  std::printf("%s, batch %lld, %s, %s, %d thread(s); %d alternating blocks of %d repetitions\n", network.c_str(),
              static_cast<long long>(batch), pass.c_str(), backend.c_str(), threads, blocks, reps);

  RunContext ctx{MPI_COMM_WORLD, 0, 1, p, 1};
  auto wl = w.backends.at(backend)(ctx);
  const Validation v = wl->validate();
  std::printf("validation: relative error %.3g (tolerance %.3g)\n", v.rel_error, v.tolerance);

  // The bare loop's kernels: a second executor over the same graph and inputs.
  const auto net = load_point_network(network, batch, training);
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
        if (x.phase == static_cast<std::uint8_t>(Phase::Op)) d500_s.push_back(static_cast<double>(x.end_ns - x.start_ns) * 1e-9);
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
  std::printf("d500 (harness, every step timed) median %.3f ms (n=%zu); the same kernels back to back %.3f ms (n=%zu): overhead %+.3f%% "
              "[95%% CI %+.3f%%, %+.3f%%]\n",
              m1 * 1e3, d500_s.size(), m2 * 1e3, bare_s.size(), (m1 / m2 - 1) * 100, (ci.lo - 1) * 100, (ci.hi - 1) * 100);
  MPI_Finalize();
  return 0;
}
