#ifndef CORESCAPE_SCHEDULER_LIST_PAGES_H_
#define CORESCAPE_SCHEDULER_LIST_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::scheduler {

// Paged listings (ListJobs, ListNodes). A page token is the sort position of
// the last item returned, so items inserted before it (newer jobs, names
// sorting earlier) never shift or repeat what later pages hold.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
// Items per response stay under this many bytes: half of gRPC's default
// 4 MiB receive limit, whatever the page size.
inline constexpr size_t kMaxPageBytes = size_t{2} << 20;
inline constexpr size_t kMaxPageTokenBytes = 1024;

// page_size as requested: 0 means kDefaultPageSize; INVALID_ARGUMENT naming
// the field outside [0, kMaxPageSize].
absl::StatusOr<int> ResolvePageSize(int32_t requested);

// Opaque to clients: the listing's name and the position, web-safe base64.
std::string EncodePageToken(absl::string_view listing, absl::string_view position);
// The position in `token` (empty for an empty token: the first page);
// INVALID_ARGUMENT naming page_token for anything not made by
// EncodePageToken for `listing`.
absl::StatusOr<std::string> DecodePageToken(absl::string_view listing,
                                            absl::string_view token);

template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // empty: this was the last page
};

// The page of `sorted` that starts at the first item `after_cursor` holds
// for (false for every item before the cursor, true from it on): at most
// `page_size` items and kMaxPageBytes of `byte_size`, at least one.
// `position` gives the next token's position of the last item taken.
template <typename T>
Page<T> TakePage(std::vector<T> sorted, int page_size, absl::string_view listing,
                 const std::function<bool(const T&)>& after_cursor,
                 const std::function<std::string(const T&)>& position,
                 const std::function<size_t(const T&)>& byte_size) {
  Page<T> page;
  size_t begin = 0;
  while (begin < sorted.size() && !after_cursor(sorted[begin])) ++begin;
  size_t bytes = 0;
  size_t end = begin;
  while (end < sorted.size() && static_cast<int>(end - begin) < page_size) {
    bytes += byte_size(sorted[end]);
    if (end > begin && bytes > kMaxPageBytes) break;
    ++end;
  }
  for (size_t i = begin; i < end; ++i) page.items.push_back(std::move(sorted[i]));
  if (end < sorted.size() && !page.items.empty()) {
    page.next_page_token = EncodePageToken(listing, position(page.items.back()));
  }
  return page;
}

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_LIST_PAGES_H_
