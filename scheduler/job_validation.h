#ifndef CORESCAPE_SCHEDULER_JOB_VALIDATION_H_
#define CORESCAPE_SCHEDULER_JOB_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "corescape/v1/job.pb.h"

namespace corescape::scheduler {

// Optimizers whose masks follow the scheduler's mask epochs (SCAPE and its
// per-rank global top-k baseline).
bool UsesMaskEpochs(const std::string& optimizer);

// The most workers one job may ask for: a typo guard ("more workers than can
// ever exist"), far above anything this scheduler has been run with.
inline constexpr int kMaxJobWorkers = 1024;

// Fills defaults the user may leave out (gradient accumulation 1, optimizer
// hyper-parameters, attention mode COLOCATED, ...).
void ApplyJobDefaults(v1::JobSpec& spec);

// INVALID_ARGUMENT naming the field ("spec.data.micro_batch_size: must be
// positive"). Checks that data paths exist on the scheduler's filesystem.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_JOB_VALIDATION_H_
