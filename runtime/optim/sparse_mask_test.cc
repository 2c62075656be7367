#include "runtime/optim/sparse_mask.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/optim/in_process_rank_group.h"

namespace corescape::optim {
namespace {

// `size` statistics drawn uniformly from [0, 1) with `seed`.
std::vector<float> UniformStat(uint32_t seed, int64_t size) {
  std::mt19937 rng(seed);
  std::vector<float> stat(size);
  for (float& x : stat) x = std::uniform_real_distribution<float>()(rng);
  return stat;
}

TEST(ParameterPartitionTest, DisjointCoveringBalanced) {
  for (int64_t total : {4, 7, 1000, 354528, 1000003}) {
    for (int world : {1, 2, 3, 4, 7}) {
      if (total < world) continue;
      auto p = ParameterPartition::Balanced(total, world);
      ASSERT_TRUE(p.ok());
      EXPECT_EQ(p->world_size(), world);
      EXPECT_EQ(p->begin(0), 0);
      EXPECT_EQ(p->end(world - 1), total);
      int64_t smallest = total, largest = 0;
      for (int r = 0; r < world; ++r) {
        if (r > 0) {
          EXPECT_EQ(p->begin(r), p->end(r - 1));  // contiguous, no overlap, no gap
        }
        EXPECT_GT(p->size(r), 0);
        smallest = std::min(smallest, p->size(r));
        largest = std::max(largest, p->size(r));
        EXPECT_EQ(p->OwnerOf(p->begin(r)), r);
        EXPECT_EQ(p->OwnerOf(p->end(r) - 1), r);
      }
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_FALSE(ParameterPartition::Balanced(3, 4).ok());
  EXPECT_FALSE(ParameterPartition::Balanced(10, 0).ok());
}

TEST(MaskCountTest, CeilOfDensityTimesRange) {
  EXPECT_EQ(MaskCountForRange(10, 0.1), 1);
  EXPECT_EQ(MaskCountForRange(100, 0.01), 1);
  EXPECT_EQ(MaskCountForRange(88632, 0.01), 887);  // ceil(886.32)
  EXPECT_EQ(MaskCountForRange(88632, 0.1), 8864);  // ceil(8863.2)
  EXPECT_EQ(MaskCountForRange(1000, 0.3), 300);
  EXPECT_EQ(MaskCountForRange(7, 1.0), 7);
  EXPECT_EQ(MaskCountForRange(7, 1e-9), 1);
  EXPECT_EQ(MaskCountForRange(0, 0.5), 0);
}

TEST(SelectTopKTest, LargestFirstTiesToLowerIndexNanLast) {
  const std::vector<float> s = {1, 5, NAN, 5, 3, 5, 0};
  EXPECT_EQ(SelectTopK(s, 100, 2), (std::vector<int64_t>{101, 103}));
  EXPECT_EQ(SelectTopK(s, 0, 4), (std::vector<int64_t>{1, 3, 4, 5}));
  EXPECT_EQ(SelectTopK(s, 0, 7).size(), 7u);
  EXPECT_EQ(SelectTopK(s, 0, 0).size(), 0u);
}

// The top k by a full sort of (value descending, index ascending) with NaN
// as −∞ and float equality for ties (so −0 ties +0): what SelectTopK must
// return, computed without its keys or its selection.
std::vector<int64_t> TopKByFullSort(const std::vector<float>& stat, int64_t begin, int64_t k) {
  std::vector<int64_t> order(stat.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  auto value = [&](int64_t i) { return std::isnan(stat[i]) ? -INFINITY : stat[i]; };
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return value(a) > value(b) || (value(a) == value(b) && a < b);
  });
  order.resize(std::clamp<int64_t>(k, 0, static_cast<int64_t>(stat.size())));
  std::sort(order.begin(), order.end());
  for (int64_t& i : order) i += begin;
  return order;
}

// Statistics full of ties: a few repeated values (both zeros, infinities,
// NaN, a denormal, negatives) and coarsely quantized uniforms.
std::vector<float> TiedStat(uint32_t seed, int64_t size) {
  std::mt19937 rng(seed);
  const float specials[] = {0.0f, -0.0f, 1.0f, 2.0f, NAN, INFINITY, -INFINITY, -3.0f, 1e-40f, 0.5f};
  std::vector<float> stat(size);
  for (float& x : stat) {
    const uint32_t pick = rng() % 4;
    if (pick == 0) {
      x = specials[rng() % 10];
    } else {
      x = std::round(std::uniform_real_distribution<float>(-1, 4)(rng) * 16) / 16;
    }
  }
  return stat;
}

// Both selection paths (comparison below 2^14 entries, threshold above),
// k = 0, 1, the middle, range − 1 and the whole range.
TEST(SelectTopKTest, EqualsFullSortReferenceIncludingTies) {
  for (int64_t size : {1, 2, 9, 1000, 16383, 16384, 70001, 300000}) {
    for (uint32_t seed : {1u, 2u}) {
      for (const std::vector<float>& stat : {TiedStat(seed, size), UniformStat(seed, size)}) {
        for (int64_t k : {int64_t{0}, int64_t{1}, size / 100, size / 3, size - 1, size}) {
          ASSERT_EQ(SelectTopK(stat, 17, k), TopKByFullSort(stat, 17, k))
              << "size " << size << " seed " << seed << " k " << k;
        }
      }
    }
  }
}

// On a pool's threads a large range is cut into chunks (one per thread, at
// least 2^18 entries each): the same set, ascending, as the reference for
// every chunk count, ties spread over chunk boundaries included.
TEST(SelectTopKTest, AThreadPoolSelectsTheSameSet) {
  ThreadPool two(2), three(3), eight(8);
  const int64_t size = 5 * (int64_t{1} << 18) + 77;  // 5 chunks at most
  for (uint32_t seed : {3u, 4u}) {
    for (const std::vector<float>& stat : {TiedStat(seed, size), UniformStat(seed, size)}) {
      for (int64_t k : {int64_t{1}, size / 100, size / 3, size - 1}) {
        const std::vector<int64_t> expected = TopKByFullSort(stat, 9, k);
        for (ThreadPool* pool : {&two, &three, &eight}) {
          ASSERT_EQ(SelectTopK(stat, 9, k, pool), expected)
              << "seed " << seed << " k " << k << " threads " << pool->num_threads();
        }
      }
    }
  }
  // Every entry equal: the lowest indices, across all chunks.
  const std::vector<float> equal(size, 1.5f);
  std::vector<int64_t> lowest(size / 2);
  std::iota(lowest.begin(), lowest.end(), int64_t{0});
  EXPECT_EQ(SelectTopK(equal, 0, size / 2, &eight), lowest);
}

// A range of 2^17 entries or more with k ≤ n/4 is read once above a
// threshold guessed from a sample: the same set as the radix passes and the
// full sort, on data whose large values are spread, sorted either way,
// confined to one 40k run, or periodic (rows of 1024), and on
// data tied at the guess (all equal; zeros but for a few rows), with or
// without a pool, up to k = n/4 (the last k it takes) and past it.
void CheckTheSampledThresholdAgainstTheRadixPasses(int64_t size) {
  std::vector<std::pair<const char*, std::vector<float>>> data;
  data.emplace_back("tied", TiedStat(5, size));
  data.emplace_back("uniform", UniformStat(6, size));
  std::vector<float> ascending(size), descending(size), one_run(size), rows(size);
  const std::vector<float> noise = UniformStat(8, size);
  for (int64_t i = 0; i < size; ++i) {
    ascending[i] = static_cast<float>(i);
    descending[i] = static_cast<float>(size - i);
    one_run[i] = noise[i] + (i >= size / 4 && i < size / 4 + 40000 ? 10.0f : 0.0f);
    rows[i] = noise[i] + (i % 1024 < 3 ? 5.0f : 0.0f);
  }
  data.emplace_back("ascending", std::move(ascending));
  data.emplace_back("descending", std::move(descending));
  data.emplace_back("one run", std::move(one_run));
  data.emplace_back("rows", std::move(rows));
  // Ties at the guess: every entry equal, and zeros but for a few rows.
  data.emplace_back("equal", std::vector<float>(size, 0.75f));
  std::vector<float> mostly_zero(size, 0.0f);
  for (int64_t i = 5000; i < 5000 + 3 * 1024; ++i) mostly_zero[i] = noise[i];
  data.emplace_back("mostly zero", std::move(mostly_zero));
  ThreadPool three(3);
  for (const auto& [name, stat] : data) {
    for (int64_t k : {int64_t{1}, int64_t{37}, size / 1000, size / 100, size / 10, size / 4,
                      size / 4 + 1}) {
      const std::vector<int64_t> expected = TopKByFullSort(stat, 11, k);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
        ASSERT_EQ(SelectTopK(stat, 11, k, pool), expected)
            << name << " k " << k << " pool " << (pool != nullptr);
        ASSERT_EQ(SelectTopKByRadix(stat, 11, k, pool), expected)
            << name << " k " << k << " pool " << (pool != nullptr);
      }
    }
  }
}

TEST(SelectTopKTest, TheSampledThresholdSelectsTheRadixPassesSet) {
  for (const int64_t size : {(int64_t{1} << 20) + 4097, (int64_t{1} << 17) + 3}) {
    SCOPED_TRACE(size);
    CheckTheSampledThresholdAgainstTheRadixPasses(size);
  }
}

// A sample that overrates the range (every sampled entry large, too few
// others) guesses a threshold fewer than k entries reach: the radix passes
// then select, and the set is still the full sort's.
TEST(SelectTopKTest, AMisleadingSampleFallsBackToTheRadixPasses) {
  for (const int64_t size : {int64_t{1} << 20, (int64_t{1} << 17) + 5}) {
    std::vector<float> stat = UniformStat(9, size);
    for (float& x : stat) x *= 0.5f;
    const int64_t samples = TopKSampleCount(size);
    for (int64_t j = 0; j < samples; ++j) {
      const int64_t at = TopKSamplePosition(size, samples, j);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, size);
      stat[at] = 1.0f;
    }
    const int64_t k = size / 5;  // more than the samples
    ASSERT_GT(k, samples);
    EXPECT_EQ(SelectTopK(stat, 0, k), TopKByFullSort(stat, 0, k)) << size;
  }
}

TEST(SelectTopKTest, AllEqualTakesTheLowestIndices) {
  for (int64_t size : {100, 50000}) {
    const std::vector<float> stat(size, 0.25f);
    std::vector<int64_t> expected(size / 2);
    std::iota(expected.begin(), expected.end(), int64_t{5});
    EXPECT_EQ(SelectTopK(stat, 5, size / 2), expected);
    EXPECT_TRUE(SelectTopK(stat, 5, 0).empty());
    EXPECT_EQ(SelectTopK(stat, 5, size + 3).size(), static_cast<size_t>(size));  // clamped
  }
}

// Per-tensor masks select inside each tensor of a rank's range: every
// tensor's selection is the reference's over that tensor alone, at its
// offset in the buffer.
TEST(SelectTopKTest, PerTensorRangesMatchTheReference) {
  const std::vector<int64_t> bounds = {0, 512, 20000, 20001, 90000, 90512};
  const std::vector<float> stat = TiedStat(7, bounds.back());
  for (size_t t = 0; t + 1 < bounds.size(); ++t) {
    const int64_t numel = bounds[t + 1] - bounds[t];
    const std::vector<float> tensor(stat.begin() + bounds[t], stat.begin() + bounds[t + 1]);
    for (double density : {0.01, 0.1, 1.0}) {
      const int64_t k = MaskCountForTensor(numel, density);
      EXPECT_EQ(SelectTopK(absl::MakeConstSpan(stat).subspan(bounds[t], numel), bounds[t], k),
                TopKByFullSort(tensor, bounds[t], k))
          << "tensor " << t << " density " << density;
    }
  }
}

class MaskExchangeSendingTest : public testing::TestWithParam<MaskSending> {};

// Every rank selects in its own range; the exchange gives every rank the
// same mask, whichever thread sends it.
TEST_P(MaskExchangeSendingTest, PartitionedPartsAssembleIdenticallyOnEveryRank) {
  constexpr int kRanks = 4;
  constexpr int64_t kTotal = 10007;
  auto partition = ParameterPartition::Balanced(kTotal, kRanks);
  std::vector<GlobalMask> masks(kRanks);
  std::vector<MaskExchangeStats> stats(kRanks);
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                MaskExchange exchange(&*partition, MaskScope::kPartitioned, GetParam());
                const std::vector<float> stat = UniformStat(rank, partition->size(rank));
                const int64_t k = MaskCountForRange(partition->size(rank), 0.05);
                auto own = SelectTopK(stat, partition->begin(rank), k);
                if (auto s = exchange.Start(group, 9, 42, own, nullptr); !s.ok()) return s;
                auto mask = exchange.Finish(9, 42);
                if (!mask.ok()) return mask.status();
                masks[rank] = *mask;
                stats[rank] = exchange.last();
                EXPECT_EQ(mask->parts[rank], own);
                return absl::OkStatus();
              }).ok());
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(stats[r].encoded_on_thread, GetParam() == MaskSending::kOnThread);
    EXPECT_TRUE(stats[r].received_on_thread);
    EXPECT_GT(stats[r].part_bytes, kMaskHeaderBytes);
  }
  int64_t expected = 0;
  for (int r = 0; r < kRanks; ++r) {
    expected += MaskCountForRange(partition->size(r), 0.05);
    EXPECT_EQ(masks[r], masks[0]);
    for (int64_t j : masks[0].parts[r]) {
      EXPECT_GE(j, partition->begin(r));
      EXPECT_LT(j, partition->end(r));
    }
  }
  EXPECT_EQ(static_cast<int64_t>(masks[0].indices.size()), expected);  // no fill-in
  EXPECT_TRUE(std::is_sorted(masks[0].indices.begin(), masks[0].indices.end()));
}

