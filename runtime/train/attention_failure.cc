#include "runtime/train/attention_failure.h"

#include "absl/strings/cord.h"

namespace corescape::train {
namespace {

// Marks the status; the message stays free for people.
constexpr char kDiscardedPayload[] = "type.corescape.dev/attention-step-discarded";

}  // namespace

absl::Status AttentionDiscardedError(absl::string_view what) {
  absl::Status status = absl::UnavailableError(what);
  status.SetPayload(kDiscardedPayload, absl::Cord("1"));
  return status;
}

bool IsDiscardedForAttention(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDiscardedPayload).has_value();
}

}  // namespace corescape::train
