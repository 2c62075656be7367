#include "scheduler/node_registry.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/clock.h"
#include "scheduler/event_log.h"
#include "scheduler/fault_injecting_state_store.h"
#include "scheduler/state_store.h"
#include "scheduler/state_test_util.h"

namespace corescape::scheduler {
namespace {

using ::corescape::v1::ClusterEvent;

v1::RegisterRequest Request(const std::string& name, const std::string& host = "10.0.0.1",
                            v1::NodeRole role = v1::WORKER) {
  v1::RegisterRequest request;
  request.set_name(name);
  request.set_role(role);
  request.set_host(host);
  request.set_pid(1234);
  request.set_grpc_address(host + ":7071");
  request.set_instance_id(42);
  return request;
}

// A registry over a real SQLite store that can be "restarted" by building
// a new registry on the same directory.
class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    Restart();
  }

  void Restart() {
    registry_.reset();
    events_.reset();
    store_.reset();
    absl::StatusOr<testing::TestState> state = testing::OpenTestState(dir_, &clock_);
    ASSERT_TRUE(state.ok()) << state.status();
    store_ = std::move(state->store);
    events_ = std::move(state->events);
    NodeRegistryOptions options;
    options.lease_ttl = absl::Seconds(10);
    options.heartbeat_interval = absl::Seconds(2);
    options.scheduler_id = "sched-test";
    registry_ = std::make_unique<NodeRegistry>(&clock_, store_.get(), events_.get(), options);
    ASSERT_TRUE(registry_->Load().ok());
  }

  v1::NodeState StateOf(const std::string& name) {
    auto node = registry_->Get(name);
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? node->state() : v1::NODE_STATE_UNSPECIFIED;
  }

  bool HasEvent(ClusterEvent::Kind kind, const std::string& node) {
    for (const auto& event : events_->After(0)) {
      if (event.kind() == kind && event.node_name() == node) return true;
    }
    return false;
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<SqliteStateStore> store_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<NodeRegistry> registry_;
};

TEST_F(RegistryTest, RegisterAssignsIdentityAndLease) {
  auto response = registry_->Register(Request("w0"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->incarnation(), 1u);
  EXPECT_EQ(response->node_id(), "node-1");
  EXPECT_EQ(response->lease_ttl_ms(), 10000);
  EXPECT_EQ(response->heartbeat_interval_ms(), 2000);
  EXPECT_EQ(response->scheduler_id(), "sched-test");
  auto node = registry_->Get("w0");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state(), v1::ALIVE);
  EXPECT_EQ(node->lease_expires_unix_ms(),
            absl::ToUnixMillis(clock_.Now() + absl::Seconds(10)));
  EXPECT_TRUE(HasEvent(ClusterEvent::NODE_REGISTERED, "w0"));
  auto second = registry_->Register(Request("w1"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->node_id(), "node-2");
}

TEST_F(RegistryTest, MissedRenewalsMarkNodeDeadAndRaiseEvent) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  ASSERT_TRUE(registry_->Register(Request("w1", "10.0.0.2")).ok());
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(4));
    ASSERT_TRUE(registry_->Renew("w1", 1).ok());
    EXPECT_TRUE(registry_->ExpireLeases().size() <= 1);
  }
  EXPECT_EQ(StateOf("w0"), v1::DEAD);
  EXPECT_EQ(StateOf("w1"), v1::ALIVE);
  EXPECT_TRUE(HasEvent(ClusterEvent::NODE_DEAD, "w0"));
  EXPECT_FALSE(HasEvent(ClusterEvent::NODE_DEAD, "w1"));
}

TEST_F(RegistryTest, LeaseExpiresExactlyAtTtl) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  clock_.Advance(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(registry_->ExpireLeases(), std::vector<std::string>{"w0"});
  // A dead incarnation cannot come back by heartbeating: it must re-register.
  auto renew = registry_->Renew("w0", 1);
  EXPECT_EQ(renew.status().code(), absl::StatusCode::kFailedPrecondition);
}

