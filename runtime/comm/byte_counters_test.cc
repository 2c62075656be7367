#include "runtime/comm/byte_counters.h"

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

TEST(ByteCountersTest, TotalsAndArithmetic) {
  ByteCounters a;
  a[CollectiveKind::kAllReduce] = {100, 90, 1};
  a[CollectiveKind::kPointToPoint] = {7, 0, 2};
  EXPECT_EQ(a.total_sent(), 107);
  EXPECT_EQ(a.total_received(), 90);
  EXPECT_EQ(a.total_operations(), 3);
  ByteCounters b = a;
  b[CollectiveKind::kAllGather].bytes_received = 5;
  ByteCounters delta = b - a;
  EXPECT_EQ(delta.total_sent(), 0);
  EXPECT_EQ(delta.total_received(), 5);
  EXPECT_EQ(a + delta, b);
  EXPECT_EQ(delta.DebugString(), "all_gather: sent 0 B, received 5 B in 0 ops");
  EXPECT_EQ(ByteCounters().DebugString(), "no traffic");
}

}  // namespace
}  // namespace corescape::comm
