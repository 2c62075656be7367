#include "runtime/optim/in_process_rank_group.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace corescape::optim {
namespace {

TEST(InProcessRankGroupTest, AllReduceSumsInRankOrderIdenticallyEverywhere) {
  constexpr int kRanks = 4;
  constexpr int64_t kCount = 1001;
  std::vector<std::vector<float>> results(kRanks);
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                EXPECT_EQ(group.rank(), rank);
                EXPECT_EQ(group.world_size(), kRanks);
                std::vector<float> data(kCount);
                // Values whose float sum depends on the order.
                for (int64_t i = 0; i < kCount; ++i) data[i] = (rank == 0 ? 1e8f : 1.0f) + i * 0.37f * rank;
                absl::Status s = group.AllReduceSum(data.data(), kCount);
                results[rank] = data;
                return s;
              }).ok());
  for (int64_t i = 0; i < kCount; ++i) {
    float want = 0.0f;
    for (int r = 0; r < kRanks; ++r) want += (r == 0 ? 1e8f : 1.0f) + i * 0.37f * r;
    ASSERT_EQ(results[0][i], want) << i;  // rank order 0..P−1
  }
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(results[r], results[0]);
}

TEST(InProcessRankGroupTest, AllGatherVConcatenatesUnequalSizesInRankOrder) {
  constexpr int kRanks = 3;
  std::vector<std::string> results(kRanks);
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                const std::string mine(rank + 1, static_cast<char>('a' + rank));
                std::vector<int64_t> sizes(kRanks);
                if (auto s = group.AllGatherInt64(mine.size(), absl::MakeSpan(sizes)); !s.ok()) return s;
                std::string recv(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), '?');
                auto s = group.AllGatherV(mine.data(), mine.size(), recv.data(), sizes);
                results[rank] = recv;
                return s;
              }).ok());
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(results[r], "abbccc");
}

TEST(InProcessRankGroupTest, AsyncGatherOverlapsOtherCollectives) {
  constexpr int kRanks = 4;
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                const int64_t mine = 100 + rank;
                std::vector<int64_t> gathered(kRanks);
                std::vector<int64_t> sizes(kRanks, 8);
                auto pending = group.StartAllGatherV(&mine, 8, gathered.data(), sizes);
                if (!pending.ok()) return pending.status();
                float x = 1.0f;  // a collective issued while the gather is in flight
                if (auto s = group.AllReduceSum(&x, 1); !s.ok()) return s;
                EXPECT_EQ(x, 4.0f);
                if (auto s = (*pending)->Wait(); !s.ok()) return s;
                for (int r = 0; r < kRanks; ++r) EXPECT_EQ(gathered[r], 100 + r);
                return absl::OkStatus();
              }).ok());
}

TEST(InProcessRankGroupTest, CountsRingBytes) {
  // 4 ranks, 10 floats: chunks 3,3,2,2; rank r sends 2·10 − c[r+1] − c[r+2].
  EXPECT_EQ(InProcessRankGroup::RingAllReduceBytesSent(10, 4, 0), 4 * (20 - 3 - 2));
  EXPECT_EQ(InProcessRankGroup::RingAllReduceBytesSent(10, 4, 3), 4 * (20 - 3 - 3));
  EXPECT_EQ(InProcessRankGroup::RingAllReduceBytesSent(10, 1, 0), 0);
  EXPECT_EQ(InProcessRankGroup::RingAllReduceBytesSent(8, 2, 0), 4 * 8);
  const std::vector<int64_t> sizes = {5, 7, 11};
  EXPECT_EQ(InProcessRankGroup::RingAllGatherBytesSent(sizes, 0), 23 - 7);
  EXPECT_EQ(InProcessRankGroup::RingAllGatherBytesSent(sizes, 2), 23 - 5);

  std::vector<int64_t> sent(4);
  ASSERT_TRUE(RunInProcessRanks(4, [&](int rank, RankGroup& group) -> absl::Status {
                std::vector<float> data(1000, 1.0f);
                auto s = group.AllReduceSum(data.data(), data.size());
                sent[rank] = group.bytes_sent();
                return s;
              }).ok());
  // 2(P−1)/P of the buffer per rank when P divides it.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sent[r], 2 * 3 * 1000 * 4 / 4);
}

TEST(InProcessRankGroupTest, MismatchedCollectivesFailOnEveryRank) {
  std::vector<absl::Status> statuses(2);
  absl::Status s = RunInProcessRanks(2, [&](int rank, RankGroup& group) -> absl::Status {
    std::vector<float> data(rank == 0 ? 3 : 4, 1.0f);
    statuses[rank] = group.AllReduceSum(data.data(), data.size());
    return statuses[rank];
  });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_FALSE(statuses[1].ok());
}

TEST(InProcessRankGroupTest, ARankThatStopsReleasesTheOthers) {
  absl::Status s = RunInProcessRanks(3, [&](int rank, RankGroup& group) -> absl::Status {
    if (rank == 1) return absl::InternalError("rank 1 crashed");
    float x = 1.0f;
    return group.AllReduceSum(&x, 1);  // would wait forever without the abort
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("crashed"), absl::string_view::npos);
}

}  // namespace
}  // namespace corescape::optim
