#include "runtime/kernels/cpu/attention_work.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace corescape::kernels::cpu {
namespace {

const AttentionShape kShape{8, 2, 64, 0.125f};

// Two pieces of a 100-token document at K/V row 0, a 30-token document at
// row 100, and a task whose K/V rows overlap the first document's.
const std::vector<AttentionTask> kTasks = {
    {0, 10, 0, 0}, {90, 100, 10, 0}, {0, 30, 20, 100}, {0, 2, 50, 98}};

TEST(AttentionWorkTest, GroupsTasksSharingKvRows) {
  const std::vector<KvRowGroup> groups = GroupByKvRows(kTasks);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].row_begin, 0);
  EXPECT_EQ(groups[0].row_end, 100);
  EXPECT_EQ(groups[0].tasks, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(groups[1].row_begin, 100);
  EXPECT_EQ(groups[1].row_end, 130);
  EXPECT_EQ(groups[1].tasks, (std::vector<int64_t>{2}));
}

TEST(AttentionWorkTest, TilesCoverEveryPairOnceSortedByCost) {
  const int64_t pairs = CausalPairs(kTasks) * kShape.n_heads;
  for (int tile_rows : {1, 7, 64}) {
    const std::vector<QueryTile> query_tiles =
        PlanQueryTiles(kShape, kTasks, tile_rows);
    int64_t query_cost = 0;
    for (size_t i = 0; i < query_tiles.size(); ++i) {
      query_cost += query_tiles[i].cost;
      EXPECT_LE(query_tiles[i].p_end - query_tiles[i].p_begin, tile_rows);
      if (i > 0) {
        EXPECT_GE(query_tiles[i - 1].cost, query_tiles[i].cost);
      }
    }
    EXPECT_EQ(query_cost, pairs);

    const std::vector<KvRowGroup> groups = GroupByKvRows(kTasks);
    const std::vector<KeyTile> key_tiles =
        PlanKeyTiles(kShape, kTasks, groups, tile_rows);
    int64_t key_cost = 0;
    std::set<std::pair<int64_t, int>> owned;  // (row, kv head)
    for (size_t i = 0; i < key_tiles.size(); ++i) {
      key_cost += key_tiles[i].cost;
      if (i > 0) {
        EXPECT_GE(key_tiles[i - 1].cost, key_tiles[i].cost);
      }
      for (int64_t r = key_tiles[i].row_begin; r < key_tiles[i].row_end; ++r) {
        EXPECT_TRUE(owned.insert({r, key_tiles[i].kv_head}).second)
            << "row " << r << " owned twice";
      }
    }
    EXPECT_EQ(key_cost, pairs);
  }
}

}  // namespace
}  // namespace corescape::kernels::cpu