INSTANTIATE_TEST_SUITE_P(BothSendingThreads, MaskExchangeSendingTest,
                         testing::Values(MaskSending::kOnCaller, MaskSending::kOnThread),
                         [](const testing::TestParamInfo<MaskSending>& info) {
                           return info.param == MaskSending::kOnCaller ? "OnCaller" : "OnThread";
                         });

// A part of another step or mask epoch is refused.
TEST(MaskExchangeTest, RefusesAPartOfAnotherEpochOrGeneration) {
  auto partition = ParameterPartition::Balanced(100, 2);
  MaskExchange ranges(&*partition, MaskScope::kPartitioned);
  auto part = [&](int rank, int64_t step, uint64_t mask_epoch) {
    MaskPartitionHeader h;
    h.rank = rank;
    h.step = step;
    h.mask_epoch = mask_epoch;
    const std::vector<int64_t> one = {partition->begin(rank)};
    return *EncodeMaskPartition(h, {partition->begin(rank), partition->end(rank), one}, nullptr);
  };
  EXPECT_TRUE(AssembleGlobalMask(ranges, {part(0, 5, 1), part(1, 5, 1)}, 1, 5, nullptr).ok());
  auto stale = AssembleGlobalMask(ranges, {part(0, 5, 1), part(1, 4, 1)}, 1, 5, nullptr);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  auto other_generation = AssembleGlobalMask(ranges, {part(0, 5, 0), part(1, 5, 1)}, 1, 5, nullptr);
  EXPECT_EQ(other_generation.status().code(), absl::StatusCode::kFailedPrecondition);
  auto swapped = AssembleGlobalMask(ranges, {part(1, 5, 1), part(0, 5, 1)}, 1, 5, nullptr);
  EXPECT_FALSE(swapped.ok());
}

