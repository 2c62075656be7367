#include "runtime/base/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace corescape {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 B.4 and the usual check value.
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, ExtendMatchesOneShotAtEverySplit) {
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = Crc32c(text);
  for (size_t split = 0; split <= text.size(); ++split) {
    uint32_t crc = Crc32c(text.data(), split);
    crc = Crc32cExtend(crc, text.data() + split, text.size() - split);
    EXPECT_EQ(crc, whole) << "split at " << split;
  }
}

}  // namespace
}  // namespace corescape
