// Harness-overhead benchmark (prints figures; not a test), as Deep500 measured it: the median
// time of an operator measured through d500's harness (barrier, clock reads, record, the
// workload's virtual call) against the same library call timed in a bare loop, in one run.
// Blocks of the two alternate so that drift (clock, thermal, neighbours) hits both alike.
// Run: mpirun -np 1 build/d500-bench-overhead [n] [blocks] [reps_per_block] [conv_batch]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "analysis/stats.hpp"
#include "backends/registry.hpp"
#include "point.hpp"
#include "workloads/harness.hpp"
#include "workloads/level0/operator.hpp"
#include "workloads/registry.hpp"

using namespace d500;

namespace {

struct Result {
  std::vector<double> harness, bare;  // seconds per repetition
};

// A point's parameters as the planner makes them: defaults, the given values, then normalize.
Params point(const std::string& workload, const std::string& backend, const Params& given) {
  const WorkloadInfo& w = *builtin_workloads().find(workload);
  Params p = default_point(w, backend);
  // (the operators' common parameters, threads and library, are among w.params)
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
  std::printf(
      "%-22s d500 median %.4f ms (n=%zu), bare loop %.4f ms (n=%zu): overhead %+.3f%% [95%% CI %+.3f%%, %+.3f%%]\n",
      what, h * 1e3, r.harness.size(), b * 1e3, r.bare.size(), (h / b - 1) * 100, (ci.lo - 1) * 100, (ci.hi - 1) * 100);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024, blocks = argc > 2 ? std::atoi(argv[2]) : 10,
            reps = argc > 3 ? std::atoi(argv[3]) : 20, conv_batch = argc > 4 ? std::atoi(argv[4]) : 32;
  std::printf("GEMM n=%d, float32, 1 thread; %d alternating blocks of %d repetitions each\n", n, blocks, reps);
  // The bare loop runs the same backend kernel (created by the same code, on its own problem's
  // buffers) back to back: what differs is d500's harness alone.
  auto bare_kernel = [](const Params& p, std::unique_ptr<OpKernel>& k) {
    const std::string& backend = std::get<std::string>(p.at("backend"));
    OpProblem* prob = new OpProblem(make_problem(*find_operator(std::get<std::string>(p.at("workload"))), p, 1));
    k = find_backend(backend)->make_kernel(*prob, 1);
    return prob;  // lives as long as the benchmark
  };
  const Params gemm{{"n", std::int64_t{n}}, {"threads", std::int64_t{1}}};
  for (const char* backend : {"blas", "onednn"}) {
    const BackendInfo* b = find_backend(backend);
    if (!b || !b->built) {
      std::printf("%s: not in this build (%s)\n", backend, b ? b->not_built_reason.c_str() : "unknown");
      continue;
    }
    const Params p = point("gemm", backend, gemm);
    std::unique_ptr<OpKernel> k;
    bare_kernel(p, k);
    print((std::string(backend) + " (gemm)").c_str(), measure(p, blocks, reps, [&] { k->run(); }));
  }

  // A ResNet-50 convolution on oneDNN.
  if (find_backend("onednn")->built) {
    const char* layer = "resnet50/res4_3x3";
    const Params conv = point("conv2d", "onednn", {{"shape", std::string(layer)}, {"n", std::int64_t{conv_batch}}});
    std::unique_ptr<OpKernel> k;
    bare_kernel(conv, k);
    std::printf("conv2d %s forward, batch %d, oneDNN, 1 thread\n", layer, conv_batch);
    print("onednn (convolution)", measure(conv, blocks, reps, [&] { k->run(); }));
  }
  MPI_Finalize();
  return 0;
}
