// The host-side conversions of the cuda backend's reduced-precision data, against values fixed by
// the formats (IEEE 754 binary16, bfloat16) and round-to-nearest-even; runs in every build.
#include "backends/half.hpp"

#include "backends/device_ops.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

namespace d500 {
namespace {

TEST(HalfConversions, ExactValuesAndTheFormatsLimits) {
  EXPECT_EQ(to_half(1.0f), 0x3c00);
  EXPECT_EQ(to_half(-2.0f), 0xc000);
  EXPECT_EQ(to_half(0.0f), 0x0000);
  EXPECT_EQ(to_half(-0.0f), 0x8000);
  EXPECT_EQ(to_half(65504.0f), 0x7bff);                          // the largest half
  EXPECT_EQ(to_half(65519.0f), 0x7bff);                          // rounds down to it
  EXPECT_EQ(to_half(65520.0f), 0x7c00);                          // rounds up to infinity
  EXPECT_EQ(to_half(std::ldexp(1.0f, -24)), 0x0001);             // the smallest subnormal
  EXPECT_EQ(to_half(std::ldexp(1.0f, -14)), 0x0400);             // the smallest normal
  EXPECT_EQ(to_half(std::ldexp(1.0f, -25)), 0x0000);             // half the smallest subnormal: a tie, to even (0)
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // a tie, to even (down)
  EXPECT_EQ(to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // a tie, to even (up)
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above the tie
  EXPECT_TRUE(std::isnan(from_half(to_half(std::nanf("")))));
  EXPECT_TRUE(std::isinf(from_half(to_half(1e10f))));
  EXPECT_EQ(from_half(0x3555), 0.333251953125f);
  EXPECT_EQ(from_half(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_half(0x8001), -std::ldexp(1.0f, -24));

  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // a tie, to even (down)
  EXPECT_EQ(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // a tie, to even (up)
  EXPECT_EQ(from_bf16(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
}

// Over a million values spread across the formats' normal ranges, a round trip lands on the
// nearest representable value: within half a unit in the last place (2^-11 for half, 2^-8 for
// bfloat16, relative), and converting it again changes nothing.
// The tensor-wide helpers convert element by element, as the scalar functions do.
TEST(HalfConversions, TensorsConvertElementByElement) {
  const std::vector<float> x{1.0f, -0.1f, 3.14159f, 65504.0f, 1e-8f};
  for (const bool bf16 : {true, false}) {
    const std::vector<std::uint16_t> h = to_16bit(x, bf16);
    ASSERT_EQ(h.size(), x.size());
    std::vector<float> back(x.size());
    from_16bit(h.data(), h.size(), bf16, back.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(h[i], bf16 ? to_bf16(x[i]) : to_half(x[i])) << i;
      EXPECT_EQ(back[i], bf16 ? from_bf16(h[i]) : from_half(h[i])) << i;
    }
  }
}

TEST(HalfConversions, RoundTripsAreWithinHalfAnUlpAndStable) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp_half(-14, 15), exp_bf(-100, 100);
  for (int i = 0; i < 1000000; ++i) {
    const float h = (i % 2 ? -1.0f : 1.0f) * std::ldexp(mant(gen), exp_half(gen));
    if (std::fabs(h) <= 65504.0f) {
      const float back = from_half(to_half(h));
      ASSERT_LE(std::fabs(back - h), std::ldexp(std::fabs(h), -11) * (1 + 1e-6)) << h;
      ASSERT_EQ(to_half(back), to_half(h)) << h;
    }
    const float b = (i % 2 ? -1.0f : 1.0f) * std::ldexp(mant(gen), exp_bf(gen));
    const float bb = from_bf16(to_bf16(b));
    ASSERT_LE(std::fabs(bb - b), std::ldexp(std::fabs(b), -8) * (1 + 1e-6)) << b;
    ASSERT_EQ(to_bf16(bb), to_bf16(b)) << b;
  }
}

// bfloat16's one rounding (device_ops.hpp's bf16_bits, which half.hpp's to_bf16 is, and which the
// cuda backend's kernels, the test device and the executor run over activations stored in
// bfloat16) against an independent one: each float rounded in double to the nearest multiple of
// its bfloat16 quantum (8 significant bits, 2^-133 below the normal range), ties to even, beyond
// the largest finite value to infinity; NaNs stay NaNs. Over random bit patterns and the edges.
TEST(HalfConversions, Bfloat16RoundingIsToNearestEvenAtEachQuantum) {
  std::vector<float> vs = {0.0f,
                           -0.0f,
                           1.0f,
                           1.00390625f,
                           1.01171875f,
                           1.0078125f,
                           -3.5f,
                           65504.0f,
                           3.4e38f,
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    vs.push_back(f);
  }
  auto oracle = [](float f) {
    if (std::isinf(f) || f == 0.0f) return static_cast<double>(f);
    int e = 0;
    std::frexp(static_cast<double>(f), &e);  // |f| in [2^(e-1), 2^e)
    const double quantum = std::ldexp(1.0, std::max(e - 8, -133));
    const double r = std::nearbyint(static_cast<double>(f) / quantum) * quantum;  // ties to even
    return std::fabs(r) >= std::ldexp(1.0, 128) ? std::copysign(HUGE_VAL, r) : r;
  };
  int ties = 0;
  for (const float f : vs) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    ties += (u & 0xffffu) == 0x8000u;
    const std::uint16_t h = dev::bf16_bits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(dev::bf16_value(h)));
      continue;
    }
    const double want = oracle(f);
    ASSERT_EQ(static_cast<double>(dev::bf16_value(h)), want) << f;
    ASSERT_EQ(std::signbit(dev::bf16_value(h)), std::signbit(f)) << f;
    ASSERT_EQ(to_bf16(f), h) << "half.hpp's and the device's are the one rounding";
  }
  EXPECT_EQ(dev::bf16_bits(1.00390625f), to_bf16(1.0f)) << "a tie rounds to the even neighbour";
  EXPECT_EQ(dev::bf16_bits(1.01171875f), to_bf16(1.015625f));
  EXPECT_EQ(dev::add_bf16(to_bf16(1.0f), to_bf16(0.00390625f)), to_bf16(1.0f)) << "1 + 2^-8 rounds back to 1";
  EXPECT_EQ(dev::relu_bf16(to_bf16(-2.0f)), 0);
  EXPECT_EQ(dev::relu_grad_bf16(to_bf16(-0.0f), to_bf16(5.0f)), 0);
  EXPECT_EQ(dev::relu_grad_bf16(to_bf16(0.5f), to_bf16(5.0f)), to_bf16(5.0f));
  EXPECT_GE(ties, 2);
}

// The cuda backend's bias on a convolution's output stored in bfloat16 (device_ops.hpp, which its
// kernels run one element a thread): in NCHW and NHWC each element gets its own channel's bias, the
// sum rounded to bfloat16; and the bias's gradient, each channel's sum of dy in parts (the planes
// large enough to split), is that channel's sum. Fails where either takes another channel's
// elements for its own.
TEST(DeviceBf16, AConvolutionsBiasGoesToEachChannelAndItsGradientSumsEachChannel) {
  for (const bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "NHWC" : "NCHW");
    dev::BatchNorm k;
    k.n = 3, k.c = 5, k.plane = 70, k.nhwc = nhwc, k.bf16 = true;
    const auto at = [&](std::int64_t n, std::int64_t c, std::int64_t s) {
      return static_cast<std::size_t>(nhwc ? (n * k.plane + s) * k.c + c : (n * k.c + c) * k.plane + s);
    };
    const std::size_t total = static_cast<std::size_t>(k.n * k.c * k.plane);
    std::vector<std::uint16_t> y(total), dy(total);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (std::size_t i = 0; i < total; ++i) y[i] = to_bf16(u(rng)), dy[i] = to_bf16(u(rng));
    const std::vector<std::uint16_t> before = y;
    std::vector<float> bias(static_cast<std::size_t>(k.c));
    for (std::size_t c = 0; c < bias.size(); ++c) bias[c] = 0.3f + 1.7f * static_cast<float>(c);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(total); ++i)
      dev::bias_add_bf16_at(k, y.data(), bias.data(), i);
    const dev::Parts ps = dev::parts_of(k.c, k.n * k.plane);
    ASSERT_GT(ps.chunks, 1) << "the sums split into parts, as on the GPU";
    std::vector<double> part(static_cast<std::size_t>(ps.chunks * ps.outputs));
    for (std::int64_t e = 0; e < ps.chunks * ps.outputs; ++e)
      dev::bn_stats_stage(k, ps, dy.data(), nullptr, part.data(), e);
    std::vector<float> db(static_cast<std::size_t>(k.c));
    for (std::int64_t c = 0; c < k.c; ++c) dev::channel_sum_finish(ps, part.data(), db.data(), c);
    for (std::int64_t c = 0; c < k.c; ++c) {
      double want = 0;
      for (std::int64_t n = 0; n < k.n; ++n)
        for (std::int64_t s = 0; s < k.plane; ++s) {
          const std::size_t i = at(n, c, s);
          ASSERT_EQ(y[i], to_bf16(from_bf16(before[i]) + bias[static_cast<std::size_t>(c)]))
              << n << " " << c << " " << s;
          want += from_bf16(dy[i]);
        }
      EXPECT_NEAR(db[static_cast<std::size_t>(c)], want, 1e-6 * (std::abs(want) + 1)) << c;
    }
  }
}

}  // namespace
}  // namespace d500
