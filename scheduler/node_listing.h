#ifndef CORESCAPE_SCHEDULER_NODE_LISTING_H_
#define CORESCAPE_SCHEDULER_NODE_LISTING_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/operator.pb.h"
#include "scheduler/list_pages.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {

// One page of the registry's nodes (by name) that match the request's role
// and states, each with current_job_id from `jobs_by_node` (the running job
// holding it: JobManager::RunningJobsByNode). Expects a request that passed
// ValidateListNodesRequest; errors name page_size or page_token.
absl::StatusOr<Page<v1::NodeInfo>> ListNodesPage(
    const NodeRegistry& registry, const v1::ListNodesRequest& request,
    const std::map<std::string, std::string>& jobs_by_node = {});

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_NODE_LISTING_H_
