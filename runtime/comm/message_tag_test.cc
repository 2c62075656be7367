#include "runtime/comm/message_tag.h"

#include <set>

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

TEST(MessageTagTest, CollectiveRoundTrip) {
  uint64_t tag = CollectiveTag(0xBEEF, 4095, CollectiveKind::kReduceScatter, 70000, 32767);
  absl::StatusOr<DecodedTag> d = DecodeTag(tag);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->key, 0xBEEF);
  EXPECT_EQ(d->source_rank, 4095);
  EXPECT_EQ(d->channel, TagChannel::kCollective);
  EXPECT_EQ(d->kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(d->sequence, 70000 % 65536);
  EXPECT_EQ(d->message_index, 32767u);
}

TEST(MessageTagTest, PointToPointAndControlRoundTrip) {
  absl::StatusOr<DecodedTag> p = DecodeTag(PointToPointTag(7, 3, 0xFFFFFFFFu));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->channel, TagChannel::kPointToPoint);
  EXPECT_EQ(p->source_rank, 3);
  EXPECT_EQ(p->user_tag, 0xFFFFFFFFu);
  absl::StatusOr<DecodedTag> c = DecodeTag(ControlTag(7, 9));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->channel, TagChannel::kControl);
  EXPECT_EQ(c->source_rank, 9);
}

TEST(MessageTagTest, FieldsNeverCollide) {
  // Every field change gives a different tag.
  std::set<uint64_t> tags;
  for (int rank : {0, 1, 4095}) {
    for (int kind = 0; kind < kNumCollectiveKinds; ++kind) {
      for (uint64_t seq : {0, 1, 65535}) {
        for (uint32_t index : {0u, 1u, 32767u}) {
          tags.insert(CollectiveTag(1, rank, static_cast<CollectiveKind>(kind), seq, index));
        }
      }
    }
    tags.insert(PointToPointTag(1, rank, 0));
    tags.insert(ControlTag(1, rank));
  }
  EXPECT_EQ(tags.size(), 3u * (6 * 3 * 3 + 2));
}

TEST(MessageTagTest, GenerationsWithin65536HaveDistinctKeys) {
  const uint64_t fp = Fingerprint64("job-1/secret");
  std::set<uint16_t> keys;
  for (uint64_t g = 1000; g < 1000 + 65536; ++g) keys.insert(CommunicatorKey(fp, g));
  EXPECT_EQ(keys.size(), 65536u);
  EXPECT_NE(CommunicatorKey(fp, 5), CommunicatorKey(fp, 4));
  EXPECT_NE(CommunicatorKey(Fingerprint64("job-1/other"), 5), CommunicatorKey(fp, 5));
}

TEST(MessageTagTest, RejectsMalformedTags) {
  EXPECT_FALSE(DecodeTag(uint64_t{3} << 34).ok());            // channel 3
  EXPECT_FALSE(DecodeTag((uint64_t{2} << 34) | 1).ok());       // control with payload
  EXPECT_FALSE(DecodeTag((uint64_t{1} << 34) | (uint64_t{1} << 33)).ok());  // p2p > 32 bits
  EXPECT_FALSE(DecodeTag(uint64_t{7} << 31).ok());             // kind 7
}

TEST(MessageTagTest, FingerprintIsStable) {
  // FNV-1a of "a": pinned so the value cannot drift between builds.
  EXPECT_EQ(Fingerprint64("a"), 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace corescape::comm
