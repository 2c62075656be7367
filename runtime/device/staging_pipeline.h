#ifndef CORESCAPE_RUNTIME_DEVICE_STAGING_PIPELINE_H_
#define CORESCAPE_RUNTIME_DEVICE_STAGING_PIPELINE_H_

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

// Updates an array that lives in pinned host memory with device kernels
// while holding only two chunks of it in device memory: the chunks take
// turns in two staging buffers, chunk i+1 uploads on one copy stream and
// chunk i−1 downloads on another while chunk i's kernels run on the
// compute stream. Events order the three streams, so a staging buffer is
// refilled only after its previous chunk is home, and first filled only
// after the compute stream's earlier work.
class StagingPipeline {
 public:
  // kernel(staged, begin, count): issue, on the compute stream, the work on
  // host[begin, begin + count), now at `staged` in device memory.
  using ChunkKernel = absl::FunctionRef<absl::Status(float* staged, int64_t begin, int64_t count)>;

  // `compute` (not owned) is the stream the kernels are issued on.
  static absl::StatusOr<std::unique_ptr<StagingPipeline>> Create(DeviceRuntime* runtime,
                                                                 Stream* compute);

  // Runs `kernel` over host[0, n), `chunk` floats at a time, through
  // staging[0] and staging[1] (device memory, each at least `chunk`
  // floats). Returns once host holds every result; on an error, once no
  // copy is in flight.
  absl::Status Run(float* host, int64_t n, float* const staging[2], int64_t chunk,
                   ChunkKernel kernel);

 private:
  StagingPipeline(DeviceRuntime* runtime, Stream* compute) : runtime_(runtime), compute_(compute) {}
  absl::Status RunChunks(float* host, int64_t n, float* const staging[2], int64_t chunk,
                         ChunkKernel kernel);

  DeviceRuntime* runtime_;
  Stream* compute_;
  std::unique_ptr<Stream> upload_, download_;
  // Per staging buffer: its chunk uploaded, computed, downloaded.
  std::unique_ptr<Event> uploaded_[2], computed_[2], downloaded_[2];
  // The compute stream's work issued before a Run.
  std::unique_ptr<Event> compute_issued_;
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_STAGING_PIPELINE_H_
