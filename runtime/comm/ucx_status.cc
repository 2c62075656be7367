#include "runtime/comm/ucx_status.h"

#include "absl/strings/str_cat.h"

namespace corescape::comm {

absl::Status UcxError(ucs_status_t status, absl::string_view context) {
  if (status == UCS_OK) return absl::OkStatus();
  std::string message = absl::StrCat(context, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    // UCX reports a dead peer as an endpoint timeout: the peer is gone, not slow.
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_BUSY:
      return absl::UnavailableError(message);
    case UCS_ERR_MESSAGE_TRUNCATED:
      return absl::DataLossError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace corescape::comm
