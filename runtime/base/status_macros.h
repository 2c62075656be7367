#ifndef CORESCAPE_RUNTIME_BASE_STATUS_MACROS_H_
#define CORESCAPE_RUNTIME_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"

// Returns `expr`'s status from the enclosing function when it is an error:
// for long runs of fallible calls (a training step's kernels).
#define CORESCAPE_RETURN_IF_ERROR(expr)                                  \
  do {                                                                   \
    if (absl::Status corescape_status_ = (expr); !corescape_status_.ok()) \
      return corescape_status_;                                          \
  } while (0)

#endif  // CORESCAPE_RUNTIME_BASE_STATUS_MACROS_H_
