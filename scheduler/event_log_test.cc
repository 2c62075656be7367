#include "scheduler/event_log.h"

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "runtime/base/clock.h"
#include "scheduler/state_store.h"
#include "scheduler/state_test_util.h"

namespace corescape::scheduler {
namespace {

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<testing::TestState> state =
        testing::OpenTestState(testing::FreshTestDir("event_log_test"), &clock_);
    ASSERT_TRUE(state.ok()) << state.status();
    store_ = std::move(state->store);
    events_ = std::move(state->events);
  }

  FakeClock clock_;
  std::unique_ptr<SqliteStateStore> store_;
  std::unique_ptr<EventLog> events_;
};

TEST_F(EventLogTest, WaitingPastTheNewestEventBlocksEvenAtTheLargestSequence) {
  for (int i = 0; i < 3; ++i) events_->Append(v1::ClusterEvent::NODE_REGISTERED, "n", "", "x");
  EXPECT_TRUE(events_->WaitForEventsAfter(2, absl::Milliseconds(1)));
  EXPECT_FALSE(events_->WaitForEventsAfter(3, absl::Milliseconds(1)));
  // A watcher that asks for everything after 2^64 - 1 has nothing to wait
  // for; it must not be woken at once (that spins WatchEvents on a core).
  EXPECT_FALSE(events_->WaitForEventsAfter(std::numeric_limits<uint64_t>::max(),
                                           absl::Milliseconds(1)));
  EXPECT_TRUE(events_->After(std::numeric_limits<uint64_t>::max()).empty());
}

TEST_F(EventLogTest, EmptyLogHasNothingAfterZero) {
  EXPECT_FALSE(events_->WaitForEventsAfter(0, absl::Milliseconds(1)));
  events_->Append(v1::ClusterEvent::NODE_REGISTERED, "n", "", "x");
  EXPECT_TRUE(events_->WaitForEventsAfter(0, absl::Milliseconds(1)));
}

}  // namespace
}  // namespace corescape::scheduler
