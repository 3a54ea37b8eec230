#pragma once
// A GPU's arithmetic peak, the upper bound Hoefler and Belli's rule 11 asks a rate to be shown
// against: SMs x dense FLOP per clock per SM for the arithmetic x the SM clock. The FLOP per
// clock per SM are NVIDIA's architecture whitepapers' (Volta, Turing, Ampere GA100 and GA10x,
// Ada AD10x, Hopper GH100), dense (no structured sparsity), a fused multiply-add counted as two;
// the clock is the
// one the caller gives (the cuda backend: the device's peak SM clock, cudaDevAttrClockRate), so
// the bound is what the SMs could do at that clock, not a guaranteed speed: under a power cap a
// tensor-core kernel runs below it (NVIDIA's own tensor-core figures for the H100 SXM use a
// 1830 MHz clock against its 1980 MHz peak). Host-side and dependency-free: unit-tested in every
// build.
#include <string>

namespace d500::cuda {

struct PeakRate {
  double flop_per_clock_per_sm = 0;  // 0: unknown (why says so)
  std::string units;                 // "FP32 cores" or "tensor cores"
  std::string why_unknown;
};

// `arithmetic`: "fp32" (float32 FMA on the CUDA cores, no TF32), "tf32", "bf16", "fp16" (tensor
// cores, float32 accumulation). Compute capabilities 7.0 (V100), 7.5 (T4), 8.0 (A100), 8.6 (A10,
// A40, RTX A6000, GeForce RTX 30), 8.9 (L4, L40S, GeForce RTX 40), 9.0 (H100, H200); others are
// unknown, and an arithmetic the architecture lacks is unknown with that reason. On 8.6 and 8.9
// the GeForce and TITAN parts (`name`, the device's) run their tensor cores at half the rate with
// float32 accumulation (NVIDIA's GA102 and AD102 whitepapers: "FP16 Tensor TFLOPS with FP32
// Accumulate"), the data-centre and workstation parts at the full rate.
inline PeakRate gpu_peak_rate(int major, int minor, const std::string& arithmetic, const std::string& name = "") {
  struct Row {
    int major, minor;
    double fp32, tf32, bf16, fp16;  // 0: the architecture lacks it
    bool consumer_halves;           // GeForce/TITAN parts: half the tensor rate with float32 accumulation
  };
  static constexpr Row kRows[] = {
      {7, 0, 128, 0, 0, 1024, false},        // V100: 64 FP32 cores, 8 tensor cores x 64 FMA
      {7, 5, 128, 0, 0, 1024, false},        // T4: 64 FP32 cores, 8 tensor cores x 64 FMA
      {8, 0, 128, 1024, 2048, 2048, false},  // A100: 64 FP32 cores, 4 tensor cores x 256 FP16 FMA (TF32: half)
      {8, 6, 256, 512, 1024, 1024, true},    // GA10x: 128 FP32 cores, 4 tensor cores x 128 FP16 FMA (TF32: half)
      {8, 9, 256, 512, 1024, 1024, true},    // AD10x: as GA10x per SM and clock (FP8 aside)
      {9, 0, 256, 2048, 4096, 4096, false},  // H100, H200: 128 FP32 cores, 4 tensor cores x 512 FP16 FMA (TF32: half)
  };
  PeakRate r;
  const std::string cc = std::to_string(major) + "." + std::to_string(minor);
  const bool known_arithmetic =
      arithmetic == "fp32" || arithmetic == "tf32" || arithmetic == "bf16" || arithmetic == "fp16";
  if (!known_arithmetic) {
    r.why_unknown = "no peak for arithmetic '" + arithmetic + "' (fp32, tf32, bf16 or fp16)";
    return r;
  }
  for (const Row& row : kRows) {
    if (row.major != major || row.minor != minor) continue;
    r.flop_per_clock_per_sm = arithmetic == "fp32"   ? row.fp32
                              : arithmetic == "tf32" ? row.tf32
                              : arithmetic == "bf16" ? row.bf16
                                                     : row.fp16;
    r.units = arithmetic == "fp32" ? "FP32 cores" : "tensor cores";
    const bool consumer = name.find("GeForce") != std::string::npos || name.find("TITAN") != std::string::npos;
    if (arithmetic != "fp32" && row.consumer_halves && consumer) {
      r.flop_per_clock_per_sm /= 2;
      r.units = "tensor cores, a GeForce/TITAN part's half rate with float32 accumulation";
    }
    if (r.flop_per_clock_per_sm == 0)
      r.why_unknown = "compute capability " + cc + " has no " + arithmetic + " tensor cores";
    return r;
  }
  r.why_unknown = "compute capability " + cc + " is not in d500's table of peaks (7.0, 7.5, 8.0, 8.6, 8.9, 9.0)";
  return r;
}

// The peak in FLOP/s of `sms` SMs at `clock_khz`, and its basis in words ("132 SMs x 4096 bf16
// FLOP/clock/SM (tensor cores, dense) x 1980 MHz"); 0 with the reason in `basis` when unknown.
inline double gpu_peak_flops(int major, int minor, int sms, long long clock_khz, const std::string& arithmetic,
                             std::string& basis, const std::string& name = "") {
  const PeakRate r = gpu_peak_rate(major, minor, arithmetic, name);
  if (r.flop_per_clock_per_sm == 0) {
    basis = "unknown: " + r.why_unknown;
    return 0;
  }
  if (sms <= 0 || clock_khz <= 0) {
    basis = "unknown: the device reports no SM count or clock";
    return 0;
  }
  basis = std::to_string(sms) + " SMs x " + std::to_string(static_cast<long long>(r.flop_per_clock_per_sm)) + " " +
          arithmetic + " FLOP/clock/SM (" + r.units + ", dense, a fused multiply-add counted as 2) x " +
          std::to_string(clock_khz / 1000) + " MHz (the device's peak SM clock)";
  return static_cast<double>(sms) * r.flop_per_clock_per_sm * static_cast<double>(clock_khz) * 1e3;
}

}  // namespace d500::cuda
