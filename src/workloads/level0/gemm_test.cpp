#include "workloads/level0/gemm.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "backends/blas/blas_backend.hpp"
#include "backends/reference/ops.hpp"
#ifdef D500_HAVE_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif
#include "workloads/harness.hpp"

using namespace d500;

TEST(Gemm, BlasAgreesWithReferenceOnANonSquareProblem) {
  const int m = 67, n = 45, k = 33;
  std::vector<float> a(m * k), b(k * n), c_ref(m * n), c_blas(m * n);
  fill_uniform(a.data(), a.size(), 1);
  fill_uniform(b.data(), b.size(), 2);
  reference::sgemm(m, n, k, a.data(), b.data(), c_ref.data());
  blas_sgemm(m, n, k, a.data(), b.data(), c_blas.data());
  EXPECT_LT(gemm_rel_error(m, n, k, a.data(), b.data(), c_ref.data(), m), gemm_tolerance(k));
  EXPECT_LT(gemm_rel_error(m, n, k, a.data(), b.data(), c_blas.data(), m), gemm_tolerance(k));
  // A single wrong element is caught when its row is checked.
  c_blas[5 * n + 7] += 0.5f;
  EXPECT_GT(gemm_rel_error(m, n, k, a.data(), b.data(), c_blas.data(), m), gemm_tolerance(k));
}

TEST(Gemm, RegisteredImplementationsValidateAndCountWork) {
  const WorkloadInfo* w = builtin_workloads().find("gemm");
  ASSERT_NE(w, nullptr);
  Params p{{"workload", std::string("gemm")}, {"backend", std::string("blas")}, {"m", std::int64_t{40}},
           {"n", std::int64_t{30}},          {"k", std::int64_t{20}},          {"threads", std::int64_t{1}},
           {"seed", std::int64_t{3}},        {"nodes", std::int64_t{1}},       {"ranks_per_node", std::int64_t{1}}};
  std::vector<std::string> backends = {"reference", "blas"};
#ifdef D500_HAVE_ONEDNN
  backends.push_back("onednn");
#endif
  for (const auto& backend : backends) {
    p["backend"] = backend;
    RunContext ctx{MPI_COMM_SELF, 0, 1, p, 3};
    auto wl = w->backends.at(backend)(ctx);
    Validation v = wl->validate();
    EXPECT_LE(v.rel_error, v.tolerance) << backend;
    EXPECT_GT(v.rel_error, 0.0) << backend << ": float32 against a double reference is never exact here";
    EXPECT_EQ(wl->work().flops, 2 * 40 * 30 * 20);
  }
}

#ifdef D500_HAVE_ONEDNN
TEST(Gemm, OnednnAgreesWithReferenceOnANonSquareProblem) {
  const int m = 67, n = 45, k = 33;
  std::vector<float> a(m * k), b(k * n), c(m * n, -1.0f);
  fill_uniform(a.data(), a.size(), 1);
  fill_uniform(b.data(), b.size(), 2);
  OnednnGemm prim(m, n, k, a.data(), b.data(), c.data(), 1);
  prim.run();
  EXPECT_LT(gemm_rel_error(m, n, k, a.data(), b.data(), c.data(), m), gemm_tolerance(k));
  // The primitive works on the caller's buffers: new inputs, new result, no re-creation.
  fill_uniform(a.data(), a.size(), 3);
  prim.run();
  EXPECT_LT(gemm_rel_error(m, n, k, a.data(), b.data(), c.data(), m), gemm_tolerance(k));
}
#endif

TEST(FillUniform, IsDeterministicAndInRange) {
  std::vector<float> x(1000), y(1000), z(1000);
  fill_uniform(x.data(), x.size(), 42);
  fill_uniform(y.data(), y.size(), 42);
  fill_uniform(z.data(), z.size(), 43);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  for (float v : x) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
}

TEST(Harness, RecordsWarmupsAndRepetitionsAndFlushesWhenFull) {
  Recorder rec(4);  // smaller than the 2 + 9 repetitions: forces flushes mid-run
  std::vector<Sample> got;
  int flushes = 0, durable_flushes = 0;
  // A 1 s interval with near-instant repetitions: only the final flush is due for durability.
  Harness h(MPI_COMM_SELF, rec, 2, 9, Work{100, 8}, [&](std::span<const Sample> s, bool durable) {
    ++flushes;
    durable_flushes += durable;
    got.insert(got.end(), s.begin(), s.end());
  }, 1'000'000'000);
  int calls = 0;
  h.repeat([&] { ++calls; });
  EXPECT_EQ(calls, 11);
  ASSERT_EQ(got.size(), 11u);
  EXPECT_GE(flushes, 3);
  EXPECT_EQ(durable_flushes, 1);
  for (int r = 0; r < 11; ++r) {
    EXPECT_EQ(got[r].rep, r);
    EXPECT_EQ(got[r].warmup, r < 2 ? 1 : 0);
    EXPECT_LE(got[r].start_ns, got[r].end_ns);
    EXPECT_EQ(got[r].flops, 100);
    EXPECT_EQ(got[r].bytes, 8);
  }
}

TEST(Harness, SlowRepetitionsAreFlushedDurablyOnSchedule) {
  Recorder rec(1000);
  int durable_flushes = 0;
  std::size_t samples = 0;
  // Each repetition takes >= 2 ms and the interval is 1 ns: every repetition is due.
  Harness h(MPI_COMM_SELF, rec, 0, 5, Work{}, [&](std::span<const Sample> s, bool durable) {
    durable_flushes += durable;
    samples += s.size();
  }, 1);
  h.repeat([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  EXPECT_EQ(samples, 5u);
  EXPECT_EQ(durable_flushes, 6);  // after each of the 5 repetitions, and the final one
}
