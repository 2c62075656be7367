#ifndef CORESCAPE_SCHEDULER_STATE_STORE_H_
#define CORESCAPE_SCHEDULER_STATE_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace corescape::scheduler {

// One record of a batch: written with `value`, or deleted without one.
struct StoreWrite {
  std::string kind;
  std::string key;
  std::optional<std::string> value;
};

// Durable key-value records grouped by kind ("node", "job", "event", "meta").
// A call that returns OK has reached stable storage: the scheduler writes
// before it acknowledges, so a restart loses nothing it acknowledged.
class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual absl::Status Put(absl::string_view kind, absl::string_view key,
                           absl::string_view value) = 0;
  virtual absl::Status Delete(absl::string_view kind, absl::string_view key) = 0;
  // All of `writes` in one transaction: either every one reached stable
  // storage, or (on an error) none did.
  virtual absl::Status WriteBatch(const std::vector<StoreWrite>& writes) = 0;
  // Records of one kind in key order.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
  LoadAll(absl::string_view kind) = 0;
  // Keeps only the `keep` largest keys of `kind` (for bounded logs).
  virtual absl::Status TrimToNewest(absl::string_view kind, int keep) = 0;
};

// SQLite in WAL mode with synchronous=FULL: each Put is a committed,
// fsynced transaction.
class SqliteStateStore final : public StateStore {
 public:
  // Opens (creating if needed) <directory>/scheduler.db. Fails with
  // FAILED_PRECONDITION if another process holds the directory.
  static absl::StatusOr<std::unique_ptr<SqliteStateStore>> Open(
      const std::string& directory);
  ~SqliteStateStore() override;

  absl::Status Put(absl::string_view kind, absl::string_view key,
                   absl::string_view value) override;
  absl::Status Delete(absl::string_view kind, absl::string_view key) override;
  absl::Status WriteBatch(const std::vector<StoreWrite>& writes) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> LoadAll(
      absl::string_view kind) override;
  absl::Status TrimToNewest(absl::string_view kind, int keep) override;

 private:
  SqliteStateStore(sqlite3* db, std::string path, int lock_fd)
      : db_(db), path_(std::move(path)), lock_fd_(lock_fd) {}
  absl::Status Execute(const char* sql);
  absl::Status ExecuteLocked(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutLocked(absl::string_view kind, absl::string_view key,
                         absl::string_view value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteLocked(absl::string_view kind, absl::string_view key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SqliteError(absl::string_view what);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  const std::string path_;
  const int lock_fd_;  // flock()ed: one scheduler per state directory
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_STATE_STORE_H_
