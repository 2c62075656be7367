#include "scheduler/node_listing.h"

#include <algorithm>
#include <string>
#include <vector>

namespace corescape::scheduler {

absl::StatusOr<Page<v1::NodeInfo>> ListNodesPage(
    const NodeRegistry& registry, const v1::ListNodesRequest& request,
    const std::map<std::string, std::string>& jobs_by_node) {
  auto page_size = ResolvePageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  // The position is the previous page's last name.
  auto after = DecodePageToken("nodes", request.page_token());
  if (!after.ok()) return after.status();
  std::vector<v1::NodeInfo> matching;
  for (v1::NodeInfo& node : registry.List()) {
    if (request.role() != v1::NODE_ROLE_UNSPECIFIED && node.role() != request.role()) continue;
    if (!request.states().empty() &&
        std::find(request.states().begin(), request.states().end(), node.state()) ==
            request.states().end()) {
      continue;
    }
    if (auto job = jobs_by_node.find(node.name()); job != jobs_by_node.end()) {
      node.set_current_job_id(job->second);
    }
    matching.push_back(std::move(node));
  }
  return TakePage<v1::NodeInfo>(
      std::move(matching), *page_size, "nodes",
      [&](const v1::NodeInfo& node) { return after->empty() || node.name() > *after; },
      [](const v1::NodeInfo& node) { return node.name(); },
      [](const v1::NodeInfo& node) { return node.ByteSizeLong(); });
}

}  // namespace corescape::scheduler
