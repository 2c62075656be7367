#include "runtime/optim/mask_codec.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace corescape::optim {
namespace {

std::vector<int64_t> RandomMask(int64_t begin, int64_t end, double density, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution keep(density);
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) {
    if (keep(rng)) out.push_back(i);
  }
  return out;
}

MaskPartitionHeader Header(int64_t step = 7) {
  MaskPartitionHeader h;
  h.mask_epoch = 3;
  h.step = step;
  h.rank = 2;
  return h;
}

TEST(MaskCodecTest, EveryEncodingRoundTripsWithExactSize) {
  const int64_t begin = 1000, end = 9000;
  for (double density : {0.0, 0.001, 0.01, 0.1, 0.5, 1.0}) {
    const std::vector<int64_t> mask = RandomMask(begin, end, density, 11);
    const std::vector<int64_t> previous = RandomMask(begin, end, density, 12);
    for (MaskEncoding e : {MaskEncoding::kBitmask, MaskEncoding::kIndexList,
                           MaskEncoding::kDeltaIndices, MaskEncoding::kChangeFromPrevious}) {
      auto encoded = EncodeMaskPartition(Header(), {begin, end, mask}, &previous, e);
      ASSERT_TRUE(encoded.ok()) << encoded.status();
      EXPECT_EQ(static_cast<int64_t>(encoded->size()),
                kMaskHeaderBytes + *MaskPayloadBytes(e, {begin, end, mask}, &previous))
          << MaskEncodingName(e) << " d=" << density;
      auto decoded = DecodeMaskPartition(*encoded, begin, end, &previous);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(decoded->indices, mask) << MaskEncodingName(e);
      EXPECT_EQ(decoded->header.encoding, e);
      EXPECT_EQ(decoded->header.step, 7);
      EXPECT_EQ(decoded->header.mask_epoch, 3u);
      EXPECT_EQ(decoded->header.rank, 2);
      EXPECT_EQ(decoded->header.count, static_cast<int64_t>(mask.size()));
    }
  }
}

TEST(MaskCodecTest, PicksTheSmallestEncoding) {
  const int64_t begin = 0, end = 80000;
  // Dense: bitmask (10,000 bytes) beats 4·k and varints.
  std::vector<int64_t> half = RandomMask(begin, end, 0.5, 1);
  auto e1 = EncodeMaskPartition(Header(), {begin, end, half}, nullptr);
  EXPECT_EQ(static_cast<MaskEncoding>((*e1)[1]), MaskEncoding::kBitmask);
  // 1%: gaps ~100 fit one varint byte: delta beats bitmask (10,000) and list (3,200).
  std::vector<int64_t> sparse = RandomMask(begin, end, 0.01, 2);
  auto e2 = EncodeMaskPartition(Header(), {begin, end, sparse}, nullptr);
  EXPECT_EQ(static_cast<MaskEncoding>((*e2)[1]), MaskEncoding::kDeltaIndices);
  // Nearly the previous mask: only the change travels.
  std::vector<int64_t> next = sparse;
  next.erase(next.begin() + 3);
  next.push_back(end - 1);
  auto e3 = EncodeMaskPartition(Header(), {begin, end, next}, &sparse);
  EXPECT_EQ(static_cast<MaskEncoding>((*e3)[1]), MaskEncoding::kChangeFromPrevious);
  EXPECT_LT(e3->size(), 40u);
  // Whatever was picked is no larger than any alternative.
  for (MaskEncoding e : {MaskEncoding::kBitmask, MaskEncoding::kIndexList,
                         MaskEncoding::kDeltaIndices, MaskEncoding::kChangeFromPrevious}) {
    EXPECT_LE(static_cast<int64_t>(e3->size()),
              kMaskHeaderBytes + *MaskPayloadBytes(e, {begin, end, next}, &sparse));
  }
  // A few entries far apart: a gap needs 3 varint bytes, the list 4, so delta.
  std::vector<int64_t> few = {5, 40000, 79999};
  auto e4 = EncodeMaskPartition(Header(), {begin, end, few}, nullptr);
  EXPECT_EQ(static_cast<MaskEncoding>((*e4)[1]), MaskEncoding::kDeltaIndices);
}