TEST(MaskExchangeTest, WholeBufferPartsFillIn) {
  // Per-rank global top-k: each rank picks k anywhere; the union grows with P.
  constexpr int kRanks = 4;
  constexpr int64_t kTotal = 4000;
  auto partition = ParameterPartition::Balanced(kTotal, kRanks);
  std::vector<int64_t> union_size(kRanks);
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                MaskExchange exchange(&*partition, MaskScope::kWholeBuffer);
                const std::vector<float> stat = UniformStat(100 + rank, kTotal);
                auto own = SelectTopK(stat, 0, 40);
                if (auto s = exchange.Start(group, 0, 1, own, nullptr); !s.ok()) return s;
                auto mask = exchange.Finish(0, 1);
                if (!mask.ok()) return mask.status();
                union_size[rank] = mask->indices.size();
                return absl::OkStatus();
              }).ok());
  EXPECT_GT(union_size[0], 40 * 3);  // independent picks barely overlap
  EXPECT_LE(union_size[0], 40 * kRanks);
}

// Rank 0 of two, over kGatedTotal coordinates, whose asynchronous
// all-gather arrives only when the test opens its gate (a slow peer), or
// fails with `failure`. The peer selects nothing: its part is an empty one
// of rank 1's range, for the mask epoch and step of rank 0's.
constexpr int64_t kGatedTotal = 1000;

