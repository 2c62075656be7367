#ifndef CORESCAPE_DAEMON_NODE_AGENT_H_
#define CORESCAPE_DAEMON_NODE_AGENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "corescape/v1/node.grpc.pb.h"
#include "runtime/security/transport_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace corescape {

struct NodeAgentOptions {
  std::string scheduler_address;
  // How the channel to the scheduler is secured (the node's certificate).
  security::TransportSecurity security = security::TransportSecurity::Insecure();
  // Sent as is on every (re-)registration.
  v1::RegisterRequest registration;
  absl::Duration rpc_timeout = absl::Seconds(5);
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // If set, sees every message handed to Send (metrics); must not block.
  std::function<void(const v1::NodeMessage&)> on_send;
  // If set, called on the session's reader thread after every lease grant
  // (the systemd watchdog ping: a node that stops renewing is restarted);
  // must not block.
  std::function<void()> on_lease_renewed;
};

// A daemon's membership in the cluster: registers with the scheduler, keeps
// the lease alive over the Session stream, hands pushed commands to the
// daemon, and recovers on its own: after a broken stream it reopens the
// session (the scheduler gives restarted nodes one lease to come back); if
// the scheduler refuses the incarnation it registers again, with
// exponential backoff while the scheduler is unreachable.
class NodeAgent {
 public:
  using CommandHandler = std::function<void(const v1::SchedulerCommand&)>;

  NodeAgent(NodeAgentOptions options, CommandHandler handler);
  ~NodeAgent();

  void Start();
  // Stops the session; with `deregister` tells the scheduler we left.
  void Stop(bool deregister);

  // Queues a message (a report) for the session. Dropped with a warning if
  // no session is up within the lease.
  void Send(v1::NodeMessage message);

  bool registered() const;
  // True while a session stream is open (reports can flow).
  bool session_open() const;
  uint64_t incarnation() const;
  // Blocks until registered or timeout; true if registered.
  bool WaitUntilRegistered(absl::Duration timeout) const;

 private:
  void Run();
  absl::Status RegisterOnce();
  // Runs one session until it ends; returns why it ended.
  absl::Status RunSession();
  void Backoff(absl::Duration& delay);

  const NodeAgentOptions options_;
  const CommandHandler handler_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::NodeService::Stub> stub_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  grpc::ClientContext* session_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<v1::NodeMessage> outbox_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_NODE_AGENT_H_
