#include "runtime/base/host_port.h"

#include "gtest/gtest.h"

namespace corescape {
namespace {

TEST(HostPortTest, ParsesHostnameAndIpv4) {
  auto parsed = ParseHostPort("node-1.cluster:7070");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->host, "node-1.cluster");
  EXPECT_EQ(parsed->port, 7070);
  EXPECT_EQ(parsed->ToString(), "node-1.cluster:7070");
  EXPECT_TRUE(ParseHostPort("127.0.0.1:1").ok());
}

TEST(HostPortTest, ParsesBracketedIpv6) {
  auto parsed = ParseHostPort("[::1]:50051");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->host, "::1");
  EXPECT_EQ(parsed->ToString(), "[::1]:50051");
}

TEST(HostPortTest, RejectsMalformedAddresses) {
  for (const char* bad : {"", "localhost", ":80", "host:", "host:0",
                          "host:65536", "host:-1", "host:12ab", "ho st:80",
                          "::1:80", "[::1]80", "[::1", "a/b:80"}) {
    auto parsed = ParseHostPort(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HostPortTest, PortZeroAllowedWhenAsked) {
  EXPECT_FALSE(ParseHostPort("127.0.0.1:0").ok());
  EXPECT_TRUE(ParseHostPort("127.0.0.1:0", /*min_port=*/0).ok());
}

}  // namespace
}  // namespace corescape