class GatedGroup final : public RankGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  // Only the sizes' all-gather blocks.
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t>) override {
    if (gate_blocking_too) gate.WaitForNotification();
    std::memcpy(recv, send, send_bytes);
    const int64_t peer_bytes = kMaskHeaderBytes;  // an empty part's
    std::memcpy(static_cast<char*>(recv) + send_bytes, &peer_bytes, sizeof(peer_bytes));
    blocking_thread = std::this_thread::get_id();
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv, absl::Span<const int64_t>) override {
    return std::unique_ptr<PendingCollective>(
        new Gated(this, std::string(static_cast<const char*>(send), send_bytes), recv));
  }
  int64_t bytes_sent() const override { return 0; }
  int64_t bytes_received() const override { return 0; }

  absl::Notification gate;
  absl::Status failure;
  // The blocking all-gather (the sizes') waits for the gate too.
  bool gate_blocking_too = false;
  std::atomic<std::thread::id> blocking_thread;  // where the last blocking all-gather ran

 private:
  struct Gated final : PendingCollective {
    Gated(GatedGroup* group, std::string payload, void* recv)
        : group(group), payload(std::move(payload)), recv(recv) {}
    absl::Status Wait() override {
      group->gate.WaitForNotification();
      if (!group->failure.ok()) return group->failure;
      auto mine = DecodeMaskPartition(payload, 0, kGatedTotal / 2, nullptr);
      if (!mine.ok()) return mine.status();
      MaskPartitionHeader header = mine->header;
      header.rank = 1;
      auto peer = EncodeMaskPartition(header, {kGatedTotal / 2, kGatedTotal, {}}, nullptr);
      if (!peer.ok()) return peer.status();
      std::memcpy(recv, payload.data(), payload.size());
      std::memcpy(static_cast<char*>(recv) + payload.size(), peer->data(), peer->size());
      return absl::OkStatus();
    }
    GatedGroup* group;
    std::string payload;
    void* recv;
  };
};

