#include "runtime/device/device.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace corescape::device {
namespace {

TEST(ParseDevice, AcceptsCpuCudaAndOrdinals) {
  EXPECT_EQ(*ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ParseDevice("cuda"), Device::Cuda(0));
  EXPECT_EQ(*ParseDevice("cuda:0"), Device::Cuda(0));
  EXPECT_EQ(*ParseDevice("cuda:7"), Device::Cuda(7));
  EXPECT_EQ(*ParseDevice("cuda:255"), Device::Cuda(255));
}

TEST(ParseDevice, RoundTripsThroughToString) {
  for (const Device& d : {Device::Cpu(), Device::Cuda(0), Device::Cuda(3)}) {
    auto parsed = ParseDevice(d.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(Device::Cuda(3).ToString(), "cuda:3");
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
}

// Each bad string fails with INVALID_ARGUMENT and a message naming the
// problem.
TEST(ParseDevice, RefusesBadStringsNamingTheProblem) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "empty"},
      {"gpu", "unknown kind"},
      {"CUDA:0", "unknown kind"},
      {"cpu:0", "cpu takes no ordinal"},
      {"cuda:", "must be a number"},
      {"cuda:-1", "must be a number"},
      {"cuda:+1", "must be a number"},
      {"cuda: 1", "must be a number"},
      {"cuda:1x", "must be a number"},
      {"cuda:0:1", "must be a number"},
      {"cuda:256", "above 255"},
      {"cuda:99999999999", "must be a number"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseDevice(c.text);
    ASSERT_FALSE(parsed.ok()) << "'" << c.text << "' parsed as " << parsed->ToString();
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << "'" << c.text << "': " << parsed.status();
  }
}

TEST(ParseDevice, QuotesUnprintableInputEscaped) {
  auto parsed = ParseDevice(std::string("cu\0da\n", 6));
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << parsed.status();
}

}  // namespace
}  // namespace corescape::device
