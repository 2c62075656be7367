#ifndef CORESCAPE_RUNTIME_COMM_HANDLE_SET_H_
#define CORESCAPE_RUNTIME_COMM_HANDLE_SET_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"

namespace corescape::comm {

// Asynchronous point-to-point operations posted together (e.g. one exchange
// with every peer), waited for together.
using HandleSet = std::vector<std::unique_ptr<CollectiveHandle>>;

// Adds a just-posted operation to `handles`, or returns why posting failed.
absl::Status Post(HandleSet& handles, absl::StatusOr<std::unique_ptr<CollectiveHandle>> handle);

// Waits for every handle (so no buffer is still in use), empties the set
// and returns the first error. Null entries are skipped.
absl::Status WaitAll(HandleSet& handles);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HANDLE_SET_H_