// A full disk must not stop lease expiry: the node is DEAD at once in
// memory (its session is fenced, jobs see it) and on disk once the store
// accepts writes again.
TEST_F(RegistryTest, LeasesExpireWhileTheStoreRefusesWritesAndAreRecordedLater) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  FaultInjectingStateStore failing(store_.get());
  registry_ = std::make_unique<NodeRegistry>(&clock_, &failing, events_.get(),
                                             NodeRegistryOptions{absl::Seconds(10)});
  ASSERT_TRUE(registry_->Load().ok());
  ASSERT_TRUE(registry_->OpenSession("w0", 1).ok());
  failing.FailWrites(3, "node");
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(registry_->ExpireLeases(), std::vector<std::string>{"w0"});
  EXPECT_EQ(StateOf("w0"), v1::DEAD);
  EXPECT_EQ(registry_->Renew("w0", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  auto on_disk = [&]() {
    v1::NodeInfo info;
    auto nodes = store_->LoadAll("node");
    for (const auto& [name, value] : *nodes) {
      if (name == "w0") {
        EXPECT_TRUE(info.ParseFromString(value));
      }
    }
    return info.state();
  };
  EXPECT_EQ(on_disk(), v1::ALIVE);
  // Two more refused sweeps, then the third write lands.
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  EXPECT_EQ(on_disk(), v1::ALIVE);
  EXPECT_EQ(failing.refused(), 3);
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  EXPECT_EQ(on_disk(), v1::DEAD);
  EXPECT_EQ(failing.refused(), 3);
}

TEST_F(RegistryTest, RetentionPrunesDepartedNodesAndKeepsTheNumbering) {
  const absl::Duration retention = absl::Hours(1);
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  auto w1 = registry_->Register(Request("w1"));
  ASSERT_TRUE(w1.ok());
  ASSERT_TRUE(registry_->Register(Request("w2")).ok());
  ASSERT_TRUE(registry_->Deregister("w1", w1->incarnation(), "done").ok());
  clock_.Advance(absl::Seconds(11));
  registry_->ExpireLeases();  // w0 and w2 DEAD
  clock_.Advance(absl::Minutes(30));
  auto w2 = registry_->Register(Request("w2"));  // back: live again
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(registry_->PruneDeparted(retention), 0);
  clock_.Advance(absl::Minutes(31));
  ASSERT_TRUE(registry_->Renew("w2", w2->incarnation()).ok());
  EXPECT_EQ(registry_->PruneDeparted(retention), 2);  // w0 (DEAD), w1 (DEREGISTERED)
  EXPECT_EQ(registry_->Get("w0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Get("w1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Get("w2")->state(), v1::ALIVE);
  Restart();
  EXPECT_EQ(registry_->Get("w0").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry_->Get("w2").ok());
  // node-1..3 were handed out: a new name gets node-4, even after a restart.
  auto fresh = registry_->Register(Request("w9"));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->node_id(), "node-4");
}

TEST_F(RegistryTest, ReRegistrationKeepsIdentityWithNewIncarnation) {
  auto first = registry_->Register(Request("w0"));
  ASSERT_TRUE(first.ok());
  clock_.Advance(absl::Seconds(11));
  registry_->ExpireLeases();
  ASSERT_EQ(StateOf("w0"), v1::DEAD);
  auto second = registry_->Register(Request("w0", "10.0.0.9"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->node_id(), first->node_id());
  EXPECT_EQ(second->incarnation(), 2u);
  EXPECT_EQ(StateOf("w0"), v1::ALIVE);
  EXPECT_TRUE(HasEvent(ClusterEvent::NODE_REREGISTERED, "w0"));
  // The old incarnation is fenced off.
  EXPECT_EQ(registry_->Renew("w0", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(registry_->Renew("w0", 2).ok());
}

TEST_F(RegistryTest, OneLiveSessionPerIncarnationAndTheFirstKeepsItsCommands) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  ASSERT_TRUE(registry_->OpenSession("w0", 1).ok());
  auto second = registry_->OpenSession("w0", 1);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(second.status().message()), ::testing::HasSubstr("live session"));

  v1::SchedulerCommand drain;
  drain.mutable_drain()->set_reason("test");
  ASSERT_TRUE(registry_->Push("w0", 1, drain).ok());
  auto taken = registry_->TakeCommands("w0", 1, absl::ZeroDuration());
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->size(), 1u);

  // Once it ends, the incarnation may open a session again (a reconnect);
  // a new incarnation starts with none open, whatever the old one does.
  registry_->CloseSession("w0", 1);
  EXPECT_TRUE(registry_->OpenSession("w0", 1).ok());
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  registry_->CloseSession("w0", 1);
  EXPECT_TRUE(registry_->OpenSession("w0", 2).ok());
  EXPECT_EQ(registry_->OpenSession("w0", 2).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(RegistryTest, LiveNameOnAnotherHostIsRefused) {
  ASSERT_TRUE(registry_->Register(Request("w0", "10.0.0.1")).ok());
  auto clash = registry_->Register(Request("w0", "10.0.0.2"));
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists);
  // The same host re-registering is a restart of that node: accepted.
  auto restart = registry_->Register(Request("w0", "10.0.0.1"));
  ASSERT_TRUE(restart.ok());
  EXPECT_EQ(restart->incarnation(), 2u);
}

TEST_F(RegistryTest, StateSurvivesRestartAndLiveNodesGetOneLeaseToResume) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  ASSERT_TRUE(registry_->Register(Request("w1", "10.0.0.2")).ok());
  ASSERT_TRUE(registry_->Register(Request("a0", "10.0.0.3", v1::ATTENTION_SERVER)).ok());
  ASSERT_TRUE(registry_->Drain("w1", "maintenance").ok());
  clock_.Advance(absl::Seconds(30));  // downtime
  Restart();

  auto nodes = registry_->List();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name(), "a0");
  EXPECT_EQ(nodes[0].role(), v1::ATTENTION_SERVER);
  EXPECT_EQ(StateOf("w1"), v1::DRAINING);
  // Not dead yet despite the downtime: they get a lease from the restart.
  EXPECT_TRUE(registry_->ExpireLeases().empty());
  ASSERT_TRUE(registry_->OpenSession("w0", 1).ok());
  EXPECT_TRUE(HasEvent(ClusterEvent::NODE_RESUMED, "w0"));
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(registry_->Renew("w0", 1).ok());
  clock_.Advance(absl::Seconds(6));
  // a0 and w1 never came back.
  auto expired = registry_->ExpireLeases();
  EXPECT_EQ(expired, (std::vector<std::string>{"a0", "w1"}));
  EXPECT_EQ(StateOf("w0"), v1::ALIVE);
  // Re-registering continues the incarnation numbering and keeps the id.
  auto again = registry_->Register(Request("a0", "10.0.0.3", v1::ATTENTION_SERVER));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->incarnation(), 2u);
  EXPECT_EQ(again->node_id(), "node-3");
  auto fresh = registry_->Register(Request("w9"));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->node_id(), "node-4");
  // Events continue numbering after the restart.
  auto events = events_->After(0);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].sequence(), events[i - 1].sequence() + 1);
  }
}

