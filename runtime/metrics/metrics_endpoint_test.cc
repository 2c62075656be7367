#include "runtime/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"

namespace corescape::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A plain HTTP/1.0 GET over a socket: the response, headers and body.
std::string HttpGet(const std::string& address, const std::string& path) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(parts.back(), &port));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(MetricNameTest, Prefixes) { EXPECT_EQ(MetricName("jobs"), "corescape_jobs"); }

TEST(MetricsEndpointTest, ServesRegistryCollectorsAndProcessMetrics) {
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", "test-daemon");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_THAT((*endpoint)->bound_address(), Not(HasSubstr(":0")));
  auto& family = prometheus::BuildCounter()
                     .Name(MetricName("test_events_total"))
                     .Help("events")
                     .Register((*endpoint)->registry());
  family.Add({{"kind", "a"}}).Increment(3);
  int value = 7;
  (*endpoint)->AddCollector([&value]() {
    std::vector<prometheus::MetricFamily> families;
    families.push_back(FamilyBuilder("test_value", "a value read at scrape time")
                           .Add({{"name", "x"}}, value)
                           .Build());
    return families;
  });
  std::string body = HttpGet((*endpoint)->bound_address(), "/metrics");
  EXPECT_THAT(body, HasSubstr("200 OK"));
  EXPECT_THAT(body, HasSubstr("corescape_test_events_total{kind=\"a\"} 3"));
  EXPECT_THAT(body, HasSubstr("corescape_test_value{name=\"x\"} 7"));
  EXPECT_THAT(body, HasSubstr("corescape_build_info{daemon=\"test-daemon\""));
  EXPECT_THAT(body, HasSubstr("corescape_process_resident_memory_bytes "));
  EXPECT_THAT(body, HasSubstr("corescape_process_start_time_seconds "));
  value = 9;  // read again at the next scrape, not copied
  EXPECT_THAT(HttpGet((*endpoint)->bound_address(), "/metrics"),
              HasSubstr("corescape_test_value{name=\"x\"} 9"));
  EXPECT_THAT(HttpGet((*endpoint)->bound_address(), "/nothing-here"), HasSubstr("404"));
}

TEST(MetricsEndpointTest, RefusesBadAddresses) {
  EXPECT_FALSE(MetricsEndpoint::Start("not an address", "d").ok());
  EXPECT_FALSE(MetricsEndpoint::Start("127.0.0.1:99999", "d").ok());
}

TEST(MetricsEndpointTest, RefusesAPortInUse) {
  auto first = MetricsEndpoint::Start("127.0.0.1:0", "d");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsEndpoint::Start((*first)->bound_address(), "d");
  EXPECT_FALSE(second.ok());
}

}  // namespace
}  // namespace corescape::metrics
