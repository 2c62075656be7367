#include "runtime/optim/in_process_rank_group.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace corescape::optim {
namespace {

// Values whose float sum depends on the order of the additions.
float OrderSensitive(int rank, int64_t i) {
  return (rank == 0 ? 1e8f : 1.0f) + static_cast<float>(i) * 0.37f * static_cast<float>(rank + 1) -
         (rank == 2 ? 1e8f : 0.0f);
}

std::vector<std::vector<float>> AllReduceOnRanks(int ranks, int64_t count) {
  std::vector<std::vector<float>> results(ranks);
  EXPECT_TRUE(RunInProcessRanks(ranks, [&](int rank, RankGroup& group) -> absl::Status {
                EXPECT_EQ(group.rank(), rank);
                EXPECT_EQ(group.world_size(), ranks);
                std::vector<float> data(count);
                for (int64_t i = 0; i < count; ++i) data[i] = OrderSensitive(rank, i);
                absl::Status s = group.AllReduceSum(data.data(), count);
                results[rank] = data;
                return s;
              }).ok());
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
  return results;
}

// Its collectives read host memory: a GPU buffer is refused by name, never
// read as if it were the host's.
TEST(InProcessRankGroupTest, RefusesDeviceMemory) {
  EXPECT_TRUE(RunInProcessRanks(2, [&](int rank, RankGroup& group) -> absl::Status {
                float value = 1.0f;
                absl::Status s = group.AllReduceSumOnDevice(&value, 1);
                EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
                EXPECT_NE(s.message().find("host memory"), std::string::npos) << s;
                return absl::OkStatus();
              }).ok());
}

// Small payloads: the data plane's recursive doubling, written out.
TEST(InProcessRankGroupTest, SmallAllReduceSumsInRecursiveDoublingOrder) {
  constexpr int64_t kCount = 1001;  // 4 KB <= 64 KiB
  auto x = [](int r, int64_t i) { return OrderSensitive(r, i); };
  const auto four = AllReduceOnRanks(4, kCount);
  const auto three = AllReduceOnRanks(3, kCount);
  const auto five = AllReduceOnRanks(5, kCount);
  int differs_from_rank_order = 0;
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(four[0][i], (x(0, i) + x(1, i)) + (x(2, i) + x(3, i))) << i;
    ASSERT_EQ(three[0][i], (x(0, i) + x(2, i)) + x(1, i)) << i;  // rank 2 folds into 0
    ASSERT_EQ(five[0][i], ((x(0, i) + x(4, i)) + x(1, i)) + (x(2, i) + x(3, i))) << i;
    differs_from_rank_order += four[0][i] != ((x(0, i) + x(1, i)) + x(2, i)) + x(3, i);
  }
  EXPECT_GT(differs_from_rank_order, 0) << "the data is not order-sensitive";
}

// Large payloads: ring chunks, chunk c summed starting at rank c + 1.
TEST(InProcessRankGroupTest, LargeAllReduceSumsInRingOrder) {
  constexpr int64_t kCount = 16385;  // one float over 64 KiB; chunks 5462, 5462, 5461
  auto x = [](int r, int64_t i) { return OrderSensitive(r, i); };
  const auto three = AllReduceOnRanks(3, kCount);
  int differs_from_rank_order = 0;
  for (int64_t i = 0; i < kCount; ++i) {
    const int chunk = i < 5462 ? 0 : (i < 2 * 5462 ? 1 : 2);
    const float want =
        (x((chunk + 1) % 3, i) + x((chunk + 2) % 3, i)) + x(chunk, i);
    ASSERT_EQ(three[0][i], want) << i;
    differs_from_rank_order += three[0][i] != (x(0, i) + x(1, i)) + x(2, i);
  }
  EXPECT_GT(differs_from_rank_order, 0) << "the data is not order-sensitive";
}

TEST(InProcessRankGroupTest, SumInDataPlaneOrderSwitchesAtSmallBytes) {
  // Three ranks, 4 floats: 16 bytes. With small_bytes 16 recursive doubling,
  // with 15 the ring (chunks of 2, 1, 1).
  const std::vector<float> a = {1e8f, 1e8f, 1e8f, 1e8f}, b = {1, 1, 1, 1},
                           c = {-1e8f, -1e8f, -1e8f, -1e8f};
  const std::vector<const float*> in = {a.data(), b.data(), c.data()};
  std::vector<float> out(4);
  SumInDataPlaneOrder(in, 4, out.data(), 16);
  EXPECT_EQ(out, std::vector<float>({1, 1, 1, 1}));  // (a + c) + b
  SumInDataPlaneOrder(in, 4, out.data(), 15);
  // chunk 0 (elements 0, 1): (b + c) + a = 0; chunk 1: (c + a) + b = 1;
  // chunk 2: (a + b) + c = 0.
  EXPECT_EQ(out, std::vector<float>({0, 0, 1, 0}));
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
