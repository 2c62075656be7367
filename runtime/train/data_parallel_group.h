#ifndef CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_
#define CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace corescape::train {

// The collectives a data-parallel training step needs. Implemented over the
// data plane's communicator by the worker, and trivially for one process.
// Results must be bitwise identical on every rank.
class DataParallelGroup {
 public:
  virtual ~DataParallelGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
  // Makes pending and later collectives fail at once (a stopped job must not
  // sit out a peer's timeout). Thread-safe.
  virtual void Abort(const std::string& reason) {}
};

// World size 1: every collective is the identity.
class SingleProcessGroup final : public DataParallelGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  int64_t bytes_sent() const override { return 0; }
  int64_t bytes_received() const override { return 0; }
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_
