// run_contained against real failures in a real child process: a crash, a hang, a runaway
// allocation and an exception each come back as what they were, and the caller goes on.
// (Built into the integration-test binary, whose main does not start MPI: fork's rules.)
#include "common/contain.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace d500;

TEST(Contain, TheChildsResultComesBack) {
  Contained c = run_contained([] { return std::string("4 points\0 and more", 18); }, ContainLimits{});
  EXPECT_EQ(c.kind, Contained::Ok);
  EXPECT_EQ(c.text, std::string("4 points\0 and more", 18));
}

TEST(Contain, AnExceptionIsFailedWithItsMessage) {
  Contained c = run_contained([]() -> std::string { throw std::runtime_error("x.h5: no schema"); }, ContainLimits{});
  EXPECT_EQ(c.kind, Contained::Failed);
  EXPECT_EQ(c.text, "x.h5: no schema");
}

TEST(Contain, ACrashIsNamedAndTheCallerGoesOn) {
  Contained c = run_contained(
      []() -> std::string {
        raise(SIGSEGV);
        return "unreachable";
      },
      ContainLimits{});
  EXPECT_EQ(c.kind, Contained::Crashed);
  EXPECT_EQ(c.text, "crashed with SIGSEGV");
}

TEST(Contain, AHangIsStoppedAtTheTimeLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  Contained c = run_contained(
      []() -> std::string {
        for (;;) pause();
      },
      ContainLimits{0.5, 1LL << 30});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(c.kind, Contained::TimedOut);
  EXPECT_NE(c.text.find("took longer than 0.5"), std::string::npos) << c.text;
  EXPECT_GE(s, 0.5);
  EXPECT_LT(s, 5.0);
}

TEST(Contain, ARunawayAllocationMeetsTheMemoryLimit) {
  Contained c = run_contained(
      []() -> std::string {
        std::vector<std::vector<char>> hog;
        for (int i = 0; i < 64; ++i) hog.emplace_back(std::size_t{64} << 20, 'x');  // 4 GiB if it were allowed
        return "allocated " + std::to_string(hog.size());
      },
      ContainLimits{30, 512LL << 20});
  EXPECT_EQ(c.kind, Contained::OutOfMemory);
  EXPECT_NE(c.text.find("needed more than 512 MiB"), std::string::npos) << c.text;
}

// The limit is on what the work adds, not on the address space the caller already maps: a GPU
// node's libraries and driver reservations can exceed the limit itself. Here the caller holds a
// 3 GiB reservation (as a CUDA driver does, never touched); the child still gets its 512 MiB.
TEST(Contain, TheMemoryLimitIsOnTopOfWhatTheCallerAlreadyMaps) {
  const std::size_t reserved = std::size_t{3} << 30;
  void* r = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(r, MAP_FAILED);
  Contained c = run_contained(
      []() -> std::string {
        std::vector<char> v(std::size_t{256} << 20, 'x');
        return "allocated " + std::to_string(v.size() >> 20) + " MiB";
      },
      ContainLimits{30, 512LL << 20});
  munmap(r, reserved);
  EXPECT_EQ(c.kind, Contained::Ok) << c.text;
  EXPECT_EQ(c.text, "allocated 256 MiB");
}

TEST(Contain, OnlyRegularFilesAreOpened) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("d500-contain-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / "x.h5", file = dir / "y.h5", link = dir / "z.h5";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::FILE* f = std::fopen(file.c_str(), "w");
  std::fclose(f);
  fs::create_symlink(file, link);
  EXPECT_EQ(not_a_regular_file(fifo.string()), "not a regular file (a FIFO); only regular files are read");
  EXPECT_EQ(not_a_regular_file(dir.string()), "not a regular file (a directory); only regular files are read");
  EXPECT_EQ(not_a_regular_file(file.string()), "");
  EXPECT_EQ(not_a_regular_file(link.string()), "");  // a link to a regular file is read
  EXPECT_EQ(not_a_regular_file((dir / "absent.h5").string()), "no such file");
  fs::remove_all(dir);
}

TEST(Contain, ReadLimitsGrowWithTheFileAndHonourTheEnvironment) {
  unsetenv("D500_READ_TIMEOUT_S");
  unsetenv("D500_READ_MEMORY_MB");
  ContainLimits small = read_limits(0), big = read_limits(std::int64_t{8} << 30);
  EXPECT_EQ(small.memory_bytes, 2LL << 30);
  EXPECT_GT(big.memory_bytes, small.memory_bytes);
  EXPECT_GT(big.seconds, small.seconds);
  setenv("D500_READ_TIMEOUT_S", "7", 1);
  setenv("D500_READ_MEMORY_MB", "300", 1);
  ContainLimits env = read_limits(1 << 20);
  EXPECT_EQ(env.seconds, 7);
  EXPECT_EQ(env.memory_bytes, 300LL << 20);
  unsetenv("D500_READ_TIMEOUT_S");
  unsetenv("D500_READ_MEMORY_MB");
}
