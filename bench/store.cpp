// Benchmark of the metrics path (prints figures; not a test):
//  1. the cost the timed path pays per sample: Recorder::record alone, and the two clock reads
//     plus record that Harness::repeat adds around an operation;
//  2. the sustained flush rate per rank into one shared HDF5 file, parallel and gather modes;
//  3. the file size per million samples.
// Run: mpirun -np 2 build/d500-bench-store [samples_per_rank] [dir]
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "store/h5.hpp"
#include "store/writer.hpp"

using namespace d500;
namespace fs = std::filesystem;

namespace {

inline void clobber() { asm volatile("" ::: "memory"); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ns per sample for `n` calls of record() (and, with clocks, of the harness's timed-path work).
double record_cost(std::size_t n, bool with_clocks) {
  Recorder rec(n);
  const std::int64_t t0 = now_ns();
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t a = 0, b = 0;
    if (with_clocks) {
      a = now_ns();
      clobber();
      b = now_ns();
    }
    rec.record(Sample{a, b, 8, 16, 0, static_cast<std::int32_t>(i), 0});
    clobber();
  }
  const std::int64_t t1 = now_ns();
  return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  h5::init("rank " + std::to_string(rank));
  const long long per_rank = argc > 1 ? std::atoll(argv[1]) : 20'000'000;
  const fs::path dir = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path();

  if (rank == 0) {
    std::vector<double> rec_only, rec_clock;
    for (int t = 0; t < 7; ++t) {
      rec_only.push_back(record_cost(1 << 20, false));
      rec_clock.push_back(record_cost(1 << 20, true));
    }
    std::printf("timed path, per sample (median of 7 x 2^20):\n");
    std::printf("  Recorder::record alone              %6.2f ns\n", median(rec_only));
    std::printf("  2 x steady_clock::now() + record    %6.2f ns\n", median(rec_clock));
  }

  // Appends of a full buffer per rank; durable (H5Fflush) every 8th, as a fast point would be.
  const std::size_t batch = 1 << 18;  // the worker's buffer size
  std::vector<Sample> buf(batch);
  for (std::size_t i = 0; i < batch; ++i) buf[i] = Sample{100, 200, 8, 16, rank, static_cast<std::int32_t>(i), 0, 0};
  const JobIdentity spec{"bench", "bench", "0", 1, size};
  const PointIdentity point{"0000000000000000", "bench:none", 0, {}};
  for (StoreMode mode : {StoreMode::Parallel, StoreMode::Gather}) {
    fs::path file = dir / ("d500-bench-" + std::to_string(getppid()) + "-" + store_mode_name(mode) + ".h5");
    if (rank == 0) fs::remove(file);
    MPI_Barrier(MPI_COMM_WORLD);
    double secs = 0;
    {
      ResultWriter w(file.string(), MPI_COMM_WORLD, spec, EnvRecord{"", "", "bench", false, {}, {}, ""}, mode);
      w.begin_point(point, 0, 0, static_cast<int>(std::min<long long>(per_rank, 1 << 30)),
                    {Work{16, 8, 0}, "GB/s", "-", "weak", "", false, -1, {}});
      MPI_Barrier(MPI_COMM_WORLD);
      const std::int64_t t0 = now_ns();
      int k = 0;
      for (long long done = 0; done < per_rank; done += static_cast<long long>(batch)) w.append(buf, ++k % 8 == 0);
      MPI_Barrier(MPI_COMM_WORLD);
      secs = static_cast<double>(now_ns() - t0) * 1e-9;
      w.end_point(Outcome::Complete, "", secs);
      w.finish("complete");
    }
    if (rank == 0) {
      const double rows = static_cast<double>((per_rank + batch - 1) / batch * batch) * size;
      const double mb = static_cast<double>(fs::file_size(file)) / 1e6;
      std::printf("flush, %s mode, %d ranks, %.0f samples per rank in batches of %zu:\n", store_mode_name(mode), size,
                  rows / size, batch);
      std::printf(
          "  %.2f s, %.2f million samples/s per rank, %.1f MB/s in all; file %.1f MB = %.1f MB per million samples\n",
          secs, rows / size / secs / 1e6, mb / secs, mb, mb / (rows / 1e6));
      fs::remove(file);
    }
  }
  MPI_Finalize();
  return 0;
}
