#ifndef CORESCAPE_RUNTIME_COMM_UCX_STATUS_H_
#define CORESCAPE_RUNTIME_COMM_UCX_STATUS_H_

#include <ucs/type/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace corescape::comm {

// "<context>: <UCX's description>" with a status code that says what the
// caller can do: Unavailable for unreachable/reset peers, DeadlineExceeded
// for UCX timeouts, Cancelled, DataLoss for truncated messages, Internal
// otherwise.
absl::Status UcxError(ucs_status_t status, absl::string_view context);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_UCX_STATUS_H_
