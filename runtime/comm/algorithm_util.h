#ifndef CORESCAPE_RUNTIME_COMM_ALGORITHM_UTIL_H_
#define CORESCAPE_RUNTIME_COMM_ALGORITHM_UTIL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/message_channel.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {

// Message indices available to one operation.
inline constexpr int64_t kMessageIndexLimit = int64_t{kMaxMessageIndex} + 1;

// Appends a started message to `ids`, or returns its error.
inline absl::Status Track(absl::StatusOr<MessageChannel::MessageId> id,
                          std::vector<MessageChannel::MessageId>& ids) {
  if (!id.ok()) return id.status();
  ids.push_back(*id);
  return absl::OkStatus();
}

inline absl::Status WaitAll(MessageChannel& channel,
                            const std::vector<MessageChannel::MessageId>& ids) {
  for (MessageChannel::MessageId id : ids) {
    if (absl::Status s = channel.Wait(id); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_ALGORITHM_UTIL_H_