// Start returns while the parts are still on their way; the decoding and
// the caller's hook run on the exchange's own thread once they arrive, and
// Finish hands over what they made.
TEST(MaskExchangeTest, ReceivesOnItsOwnThreadWhileTheCallerGoesOn) {
  auto partition = ParameterPartition::Balanced(kGatedTotal, 2);
  MaskExchange exchange(&*partition, MaskScope::kPartitioned);
  GatedGroup group;
  const std::vector<int64_t> own = {3, 17, 400, 499};
  std::atomic<bool> hook_ran{false};
  std::thread::id hook_thread;
  int64_t hook_entries = -1;
  ASSERT_TRUE(exchange
                  .Start(group, 2, 7, own, nullptr,
                         [&](const GlobalMask& mask) {
                           hook_thread = std::this_thread::get_id();
                           hook_entries = static_cast<int64_t>(mask.indices.size());
                           hook_ran = true;
                           return absl::OkStatus();
                         })
                  .ok());
  EXPECT_TRUE(exchange.in_flight());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(hook_ran);  // nothing has arrived: the caller was not held up
  group.gate.Notify();
  auto mask = exchange.Finish(2, 7);
  ASSERT_TRUE(mask.ok()) << mask.status();
  EXPECT_TRUE(hook_ran);
  EXPECT_TRUE(exchange.last().received_on_thread);
  EXPECT_FALSE(exchange.last().encoded_on_thread);
  EXPECT_EQ(group.blocking_thread.load(), std::this_thread::get_id());
  EXPECT_NE(hook_thread, std::this_thread::get_id());
  EXPECT_EQ(hook_entries, 4);
  EXPECT_EQ(mask->indices, own);
  EXPECT_EQ(mask->step, 7);
  EXPECT_FALSE(exchange.in_flight());
}

