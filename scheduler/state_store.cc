#include "scheduler/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"

namespace corescape::scheduler {
namespace {

// Finalizes a prepared statement however the function returns.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& directory) {
  if (absl::Status s = MakeDirectories(directory); !s.ok()) return s;
  std::string lock_path = absl::StrCat(directory, "/LOCK");
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open ", lock_path, ": ", std::strerror(errno)));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "state directory ", directory, " is in use by another scheduler"));
  }
  std::string path = absl::StrCat(directory, "/scheduler.db");
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                               SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    close(lock_fd);
    return absl::UnavailableError(
        absl::StrCat("cannot open state store ", path, ": ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SqliteStateStore> store(new SqliteStateStore(db, path, lock_fd));
  for (const char* sql :
       {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;",
        "CREATE TABLE IF NOT EXISTS records ("
        "  kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
        "  PRIMARY KEY (kind, key));",
        // Detects a file that is not our database early, with a clear error.
        "SELECT count(*) FROM records;"}) {
    if (absl::Status s = store->Execute(sql); !s.ok()) return s;
  }
  return store;
}

SqliteStateStore::~SqliteStateStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
  close(lock_fd_);  // releases the flock
}

absl::Status SqliteStateStore::SqliteError(absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("state store ", path_, ": ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status SqliteStateStore::Execute(const char* sql) {
  absl::MutexLock lock(&mu_);
  return ExecuteLocked(sql);
}

absl::Status SqliteStateStore::ExecuteLocked(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status = absl::InternalError(
        absl::StrCat("state store ", path_, ": ", error ? error : "error"));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::Status SqliteStateStore::Put(absl::string_view kind, absl::string_view key,
                                   absl::string_view value) {
  absl::MutexLock lock(&mu_);
  return PutLocked(kind, key, value);
}

absl::Status SqliteStateStore::PutLocked(absl::string_view kind, absl::string_view key,
                                         absl::string_view value) {
  Statement stmt;
  if (sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO records(kind, key, value) "
                         "VALUES (?, ?, ?);",
                         -1, stmt.out(), nullptr) != SQLITE_OK) {
    return SqliteError("prepare put");
  }
  sqlite3_bind_text(stmt.get(), 1, kind.data(), kind.size(), SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.get(), 2, key.data(), key.size(), SQLITE_TRANSIENT);
  sqlite3_bind_blob(stmt.get(), 3, value.data(), value.size(), SQLITE_TRANSIENT);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return SqliteError("put");
  return absl::OkStatus();
}

absl::Status SqliteStateStore::Delete(absl::string_view kind,
                                      absl::string_view key) {
  absl::MutexLock lock(&mu_);
  return DeleteLocked(kind, key);
}

absl::Status SqliteStateStore::DeleteLocked(absl::string_view kind, absl::string_view key) {
  Statement stmt;
  if (sqlite3_prepare_v2(db_, "DELETE FROM records WHERE kind = ? AND key = ?;",
                         -1, stmt.out(), nullptr) != SQLITE_OK) {
    return SqliteError("prepare delete");
  }
  sqlite3_bind_text(stmt.get(), 1, kind.data(), kind.size(), SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt.get(), 2, key.data(), key.size(), SQLITE_TRANSIENT);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return SqliteError("delete");
  return absl::OkStatus();
}

absl::Status SqliteStateStore::WriteBatch(const std::vector<StoreWrite>& writes) {
  absl::MutexLock lock(&mu_);
  // IMMEDIATE: the write lock is taken now, so COMMIT cannot fail for a
  // reader holding it.
  if (absl::Status s = ExecuteLocked("BEGIN IMMEDIATE;"); !s.ok()) return s;
  for (const StoreWrite& write : writes) {
    absl::Status s = write.value.has_value() ? PutLocked(write.kind, write.key, *write.value)
                                             : DeleteLocked(write.kind, write.key);
    if (!s.ok()) {
      ExecuteLocked("ROLLBACK;").IgnoreError();
      return s;
    }
  }
  if (absl::Status s = ExecuteLocked("COMMIT;"); !s.ok()) {
    ExecuteLocked("ROLLBACK;").IgnoreError();
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SqliteStateStore::LoadAll(absl::string_view kind) {
  absl::MutexLock lock(&mu_);
  Statement stmt;
  if (sqlite3_prepare_v2(db_,
                         "SELECT key, value FROM records WHERE kind = ? "
                         "ORDER BY key;",
                         -1, stmt.out(), nullptr) != SQLITE_OK) {
    return SqliteError("prepare load");
  }
  sqlite3_bind_text(stmt.get(), 1, kind.data(), kind.size(), SQLITE_TRANSIENT);
  std::vector<std::pair<std::string, std::string>> records;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    const char* key = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0));
    const char* value = static_cast<const char*>(sqlite3_column_blob(stmt.get(), 1));
    int value_size = sqlite3_column_bytes(stmt.get(), 1);
    records.emplace_back(key ? key : "", std::string(value ? value : "", value_size));
  }
  if (rc != SQLITE_DONE) return SqliteError("load");
  return records;
}

absl::Status SqliteStateStore::TrimToNewest(absl::string_view kind, int keep) {
  absl::MutexLock lock(&mu_);
  Statement stmt;
  if (sqlite3_prepare_v2(
          db_,
          "DELETE FROM records WHERE kind = ?1 AND key NOT IN "
          "(SELECT key FROM records WHERE kind = ?1 ORDER BY key DESC LIMIT ?2);",
          -1, stmt.out(), nullptr) != SQLITE_OK) {
    return SqliteError("prepare trim");
  }
  sqlite3_bind_text(stmt.get(), 1, kind.data(), kind.size(), SQLITE_TRANSIENT);
  sqlite3_bind_int(stmt.get(), 2, keep);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return SqliteError("trim");
  return absl::OkStatus();
}

}  // namespace corescape::scheduler
