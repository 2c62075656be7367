// The collective algorithms on the in-process fabric: P ranks as threads,
// both delivery modes, settings that force every algorithm and many pipeline
// segments. Checks results against a serial reference, bitwise equality
// across ranks, and the exact bytes each rank sends and receives.
#include "runtime/comm/collective_algorithms.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/block_layout.h"
#include "runtime/comm/in_process_fabric.h"

namespace corescape::comm {
namespace {

using Mode = InProcessFabric::Mode;

// Runs body(rank, channel) on `world` threads; returns each rank's status
// and counters.
struct RankResult {
  absl::Status status;
  ByteCounters counters;
};
std::vector<RankResult> RunRanks(int world, Mode mode, CollectiveKind kind,
                                 const std::function<absl::Status(int, MessageChannel&)>& body) {
  InProcessFabric fabric(world, mode, absl::Seconds(20));
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<MessageChannel> ch = fabric.OpenChannel(r, 0, kind, &results[r].counters);
      results[r].status = body(r, *ch);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Values that are small integers: every summation order gives the exact
// result, so a serial reference can be compared bitwise.
std::vector<float> IntegerInput(int rank, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>((i * 7 + rank * 13) % 41 - 20);
  return v;
}
std::vector<float> RandomInput(int rank, int64_t count) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen) * std::pow(10.0f, static_cast<float>(gen() % 7) - 3.0f);
  return v;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Case {
  int world;
  int64_t count;
  AlgorithmSettings settings;
  Mode mode;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  AlgorithmSettings small_path;  // everything small: latency algorithms
  small_path.small_bytes = 1 << 20;
  AlgorithmSettings ring_path;  // everything large, tiny segments, ring gathers
  ring_path.small_bytes = 0;
  ring_path.segment_bytes = 12;
  ring_path.doubling_bytes = 0;
  AlgorithmSettings doubling_path = ring_path;  // gathers by recursive doubling (P = 2^k)
  doubling_path.doubling_bytes = int64_t{1} << 40;
  AlgorithmSettings shallow_ring = ring_path;  // two receives ahead per ring step
  shallow_ring.ring_receive_depth = 2;
  AlgorithmSettings defaults;
  for (int world : {1, 2, 3, 4, 5, 6, 8}) {
    for (int64_t count : {0, 1, 2, 7, 1001}) {
      for (Mode mode : {Mode::kEager, Mode::kRendezvous}) {
        cases.push_back({world, count, small_path, mode});
        cases.push_back({world, count, ring_path, mode});
        cases.push_back({world, count, doubling_path, mode});
        cases.push_back({world, count, shallow_ring, mode});
      }
    }
    cases.push_back({world, 70000, defaults, Mode::kRendezvous});
  }
  return cases;
}

std::string Describe(const Case& c) {
  return "P=" + std::to_string(c.world) + " count=" + std::to_string(c.count) + " " +
         DescribeSettings(c.settings) +
         (c.mode == Mode::kEager ? " eager" : " rendezvous");
}

TEST(CollectiveAlgorithmsTest, AllReduceMatchesSerialReferenceBitwise) {
  for (const Case& c : AllCases()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      SCOPED_TRACE(Describe(c) + (op == ReduceOp::kMean ? " mean" : " sum"));
      std::vector<std::vector<float>> data(c.world);
      for (int r = 0; r < c.world; ++r) data[r] = IntegerInput(r, c.count);
      std::vector<float> expected(c.count, 0.0f);
      for (int r = 0; r < c.world; ++r) {
        for (int64_t i = 0; i < c.count; ++i) expected[i] += data[r][i];
      }
      if (op == ReduceOp::kMean) {
        for (float& x : expected) x /= static_cast<float>(c.world);
      }
      auto results = RunRanks(c.world, c.mode, CollectiveKind::kAllReduce,
                              [&](int r, MessageChannel& ch) {
                                return RunAllReduce(ch, c.settings, data[r].data(), c.count, op);
                              });
      for (int r = 0; r < c.world; ++r) {
        ASSERT_TRUE(results[r].status.ok()) << results[r].status;
        EXPECT_TRUE(BitwiseEqual(data[r], expected)) << "rank " << r;
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, AllReduceIsBitwiseIdenticalAcrossRanksAndRuns) {
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Describe(c));
    std::vector<float> first_run;
    for (int run = 0; run < 2; ++run) {
      std::vector<std::vector<float>> data(c.world);
      for (int r = 0; r < c.world; ++r) data[r] = RandomInput(r, c.count);
      std::vector<double> exact(c.count, 0.0);
      for (int r = 0; r < c.world; ++r) {
        for (int64_t i = 0; i < c.count; ++i) exact[i] += data[r][i];
      }
      auto results = RunRanks(c.world, c.mode, CollectiveKind::kAllReduce,
                              [&](int r, MessageChannel& ch) {
                                return RunAllReduce(ch, c.settings, data[r].data(), c.count,
                                                    ReduceOp::kSum);
                              });
      for (int r = 0; r < c.world; ++r) {
        ASSERT_TRUE(results[r].status.ok()) << results[r].status;
        EXPECT_TRUE(BitwiseEqual(data[r], data[0])) << "rank " << r << " differs from rank 0";
      }
      for (int64_t i = 0; i < c.count; ++i) {
        EXPECT_NEAR(data[0][i], exact[i], 1e-4 * (1 + std::fabs(exact[i]))) << i;
      }
      if (run == 0) {
        first_run = data[0];
      } else {
        EXPECT_TRUE(BitwiseEqual(first_run, data[0])) << "not deterministic";
      }
    }
  }
}

// Whether a gather runs as recursive doubling, from the documented rule
// (docs/data_plane.md): power-of-two P and at most doubling_bytes in all.
bool DoublingGather(int world, int64_t total_bytes, const AlgorithmSettings& s) {
  return world > 1 && (world & (world - 1)) == 0 && total_bytes <= s.doubling_bytes;
}

// Bytes rank r sends in a recursive-doubling gather: in round k its group of
// 2^k ranks (starting at r with the low k bits cleared).
int64_t DoublingGatherSent(const std::vector<int64_t>& block_bytes, int rank) {
  const int world = static_cast<int>(block_bytes.size());
  int64_t sent = 0;
  for (int group = 1; group < world; group *= 2) {
    const int first = rank / group * group;
    for (int b = first; b < first + group; ++b) sent += block_bytes[b];
  }
  return sent;
}

// Bytes per rank, derived from the documented schedules (docs/data_plane.md).
TEST(CollectiveAlgorithmsTest, AllReduceByteCountsAreExact) {
  for (const Case& c : AllCases()) {
    if (c.mode != Mode::kRendezvous || c.world == 1 || c.count == 0) continue;
    SCOPED_TRACE(Describe(c));
    std::vector<std::vector<float>> data(c.world);
    for (int r = 0; r < c.world; ++r) data[r] = IntegerInput(r, c.count);
    auto results = RunRanks(c.world, c.mode, CollectiveKind::kAllReduce,
                            [&](int r, MessageChannel& ch) {
                              return RunAllReduce(ch, c.settings, data[r].data(), c.count,
                                                  ReduceOp::kSum);
                            });
    const int64_t n4 = c.count * 4;
    const bool small = n4 <= c.settings.small_bytes;
    BlockLayout chunks = BlockLayout::Balanced(c.count, c.world, 4);
    int pow2 = 1, rounds = 0;
    while (pow2 * 2 <= c.world) pow2 *= 2, ++rounds;
    int64_t total_sent = 0;
    for (int r = 0; r < c.world; ++r) {
      const KindCounters& k = results[r].counters[CollectiveKind::kAllReduce];
      int64_t sent, received;
      if (small) {
        const int64_t messages = r >= pow2 ? 1 : rounds + (r + pow2 < c.world ? 1 : 0);
        sent = received = messages * n4;
      } else if (DoublingGather(c.world, n4, c.settings)) {
        sent = n4 - chunks.bytes[r] + DoublingGatherSent(chunks.bytes, r);
        received = 2 * n4 - chunks.bytes[r] - chunks.bytes[(r + c.world - 1) % c.world];
      } else {
        sent = 2 * n4 - chunks.bytes[r] - chunks.bytes[(r + 1) % c.world];
        received = 2 * n4 - chunks.bytes[r] - chunks.bytes[(r + c.world - 1) % c.world];
      }
      EXPECT_EQ(k.bytes_sent, sent) << "rank " << r;
      EXPECT_EQ(k.bytes_received, received) << "rank " << r;
      total_sent += k.bytes_sent;
    }
    if (!small) {
      // Both gathers move the same bytes in all: P - 1 blocks to every rank.
      EXPECT_EQ(total_sent, 2 * (c.world - 1) * n4);
    }
  }
}

// The ring's order written out independently (docs/data_plane.md): chunk c
// of P balanced chunks is ((x_{c+1} + x_{c+2}) + ...) + x_c, indices mod P;
// a mean divides that last addition's result by P.
std::vector<float> RingOrderReference(const std::vector<std::vector<float>>& inputs,
                                      ReduceOp op) {
  const int world = static_cast<int>(inputs.size());
  const int64_t count = static_cast<int64_t>(inputs[0].size());
  std::vector<float> out(count);
  int64_t begin = 0;
  for (int c = 0; c < world; ++c) {
    const int64_t n = count / world + (c < count % world ? 1 : 0);
    for (int64_t i = begin; i < begin + n; ++i) {
      float acc = inputs[(c + 1) % world][i];
      for (int k = 2; k <= world; ++k) acc = acc + inputs[(c + k) % world][i];
      out[i] = op == ReduceOp::kMean ? acc / static_cast<float>(world) : acc;
    }
    begin += n;
  }
  return out;
}

// Whichever gather finishes it, the large all-reduce adds in the ring's
// order: order-sensitive data matches the independent reference bitwise.
TEST(CollectiveAlgorithmsTest, LargeAllReduceAddsInRingOrderWithEitherGather) {
  AlgorithmSettings ring;
  ring.small_bytes = 0;
  ring.segment_bytes = 20;
  ring.doubling_bytes = 0;
  AlgorithmSettings doubling = ring;
  doubling.doubling_bytes = int64_t{1} << 40;
  AlgorithmSettings shallow = doubling;
  shallow.ring_receive_depth = 1;
  int order_sensitive_cases = 0;
  for (int world : {2, 3, 4, 8}) {
    for (int64_t count : {1, 7, 1001, 4099}) {
      for (const AlgorithmSettings& settings : {ring, doubling, shallow}) {
        for (Mode mode : {Mode::kEager, Mode::kRendezvous}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
            SCOPED_TRACE(Describe({world, count, settings, mode}) +
                         (op == ReduceOp::kMean ? " mean" : " sum"));
            std::vector<std::vector<float>> data(world);
            for (int r = 0; r < world; ++r) data[r] = RandomInput(r, count);
            const std::vector<float> expected = RingOrderReference(data, op);
            std::vector<float> rank_order = data[0];
            for (int r = 1; r < world; ++r) {
              for (int64_t i = 0; i < count; ++i) rank_order[i] += data[r][i];
            }
            auto results = RunRanks(world, mode, CollectiveKind::kAllReduce,
                                    [&](int r, MessageChannel& ch) {
                                      return RunAllReduce(ch, settings, data[r].data(), count,
                                                          op);
                                    });
            for (int r = 0; r < world; ++r) {
              ASSERT_TRUE(results[r].status.ok()) << results[r].status;
              ASSERT_TRUE(BitwiseEqual(data[r], expected)) << "rank " << r;
            }
            order_sensitive_cases += op == ReduceOp::kSum && !BitwiseEqual(rank_order, expected);
          }
        }
      }
    }
  }
  // The data is order-sensitive: a different order would have been caught.
  EXPECT_GT(order_sensitive_cases, 10);
}

std::vector<int64_t> UnevenSizes(int world, int64_t scale) {
  std::vector<int64_t> sizes(world);
  for (int r = 0; r < world; ++r) sizes[r] = (r % 3 == 1) ? 0 : scale * (r + 1) + r;
  return sizes;
}

TEST(CollectiveAlgorithmsTest, AllGatherVUnevenSizes) {
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Describe(c));
    const std::vector<int64_t> sizes = UnevenSizes(c.world, c.count);
    const BlockLayout layout = *BlockLayout::FromSizes(sizes);
    std::vector<std::vector<char>> send(c.world), recv(c.world);
    std::vector<char> expected;
    for (int r = 0; r < c.world; ++r) {
      for (int64_t i = 0; i < sizes[r]; ++i) send[r].push_back(static_cast<char>(r * 31 + i));
      expected.insert(expected.end(), send[r].begin(), send[r].end());
      recv[r].assign(layout.total_bytes(), '\x55');
    }
    auto results = RunRanks(c.world, c.mode, CollectiveKind::kAllGather,
                            [&](int r, MessageChannel& ch) {
                              return RunAllGatherV(ch, c.settings, send[r].data(),
                                                   recv[r].data(), sizes);
                            });
    const bool small = layout.total_bytes() <= c.settings.small_bytes;
    for (int r = 0; r < c.world; ++r) {
      ASSERT_TRUE(results[r].status.ok()) << results[r].status;
      EXPECT_EQ(recv[r], expected) << "rank " << r;
      const KindCounters& k = results[r].counters[CollectiveKind::kAllGather];
      const int64_t total = layout.total_bytes();
      if (c.world > 1) {
        EXPECT_EQ(k.bytes_received, total - sizes[r]);
        EXPECT_EQ(k.bytes_sent, small ? (c.world - 1) * sizes[r]
                                : DoublingGather(c.world, total, c.settings)
                                    ? DoublingGatherSent(sizes, r)
                                    : total - sizes[(r + 1) % c.world]);
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, ReduceScatterUnevenCounts) {
  for (const Case& c : AllCases()) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      SCOPED_TRACE(Describe(c));
      const std::vector<int64_t> counts = UnevenSizes(c.world, c.count);
      int64_t total = 0;
      for (int64_t n : counts) total += n;
      const BlockLayout layout = *BlockLayout::FromSizes(counts, 4);
      std::vector<std::vector<float>> send(c.world), recv(c.world);
      std::vector<float> sum(total, 0.0f);
      for (int r = 0; r < c.world; ++r) {
        send[r] = IntegerInput(r, total);
        for (int64_t i = 0; i < total; ++i) sum[i] += send[r][i];
        recv[r].assign(counts[r], -999.0f);
      }
      auto results = RunRanks(c.world, c.mode, CollectiveKind::kReduceScatter,
                              [&](int r, MessageChannel& ch) {
                                return RunReduceScatter(ch, c.settings, send[r].data(),
                                                        recv[r].data(), counts, op);
                              });
      const bool small = layout.total_bytes() <= c.settings.small_bytes;
      for (int r = 0; r < c.world; ++r) {
        ASSERT_TRUE(results[r].status.ok()) << results[r].status;
        std::vector<float> expected(sum.begin() + layout.offset[r] / 4,
                                    sum.begin() + (layout.offset[r] + layout.bytes[r]) / 4);
        if (op == ReduceOp::kMean) {
          for (float& x : expected) x /= static_cast<float>(c.world);
        }
        EXPECT_TRUE(BitwiseEqual(recv[r], expected)) << "rank " << r;
        const KindCounters& k = results[r].counters[CollectiveKind::kReduceScatter];
        if (c.world > 1) {
          EXPECT_EQ(k.bytes_sent, layout.total_bytes() - layout.bytes[r]);
          EXPECT_EQ(k.bytes_received,
                    small ? (c.world - 1) * layout.bytes[r]
                          : layout.total_bytes() - layout.bytes[(r + c.world - 1) % c.world]);
        }
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, BroadcastFromEveryRoot) {
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Describe(c));
    const int64_t bytes = c.count * 3 + (c.count > 0 ? 1 : 0);
    for (int root = 0; root < c.world; ++root) {
      std::vector<std::vector<char>> buf(c.world, std::vector<char>(bytes, 0));
      for (int64_t i = 0; i < bytes; ++i) buf[root][i] = static_cast<char>(i * 17 + root);
      const std::vector<char> expected = buf[root];
      auto results = RunRanks(c.world, c.mode, CollectiveKind::kBroadcast,
                              [&](int r, MessageChannel& ch) {
                                return RunBroadcast(ch, c.settings, buf[r].data(), bytes, root);
                              });
      const bool small = bytes <= c.settings.small_bytes;
      for (int r = 0; r < c.world; ++r) {
        ASSERT_TRUE(results[r].status.ok()) << results[r].status;
        EXPECT_EQ(buf[r], expected) << "rank " << r << " root " << root;
        const KindCounters& k = results[r].counters[CollectiveKind::kBroadcast];
        if (c.world == 1) continue;
        const int position = (r - root + c.world) % c.world;
        int64_t sent = 0, received = position == 0 ? 0 : bytes;
        if (small) {
          sent = position == 0 ? (c.world - 1) * bytes : 0;
        } else {
          sent = position < c.world - 1 ? bytes : 0;
        }
        EXPECT_EQ(k.bytes_sent, sent) << "rank " << r;
        EXPECT_EQ(k.bytes_received, received) << "rank " << r;
      }
    }
  }
}

TEST(CollectiveAlgorithmsTest, BarrierCompletes) {
  for (int world : {1, 2, 3, 5, 8}) {
    auto results = RunRanks(world, Mode::kRendezvous, CollectiveKind::kBarrier,
                            [&](int, MessageChannel& ch) { return RunBarrier(ch); });
    for (const RankResult& r : results) {
      EXPECT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.counters.total_sent(), 0);
    }
  }
}

