#include "runtime/device/staging_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace corescape::device {

absl::StatusOr<std::unique_ptr<StagingPipeline>> StagingPipeline::Create(DeviceRuntime* runtime,
                                                                         Stream* compute) {
  if (runtime == nullptr || compute == nullptr) {
    return absl::InvalidArgumentError("staging pipeline: no device runtime or compute stream");
  }
  std::unique_ptr<StagingPipeline> pipeline(new StagingPipeline(runtime, compute));
  for (std::unique_ptr<Stream>* stream : {&pipeline->upload_, &pipeline->download_}) {
    auto created = runtime->CreateStream();
    if (!created.ok()) return created.status();
    *stream = *std::move(created);
  }
  for (int b = 0; b < 2; ++b) {
    for (std::unique_ptr<Event>* event :
         {&pipeline->uploaded_[b], &pipeline->computed_[b], &pipeline->downloaded_[b]}) {
      auto created = runtime->CreateEvent();
      if (!created.ok()) return created.status();
      *event = *std::move(created);
    }
  }
  auto issued = runtime->CreateEvent();
  if (!issued.ok()) return issued.status();
  pipeline->compute_issued_ = *std::move(issued);
  return pipeline;
}

absl::Status StagingPipeline::Run(float* host, int64_t n, float* const staging[2], int64_t chunk,
                                  ChunkKernel kernel) {
  if (n < 0 || chunk <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging pipeline: ", n, " floats in chunks of ", chunk));
  }
  if (n == 0) return absl::OkStatus();
  if (host == nullptr || staging[0] == nullptr || staging[1] == nullptr) {
    return absl::InvalidArgumentError("staging pipeline: a null host array or staging buffer");
  }
  absl::Status status = RunChunks(host, n, staging, chunk, kernel);
  // Copies in flight still read or write the caller's memory.
  absl::Status uploaded = upload_->Synchronize();
  absl::Status downloaded = download_->Synchronize();
  if (!status.ok()) return status;
  if (!uploaded.ok()) return uploaded;
  return downloaded;
}

absl::Status StagingPipeline::RunChunks(float* host, int64_t n, float* const staging[2],
                                        int64_t chunk, ChunkKernel kernel) {
  // The staging buffers may be blocks the caching allocator handed on from
  // work still queued on the compute stream: no upload overwrites them
  // before that work is done.
  CORESCAPE_RETURN_IF_ERROR(compute_->Record(*compute_issued_));
  CORESCAPE_RETURN_IF_ERROR(upload_->Wait(*compute_issued_));
  for (int64_t begin = 0, i = 0; begin < n; begin += chunk, ++i) {
    const int b = static_cast<int>(i % 2);
    const int64_t count = std::min(chunk, n - begin);
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    // The buffer's previous chunk (i − 2) must be home before it is refilled.
    CORESCAPE_RETURN_IF_ERROR(upload_->Wait(*downloaded_[b]));
    CORESCAPE_RETURN_IF_ERROR(
        runtime_->CopyAsync(staging[b], host + begin, bytes, CopyKind::kHostToDevice, *upload_));
    CORESCAPE_RETURN_IF_ERROR(upload_->Record(*uploaded_[b]));
    CORESCAPE_RETURN_IF_ERROR(compute_->Wait(*uploaded_[b]));
    if (absl::Status s = kernel(staging[b], begin, count); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("staging chunk [", begin, ", ", begin + count,
                                                 "): ", s.message()));
    }
    CORESCAPE_RETURN_IF_ERROR(compute_->Record(*computed_[b]));
    CORESCAPE_RETURN_IF_ERROR(download_->Wait(*computed_[b]));
    CORESCAPE_RETURN_IF_ERROR(
        runtime_->CopyAsync(host + begin, staging[b], bytes, CopyKind::kDeviceToHost, *download_));
    CORESCAPE_RETURN_IF_ERROR(download_->Record(*downloaded_[b]));
  }
  return absl::OkStatus();
}

}  // namespace corescape::device
