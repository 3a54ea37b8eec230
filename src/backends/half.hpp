#pragma once
// float <-> bfloat16 and IEEE half, as bit patterns, rounding to nearest even: the conversions
// the cuda backend's reduced-precision inputs and outputs need, done on the host at setup and
// in finish() (untimed), and those of d500's executor and the onednn kernels over activations
// stored in bfloat16 (TensorView::bf16). Plain C++, so that they are unit-tested in every build.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/device_ops.hpp"

namespace d500 {

// float -> bfloat16 bits, rounded to nearest even (a NaN stays a NaN), and back (exact): the one
// rounding device_ops.hpp defines for the host and the device alike (the cuda backend's kernels,
// the test device, the executor and the onednn kernels over activations stored in bfloat16).
inline std::uint16_t to_bf16(float f) { return dev::bf16_bits(f); }
inline float from_bf16(std::uint16_t h) { return dev::bf16_value(h); }

// float -> half bits, round to nearest even (the conversions cuBLAS's inputs need; done on the
// host at setup, untimed).
inline std::uint16_t to_half(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // beyond 65504 after rounding: infinity
  if (a < 0x38800000u) {  // a subnormal half (or zero): round |f| * 2^24 to an integer, ties to even
    const float scaled = std::fabs(f) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  std::uint32_t m = a + 0xfffu + ((a >> 13) & 1u);  // round the 23-bit mantissa to 10 bits, ties to even
  return static_cast<std::uint16_t>(sign | ((m - 0x38000000u) >> 13));
}

inline float from_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) {
    f = std::ldexp(static_cast<float>(m), -24);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= sign;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const std::uint32_t u = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
  std::memcpy(&f, &u, 4);
  return f;
}

// A float tensor as 16-bit words (bfloat16 with `bf16`, else half), and n of them widened back
// into `out`: the host side of a reduced-precision kernel's inputs (at setup) and outputs (in
// finish()), both untimed.
inline std::vector<std::uint16_t> to_16bit(const std::vector<float>& x, bool bf16) {
  std::vector<std::uint16_t> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] = bf16 ? to_bf16(x[i]) : to_half(x[i]);
  return h;
}

inline void from_16bit(const std::uint16_t* h, std::size_t n, bool bf16, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16 ? from_bf16(h[i]) : from_half(h[i]);
}

}  // namespace d500
