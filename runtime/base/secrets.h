#ifndef CORESCAPE_RUNTIME_BASE_SECRETS_H_
#define CORESCAPE_RUNTIME_BASE_SECRETS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape {

// `count` bytes from the kernel's CSPRNG (getrandom(2)); fails only if the
// kernel refuses (never falls back to a weaker source).
absl::StatusOr<std::string> SecureRandomBytes(size_t count);

// HMAC-SHA256(key, message): 32 raw bytes (OpenSSL).
std::string HmacSha256(absl::string_view key, absl::string_view message);

// A fresh 256-bit secret as 64 lowercase hex digits.
absl::StatusOr<std::string> NewHexSecret();

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_SECRETS_H_
