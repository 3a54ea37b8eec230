// Simulated coverage of the intervals d500 can give a ratio of medians (prints figures; not a
// test): for samples of n repetitions from a lognormal, a bimodal and a 10%-outlier distribution,
// b drawn as twice a's distribution (so the true ratio median(a) / median(b) is 0.5 whatever the
// shape), how often each interval covers 0.5: the BCa bootstrap, the percentile bootstrap (both
// as the report computes them: 2000 resamples, stats::bootstrap_median_ratio) and the
// distribution-free one (stats::exact_median_ratio). Also each one's median width (hi / lo).
// Usage: d500-bench-ratio-coverage [TRIALS] [N ...]   (default 2000 10 20)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "analysis/stats.hpp"

using namespace d500;

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::vector<int> ns;
  for (int i = 2; i < argc; ++i) ns.push_back(std::atoi(argv[i]));
  if (ns.empty()) ns = {10, 20};
  struct Shape {
    const char* name;
    std::function<double(std::mt19937_64&)> draw;
  };
  const std::vector<Shape> shapes{
      {"lognormal (sigma 0.5)", [](std::mt19937_64& g) { return std::lognormal_distribution<double>(0, 0.5)(g); }},
      {"bimodal (1 or 1.5, sd 0.05)",
       [](std::mt19937_64& g) {
         const double mode = std::bernoulli_distribution(0.5)(g) ? 1.5 : 1.0;
         return mode * std::lognormal_distribution<double>(0, 0.05)(g);
       }},
      {"10% outliers (3-10x)",
       [](std::mt19937_64& g) {
         const double base = std::lognormal_distribution<double>(0, 0.05)(g);
         return std::bernoulli_distribution(0.1)(g) ? base * std::uniform_real_distribution<double>(3, 10)(g) : base;
       }},
  };
  std::printf("coverage of a nominal 95%% interval of median(a) / median(b), %d trials each (true ratio 0.5)\n",
              trials);
  std::printf("%-30s %4s  %-22s %-22s %-22s\n", "distribution", "n", "BCa bootstrap", "percentile bootstrap",
              "distribution-free");
  std::mt19937_64 gen(20261127);
  for (const auto& shape : shapes)
    for (int n : ns) {
      int cover[3] = {0, 0, 0}, bounded[3] = {0, 0, 0};
      std::vector<double> widths[3];
      for (int t = 0; t < trials; ++t) {
        std::vector<double> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
        for (auto& x : a) x = shape.draw(gen);
        for (auto& x : b) x = 2 * shape.draw(gen);
        const stats::RatioInterval r[3] = {
            stats::bootstrap_median_ratio(a, b, 0.95, stats::BootstrapMethod::BCa, 2000, gen()),
            stats::bootstrap_median_ratio(a, b, 0.95, stats::BootstrapMethod::Percentile, 2000, gen()),
            stats::exact_median_ratio(a, b, 0.95)};
        for (int m = 0; m < 3; ++m) {
          if (!r[m].bounded) continue;
          ++bounded[m];
          cover[m] += r[m].lo <= 0.5 && 0.5 <= r[m].hi;
          widths[m].push_back(r[m].hi / r[m].lo);
        }
      }
      std::string cells[3];
      for (int m = 0; m < 3; ++m) {
        char b[64];
        if (bounded[m] == 0) {
          std::snprintf(b, sizeof b, "no interval");
        } else {
          std::sort(widths[m].begin(), widths[m].end());
          std::snprintf(b, sizeof b, "%.3f (width x%.2f)", static_cast<double>(cover[m]) / bounded[m],
                        widths[m][widths[m].size() / 2]);
        }
        cells[m] = b;
      }
      std::printf("%-30s %4d  %-22s %-22s %-22s\n", shape.name, n, cells[0].c_str(), cells[1].c_str(),
                  cells[2].c_str());
    }
  return 0;
}
