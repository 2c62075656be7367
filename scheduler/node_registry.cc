#include "scheduler/node_registry.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

namespace corescape::scheduler {
namespace {

constexpr char kNodeKind[] = "node";
constexpr char kMetaKind[] = "meta";
// Survives pruning the node that held the highest number.
constexpr char kNextNodeNumberKey[] = "next_node_number";

int64_t UnixMillis(absl::Time t) { return absl::ToUnixMillis(t); }

}  // namespace

NodeRegistry::NodeRegistry(const Clock* clock, StateStore* store,
                           EventLog* events, NodeRegistryOptions options)
    : clock_(clock), store_(store), events_(events), options_(std::move(options)) {}

absl::Status NodeRegistry::Persist(const NodeRecord& record) {
  absl::Status status =
      store_->Put(kNodeKind, record.info.name(), record.info.SerializeAsString());
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot record node '", record.info.name(),
                     "' durably: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status NodeRegistry::Load() {
  auto records = store_->LoadAll(kNodeKind);
  if (!records.ok()) return records.status();
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (const auto& [name, value] : *records) {
    NodeRecord record;
    if (!record.info.ParseFromString(value) || record.info.name() != name) {
      LOG(WARNING) << "skipping unreadable node record '" << name << "'";
      continue;
    }
    if (IsLive(record.info.state())) {
      // We cannot know whether it survived our downtime: give it one lease
      // to reconnect before declaring it dead.
      record.awaiting_resume = true;
      record.info.set_lease_expires_unix_ms(UnixMillis(now + options_.lease_ttl));
    }
    uint64_t number = 0;
    if (absl::SimpleAtoi(absl::StripPrefix(record.info.node_id(), "node-"), &number)) {
      next_node_number_ = std::max(next_node_number_, number + 1);
    }
    nodes_[name] = std::move(record);
  }
  auto meta = store_->LoadAll(kMetaKind);
  if (!meta.ok()) return meta.status();
  for (const auto& [key, value] : *meta) {
    uint64_t number = 0;
    if (key == kNextNodeNumberKey && absl::SimpleAtoi(value, &number)) {
      next_node_number_ = std::max(next_node_number_, number);
    }
  }
  LOG(INFO) << "restored " << nodes_.size() << " node records";
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterResponse> NodeRegistry::Register(
    const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  auto it = nodes_.find(request.name());
  const bool known = it != nodes_.end();
  if (known && IsLive(it->second.info.state()) &&
      it->second.info.host() != request.host() &&
      UnixMillis(now) < it->second.info.lease_expires_unix_ms()) {
    // Another machine claims a name whose holder is alive: refuse rather
    // than fence a healthy node. The same host re-registering is a restart.
    return absl::AlreadyExistsError(absl::StrCat(
        "name: '", request.name(), "' is held by a live node on host ",
        it->second.info.host(), " (pid ", it->second.info.pid(),
        "); choose another name or wait for its lease to expire"));
  }

  NodeRecord record;
  v1::NodeInfo& info = record.info;
  info.set_name(request.name());
  info.set_node_id(known ? it->second.info.node_id()
                         : absl::StrCat("node-", next_node_number_));
  info.set_role(request.role());
  // Draining is the operator's decision about the name: it survives restarts.
  info.set_state(known && it->second.info.state() == v1::DRAINING ? v1::DRAINING
                                                                  : v1::ALIVE);
  info.set_incarnation(known ? it->second.info.incarnation() + 1 : 1);
  info.set_host(request.host());
  info.set_pid(request.pid());
  info.set_grpc_address(request.grpc_address());
  info.set_data_address(request.data_address());
  *info.mutable_resources() = request.resources();
  info.set_registered_unix_ms(UnixMillis(now));
  info.set_last_heartbeat_unix_ms(UnixMillis(now));
  info.set_lease_expires_unix_ms(UnixMillis(now + options_.lease_ttl));
  info.set_version(request.version());
  info.set_instance_id(request.instance_id());

  if (absl::Status s = Persist(record); !s.ok()) return s;
  if (!known) ++next_node_number_;

  std::string message;
  v1::ClusterEvent::Kind kind = v1::ClusterEvent::NODE_REGISTERED;
  if (known) {
    kind = v1::ClusterEvent::NODE_REREGISTERED;
    message = absl::StrFormat(
        "%s incarnation %d on %s pid %d (previous incarnation %d was %s)",
        v1::NodeRole_Name(info.role()), info.incarnation(), info.host(),
        info.pid(), it->second.info.incarnation(),
        v1::NodeState_Name(it->second.info.state()));
  } else {
    message = absl::StrFormat("%s on %s pid %d at %s",
                              v1::NodeRole_Name(info.role()), info.host(),
                              info.pid(), info.grpc_address());
  }
  v1::RegisterResponse response;
  response.set_node_id(info.node_id());
  response.set_incarnation(info.incarnation());
  response.set_lease_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  response.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response.set_scheduler_id(options_.scheduler_id);

  // Replacing the record drops the old incarnation's queued commands and
  // ends its session (TakeCommands sees the new incarnation).
  nodes_[request.name()] = std::move(record);
  events_->Append(kind, request.name(), "", message);
  return response;
}

absl::StatusOr<NodeRegistry::NodeRecord*> NodeRegistry::FindSession(
    const std::string& name, uint64_t incarnation) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no node named '", name, "'; register first"));
  }
  NodeRecord& record = it->second;
  if (record.info.incarnation() != incarnation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "incarnation ", incarnation, " of '", name, "' was superseded by ",
        record.info.incarnation(), "; re-register"));
  }
  if (!IsLive(record.info.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", name, "' is ", v1::NodeState_Name(record.info.state()),
                     "; re-register"));
  }
  return &record;
}

