#ifndef CORESCAPE_SCHEDULER_IN_MEMORY_STATE_STORE_H_
#define CORESCAPE_SCHEDULER_IN_MEMORY_STATE_STORE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler {

// A StateStore in a map, for tests that write thousands of records and
// would otherwise wait on as many fsyncs. Not durable.
class InMemoryStateStore final : public StateStore {
 public:
  absl::Status Put(absl::string_view kind, absl::string_view key,
                   absl::string_view value) override {
    absl::MutexLock lock(&mu_);
    records_[{std::string(kind), std::string(key)}] = std::string(value);
    return absl::OkStatus();
  }
  absl::Status Delete(absl::string_view kind, absl::string_view key) override {
    absl::MutexLock lock(&mu_);
    records_.erase({std::string(kind), std::string(key)});
    return absl::OkStatus();
  }
  absl::Status WriteBatch(const std::vector<StoreWrite>& writes) override {
    for (const StoreWrite& write : writes) {
      absl::Status s =
          write.value ? Put(write.kind, write.key, *write.value) : Delete(write.kind, write.key);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> LoadAll(
      absl::string_view kind) override {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<std::string, std::string>> records;
    for (const auto& [id, value] : records_) {
      if (id.first == kind) records.emplace_back(id.second, value);
    }
    return records;
  }
  absl::Status TrimToNewest(absl::string_view kind, int keep) override {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& [id, value] : records_) {
      if (id.first == kind) keys.push_back(id);
    }
    for (size_t i = 0; i + keep < keys.size(); ++i) records_.erase(keys[i]);
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::string> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_IN_MEMORY_STATE_STORE_H_