// Sent on the exchange's thread, Start returns before this rank's part is
// even encoded: the sizes' all-gather (held by the gate, a slow peer) runs
// there too.
TEST(MaskExchangeTest, SendsOnItsOwnThreadWhileTheCallerGoesOn) {
  auto partition = ParameterPartition::Balanced(kGatedTotal, 2);
  MaskExchange exchange(&*partition, MaskScope::kPartitioned, MaskSending::kOnThread);
  GatedGroup group;
  group.gate_blocking_too = true;
  const std::vector<int64_t> own = {5, 6, 7, 300};
  ASSERT_TRUE(exchange.Start(group, 1, 3, own, nullptr).ok());
  EXPECT_TRUE(exchange.encodes_on_thread());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(group.blocking_thread.load(), std::thread::id());  // still held: Start did not wait
  group.gate.Notify();
  auto mask = exchange.Finish(1, 3);
  ASSERT_TRUE(mask.ok()) << mask.status();
  EXPECT_EQ(mask->indices, own);
  EXPECT_NE(group.blocking_thread.load(), std::this_thread::get_id());
  EXPECT_TRUE(exchange.last().encoded_on_thread);
  EXPECT_TRUE(exchange.last().received_on_thread);
  EXPECT_GT(exchange.last().part_bytes, kMaskHeaderBytes);
  EXPECT_FALSE(exchange.encodes_on_thread());
}

// A part the encoder refuses: Start's error on the caller's thread,
// Finish's on the exchange's; either way nothing stays in flight.
TEST(MaskExchangeTest, AnUnencodablePartFailsWhereItIsSent) {
  auto partition = ParameterPartition::Balanced(kGatedTotal, 2);
  const std::vector<int64_t> outside = {3, 500};  // past rank 0's range
  {
    MaskExchange exchange(&*partition, MaskScope::kPartitioned, MaskSending::kOnCaller);
    GatedGroup group;
    group.gate.Notify();
    const absl::Status started = exchange.Start(group, 0, 1, outside, nullptr);
    EXPECT_FALSE(started.ok());
    EXPECT_NE(started.message().find("entry 1 is 500"), absl::string_view::npos) << started;
    EXPECT_FALSE(exchange.in_flight());
  }
  {
    MaskExchange exchange(&*partition, MaskScope::kPartitioned, MaskSending::kOnThread);
    GatedGroup group;
    group.gate.Notify();
    ASSERT_TRUE(exchange.Start(group, 0, 1, outside, nullptr).ok());
    auto mask = exchange.Finish(0, 1);
    EXPECT_FALSE(mask.ok());
    EXPECT_NE(mask.status().message().find("entry 1 is 500"), absl::string_view::npos) << mask.status();
    EXPECT_FALSE(exchange.in_flight());
    // The exchange is usable again.
    ASSERT_TRUE(exchange.Start(group, 0, 2, {4, 9}, nullptr).ok());
    auto next = exchange.Finish(0, 2);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->indices, (std::vector<int64_t>{4, 9}));
  }
}