v1::LeaseGrant NodeRegistry::ExtendLease(NodeRecord& record) {
  const absl::Time now = clock_->Now();
  record.info.set_last_heartbeat_unix_ms(UnixMillis(now));
  record.info.set_lease_expires_unix_ms(UnixMillis(now + options_.lease_ttl));
  v1::LeaseGrant grant;
  grant.set_lease_expires_unix_ms(record.info.lease_expires_unix_ms());
  grant.set_incarnation(record.info.incarnation());
  return grant;
}

absl::StatusOr<v1::LeaseGrant> NodeRegistry::OpenSession(const std::string& name,
                                                         uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  auto record = FindSession(name, incarnation);
  if (!record.ok()) return record.status();
  if ((*record)->session_open) {
    return absl::AlreadyExistsError(absl::StrCat(
        "open: incarnation ", incarnation, " of '", name,
        "' already has a live session; one session per incarnation"));
  }
  (*record)->session_open = true;
  if ((*record)->awaiting_resume) {
    (*record)->awaiting_resume = false;
    events_->Append(v1::ClusterEvent::NODE_RESUMED, name, "",
                    absl::StrCat("incarnation ", incarnation,
                                 " reconnected after a scheduler restart"));
  }
  return ExtendLease(**record);
}

void NodeRegistry::CloseSession(const std::string& name, uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  // A newer incarnation's record has its own session flag.
  if (it != nodes_.end() && it->second.info.incarnation() == incarnation) {
    it->second.session_open = false;
  }
}

absl::StatusOr<v1::LeaseGrant> NodeRegistry::Renew(const std::string& name,
                                                   uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  auto record = FindSession(name, incarnation);
  if (!record.ok()) return record.status();
  return ExtendLease(**record);
}

absl::Status NodeRegistry::Deregister(const std::string& name,
                                      uint64_t incarnation,
                                      const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto record = FindSession(name, incarnation);
  if (!record.ok()) return record.status();
  NodeRecord updated = **record;
  updated.info.set_state(v1::DEREGISTERED);
  updated.commands.clear();
  if (absl::Status s = Persist(updated); !s.ok()) return s;
  **record = std::move(updated);
  events_->Append(v1::ClusterEvent::NODE_DEREGISTERED, name, "",
                  reason.empty() ? "clean shutdown" : reason);
  return absl::OkStatus();
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::Drain(const std::string& name,
                                                 const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat("no node named '", name, "'"));
  }
  NodeRecord& record = it->second;
  if (record.info.state() == v1::DRAINING) return record.info;
  if (record.info.state() != v1::ALIVE) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", name, "' is ",
                     v1::NodeState_Name(record.info.state()), ", not ALIVE"));
  }
  NodeRecord updated = record;
  updated.info.set_state(v1::DRAINING);
  if (absl::Status s = Persist(updated); !s.ok()) return s;
  record.info = updated.info;
  v1::SchedulerCommand command;
  command.mutable_drain()->set_reason(reason);
  record.commands.push_back(std::move(command));
  events_->Append(v1::ClusterEvent::NODE_DRAINING, name, "",
                  reason.empty() ? "drained by operator" : reason);
  return record.info;
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::Get(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat("no node named '", name, "'"));
  }
  return it->second.info;
}

