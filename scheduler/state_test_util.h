// What the scheduler's component tests share: a fresh state directory, and
// the SQLite store and event log over it.
#ifndef CORESCAPE_SCHEDULER_STATE_TEST_UTIL_H_
#define CORESCAPE_SCHEDULER_STATE_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/clock.h"
#include "scheduler/event_log.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler::testing {

// `name` under $TEST_TMPDIR (or /tmp), removed if it was there.
inline std::string FreshTestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

struct TestState {
  std::unique_ptr<SqliteStateStore> store;
  std::unique_ptr<EventLog> events;
};

// Opens the store in `dir` and loads its event log.
inline absl::StatusOr<TestState> OpenTestState(const std::string& dir, const Clock* clock) {
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store = SqliteStateStore::Open(dir);
  if (!store.ok()) return store.status();
  TestState state;
  state.store = *std::move(store);
  state.events = std::make_unique<EventLog>(clock, state.store.get());
  if (absl::Status loaded = state.events->Load(); !loaded.ok()) return loaded;
  return state;
}

}  // namespace corescape::scheduler::testing

#endif  // CORESCAPE_SCHEDULER_STATE_TEST_UTIL_H_
