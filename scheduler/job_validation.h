#ifndef CORESCAPE_SCHEDULER_JOB_VALIDATION_H_
#define CORESCAPE_SCHEDULER_JOB_VALIDATION_H_

// The scheduler accepts a job by applying the resolved spec's defaults and
// validating it (runtime/job/job_spec.h): the same values the worker and
// the CLI read.
#include "runtime/job/job_spec.h"

namespace corescape::scheduler {

using job::ApplyJobDefaults;
using job::kMaxJobWorkers;
using job::UsesMaskEpochs;
using job::ValidateJobSpec;

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_JOB_VALIDATION_H_
