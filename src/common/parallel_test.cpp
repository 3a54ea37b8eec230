#include "common/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

using namespace d500;

namespace {
// Work of an uneven length per item, so that threads finish out of order.
std::uint64_t busy(std::size_t i) {
  std::uint64_t x = i + 1;
  for (std::size_t k = 0; k < 200 * (i % 7 + 1); ++k) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

}  // namespace

TEST(OrderedParallel, TakesEveryItemInOrderOnTheCallingThreadWhateverTheThreads) {
  const auto caller = std::this_thread::get_id();
  for (unsigned threads : {1u, 2u, 4u, 7u}) {
    const std::size_t n = 1000, window = 3;
    std::atomic<std::size_t> takes_begun{0};
    std::atomic<bool> made_on_caller{false}, too_far_ahead{false};
    std::size_t next = 0;
    ordered_parallel<std::pair<std::size_t, std::uint64_t>>(
        n, threads, window,
        [&](std::size_t i) {
          if (std::this_thread::get_id() == caller) made_on_caller = true;
          // An item is made only while the one `window` places before it has been taken.
          if (i > takes_begun.load() + window) too_far_ahead = true;
          return std::make_pair(i, busy(i));
        },
        [&](std::size_t i, std::pair<std::size_t, std::uint64_t>&& r) {
          ++takes_begun;
          EXPECT_EQ(std::this_thread::get_id(), caller);
          ASSERT_EQ(i, next) << threads << " threads";
          EXPECT_EQ(r.first, i);
          EXPECT_EQ(r.second, busy(i));
          ++next;
        });
    EXPECT_EQ(next, n) << threads << " threads";
    EXPECT_EQ(made_on_caller.load(), threads == 1) << threads << " threads";
    EXPECT_FALSE(too_far_ahead.load()) << threads << " threads";
  }
}

TEST(OrderedParallel, TheFirstFailureInItemOrderIsRethrownAfterEveryItemBeforeIt) {
  for (unsigned threads : {1u, 3u}) {
    // Every item from 500 on fails, later ones sooner: the failure of 500 is the one thrown, and
    // only once 0..499 are taken.
    std::size_t taken = 0;
    try {
      ordered_parallel<int>(
          1000, threads, 8,
          [&](std::size_t i) -> int {
            if (i >= 500) throw std::runtime_error("item " + std::to_string(i));
            busy(i);
            return static_cast<int>(i);
          },
          [&](std::size_t i, int&& v) {
            EXPECT_EQ(static_cast<std::size_t>(v), i);
            ++taken;
          });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "item 500") << threads << " threads";
    }
    EXPECT_EQ(taken, 500u) << threads << " threads";
  }
}

TEST(OrderedParallel, AFailureOfTakeStopsTheThreadsAndIsRethrown) {
  std::atomic<std::size_t> made{0};
  const std::size_t window = 4;
  const unsigned threads = 3;
  EXPECT_THROW(ordered_parallel<std::size_t>(
                   100000, threads, window,
                   [&](std::size_t i) {
                     ++made;
                     return i;
                   },
                   [&](std::size_t i, std::size_t&&) {
                     if (i == 10) throw std::logic_error("stop");
                   }),
               std::logic_error);
  // Joined before the rethrow: nothing is made afterwards, and nothing beyond the window.
  const std::size_t after = made.load();
  EXPECT_LE(after, 11 + window);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(made.load(), after);
}

// A training step's next batch is made on a thread beside the caller's: the job runs there, not
// on the caller's, while the caller goes on; wait() returns once it is done and rethrows its
// failure; the thread takes job after job.
TEST(Beside, RunsEachJobOnItsOwnThreadWhileTheCallerGoesOnAndRethrowsAFailure) {
  Beside beside;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> release{false};
  std::thread::id ran_on;
  int runs = 0;
  std::function<void()> job = [&] {
    while (!release.load()) std::this_thread::yield();  // held until the caller has gone on
    ran_on = std::this_thread::get_id();
    ++runs;
  };
  for (int k = 0; k < 3; ++k) {
    release = false;
    beside.start(job);
    release = true;  // start() returned while the job was still held
    beside.wait();
    EXPECT_EQ(runs, k + 1);
    EXPECT_NE(ran_on, caller);
  }
  std::function<void()> failing = [] { throw std::runtime_error("no batch"); };
  beside.start(failing);
  EXPECT_THROW(beside.wait(), std::runtime_error);
  release = true;
  beside.start(job);
  beside.wait();
  EXPECT_EQ(runs, 4) << "a failure leaves the thread taking jobs";
}