std::vector<v1::NodeInfo> NodeRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeInfo> result;
  result.reserve(nodes_.size());
  for (const auto& [name, record] : nodes_) result.push_back(record.info);
  return result;
}

std::vector<std::string> NodeRegistry::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  PersistUnrecordedDeaths();
  const int64_t now_ms = UnixMillis(clock_->Now());
  std::vector<std::string> expired;
  for (auto& [name, record] : nodes_) {
    if (!IsLive(record.info.state()) ||
        now_ms < record.info.lease_expires_unix_ms()) {
      continue;
    }
    // Dead in memory at once, durable or not: with a failing store the jobs
    // on it must still recover. A restart before the write lands loads it
    // live and gives it a lease to come back within, as for any node.
    record.info.set_state(v1::DEAD);
    record.commands.clear();
    if (absl::Status s = Persist(record); !s.ok()) {
      LOG(WARNING) << s << "; kept DEAD in memory, written when the store accepts it";
      unrecorded_deaths_[name] = record.info.incarnation();
    }
    events_->Append(
        v1::ClusterEvent::NODE_DEAD, name, "",
        absl::StrFormat("lease expired: no heartbeat for %d ms (incarnation %d)",
                        now_ms - record.info.last_heartbeat_unix_ms(),
                        record.info.incarnation()));
    expired.push_back(name);
  }
  return expired;
}

void NodeRegistry::PersistUnrecordedDeaths() {
  for (auto it = unrecorded_deaths_.begin(); it != unrecorded_deaths_.end();) {
    auto node = nodes_.find(it->first);
    if (node == nodes_.end() || node->second.info.incarnation() != it->second ||
        node->second.info.state() != v1::DEAD) {
      it = unrecorded_deaths_.erase(it);  // re-registered since: that record was written
      continue;
    }
    if (!Persist(node->second).ok()) return;  // the store still refuses: next sweep
    it = unrecorded_deaths_.erase(it);
  }
}

int NodeRegistry::PruneDeparted(absl::Duration retention) {
  absl::MutexLock lock(&mu_);
  const int64_t cutoff_ms = UnixMillis(clock_->Now() - retention);
  std::vector<StoreWrite> writes;
  std::vector<std::string> names;
  for (const auto& [name, record] : nodes_) {
    if (IsLive(record.info.state()) || record.info.last_heartbeat_unix_ms() >= cutoff_ms ||
        unrecorded_deaths_.count(name) > 0) {
      continue;
    }
    writes.push_back({kNodeKind, name, std::nullopt});
    names.push_back(name);
  }
  if (names.empty()) return 0;
  writes.push_back({kMetaKind, kNextNodeNumberKey, absl::StrCat(next_node_number_)});
  if (absl::Status s = store_->WriteBatch(writes); !s.ok()) {
    LOG(WARNING) << "cannot prune " << names.size() << " departed nodes (retried later): " << s;
    return 0;
  }
  for (const std::string& name : names) nodes_.erase(name);
  LOG(INFO) << "pruned " << names.size() << " nodes not heard from in " << retention;
  return static_cast<int>(names.size());
}

absl::Status NodeRegistry::Push(const std::string& name, uint64_t incarnation,
                                const v1::SchedulerCommand& command) {
  absl::MutexLock lock(&mu_);
  auto record = FindSession(name, incarnation);
  if (!record.ok()) return record.status();
  (*record)->commands.push_back(command);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::SchedulerCommand>> NodeRegistry::TakeCommands(
    const std::string& name, uint64_t incarnation, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = nodes_.find(name);
    return it == nodes_.end() || it->second.info.incarnation() != incarnation ||
           !IsLive(it->second.info.state()) || !it->second.commands.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  auto record = FindSession(name, incarnation);
  if (!record.ok()) return record.status();
  std::vector<v1::SchedulerCommand> commands((*record)->commands.begin(),
                                             (*record)->commands.end());
  (*record)->commands.clear();
  return commands;
}

}  // namespace corescape::scheduler
