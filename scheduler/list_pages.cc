#include "scheduler/list_pages.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace corescape::scheduler {
namespace {

constexpr char kTokenVersion[] = "v1";

}  // namespace

absl::StatusOr<int> ResolvePageSize(int32_t requested) {
  if (requested < 0 || requested > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", requested,
                                                   " is not in [0, ", kMaxPageSize, "]"));
  }
  return requested == 0 ? kDefaultPageSize : requested;
}

std::string EncodePageToken(absl::string_view listing, absl::string_view position) {
  return absl::WebSafeBase64Escape(absl::StrCat(kTokenVersion, ":", listing, ":", position));
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view listing,
                                            absl::string_view token) {
  if (token.empty()) return std::string();
  std::string decoded;
  const std::string prefix = absl::StrCat(kTokenVersion, ":", listing, ":");
  if (token.size() > kMaxPageTokenBytes || !absl::WebSafeBase64Unescape(token, &decoded) ||
      !absl::StartsWith(decoded, prefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: not a next_page_token of ", listing, "; start again without one"));
  }
  return decoded.substr(prefix.size());
}

}  // namespace corescape::scheduler
