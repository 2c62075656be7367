#include "runtime/base/server_keepalive.h"

#include "grpc/grpc.h"

namespace corescape {

void ApplyServerKeepalive(grpc::ServerBuilder& builder, const ServerKeepalive& keepalive) {
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(keepalive.time)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(keepalive.timeout)));
  // Idle node daemons and watchers hold streams with no call traffic: ping
  // them too.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(keepalive.min_client_ping_interval)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, keepalive.max_ping_strikes);
}

}  // namespace corescape
