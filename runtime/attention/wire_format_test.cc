#include "runtime/attention/wire_format.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/micro_batch_plan.h"

namespace corescape::attention {
namespace {

ExchangeHeader Sample() {
  ExchangeHeader h;
  h.pass = Pass::kBackward;
  h.flags = kCarriesForwardTensors;
  h.exchange = 123456789012;
  h.micro_batch = 42;
  h.layer = 2;
  h.n_layers = 3;
  h.n_heads = 4;
  h.n_kv_heads = 2;
  h.head_dim = 24;
  h.softmax_scale = 0.2041f;
  h.payload_bytes = 4096;
  return h;
}

TEST(WireFormatTest, HeaderRoundTrips) {
  const ExchangeHeader h = Sample();
  auto decoded = DecodeHeader(EncodeHeader(h), "worker 0");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, h);
  ExchangeHeader end;
  end.pass = Pass::kEnd;
  end.exchange = 9;
  EXPECT_EQ(*DecodeHeader(EncodeHeader(end), "w"), end);
}

TEST(WireFormatTest, PingPongHalvesRoundTripAndMismatchesAreNamed) {
  ExchangeHeader a = Sample();
  a.flags |= kPingPongHalfA;
  ExchangeHeader b = a;
  b.flags = kCarriesForwardTensors | kPingPongHalfB;
  b.micro_batch = a.micro_batch + 1;
  for (const ExchangeHeader& h : {a, b}) {
    auto decoded = DecodeHeader(EncodeHeader(h), "worker 0");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, h);
    EXPECT_TRUE(decoded->ping_pong());
  }
  EXPECT_EQ(a.half(), 0);
  EXPECT_EQ(b.half(), 1);
  EXPECT_FALSE(Sample().ping_pong());
  EXPECT_NE(b.Describe().find("micro-batch 43, half B"), std::string::npos) << b.Describe();

  ExchangeHeader both = Sample();
  both.flags |= kPingPongHalfA | kPingPongHalfB;
  auto decoded = DecodeHeader(EncodeHeader(both), "worker 1");
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("both ping-pong halves"), std::string::npos);

  // One worker splits, the other does not: named as a ping-pong mismatch.
  absl::Status s = CheckHeaderMatches(a, Sample(), "worker 1");
  EXPECT_NE(s.message().find("ping-pong"), std::string::npos) << s;
}

TEST(WireFormatTest, RejectsDamagedHeadersNamingThePeer) {
  auto expect_error = [](HeaderBytes bytes, const std::string& what) {
    auto decoded = DecodeHeader(bytes, "worker 1 (10.0.0.2:4000)");
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.status().message().find("worker 1 (10.0.0.2:4000)"), std::string::npos);
    EXPECT_NE(decoded.status().message().find(what), std::string::npos) << decoded.status();
  };
  HeaderBytes bytes = EncodeHeader(Sample());
  bytes[0] ^= 1;
  expect_error(bytes, "magic");
  bytes = EncodeHeader(Sample());
  bytes[4] = 9;
  expect_error(bytes, "version");
  bytes = EncodeHeader(Sample());
  bytes[6] = 7;
  expect_error(bytes, "pass");
  ExchangeHeader h = Sample();
  h.layer = 3;
  expect_error(EncodeHeader(h), "layer 3 of 3");
  h = Sample();
  h.n_kv_heads = 3;
  expect_error(EncodeHeader(h), "shape");
  h = Sample();
  h.num_documents = 5;  // only with the forward of layer 0
  expect_error(EncodeHeader(h), "documents");
  h = Sample();
  h.payload_bytes = 7;
  expect_error(EncodeHeader(h), "payload");
}

