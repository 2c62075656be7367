#ifndef CORESCAPE_SCHEDULER_NODE_LISTING_H_
#define CORESCAPE_SCHEDULER_NODE_LISTING_H_

#include "absl/status/statusor.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/operator.pb.h"
#include "scheduler/list_pages.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {

// One page of the registry's nodes (by name) that match the request's role
// and states. Expects a request that passed ValidateListNodesRequest; errors
// name page_size or page_token.
absl::StatusOr<Page<v1::NodeInfo>> ListNodesPage(const NodeRegistry& registry,
                                                 const v1::ListNodesRequest& request);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_NODE_LISTING_H_
