#include "runtime/comm/handle_set.h"

namespace corescape::comm {

absl::Status Post(HandleSet& handles, absl::StatusOr<std::unique_ptr<CollectiveHandle>> handle) {
  if (!handle.ok()) return handle.status();
  handles.push_back(*std::move(handle));
  return absl::OkStatus();
}

absl::Status WaitAll(HandleSet& handles) {
  absl::Status first;
  for (auto& handle : handles) {
    if (handle == nullptr) continue;
    absl::Status s = handle->Wait();
    if (first.ok() && !s.ok()) first = s;
  }
  handles.clear();
  return first;
}

}  // namespace corescape::comm
