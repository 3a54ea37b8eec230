// Benchmark of reading results files (prints figures; not a test): what the containment of
// damaged files costs. Each file is read plainly (read_job_file) and guarded
// (read_job_file_guarded: a forked child reads it first under limits, then this process reads
// it again), alternately, 5 times each; the medians are printed with their ratio.
// Run: build/d500-bench-read FILE.h5 [...]   (no mpirun: the reader is serial)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/error.hpp"
#include "metrics/metrics.hpp"
#include "store/guarded.hpp"
#include "store/reader.hpp"

using namespace d500;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: d500-bench-read FILE.h5 [...]\n");
    return 2;
  }
  try {
    for (int f = 1; f < argc; ++f) {
      std::vector<double> plain, guarded;
      std::size_t samples = 0;
      for (int t = 0; t < 5; ++t) {
        std::int64_t t0 = now_ns();
        JobResult a = read_job_file(argv[f]);
        plain.push_back(static_cast<double>(now_ns() - t0) * 1e-9);
        t0 = now_ns();
        JobResult b = read_job_file_guarded(argv[f]);
        guarded.push_back(static_cast<double>(now_ns() - t0) * 1e-9);
        samples = 0;
        for (const auto& p : b.points) samples += p.samples.size();
      }
      const double mb = static_cast<double>(std::filesystem::file_size(argv[f])) / 1e6;
      std::printf("%s: %.1f MB, %zu samples; read %.3f s plain, %.3f s guarded (x%.2f), medians of 5\n", argv[f], mb,
                  samples, median(plain), median(guarded), median(guarded) / median(plain));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "d500-bench-read: %s\n", e.what());
    return 1;
  }
  return 0;
}
