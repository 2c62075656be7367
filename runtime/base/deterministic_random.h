#ifndef CORESCAPE_RUNTIME_BASE_DETERMINISTIC_RANDOM_H_
#define CORESCAPE_RUNTIME_BASE_DETERMINISTIC_RANDOM_H_

// Seeded randomness whose output is fixed by this code alone (std::shuffle
// and std::uniform_int_distribution differ between standard libraries), so
// a dataset split, an epoch order or a top-k's sample is the same on every
// machine.

#include <cstdint>
#include <utility>
#include <vector>

namespace corescape {

// SplitMix64 (Steele, Lea, Flood 2014).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), bound > 0, without modulo bias (rejection).
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % bound;
  }

 private:
  uint64_t state_;
};

// Mixes several values into one seed.
inline uint64_t MixSeed(uint64_t a, uint64_t b) {
  SplitMix64 mixer(a ^ (b * 0xD1B54A32D192ED03ull));
  mixer.Next();
  return mixer.Next();
}

// Fisher–Yates over `values`.
template <typename T>
void DeterministicShuffle(std::vector<T>& values, uint64_t seed) {
  SplitMix64 random(seed);
  for (size_t i = values.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(random.Below(i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_DETERMINISTIC_RANDOM_H_
