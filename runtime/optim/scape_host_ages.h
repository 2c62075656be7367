#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_AGES_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_AGES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// The step each coordinate was last synchronized at (−1: never), kept on
// the host by a store whose update cannot set them beside it (the host
// store; a device store whose residual is offloaded to the host). An
// update's ages are written a step late, a strided pass over the mask's
// entries: Owe records them, and the next exchange's thread writes them
// (Receive) beside the next forward/backward, or the step's end where no
// exchange follows (Settle). The catch-up rule's windows of a received
// mask are worked out on that thread too.
class ScapeHostAges {
 public:
  // `last_sync` (N entries) outlives this.
  explicit ScapeHostAges(std::vector<int64_t>* last_sync) : last_sync_(*last_sync) {}

  std::vector<int64_t>& last_sync() { return last_sync_; }

  // On the exchange's thread, for the mask of step mask.step: the owed
  // ages written, then (`windows`) the mask's windows from them.
  absl::Status Receive(const GlobalMask& mask, bool windows);
  // The windows received with the mask (empty: none).
  const std::vector<int32_t>& received_windows() const { return received_; }
  // Writes the owed ages now.
  void Settle();
  // The update at `step` over `mask` (null: every coordinate): its
  // windows into `windows` (the received ones where `mask` is the received
  // mask), and its ages owed. `mask` lives until they are written.
  absl::Status UpdateWindows(int64_t step, const std::vector<int64_t>* mask, bool received,
                             std::vector<int32_t>& windows);
  // The ages of the update at `step` over `mask` (null: every coordinate)
  // owed; `mask` lives until they are written.
  void Owe(int64_t step, const std::vector<int64_t>* mask) {
    owed_step_ = step;
    owed_mask_ = mask;
  }
  // The ages replaced (a restore): nothing owed or received.
  void Forget() {
    owed_step_ = -1;
    received_.clear();
  }

 private:
  std::vector<int64_t>& last_sync_;
  // Ages owed: last_sync_[j] = owed_step_ at *owed_mask_'s entries (every j
  // where null); −1: none.
  int64_t owed_step_ = -1;
  const std::vector<int64_t>* owed_mask_ = nullptr;
  std::vector<int32_t> received_;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_AGES_H_