// Every count and length is bounded from above before a receiver sizes a
// buffer by it; the error names the field.
TEST(WireFormatTest, RejectsOversizedFieldsNamingThem) {
  struct Case {
    std::function<void(ExchangeHeader&)> damage;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](ExchangeHeader& h) { h.n_layers = kMaxWireLayers + 1; }, "n_layers"},
      {[](ExchangeHeader& h) { h.n_layers = std::numeric_limits<int32_t>::max(); }, "n_layers"},
      {[](ExchangeHeader& h) { h.n_heads = kMaxWireHeads * 2; h.n_kv_heads = 2; }, "n_heads"},
      {[](ExchangeHeader& h) { h.head_dim = kMaxWireRowWidth; }, "head_dim"},
      {[](ExchangeHeader& h) { h.head_dim = std::numeric_limits<int32_t>::max(); }, "head_dim"},
      {[](ExchangeHeader& h) { h.n_kv_heads = -2; }, "n_kv_heads"},
      {[](ExchangeHeader& h) { h.softmax_scale = INFINITY; }, "softmax_scale"},
      {[](ExchangeHeader& h) { h.payload_bytes = kMaxPayloadBytes + 4; }, "payload_bytes"},
      {[](ExchangeHeader& h) { h.payload_bytes = std::numeric_limits<int64_t>::max() - 3; },
       "payload_bytes"},
      {[](ExchangeHeader& h) { h.payload_bytes = -4; }, "payload_bytes"},
      {[](ExchangeHeader& h) {
         h.pass = Pass::kForward;
         h.layer = 0;
         h.num_documents = kMaxDocumentsPerMicroBatch + 1;
       },
       "num_documents"},
      {[](ExchangeHeader& h) {
         h.pass = Pass::kForward;
         h.layer = 0;
         h.num_speed_weights = kMaxSpeedWeights + 1;
       },
       "num_speed_weights"},
  };
  for (const Case& c : cases) {
    ExchangeHeader h = Sample();
    c.damage(h);
    auto decoded = DecodeHeader(EncodeHeader(h), "worker 3");
    ASSERT_FALSE(decoded.ok()) << c.field;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(decoded.status().message().find(c.field), std::string::npos) << decoded.status();
    EXPECT_NE(decoded.status().message().find("worker 3"), std::string::npos) << decoded.status();
  }
  // The largest shape a model may have still decodes.
  ExchangeHeader widest = Sample();
  widest.n_layers = kMaxWireLayers;
  widest.n_heads = kMaxWireHeads;
  widest.n_kv_heads = 1;
  widest.head_dim = kMaxWireRowWidth / kMaxWireHeads;
  widest.payload_bytes = kMaxPayloadBytes;
  EXPECT_TRUE(DecodeHeader(EncodeHeader(widest), "w").ok());
}

// A worker's document lengths are bounded one by one and in sum, so the
// planner and the row arithmetic never see more tokens than fit.
TEST(WireFormatTest, AnnouncedLengthsAreBoundedInSum) {
  EXPECT_TRUE(CheckAnnouncedLengths({{5, 7}, {kMaxTokensPerMicroBatch}}, "mb 0").ok());
  absl::Status s = CheckAnnouncedLengths({{kMaxTokensPerMicroBatch + 1}}, "mb 0");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("document length"), std::string::npos) << s;
  s = CheckAnnouncedLengths({{1}, {kMaxTokensPerMicroBatch / 2, kMaxTokensPerMicroBatch / 2, 1}},
                            "mb 0");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("from worker 1"), std::string::npos) << s;
  EXPECT_FALSE(CheckAnnouncedLengths({{std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::max()}},
                                     "mb 0")
                   .ok());
  EXPECT_FALSE(CheckAnnouncedLengths({{0}}, "mb 0").ok());
}