TEST(CollectiveAlgorithmsTest, SizeMismatchIsAnErrorNamingThePeer) {
  // Rank 1 believes the buffer is longer: the receiver reports the peer.
  auto results = RunRanks(2, Mode::kEager, CollectiveKind::kBroadcast,
                          [&](int r, MessageChannel& ch) {
                            std::vector<char> buf(16);
                            return RunBroadcast(ch, AlgorithmSettings(), buf.data(),
                                                r == 0 ? 16 : 8, 0);
                          });
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(results[1].status.message().find("from rank 0"), std::string::npos)
      << results[1].status;
}

TEST(CollectiveAlgorithmsTest, Validation) {
  EXPECT_FALSE(ValidateAllReduceArgs(nullptr, 3).ok());
  EXPECT_TRUE(ValidateAllReduceArgs(nullptr, 0).ok());
  EXPECT_FALSE(ValidateAllReduceArgs(nullptr, -1).ok());
  char buf[8];
  EXPECT_TRUE(ValidateAllGatherVArgs(0, 2, buf, 4, buf, {4, 4}).ok());
  EXPECT_FALSE(ValidateAllGatherVArgs(0, 2, buf, 3, buf, {4, 4}).ok());
  EXPECT_FALSE(ValidateAllGatherVArgs(0, 3, buf, 4, buf, {4, 4}).ok());
  EXPECT_FALSE(ValidateAllGatherVArgs(0, 2, buf, 4, buf, {4, -4}).ok());
  float f[4];
  EXPECT_TRUE(ValidateReduceScatterArgs(1, 2, f, f + 2, {1, 1}).ok());
  EXPECT_FALSE(ValidateReduceScatterArgs(0, 2, f, f, {1, 1}).ok());  // overlap
  EXPECT_FALSE(ValidateBroadcastArgs(2, buf, 4, 2).ok());
  EXPECT_FALSE(ValidateBroadcastArgs(2, nullptr, 4, 0).ok());
  AlgorithmSettings bad;
  bad.segment_bytes = 0;
  EXPECT_FALSE(ValidateSettings(bad).ok());
  AlgorithmSettings negative_doubling;
  negative_doubling.doubling_bytes = -1;
  EXPECT_FALSE(ValidateSettings(negative_doubling).ok());
  AlgorithmSettings negative_depth;
  negative_depth.ring_receive_depth = -1;
  EXPECT_FALSE(ValidateSettings(negative_depth).ok());
  // Every field reaches the handshake's fingerprint.
  AlgorithmSettings a, b;
  b.doubling_bytes = a.doubling_bytes + 1;
  EXPECT_NE(DescribeSettings(a), DescribeSettings(b));
  b = a;
  b.ring_receive_depth = a.ring_receive_depth + 1;
  EXPECT_NE(DescribeSettings(a), DescribeSettings(b));
}

}  // namespace
}  // namespace corescape::comm
