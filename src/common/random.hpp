#pragma once
// Deterministic inputs: the same seed gives the same numbers on every platform (unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open): mt19937_64, whose
// output sequence the standard fixes, and plain arithmetic on its bits.
#include <cstddef>
#include <cstdint>

namespace d500 {

// Uniform floats in [lo, hi), 24 random bits each.
void fill_uniform(float* x, std::size_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Uniform integers in [0, range) (range >= 1).
void fill_uniform_index(std::int64_t* x, std::size_t n, std::uint64_t seed, std::int64_t range);

}  // namespace d500
