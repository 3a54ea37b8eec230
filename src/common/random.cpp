#include "common/random.hpp"

#include <random>

namespace d500 {

void fill_uniform(float* x, std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);                    // mt19937_64's output sequence is fixed by the standard
  const double scale = (hi - lo) / 16777216.0;  // 24 random bits: exact in float
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(lo + scale * static_cast<double>(gen() >> 40));
}

void fill_uniform_index(std::int64_t* x, std::size_t n, std::uint64_t seed, std::int64_t range) {
  std::mt19937_64 gen(seed);
  const auto r = static_cast<std::uint64_t>(range < 1 ? 1 : range);
  // Multiply-shift of 32 random bits: uniform up to a bias below 2^-32 * range.
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<std::int64_t>(((gen() >> 32) * r) >> 32);
}

namespace {
std::uint64_t splitmix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

std::uint64_t mix_key(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return splitmix(splitmix(splitmix(a) ^ b) ^ c);
}

bool keep_element(std::uint64_t key, std::uint64_t i, double ratio) {
  const double u = static_cast<double>(splitmix(key ^ splitmix(i)) >> 11) * 0x1p-53;
  return u >= ratio;
}

}  // namespace d500
