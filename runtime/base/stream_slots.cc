#include "runtime/base/stream_slots.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace corescape {

StreamSlots::StreamSlots(std::string what, std::string flag, int capacity)
    : what_(std::move(what)), flag_(std::move(flag)), capacity_(capacity) {}

StreamSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release();
}

absl::StatusOr<StreamSlots::Slot> StreamSlots::Acquire() {
  absl::MutexLock lock(&mu_);
  if (in_use_ >= capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(capacity_, " concurrent ", what_, " are open, the most this server takes (",
                     flag_, "); retry later"));
  }
  ++in_use_;
  return Slot(this);
}

absl::StatusOr<StreamSlots::Slot> StreamSlots::AcquireFrom(StreamSlots* slots) {
  if (slots == nullptr) return Slot(nullptr);
  return slots->Acquire();
}

int StreamSlots::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

void StreamSlots::Release() {
  absl::MutexLock lock(&mu_);
  --in_use_;
}

}  // namespace corescape