// A group of one: its part, checked, is the mask; nothing is coded or
// sent, and the hook still runs on the exchange's thread.
TEST_P(MaskExchangeSendingTest, ALoneRanksPartIsTheMaskUncoded) {
  auto partition = ParameterPartition::Balanced(5000, 1);
  const std::vector<float> stat = UniformStat(3, 5000);
  const std::vector<int64_t> own = SelectTopK(stat, 0, 250);
  ASSERT_TRUE(RunInProcessRanks(1, [&](int, RankGroup& group) -> absl::Status {
                MaskExchange exchange(&*partition, MaskScope::kPartitioned, GetParam());
                GlobalMask previous;
                for (int64_t step = 4; step < 6; ++step) {
                  std::thread::id hook_thread;
                  int64_t hook_entries = -1;
                  if (auto s = exchange.Start(group, 2, step, own, &previous,
                                              [&](const GlobalMask& mask) {
                                                hook_thread = std::this_thread::get_id();
                                                hook_entries =
                                                    static_cast<int64_t>(mask.indices.size());
                                                return absl::OkStatus();
                                              });
                      !s.ok()) {
                    return s;
                  }
                  auto mask = exchange.Finish(2, step);
                  if (!mask.ok()) return mask.status();
                  EXPECT_EQ(mask->indices, own);
                  EXPECT_EQ(mask->parts, std::vector<std::vector<int64_t>>{own});
                  EXPECT_EQ(mask->mask_epoch, 2u);
                  EXPECT_EQ(mask->step, step);
                  EXPECT_EQ(hook_entries, 250);
                  EXPECT_NE(hook_thread, std::this_thread::get_id());
                  EXPECT_EQ(exchange.last().part_bytes, 0);
                  EXPECT_EQ(exchange.last().encoded_on_thread,
                            GetParam() == MaskSending::kOnThread);
                  previous = *std::move(mask);
                }
                EXPECT_EQ(group.bytes_sent(), 0);
                EXPECT_EQ(group.bytes_received(), 0);
                return absl::OkStatus();
              }).ok());
}

// A lone rank's part out of order is refused as the encoder refuses it:
// Start's error on the caller's thread, Finish's on the exchange's.
TEST_P(MaskExchangeSendingTest, ALoneRanksMisplacedPartIsRefused) {
  auto partition = ParameterPartition::Balanced(100, 1);
  ASSERT_TRUE(RunInProcessRanks(1, [&](int, RankGroup& group) -> absl::Status {
                MaskExchange exchange(&*partition, MaskScope::kPartitioned, GetParam());
                for (const std::vector<int64_t>& bad :
                     {std::vector<int64_t>{5, 3}, std::vector<int64_t>{5, 100}}) {
                  const absl::Status started = exchange.Start(group, 0, 1, bad, nullptr);
                  EXPECT_EQ(started.ok(), GetParam() == MaskSending::kOnThread) << started;
                  const absl::Status refused =
                      started.ok() ? exchange.Finish(0, 1).status() : started;
                  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
                  EXPECT_NE(refused.message().find(absl::StrCat("entry 1 is ", bad[1], ", after 5")),
                            absl::string_view::npos)
                      << refused;
                  EXPECT_FALSE(exchange.in_flight());
                }
                return absl::OkStatus();
              }).ok());
}