TEST(WireFormatTest, MismatchSaysWhichSideIsOutOfStep) {
  const ExchangeHeader a = Sample();
  ExchangeHeader b = a;
  b.payload_bytes = 8;  // differs per peer: not compared
  EXPECT_TRUE(CheckHeaderMatches(a, b, "p").ok());
  b.layer = 1;
  absl::Status s = CheckHeaderMatches(a, b, "server 0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("out of step"), std::string::npos) << s;
  EXPECT_NE(s.message().find("backward layer 1 of micro-batch 42"), std::string::npos) << s;
  b = a;
  b.flags = 0;
  EXPECT_NE(CheckHeaderMatches(a, b, "p").message().find("keep_qkv_for_backward"),
            std::string::npos);
  b = a;
  b.head_dim = 8;
  EXPECT_NE(CheckHeaderMatches(a, b, "p").message().find("shape"), std::string::npos);
}

// The shares of every server tile its fused batch, and every query row of
// every worker's documents is sent to exactly one server, with its prefix.
TEST(WireFormatTest, AttentionCommunicatorIdsDifferPerEpoch) {
  EXPECT_EQ(AttentionCommunicatorId("job-3", 0), "job-3/attn");
  EXPECT_EQ(AttentionCommunicatorId("job-3", 1), "job-3/attn/1");
  EXPECT_NE(AttentionCommunicatorId("job-3", 1), AttentionCommunicatorId("job-3", 2));
}

TEST(MicroBatchPlanTest, SharesTileBatchesAndCoverEveryQueryOnce) {
  std::mt19937 rng(7);
  const kernels::AttentionShape shape{4, 2, 8, 0.35f};
  for (PlannerKind kind : {PlannerKind::kCorescape, PlannerKind::kDistcaGreedy}) {
    for (int trial = 0; trial < 30; ++trial) {
      const int workers = 1 + trial % 3, servers = 1 + trial % 4;
      std::vector<std::vector<int64_t>> documents(workers);
      std::vector<std::vector<int64_t>> rows(workers);
      for (int w = 0; w < workers; ++w) {
        int64_t row = 0;
        const int n = static_cast<int>(rng() % 6);
        for (int d = 0; d < n; ++d) {
          const int64_t length = 1 + rng() % (d == 0 ? 300 : 40);
          documents[w].push_back(length);
          rows[w].push_back(row);
          row += length;
        }
      }
      PlanOptions options;
      options.servers = servers;
      options.tolerance = 0.0;
      options.planner = kind;
      auto plan = PlanMicroBatch(documents, shape, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (int w = 0; w < workers; ++w) {
        int64_t total = 0;
        for (int64_t length : documents[w]) total += length;
        std::vector<int> covered(total, 0);
        for (int s = 0; s < servers; ++s) {
          for (const RowRange& r : WorkerQueryRows(*plan, s, w, rows[w])) {
            for (int64_t i = r.row; i < r.row + r.count; ++i) ++covered[i];
          }
          int64_t q = 0, kv = 0;
          for (const RowRange& r : WorkerQueryRows(*plan, s, w, rows[w])) q += r.count;
          for (const RowRange& r : WorkerKvRows(*plan, s, w, rows[w])) kv += r.count;
          EXPECT_EQ(q, plan->shares[s][w].q_rows);
          EXPECT_EQ(kv, plan->shares[s][w].kv_rows);
        }
        for (int64_t i = 0; i < total; ++i) ASSERT_EQ(covered[i], 1) << "row " << i;
      }
    }
  }
}

TEST(MicroBatchPlanTest, GatherScatterRoundTrip) {
  std::vector<float> buffer(20);
  for (int i = 0; i < 20; ++i) buffer[i] = static_cast<float>(i);
  const std::vector<RowRange> ranges = {{3, 2}, {0, 1}};  // width 2
  std::vector<float> packed(6);
  EXPECT_EQ(GatherRows(buffer.data(), 2, ranges, packed.data()), packed.data() + 6);
  EXPECT_EQ(packed, (std::vector<float>{6, 7, 8, 9, 0, 1}));
  std::vector<float> out(20, 1.0f);
  ScatterRows(packed.data(), 2, ranges, out.data(), /*accumulate=*/true);
  EXPECT_EQ(out[6], 7.0f);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[2], 1.0f);
  ScatterRows(packed.data(), 2, ranges, out.data(), /*accumulate=*/false);
  EXPECT_EQ(out[6], 6.0f);
}

}  // namespace
}  // namespace corescape::attention
