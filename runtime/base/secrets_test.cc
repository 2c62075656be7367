#include "runtime/base/secrets.h"

#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

// RFC 4231, test cases 1 and 2.
TEST(SecretsTest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(absl::BytesToHexString(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(absl::BytesToHexString(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(SecretsTest, RandomSecretsDifferAndHaveTheRightShape) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<std::string> secret = NewHexSecret();
    ASSERT_TRUE(secret.ok()) << secret.status();
    ASSERT_EQ(secret->size(), 64u);
    EXPECT_EQ(secret->find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(*secret);
  }
  EXPECT_EQ(seen.size(), 64u);
  absl::StatusOr<std::string> big = SecureRandomBytes(100000);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->size(), 100000u);
}

}  // namespace
}  // namespace corescape