TEST(MaskExchangeTest, FinishReportsTheReceivingHalfsErrors) {
  auto partition = ParameterPartition::Balanced(kGatedTotal, 2);
  const std::vector<int64_t> own = {1, 2, 3};
  {  // The all-gather failed (a peer died).
    MaskExchange exchange(&*partition, MaskScope::kPartitioned);
    GatedGroup group;
    group.failure = absl::UnavailableError("peer 3 is gone");
    ASSERT_TRUE(exchange.Start(group, 0, 1, own, nullptr).ok());
    group.gate.Notify();
    EXPECT_EQ(exchange.Finish(0, 1).status().message(), "peer 3 is gone");
    EXPECT_FALSE(exchange.in_flight());
  }
  {  // The hook refused the mask.
    MaskExchange exchange(&*partition, MaskScope::kPartitioned);
    GatedGroup group;
    group.gate.Notify();
    ASSERT_TRUE(exchange
                    .Start(group, 0, 1, own, nullptr,
                           [](const GlobalMask&) { return absl::OutOfRangeError("too old"); })
                    .ok());
    EXPECT_EQ(exchange.Finish(0, 1).status().code(), absl::StatusCode::kOutOfRange);
  }
  {  // Finished for another step than it was started for.
    MaskExchange exchange(&*partition, MaskScope::kPartitioned);
    GatedGroup group;
    group.gate.Notify();
    ASSERT_TRUE(exchange.Start(group, 0, 1, own, nullptr).ok());
    auto mask = exchange.Finish(0, 2);
    EXPECT_EQ(mask.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(mask.status().message().find("step 1"), absl::string_view::npos) << mask.status();
    EXPECT_EQ(exchange.Finish(0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  {  // Destroyed in flight: joins once the parts arrive, nothing leaks.
    GatedGroup group;
    auto exchange = std::make_unique<MaskExchange>(&*partition, MaskScope::kPartitioned);
    ASSERT_TRUE(exchange->Start(group, 0, 1, own, nullptr).ok());
    EXPECT_EQ(exchange->Start(group, 0, 2, own, nullptr).code(),
              absl::StatusCode::kFailedPrecondition);
    group.gate.Notify();
    exchange.reset();
  }
}

TEST(ParameterPartitionTest, TensorAlignedDealsWholeTensorsBalancedByElements) {
  // Tensors of 100, 10, 300, 10, 100, 10, 270 (800 entries): the cut nearest
  // 400 is 410 (|410−400| < |110−400|), then the ranks' runs.
  const std::vector<int64_t> bounds = {0, 100, 110, 410, 420, 520, 530, 800};
  auto two = ParameterPartition::TensorAligned(bounds, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->bounds(), (std::vector<int64_t>{0, 410, 800}));
  auto four = ParameterPartition::TensorAligned(bounds, 4);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->bounds(), (std::vector<int64_t>{0, 110, 410, 530, 800}));
  EXPECT_TRUE(CheckTensorAligned(*four, bounds).ok());
  // Every rank keeps at least one tensor, even when one tensor dominates.
  auto seven = ParameterPartition::TensorAligned(bounds, 7);
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(seven->bounds(), bounds);
  EXPECT_EQ(ParameterPartition::TensorAligned(bounds, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParameterPartition::TensorAligned({0, 5, 5, 9}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto balanced = ParameterPartition::Balanced(800, 2);
  EXPECT_EQ(CheckTensorAligned(*balanced, bounds).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MaskCountTest, PerTensorCountIsFloorWithAtLeastOne) {
  EXPECT_EQ(MaskCountForTensor(10, 0.1), 1);      // exactly 1, not rounded down to 0
  EXPECT_EQ(MaskCountForTensor(1000, 0.01), 10);
  EXPECT_EQ(MaskCountForTensor(199, 0.01), 1);    // floor(1.99)
  EXPECT_EQ(MaskCountForTensor(16, 0.01), 1);     // at least one
  EXPECT_EQ(MaskCountForTensor(16, 1.0), 16);
  EXPECT_EQ(MaskCountForTensor(0, 0.5), 0);
}

}  // namespace
}  // namespace corescape::optim
