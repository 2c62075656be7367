#ifndef CORESCAPE_RUNTIME_BASE_SERVER_KEEPALIVE_H_
#define CORESCAPE_RUNTIME_BASE_SERVER_KEEPALIVE_H_

#include "absl/time/time.h"
#include "grpcpp/server_builder.h"

namespace corescape {

struct ServerKeepalive {
  // The server pings a connection idle this long, and drops it when the
  // ping is not answered within `timeout`: a peer that vanished (power
  // loss, a cut cable) frees its streams and threads instead of holding
  // them until TCP gives up hours later.
  absl::Duration time = absl::Seconds(30);
  absl::Duration timeout = absl::Seconds(10);
  // Clients may ping no more often than this; a client that pings faster
  // gets GOAWAY after `max_ping_strikes` such pings (a ping flood costs the
  // server nothing then).
  absl::Duration min_client_ping_interval = absl::Seconds(10);
  int max_ping_strikes = 2;
};

// The keepalive and HTTP/2 ping policy on every connection of `builder`.
void ApplyServerKeepalive(grpc::ServerBuilder& builder, const ServerKeepalive& keepalive = {});

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_SERVER_KEEPALIVE_H_
