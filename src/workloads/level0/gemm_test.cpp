// The workload registry's GEMM through the generic operator workload (every backend of the
// build, validated), the deterministic input fill, and the Harness's recording and flushing.
#include <gtest/gtest.h>

#include <thread>

#include "backends/registry.hpp"
#include "workloads/harness.hpp"
#include "workloads/registry.hpp"

using namespace d500;

TEST(Gemm, RegisteredImplementationsValidateAndCountWork) {
  const WorkloadInfo* w = builtin_workloads().find("gemm");
  ASSERT_NE(w, nullptr);
  Params p{{"workload", std::string("gemm")}, {"backend", std::string("blas")}, {"m", std::int64_t{40}},
           {"n", std::int64_t{30}},           {"k", std::int64_t{20}},          {"threads", std::int64_t{1}},
           {"seed", std::int64_t{3}},         {"nodes", std::int64_t{1}},       {"ranks_per_node", std::int64_t{1}},
           {"shape", std::string()},          {"library", std::string()},       {"dtype", std::string()}};
  int ran = 0;
  for (const auto& b : all_backends()) {
    if (!b.built || !w->backends.count(b.name)) continue;
    if (b.name == "custom") continue;  // needs a library implementing gemm
    if (b.no_device && !b.no_device().empty())
      continue;  // a GPU backend on a host without one (tests/integration/gpu_test.cpp)
    p["backend"] = b.name;
    RunContext ctx{MPI_COMM_SELF, 0, 1, p, 3};
    auto wl = w->backends.at(b.name)(ctx);
    Validation v = wl->validate();
    EXPECT_LE(v.rel_error, v.tolerance) << b.name;
    EXPECT_GT(v.rel_error, 0.0) << b.name << ": float32 against a double reference is never exact here";
    EXPECT_EQ(wl->work().flops, 2 * 40 * 30 * 20);
    ++ran;
  }
  EXPECT_GE(ran, 2) << "gemm runs at least on reference and blas";
}

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
  Harness h(
      MPI_COMM_SELF, rec, 2, 9, Work{100, 8},
      [&](std::span<const Sample> s, bool durable) {
        ++flushes;
        durable_flushes += durable;
        got.insert(got.end(), s.begin(), s.end());
      },
      1'000'000'000);
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

// A device kernel's repetitions: each has its op row (the host's launch and wait) and its device
// row (the duration device_ns() gives, placed from the host's start). device_ns() is asked after
// the op row has ended and before after(), so that reading the events is no part of the host's
// time; a kernel's device_ns() of -1 (a host kernel) gives op rows alone.
TEST(Harness, ADevicesDurationIsReadAfterTheHostsRowEndsAndRecordedBesideIt) {
  Recorder rec(1000);
  std::vector<Sample> got;
  Harness h(MPI_COMM_SELF, rec, 1, 4, Work{},
            [&](std::span<const Sample> s, bool) { got.insert(got.end(), s.begin(), s.end()); });
  std::vector<std::int64_t> asked_at, after_at;
  int ops = 0;
  h.repeat_kernel_then(
      [&] {
        ++ops;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [&] {
        asked_at.push_back(now_ns());
        return std::int64_t{500'000};
      },
      [&] { after_at.push_back(now_ns()); });
  EXPECT_EQ(ops, 5);
  ASSERT_EQ(got.size(), 10u);
  ASSERT_EQ(asked_at.size(), 6u);  // once before the first (host or device?), then once per repetition
  ASSERT_EQ(after_at.size(), 5u);
  for (int r = 0; r < 5; ++r) {
    const Sample& op = got[static_cast<std::size_t>(2 * r)];
    const Sample& dev = got[static_cast<std::size_t>(2 * r + 1)];
    EXPECT_EQ(op.phase, static_cast<std::uint8_t>(Phase::Op));
    EXPECT_EQ(dev.phase, static_cast<std::uint8_t>(Phase::Device));
    EXPECT_EQ(op.rep, r);
    EXPECT_EQ(dev.rep, r);
    EXPECT_EQ(dev.warmup, r < 1 ? 1 : 0);
    EXPECT_EQ(dev.end_ns - dev.start_ns, 500'000);
    EXPECT_GE(dev.start_ns, op.start_ns);
    EXPECT_GE(op.end_ns - op.start_ns, 1'000'000);
    EXPECT_GE(asked_at[static_cast<std::size_t>(r + 1)], op.end_ns)
        << "repetition " << r << ": device_ns() inside the host's row";
    EXPECT_LE(asked_at[static_cast<std::size_t>(r + 1)], after_at[static_cast<std::size_t>(r)]);
  }
  got.clear();
  h.repeat_kernel_then([] {}, [] { return std::int64_t{-1}; }, [] {});
  ASSERT_EQ(got.size(), 5u);
  for (const Sample& s : got) EXPECT_EQ(s.phase, static_cast<std::uint8_t>(Phase::Op));
}

TEST(Harness, SlowRepetitionsAreFlushedDurablyOnSchedule) {
  Recorder rec(1000);
  int durable_flushes = 0;
  std::size_t samples = 0;
  // Each repetition takes >= 2 ms and the interval is 1 ns: every repetition is due.
  Harness h(
      MPI_COMM_SELF, rec, 0, 5, Work{},
      [&](std::span<const Sample> s, bool durable) {
        durable_flushes += durable;
        samples += s.size();
      },
      1);
  h.repeat([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
  EXPECT_EQ(samples, 5u);
  EXPECT_EQ(durable_flushes, 6);  // after each of the 5 repetitions, and the final one
}

// Adaptive repetitions through the harness: repetitions of one steady duration stop by the
// interval's width, not before the minimum; slow ones stop when the point's time is up.
TEST(Harness, AdaptiveRepetitionsStopByWidthOrTimeAndSaySo) {
  Recorder rec(1000);
  std::size_t samples = 0;
  auto count = [&](std::span<const Sample> s, bool) { samples += s.size(); };
  AutoRepetitions a;
  a.on = true;
  a.ci_rel_width = 0.5;  // loose: a sleep of 2 ms varies by far less than half of itself
  a.min = 8;
  a.max = 100;
  Harness h(MPI_COMM_SELF, rec, 1, 999, Work{}, count);
  h.stop_adaptively(a);
  EXPECT_EQ(h.repetitions(), 1 + 100);
  int calls = 0;
  h.repeat([&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  // Not before the minimum; on an idle machine at it (9 calls). A busy one (CI running builds
  // beside the suite) can stretch one sleep to several times 2 ms, and the rule then rightly
  // takes a few more repetitions: the count is checked against the rule, not a machine's load.
  EXPECT_GE(calls, 1 + 8);
  EXPECT_LT(calls, 1 + 100);
  EXPECT_EQ(samples, static_cast<std::size_t>(calls));
  EXPECT_EQ(h.repetitions_run(), calls);
  EXPECT_EQ(h.stopped_by(), StoppedBy::CiWidth);
  EXPECT_LE(h.stopped_at_width(), 0.5);

  a.ci_rel_width = 1e-6;  // unreachable for sleeps
  a.max_time_s = 0.05;    // 50 ms: about 10 repetitions of 5 ms, warm-up included
  Harness slow(MPI_COMM_SELF, rec, 1, 999, Work{}, count);
  slow.stop_adaptively(a);
  calls = 0;
  slow.repeat([&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  EXPECT_EQ(slow.stopped_by(), StoppedBy::MaxTime);
  EXPECT_GE(calls, 3);
  EXPECT_LE(calls, 11);
  EXPECT_EQ(slow.repetitions_run(), calls);
}

// A termination asked for during training (a SIGTERM noted by the worker): the harness finishes
// the step under way, flushes durably, takes one checkpoint before the next step and calls the
// end; without checkpoints it ends without one; with none asked for, training runs to its end.
TEST(Harness, ATerminationAskedForMidStepCheckpointsBeforeTheNextStepAndEnds) {
  for (const bool with_checkpoints : {true, false}) {
    Recorder rec(1000);
    int durable = 0, checkpoint_rows = 0;
    Harness h(MPI_COMM_SELF, rec, 1, 0, Work{}, [&](std::span<const Sample> flushed, bool d) {
      durable += d;
      for (const Sample& s : flushed) checkpoint_rows += s.phase == static_cast<std::uint8_t>(Phase::Checkpoint);
    });
    std::vector<std::int64_t> states;
    h.on_checkpoint([&](const TrainingState& s) { states.push_back(s.step); });
    volatile std::sig_atomic_t seen = 0;
    int ended = 0, durable_at_end = -1;
    h.on_terminate(&seen, [&] {
      ++ended;
      durable_at_end = durable;
    });
    std::int64_t steps = 0;
    Harness::Checkpointing cp;
    cp.interval_ns = with_checkpoints ? std::int64_t{3600} * 1'000'000'000 : 0;  // none due by the clock
    cp.state = [&] {
      TrainingState st;
      st.step = steps;
      return st;
    };
    h.train(
        [&](int, const Harness::PhaseMark&) {
          ++steps;
          if (steps == 5) seen = 1;  // the signal arrives during step 5
          return steps < 100;
        },
        [&](int, const Harness::PhaseMark& mark, bool) {
          mark(Phase::Evaluation, now_ns(), now_ns());
          return true;
        },
        1, cp);
    EXPECT_EQ(steps, 5) << "no step after the one the signal came in";
    EXPECT_EQ(h.trained_steps(), 5);
    EXPECT_EQ(ended, 1);
    EXPECT_GE(durable_at_end, 1) << "samples flushed durably before the end";
    EXPECT_EQ(states, with_checkpoints ? std::vector<std::int64_t>{5} : std::vector<std::int64_t>{});
    EXPECT_EQ(h.checkpoints(), with_checkpoints ? 1 : 0);
    EXPECT_EQ(checkpoint_rows, with_checkpoints ? 1 : 0) << "its time is a checkpoint row, flushed before the end";
  }
  // Nothing asked for: the same training runs its 100 steps and never calls the end.
  Recorder rec(1000);
  Harness h(MPI_COMM_SELF, rec, 1, 0, Work{}, [](std::span<const Sample>, bool) {});
  volatile std::sig_atomic_t seen = 0;
  int ended = 0;
  h.on_terminate(&seen, [&] { ++ended; });
  int steps = 0;
  h.train([&](int, const Harness::PhaseMark&) { return ++steps < 100; },
          [](int, const Harness::PhaseMark&, bool) { return true; }, 1);
  EXPECT_EQ(steps, 100);
  EXPECT_EQ(ended, 0);
}
