#include "runtime/base/printable_text.h"

#include "gtest/gtest.h"

namespace corescape {
namespace {

TEST(PrintableTextTest, PlainAndInternationalTextIsSafe) {
  EXPECT_EQ(FirstUnsafeCharacter(""), std::nullopt);
  EXPECT_EQ(FirstUnsafeCharacter("tiny-fortunes 2 (run b)"), std::nullopt);
  EXPECT_EQ(FirstUnsafeCharacter("Zürich – 東京 🚀 שלום"), std::nullopt);
  EXPECT_EQ(EscapeUnsafeCharacters("Zürich – 東京"), "Zürich – 東京");
}

TEST(PrintableTextTest, NamesTheFirstUnsafeCharacter) {
  EXPECT_EQ(FirstUnsafeCharacter(std::string("a\0b", 3)), "control character U+0000 at byte 1");
  EXPECT_EQ(FirstUnsafeCharacter("a\nb"), "control character U+000A at byte 1");
  EXPECT_EQ(FirstUnsafeCharacter("\x1b[31mred"), "control character U+001B at byte 0");
  EXPECT_EQ(FirstUnsafeCharacter("a\x7f"), "control character U+007F at byte 1");
  EXPECT_EQ(FirstUnsafeCharacter("a\xc2\x9b" "31m"), "control character U+009B at byte 1");
  EXPECT_EQ(FirstUnsafeCharacter("ab\xe2\x80\xae" "cba"),
            "bidirectional control U+202E at byte 2");
  EXPECT_EQ(FirstUnsafeCharacter("\xe2\x80\xaa"), "bidirectional control U+202A at byte 0");
  EXPECT_EQ(FirstUnsafeCharacter("\xe2\x81\xa6x"), "bidirectional control U+2066 at byte 0");
  EXPECT_EQ(FirstUnsafeCharacter("\xe2\x81\xa9"), "bidirectional control U+2069 at byte 0");
  EXPECT_EQ(FirstUnsafeCharacter("ok\xff"), "byte 0xff at byte 2 is not UTF-8");
  EXPECT_EQ(FirstUnsafeCharacter("\xc0\x8a"), "byte 0xc0 at byte 0 is not UTF-8");  // overlong
  EXPECT_EQ(FirstUnsafeCharacter("\xe2\x80"), "byte 0xe2 at byte 0 is not UTF-8");  // cut short
}

TEST(PrintableTextTest, EscapesWhatATerminalWouldObey) {
  EXPECT_EQ(EscapeUnsafeCharacters("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(EscapeUnsafeCharacters("job\nFAKE   SUCCEEDED"), "job\\nFAKE   SUCCEEDED");
  EXPECT_EQ(EscapeUnsafeCharacters(std::string("a\0\r\t", 4)), "a\\x00\\r\\t");
  EXPECT_EQ(EscapeUnsafeCharacters("ab\xe2\x80\xae" "cba"), "ab\\u202ecba");
  EXPECT_EQ(EscapeUnsafeCharacters("\xc2\x9b"), "\\x9b");
  EXPECT_EQ(EscapeUnsafeCharacters("bad\xff"), "bad\\xff");
  // A backslash is escaped too, so a stored "\x1b" cannot pass for an escape.
  EXPECT_EQ(EscapeUnsafeCharacters("a\\x1b"), "a\\\\x1b");
  // Whatever comes out is safe itself.
  const std::string hostile("\x1b\n\xe2\x81\xa7\xff\xc2\x85\0", 9);
  EXPECT_EQ(FirstUnsafeCharacter(EscapeUnsafeCharacters(hostile)), std::nullopt);
}

}  // namespace
}  // namespace corescape
