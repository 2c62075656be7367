#include "runtime/base/secrets.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace corescape {

absl::StatusOr<std::string> SecureRandomBytes(size_t count) {
  std::string bytes(count, '\0');
  size_t filled = 0;
  while (filled < count) {
    const ssize_t got = getrandom(bytes.data() + filled, count - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(got);
  }
  return bytes;
}

std::string HmacSha256(absl::string_view key, absl::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

absl::StatusOr<std::string> NewHexSecret() {
  absl::StatusOr<std::string> bytes = SecureRandomBytes(32);
  if (!bytes.ok()) return bytes.status();
  return absl::BytesToHexString(*bytes);
}

}  // namespace corescape