// Change-from-previous applies the changes through a bitmap when the masks
// are dense enough and by merging when not; both give the mask back, on a
// range that is not whole words from an offset that is not one either, and
// both refuse a previous mask from outside the range.
// The automatic choice, against every encoding forced: the smallest, the
// lower encoding on a tie, byte for byte what forcing it writes. Previous
// masks from nearly the same (change-from-previous wins) to unrelated (it
// loses, some by a byte or two: its bounded write gives up part-way).
TEST(MaskCodecTest, AutomaticIsTheSmallestForcedEncodingByteForByte) {
  const int64_t begin = 1000, end = 1000 + 6400;
  int change_won = 0, change_lost = 0;
  for (double density : {0.0, 0.003, 0.02, 0.1, 0.4}) {
    for (double flip : {0.0, 0.001, 0.01, 0.05, 0.2, 1.0}) {
      for (uint32_t seed = 0; seed < 4; ++seed) {
        const std::vector<int64_t> previous = RandomMask(begin, end, density, 100 + seed);
        // Each coordinate leaves or enters with probability `flip`.
        std::mt19937 rng(200 + seed);
        std::bernoulli_distribution flips(flip);
        std::vector<int64_t> mask;
        size_t p = 0;
        for (int64_t i = begin; i < end; ++i) {
          const bool was = p < previous.size() && previous[p] == i;
          if (was) ++p;
          if (was != flips(rng)) mask.push_back(i);
        }
        auto automatic = EncodeMaskPartition(Header(), {begin, end, mask}, &previous);
        ASSERT_TRUE(automatic.ok()) << automatic.status();
        std::string smallest;
        for (MaskEncoding e : {MaskEncoding::kBitmask, MaskEncoding::kIndexList,
                               MaskEncoding::kDeltaIndices, MaskEncoding::kChangeFromPrevious}) {
          auto forced = EncodeMaskPartition(Header(), {begin, end, mask}, &previous, e);
          ASSERT_TRUE(forced.ok()) << forced.status();
          if (smallest.empty() || forced->size() < smallest.size()) smallest = *forced;
        }
        ASSERT_EQ(*automatic, smallest) << "d=" << density << " flip=" << flip << " seed=" << seed;
        const bool change = static_cast<MaskEncoding>((*automatic)[1]) == MaskEncoding::kChangeFromPrevious;
        (change ? change_won : change_lost)++;
        auto decoded = DecodeMaskPartition(*automatic, begin, end, &previous);
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        EXPECT_EQ(decoded->indices, mask);
      }
    }
  }
  EXPECT_GT(change_won, 20);
  EXPECT_GT(change_lost, 20);
}

TEST(MaskCodecTest, ChangeFromPreviousRoundTripsThroughEitherPath) {
  const int64_t begin = 37, end = 37 + 1001;
  for (double density : {0.002, 0.02, 0.3, 0.9}) {
    for (double previous_density : {0.002, 0.5}) {
      const std::vector<int64_t> mask = RandomMask(begin, end, density, 21);
      const std::vector<int64_t> previous = RandomMask(begin, end, previous_density, 22);
      auto encoded = EncodeMaskPartition(Header(), {begin, end, mask}, &previous,
                                         MaskEncoding::kChangeFromPrevious);
      ASSERT_TRUE(encoded.ok()) << encoded.status();
      auto decoded = DecodeMaskPartition(*encoded, begin, end, &previous);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(decoded->indices, mask) << "d=" << density << " previous d=" << previous_density;
      std::vector<int64_t> shifted = previous;
      for (int64_t& index : shifted) index += end - begin;  // the next range's
      EXPECT_EQ(DecodeMaskPartition(*encoded, begin, end, &shifted).status().code(),
                absl::StatusCode::kFailedPrecondition);
    }
  }
}

TEST(MaskCodecTest, RefusesBadInputAndCorruption) {
  const std::vector<int64_t> unsorted = {5, 3};
  EXPECT_FALSE(EncodeMaskPartition(Header(), {0, 10, unsorted}, nullptr).ok());
  const std::vector<int64_t> outside = {10};
  EXPECT_FALSE(EncodeMaskPartition(Header(), {0, 10, outside}, nullptr).ok());
  const std::vector<int64_t> ok_mask = {1, 4};
  EXPECT_FALSE(EncodeMaskPartition(Header(), {0, 10, ok_mask}, nullptr,
                                   MaskEncoding::kChangeFromPrevious).ok());

  auto encoded = EncodeMaskPartition(Header(), {0, 1000, ok_mask}, nullptr, MaskEncoding::kIndexList);
  ASSERT_TRUE(encoded.ok());
  EXPECT_FALSE(DecodeMaskPartition(encoded->substr(0, encoded->size() - 1), 0, 1000, nullptr).ok());
  std::string bad_magic = *encoded;
  bad_magic[0] = 0;
  EXPECT_FALSE(DecodeMaskPartition(bad_magic, 0, 1000, nullptr).ok());
  // An index beyond a smaller range.
  EXPECT_FALSE(DecodeMaskPartition(*encoded, 0, 3, nullptr).ok());
  // Change-from-previous without the previous mask.
  const std::vector<int64_t> prev = {1};
  auto change = EncodeMaskPartition(Header(), {0, 1000, ok_mask}, &prev,
                                    MaskEncoding::kChangeFromPrevious);
  ASSERT_TRUE(change.ok());
  EXPECT_FALSE(DecodeMaskPartition(*change, 0, 1000, nullptr).ok());
  EXPECT_EQ(DecodeMaskPartition(*change, 0, 1000, &prev)->indices, ok_mask);
}

}  // namespace
}  // namespace corescape::optim
