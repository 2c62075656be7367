#include "runtime/optim/scape_host_ages.h"

#include <algorithm>

#include "runtime/optim/scape_catch_up.h"

namespace corescape::optim {

void ScapeHostAges::Settle() {
  if (owed_step_ < 0) return;
  if (owed_mask_ == nullptr) {
    std::fill(last_sync_.begin(), last_sync_.end(), owed_step_);
  } else {
    for (int64_t j : *owed_mask_) last_sync_[j] = owed_step_;
  }
  owed_step_ = -1;
}

absl::Status ScapeHostAges::Receive(const GlobalMask& mask, bool windows) {
  Settle();
  received_.clear();
  if (!windows) return absl::OkStatus();
  return CatchUpRule::Windows(mask.step, &mask.indices, last_sync_, received_);
}

absl::Status ScapeHostAges::UpdateWindows(int64_t step, const std::vector<int64_t>* mask,
                                          bool received, std::vector<int32_t>& windows) {
  const size_t count = mask != nullptr ? mask->size() : last_sync_.size();
  if (mask != nullptr && received && received_.size() == count) {
    windows.swap(received_);
  } else if (absl::Status s = CatchUpRule::Windows(step, mask, last_sync_, windows); !s.ok()) {
    return s;
  }
  received_.clear();
  Owe(step, mask);
  return absl::OkStatus();
}

}  // namespace corescape::optim
