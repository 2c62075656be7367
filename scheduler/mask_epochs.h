#ifndef CORESCAPE_SCHEDULER_MASK_EPOCHS_H_
#define CORESCAPE_SCHEDULER_MASK_EPOCHS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"

namespace corescape::scheduler {

// The SCAPE mask epoch a (re)assignment of `job` to `world_size` ranks
// starts: the next epoch number, the step the ranks resume at, the partition
// map for this membership (the element-balanced cut of the model's flat
// parameter buffer), the dense steps (every checkpoint step, so checkpoints
// hold no residuals), and a forced dense refresh at the first step when the
// partition map changed (the masks of the old map are void). `job` is the
// record before the assignment: its mask_epoch and mask_epoch_world_size
// describe the previous epoch (0: none), its generation the new assignment.
absl::StatusOr<v1::MaskEpochCommand> NextMaskEpoch(const v1::Job& job, int world_size);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_MASK_EPOCHS_H_
