#include "runtime/comm/block_layout.h"

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

TEST(BlockLayoutTest, BalancedSplitsRemainderOverFirstBlocks) {
  BlockLayout l = BlockLayout::Balanced(10, 4, 4);
  EXPECT_EQ(l.bytes, (std::vector<int64_t>{12, 12, 8, 8}));
  EXPECT_EQ(l.offset, (std::vector<int64_t>{0, 12, 24, 32}));
  EXPECT_EQ(l.total_bytes(), 40);
  EXPECT_EQ(l.max_block_bytes(), 12);
  BlockLayout tiny = BlockLayout::Balanced(1, 3, 4);
  EXPECT_EQ(tiny.bytes, (std::vector<int64_t>{4, 0, 0}));
  BlockLayout empty = BlockLayout::Balanced(0, 2, 4);
  EXPECT_EQ(empty.total_bytes(), 0);
}

TEST(BlockLayoutTest, FromSizes) {
  absl::StatusOr<BlockLayout> l = BlockLayout::FromSizes({3, 0, 5}, 4);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->offset, (std::vector<int64_t>{0, 12, 12}));
  EXPECT_EQ(l->bytes, (std::vector<int64_t>{12, 0, 20}));
  EXPECT_FALSE(BlockLayout::FromSizes({1, -1}).ok());
}

TEST(BlockLayoutTest, Segments) {
  EXPECT_EQ(NumSegments(0, 8), 1);
  EXPECT_EQ(NumSegments(8, 8), 1);
  EXPECT_EQ(NumSegments(9, 8), 2);
  EXPECT_EQ(SegmentRange(20, 8, 0), (std::pair<int64_t, int64_t>(0, 8)));
  EXPECT_EQ(SegmentRange(20, 8, 2), (std::pair<int64_t, int64_t>(16, 20)));
  EXPECT_EQ(SegmentRange(0, 8, 0), (std::pair<int64_t, int64_t>(0, 0)));
}

TEST(BlockLayoutTest, ChooseSegmentBytesRespectsAlignmentAndIndexBudget) {
  EXPECT_EQ(ChooseSegmentBytes(1 << 20, 1000, 2, 4, 32768), 1000);
  EXPECT_EQ(ChooseSegmentBytes(1 << 20, 1001, 2, 4, 32768), 1000);  // aligned down
  EXPECT_EQ(ChooseSegmentBytes(1 << 20, 1, 2, 4, 32768), 64);  // 2 steps * 16384 segments
  // A huge block at many steps: grown so the messages fit the index space.
  const int64_t block = int64_t{16} << 30;
  const int steps = 2 * 63;
  int64_t seg = ChooseSegmentBytes(block, 1 << 20, steps, 4, 32768);
  EXPECT_EQ(seg % 4, 0);
  EXPECT_LE(NumSegments(block, seg) * steps, 32768);
}

TEST(BlockLayoutTest, PositiveMod) {
  EXPECT_EQ(PositiveMod(-1, 5), 4);
  EXPECT_EQ(PositiveMod(-10, 5), 0);
  EXPECT_EQ(PositiveMod(7, 5), 2);
}

}  // namespace
}  // namespace corescape::comm
