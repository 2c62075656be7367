#ifndef CORESCAPE_RUNTIME_JOB_TRAINER_CONFIG_H_
#define CORESCAPE_RUNTIME_JOB_TRAINER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"
#include "runtime/job/job_spec.h"
#include "runtime/train/data_parallel_trainer.h"

namespace corescape::job {

// What one rank of a job trains with: the resolved spec mapped field by
// field onto the trainer, nothing defaulted or checked again.
// Rank-independent; the threads, the device, the attention executor and the
// scheduler's mask epoch are the caller's.
absl::StatusOr<train::TrainerConfig> TrainerConfigFromSpec(const ResolvedJobSpec& resolved);

// The worker's: the assignment's spec (resolved by the scheduler, checked
// again here: CheckResolvedJobSpec refuses a malformed one naming the
// field), its gradient accumulation (raised when elastic) and, for jobs
// that follow mask epochs, its mask epoch (INVALID_ARGUMENT without a valid
// one: the ranks could disagree on the partition).
absl::StatusOr<train::TrainerConfig> TrainerConfigForAssignment(
    const v1::JobAssignment& assignment, int threads);

// Every setting of `config` that decides what is trained, as indented JSON
// with sorted keys (the attention executor and threads left out): what the
// example jobs' golden files hold.
std::string DescribeTrainerConfig(const train::TrainerConfig& config);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_TRAINER_CONFIG_H_