TEST_F(RegistryTest, DrainPushesCommandAndDeregisterEndsMembership) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  auto drained = registry_->Drain("w0", "kernel upgrade");
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->state(), v1::DRAINING);
  auto commands = registry_->TakeCommands("w0", 1, absl::ZeroDuration());
  ASSERT_TRUE(commands.ok());
  ASSERT_EQ(commands->size(), 1u);
  EXPECT_EQ((*commands)[0].drain().reason(), "kernel upgrade");
  EXPECT_EQ(registry_->Drain("nope", "").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(registry_->Deregister("w0", 1, "bye").ok());
  EXPECT_EQ(StateOf("w0"), v1::DEREGISTERED);
  EXPECT_EQ(registry_->Drain("w0", "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  clock_.Advance(absl::Hours(1));
  EXPECT_TRUE(registry_->ExpireLeases().empty());  // not "dead": it left
}

TEST_F(RegistryTest, TakeCommandsWakesOnPushAndEndsOnSupersede) {
  ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  std::thread pusher([&]() {
    absl::SleepFor(absl::Milliseconds(50));
    v1::SchedulerCommand command;
    command.mutable_shutdown()->set_reason("test");
    ASSERT_TRUE(registry_->Push("w0", 1, command).ok());
  });
  auto commands = registry_->TakeCommands("w0", 1, absl::Seconds(10));
  pusher.join();
  ASSERT_TRUE(commands.ok());
  ASSERT_EQ(commands->size(), 1u);
  EXPECT_TRUE((*commands)[0].has_shutdown());

  std::thread reregister([&]() {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(registry_->Register(Request("w0")).ok());
  });
  auto superseded = registry_->TakeCommands("w0", 1, absl::Seconds(10));
  reregister.join();
  EXPECT_EQ(superseded.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RegistryTest, UnknownNodeSessionIsNotFound) {
  EXPECT_EQ(registry_->OpenSession("ghost", 1).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace corescape::scheduler
