#ifndef CORESCAPE_SCHEDULER_NODE_REGISTRY_H_
#define CORESCAPE_SCHEDULER_NODE_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/node.pb.h"
#include "runtime/base/clock.h"
#include "scheduler/event_log.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler {

struct NodeRegistryOptions {
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration heartbeat_interval = absl::Seconds(2);
  std::string scheduler_id;
};

// The scheduler's membership: who is registered, under which incarnation,
// and whose lease is current. Names are identities that survive restarts of
// the node and of the scheduler; each registration bumps the incarnation, so
// messages from a superseded process are refused (fencing).
//
// Leases: every renewal extends the lease to now + lease_ttl; ExpireLeases()
// turns nodes whose lease ran out into DEAD. After a scheduler restart, nodes
// that were live get one fresh lease to reconnect within.
//
// Every membership change is written to the StateStore before it is
// acknowledged; heartbeats are kept in memory only.
class NodeRegistry {
 public:
  NodeRegistry(const Clock* clock, StateStore* store, EventLog* events,
               NodeRegistryOptions options);

  absl::Status Load();

  // Expects a request that passed ValidateRegisterRequest.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  // One live session per (name, incarnation): ALREADY_EXISTS while another
  // is open (it keeps the commands), until CloseSession.
  absl::StatusOr<v1::LeaseGrant> OpenSession(const std::string& name,
                                             uint64_t incarnation);
  // The session OpenSession admitted has ended.
  void CloseSession(const std::string& name, uint64_t incarnation);
  absl::StatusOr<v1::LeaseGrant> Renew(const std::string& name,
                                       uint64_t incarnation);
  absl::Status Deregister(const std::string& name, uint64_t incarnation,
                          const std::string& reason);
  absl::StatusOr<v1::NodeInfo> Drain(const std::string& name,
                                     const std::string& reason);

  absl::StatusOr<v1::NodeInfo> Get(const std::string& name) const;
  std::vector<v1::NodeInfo> List() const;  // by name

  // Marks nodes with expired leases DEAD; returns their names. A DEAD the
  // store refused holds in memory and is written by a later call.
  std::vector<std::string> ExpireLeases();

  // Retention: forgets DEAD and DEREGISTERED nodes not heard from for
  // `retention`, deleted from the store first. The node numbering is kept
  // with them, so a name seen later gets a fresh node_id. Returns how many.
  int PruneDeparted(absl::Duration retention);

  // Queues a command for the node's current incarnation.
  absl::Status Push(const std::string& name, uint64_t incarnation,
                    const v1::SchedulerCommand& command);

  // Waits up to `timeout` for commands of (name, incarnation) and takes them.
  // FAILED_PRECONDITION once that incarnation is superseded or dead: its
  // session must end.
  absl::StatusOr<std::vector<v1::SchedulerCommand>> TakeCommands(
      const std::string& name, uint64_t incarnation, absl::Duration timeout);

  const NodeRegistryOptions& options() const { return options_; }

 private:
  struct NodeRecord {
    v1::NodeInfo info;
    bool awaiting_resume = false;  // loaded after a restart, no session yet
    bool session_open = false;     // a session of this incarnation is live
    std::deque<v1::SchedulerCommand> commands;
  };

  absl::Status Persist(const NodeRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<NodeRecord*> FindSession(const std::string& name,
                                          uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::LeaseGrant ExtendLease(NodeRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistUnrecordedDeaths() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool IsLive(v1::NodeState state) {
    return state == v1::ALIVE || state == v1::DRAINING;
  }

  const Clock* clock_;
  StateStore* store_;
  EventLog* events_;
  const NodeRegistryOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, NodeRecord> nodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_node_number_ ABSL_GUARDED_BY(mu_) = 1;
  // Names (and incarnations) marked DEAD that the store refused to record.
  std::map<std::string, uint64_t> unrecorded_deaths_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_NODE_REGISTRY_H_
