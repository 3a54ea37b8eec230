// Harness-overhead benchmark (prints figures; not a test), as Deep500 measured it: the median
// time of an operator measured through d500's harness (barrier, clock reads, record, the
// workload's virtual call) against the same library call timed in a bare loop, in one run.
// Blocks of the two alternate so that drift (clock, thermal, neighbours) hits both alike.
// Run: mpirun -np 1 build/d500-bench-overhead [n] [blocks] [reps_per_block] [conv_batch]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/blas/blas_backend.hpp"
#include "stats.hpp"
#include "workloads/harness.hpp"
#include "workloads/registry.hpp"
#ifdef D500_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#include "workloads/level0/operator.hpp"
#endif

using namespace d500;

namespace {

struct Result {
  std::vector<double> harness, bare;  // seconds per repetition
};

// A point's parameters as the planner makes them: defaults, the given values, then normalize.
Params point(const std::string& workload, const std::string& backend, const Params& given) {
  const WorkloadInfo& w = *builtin_workloads().find(workload);
  Params p{{"workload", workload}, {"backend", backend}, {"seed", std::int64_t{1}}, {"nodes", std::int64_t{1}},
           {"ranks_per_node", std::int64_t{1}}};
  for (const auto& s : w.params)
    if (s.dflt) p[s.name] = *s.dflt;
  for (const auto& [k, v] : given) p[k] = v;
  if (w.normalize) w.normalize(p);
  return p;
}

template <class Bare>
Result measure(const Params& p, int blocks, int reps, Bare&& bare_call) {
  RunContext ctx{MPI_COMM_WORLD, 0, 1, p, 1};
  auto wl = builtin_workloads()
                .find(std::get<std::string>(p.at("workload")))
                ->backends.at(std::get<std::string>(p.at("backend")))(ctx);
  wl->validate();
  Result r;
  Recorder rec(static_cast<std::size_t>(reps) + 1);
  for (int b = 0; b < blocks; ++b) {
    Harness h(MPI_COMM_WORLD, rec, 0, reps, wl->work(), [&](std::span<const Sample> s, bool) {
      for (const auto& x : s) r.harness.push_back(static_cast<double>(x.end_ns - x.start_ns) * 1e-9);
    });
    wl->measure(h);
    for (int i = 0; i < reps; ++i) {
      const std::int64_t t0 = now_ns();
      bare_call();
      r.bare.push_back(static_cast<double>(now_ns() - t0) * 1e-9);
    }
  }
  return r;
}

void print(const char* what, const Result& r) {
  const double h = stats::median(r.harness), b = stats::median(r.bare);
  auto ci = stats::bootstrap_median_ratio(r.harness, r.bare, 0.95, stats::BootstrapMethod::BCa, 2000, 1);
  std::printf("%-22s d500 median %.4f ms (n=%zu), bare loop %.4f ms (n=%zu): overhead %+.3f%% [95%% CI %+.3f%%, %+.3f%%]\n",
              what, h * 1e3, r.harness.size(), b * 1e3, r.bare.size(), (h / b - 1) * 100, (ci.lo - 1) * 100, (ci.hi - 1) * 100);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024, blocks = argc > 2 ? std::atoi(argv[2]) : 10,
            reps = argc > 3 ? std::atoi(argv[3]) : 20, conv_batch = argc > 4 ? std::atoi(argv[4]) : 32;
  std::printf("GEMM n=%d, float32, 1 thread; %d alternating blocks of %d repetitions each\n", n, blocks, reps);
  std::vector<float> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  fill_uniform(a.data(), a.size(), 1);
  fill_uniform(b.data(), b.size(), 2);
  openblas_threads(1);
  const Params gemm{{"n", std::int64_t{n}}, {"threads", std::int64_t{1}}};
  print("blas (OpenBLAS)",
        measure(point("gemm", "blas", gemm), blocks, reps, [&] { blas_sgemm(n, n, n, a.data(), b.data(), c.data()); }));
#ifdef D500_HAVE_ONEDNN
  OnednnGemm prim(n, n, n, a.data(), b.data(), c.data(), 1);
  print("onednn (matmul)", measure(point("gemm", "onednn", gemm), blocks, reps, [&] { prim.run(); }));

  // A ResNet-50 convolution: the bare loop executes the same oneDNN primitive (created by the
  // same kernel code, on its own buffers) back to back.
  const char* layer = "resnet50/res4_3x3";
  const Params conv = point("conv2d", "onednn", {{"shape", std::string(layer)}, {"n", std::int64_t{conv_batch}}});
  OpProblem prob = make_problem(*find_operator("conv2d"), conv, 1);
  auto kernel = make_onednn_kernel(prob, 1);
  std::printf("conv2d %s forward, batch %d, oneDNN, 1 thread\n", layer, conv_batch);
  print("onednn (convolution)", measure(conv, blocks, reps, [&] { kernel->run(); }));
#else
  std::printf("onednn: not in this build\n");
#endif
  MPI_Finalize();
  return 0;
}
