#include "scheduler/mask_epochs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/job/job_spec.h"
#include "runtime/model/parameter_layout.h"
#include "runtime/optim/scape_optimizer.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::scheduler {

absl::StatusOr<v1::MaskEpochCommand> NextMaskEpoch(const v1::Job& job, int world_size) {
  const v1::JobSpec& spec = job.spec();
  if (!job::UsesMaskEpochs(spec.optimizer().name())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.job_id(), " uses optimizer '", spec.optimizer().name(), "': no mask epochs"));
  }
  auto model = job::ModelConfigFromSpec(spec.model());
  if (!model.ok()) return model.status();
  const model::ParameterLayout layout(*model);
  const int64_t parameters = layout.total_size();
  auto scape = job::ScapeConfigFromSpec(spec.optimizer());
  if (!scape.ok()) return scape.status();
  // Whole tensors per rank for per-tensor masks, else the balanced cut.
  auto partition = optim::ScapePartition(*scape, layout.TensorBounds(), world_size);
  if (!partition.ok()) return partition.status();

  v1::MaskEpochCommand epoch;
  epoch.set_job_id(job.job_id());
  epoch.set_generation(job.generation());
  epoch.set_epoch(job.mask_epoch() + 1);
  epoch.set_first_step(std::max<int64_t>(0, job.progress().checkpoint_step()));
  for (int64_t bound : partition->bounds()) epoch.add_partition_bounds(bound);
  epoch.set_world_size(world_size);
  epoch.set_parameter_count(parameters);
  epoch.set_residual_sync_period(std::max<int64_t>(0, spec.checkpoint().interval_steps()));
  // Resuming under another membership: the masks in the checkpoint were cut
  // for the old map, so the first step synchronizes everything.
  if (job.mask_epoch_world_size() != 0 && job.mask_epoch_world_size() != world_size &&
      epoch.first_step() > 0) {
    epoch.add_forced_dense_steps(epoch.first_step());
  }
  return epoch;
}

}  // namespace corescape::scheduler
