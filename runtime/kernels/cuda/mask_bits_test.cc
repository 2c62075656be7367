// The 1-bit mask bodies against the wire codec's kBitmask payload
// (runtime/optim/mask_codec): packed words are its bytes, unpacked flags its
// decoded indices.
#include "runtime/kernels/cuda/mask_bits.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/mask_codec.h"

namespace corescape::kernels::cuda {
namespace {

TEST(MaskBits, PackedWordsAreTheCodecsBitmaskBytes) {
  std::mt19937 rng(5);
  for (int64_t range : {1, 7, 8, 31, 32, 33, 100, 1000, 4099}) {
    for (double density : {0.0, 0.01, 0.3, 1.0}) {
      const int64_t begin = 12345;
      std::vector<uint8_t> flags(range, 0);
      std::vector<int64_t> indices;
      std::bernoulli_distribution on(density);
      for (int64_t i = 0; i < range; ++i) {
        if (on(rng)) {
          flags[i] = 1;
          indices.push_back(begin + i);
        }
      }
      std::vector<uint32_t> words(MaskWords(range), 0xDEADBEEF);
      for (int64_t w = 0; w < MaskWords(range); ++w) words[w] = PackMaskWord(flags.data(), w, range);

      optim::MaskPartitionHeader header;
      header.count = static_cast<int64_t>(indices.size());
      auto encoded = optim::EncodeMaskPartition(header, {begin, begin + range, indices}, nullptr,
                                                optim::MaskEncoding::kBitmask);
      ASSERT_TRUE(encoded.ok()) << encoded.status();
      const std::string payload = encoded->substr(optim::kMaskHeaderBytes);
      ASSERT_EQ(static_cast<int64_t>(payload.size()), (range + 7) / 8);
      ASSERT_EQ(std::memcmp(words.data(), payload.data(), payload.size()), 0)
          << "range " << range << " density " << density;
      // Bits past the range are zero.
      for (int64_t b = range; b < MaskWords(range) * 32; ++b) ASSERT_FALSE(MaskBit(words.data(), b));

      // Unpacking gives the codec's decoded indices back.
      auto decoded = optim::DecodeMaskPartition(*encoded, begin, begin + range, nullptr);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      std::vector<uint8_t> unpacked(range, 7);
      for (int64_t i = 0; i < range; ++i) UnpackMaskElement(words.data(), i, unpacked.data());
      std::vector<int64_t> from_bits;
      for (int64_t i = 0; i < range; ++i) {
        if (unpacked[i]) from_bits.push_back(begin + i);
      }
      EXPECT_EQ(from_bits, decoded->indices);
      EXPECT_EQ(unpacked, flags);
    }
  }
}

TEST(MaskBits, AnyNonzeroFlagCountsAsSet) {
  const std::vector<uint8_t> flags = {0, 2, 0, 255, 1};
  EXPECT_EQ(PackMaskWord(flags.data(), 0, 5), 0b11010u);
}

}  // namespace
}  // namespace corescape::kernels::cuda
