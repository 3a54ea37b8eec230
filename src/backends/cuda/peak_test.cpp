// The GPU peaks d500 shows rates against, against the figures NVIDIA publishes for each
// architecture at its own clocks (datasheets: V100 SXM2, T4, A100 SXM4, A10, A40, L4, H100 SXM5
// and PCIe; the GA102 and AD102 whitepapers for the GeForce RTX 3090 and 4090);
// host-side, runs in every build.
#include "backends/cuda/peak.hpp"

#include <gtest/gtest.h>

namespace d500::cuda {
namespace {

// NVIDIA's datasheet figure (dense TFLOP/s) for an arithmetic, with the SMs and the clock it was
// computed at.
struct Published {
  const char* gpu;
  int major, minor, sms;
  long long mhz;
  const char* arithmetic;
  double tflops, within;
};

TEST(GpuPeak, MatchesNvidiasPublishedDenseFiguresAtTheirClocks) {
  struct Named {
    Published p;
    const char* name;  // the device's name, as CUDA gives it
  };
  const Named named[] = {
      {{"A10", 8, 6, 72, 1695, "fp32", 31.2, 0.05}, "NVIDIA A10"},
      {{"A10", 8, 6, 72, 1695, "tf32", 62.5, 0.1}, "NVIDIA A10"},
      {{"A10", 8, 6, 72, 1695, "bf16", 125.0, 0.1}, "NVIDIA A10"},
      {{"A40", 8, 6, 84, 1740, "fp32", 37.4, 0.05}, "NVIDIA A40"},
      {{"A40", 8, 6, 84, 1740, "fp16", 149.7, 0.1}, "NVIDIA A40"},
      {{"L4", 8, 9, 58, 2040, "fp32", 30.3, 0.05}, "NVIDIA L4"},
      {{"GeForce RTX 3090", 8, 6, 82, 1695, "fp32", 35.6, 0.05}, "NVIDIA GeForce RTX 3090"},
      {{"GeForce RTX 3090 (FP16 tensor, FP32 accumulate)", 8, 6, 82, 1695, "fp16", 71.0, 0.2},
       "NVIDIA GeForce RTX 3090"},
      {{"GeForce RTX 4090", 8, 9, 128, 2520, "fp32", 82.6, 0.05}, "NVIDIA GeForce RTX 4090"},
      {{"GeForce RTX 4090 (FP16 tensor, FP32 accumulate)", 8, 9, 128, 2520, "fp16", 165.2, 0.1},
       "NVIDIA GeForce RTX 4090"},
  };
  for (const Named& n : named) {
    std::string basis;
    EXPECT_NEAR(gpu_peak_flops(n.p.major, n.p.minor, n.p.sms, n.p.mhz * 1000, n.p.arithmetic, basis, n.name) / 1e12,
                n.p.tflops, n.p.within)
        << n.p.gpu << " " << n.p.arithmetic << ": " << basis;
  }
  const Published rows[] = {
      {"V100 SXM2", 7, 0, 80, 1530, "fp32", 15.7, 0.05},
      {"V100 SXM2", 7, 0, 80, 1530, "fp16", 125.3, 0.1},
      {"T4", 7, 5, 40, 1590, "fp32", 8.14, 0.01},
      {"T4", 7, 5, 40, 1590, "fp16", 65.1, 0.1},
      {"A100 SXM4", 8, 0, 108, 1410, "fp32", 19.5, 0.05},
      {"A100 SXM4", 8, 0, 108, 1410, "tf32", 155.9, 0.1},
      {"A100 SXM4", 8, 0, 108, 1410, "bf16", 311.9, 0.1},
      {"A100 SXM4", 8, 0, 108, 1410, "fp16", 311.9, 0.1},
      // H100 SXM5: FP32 at its 1980 MHz peak clock; NVIDIA's tensor-core figures at 1830 MHz.
      {"H100 SXM5", 9, 0, 132, 1980, "fp32", 66.9, 0.05},
      {"H100 SXM5", 9, 0, 132, 1830, "tf32", 494.7, 0.1},
      {"H100 SXM5", 9, 0, 132, 1830, "bf16", 989.4, 0.1},
      {"H100 SXM5", 9, 0, 132, 1830, "fp16", 989.4, 0.1},
      {"H100 PCIe", 9, 0, 114, 1755, "fp32", 51.2, 0.05},
  };
  for (const Published& p : rows) {
    std::string basis;
    EXPECT_NEAR(gpu_peak_flops(p.major, p.minor, p.sms, p.mhz * 1000, p.arithmetic, basis) / 1e12, p.tflops, p.within)
        << p.gpu << " " << p.arithmetic << ": " << basis;
  }
}

TEST(GpuPeak, SaysWhyWhenItHasNoPeakAndStatesItsBasisWhenItHas) {
  std::string basis;
  EXPECT_EQ(gpu_peak_flops(9, 0, 132, 1980000, "bf16", basis), 132.0 * 4096 * 1.98e9);
  EXPECT_EQ(basis,
            "132 SMs x 4096 bf16 FLOP/clock/SM (tensor cores, dense, a fused multiply-add counted as 2) x 1980 MHz "
            "(the device's peak SM clock)");
  EXPECT_EQ(gpu_peak_flops(7, 0, 80, 1530000, "tf32", basis), 0);
  EXPECT_EQ(basis, "unknown: compute capability 7.0 has no tf32 tensor cores");
  EXPECT_EQ(gpu_peak_flops(10, 0, 148, 1965000, "fp32", basis), 0);
  EXPECT_EQ(basis, "unknown: compute capability 10.0 is not in d500's table of peaks (7.0, 7.5, 8.0, 8.6, 8.9, 9.0)");
  // A GeForce part of compute capability 8.6 says its tensor cores' half rate; its FP32 cores
  // are at the full rate, as a data-centre part's.
  EXPECT_EQ(gpu_peak_flops(8, 6, 82, 1695000, "bf16", basis, "NVIDIA GeForce RTX 3090"), 82.0 * 512 * 1.695e9);
  EXPECT_NE(basis.find("a GeForce/TITAN part's half rate"), std::string::npos) << basis;
  EXPECT_EQ(gpu_peak_flops(8, 6, 82, 1695000, "fp32", basis, "NVIDIA GeForce RTX 3090"),
            gpu_peak_flops(8, 6, 82, 1695000, "fp32", basis));
  EXPECT_EQ(gpu_peak_flops(9, 0, 132, 1980000, "bf16", basis, "NVIDIA GeForce"), 132.0 * 4096 * 1.98e9)
      << "only 8.6 and 8.9 halve";
  EXPECT_EQ(gpu_peak_flops(9, 0, 132, 1980000, "fp8", basis), 0);
  EXPECT_EQ(basis, "unknown: no peak for arithmetic 'fp8' (fp32, tf32, bf16 or fp16)");
  EXPECT_EQ(gpu_peak_flops(9, 0, 0, 1980000, "fp32", basis), 0);
  EXPECT_EQ(basis, "unknown: the device reports no SM count or clock");
}

}  // namespace
}  // namespace d500::cuda
