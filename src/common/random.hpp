#pragma once
// Deterministic inputs: the same seed gives the same numbers on every platform (unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open): mt19937_64, whose
// output sequence the standard fixes, and plain arithmetic on its bits.
#include <cstddef>
#include <cstdint>

namespace d500 {

// Uniform floats in [lo, hi), 24 random bits each.
void fill_uniform(float* x, std::size_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Dropout's decision for element i under key `key`: kept with probability 1 - ratio, from the
// top 53 bits of a splitmix64 of (key, i): the same on every platform, thread and backend.
bool keep_element(std::uint64_t key, std::uint64_t i, double ratio);
// A key from three numbers (a node's seed, a step, a call within it).
std::uint64_t mix_key(std::uint64_t a, std::uint64_t b, std::uint64_t c);
// Uniform integers in [0, range) (range >= 1).
void fill_uniform_index(std::int64_t* x, std::size_t n, std::uint64_t seed, std::int64_t range);

}  // namespace d500
