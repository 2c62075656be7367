#include "runtime/model/model_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/cpu_device_runtime.h"
#include "runtime/device/deferred_device_runtime.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/linear.h"
#include "runtime/kernels/cpu/rmsnorm.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/kernels/cpu/swiglu.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/sparse_mask.h"

#ifdef CORESCAPE_WITH_CUDA
#include "runtime/model/cuda_model_ops.h"
#endif

namespace corescape::model {

namespace {

// Core attention after the queue's earlier work: the CPU executor reads
// its inputs at once.
class QueuedAttention final : public CoreAttentionExecutor {
 public:
  QueuedAttention(CoreAttentionExecutor* inner, device::Stream* queue) : inner_(inner), queue_(queue) {}
  absl::Status Forward(const AttentionForwardCall& call) override {
    if (absl::Status s = queue_->Synchronize(); !s.ok()) return s;
    return inner_->Forward(call);
  }
  absl::Status Backward(const AttentionBackwardCall& call) override {
    if (absl::Status s = queue_->Synchronize(); !s.ok()) return s;
    return inner_->Backward(call);
  }

 private:
  CoreAttentionExecutor* inner_;
  device::Stream* queue_;
};

// The CPU kernels over host memory held by a CPU device runtime: run as
// they are called, or queued on a deferred runtime's stream (CpuExecution).
class CpuModelOps final : public ModelOps {
 public:
  CpuModelOps(CpuParameterMode mode, ThreadPool* pool, int64_t capacity_bytes, CpuExecution execution)
      : mode_(mode),
        runtime_(static_cast<size_t>(capacity_bytes)),
        deferred_(execution == CpuExecution::kImmediate
                      ? nullptr
                      : std::make_unique<device::DeferredDeviceRuntime>(
                            execution == CpuExecution::kDeferredCopiesAhead
                                ? device::DeferredDeviceRuntime::Order::kNewestStreamFirst
                                : device::DeferredDeviceRuntime::Order::kOldestStreamFirst,
                            static_cast<size_t>(capacity_bytes))),
        allocator_(&memory()),
        attention_(pool) {
    if (deferred_ != nullptr) {
      queue_ = *deferred_->CreateStream();  // never fails
      queued_attention_ = std::make_unique<QueuedAttention>(&attention_, queue_.get());
    }
  }

  device::Device device() const override { return device::Device::Cpu(); }
  Precision precision() const override { return Precision::kFp32; }
  bool host_addressable() const override { return true; }
  bool parameters_in_place() const override { return mode_ == CpuParameterMode::kInPlace; }

  absl::StatusOr<device::DeviceBuffer> Allocate(size_t bytes) override {
    return allocator_.Allocate(bytes);
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    return Issue("Zero", [=] {
      if (bytes > 0) std::memset(dst, 0, bytes);
    });
  }
  // As the CUDA backend's: in the stream's order, back when they return.
  absl::Status Upload(void* dst, const void* host_src, size_t bytes) override {
    if (absl::Status s = Issue("Upload", [=] {
          if (bytes > 0) std::memcpy(dst, host_src, bytes);
        });
        !s.ok()) {
      return s;
    }
    return Synchronize();
  }
  absl::Status Download(void* host_dst, const void* src, size_t bytes) override {
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    device::ProfileSpan span(op_profile_.active(), "Download");
    if (bytes > 0) std::memcpy(host_dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return queue_ != nullptr ? queue_->Synchronize() : absl::OkStatus(); }
  absl::StatusOr<device::PinnedHostBuffer> AllocatePinned(size_t bytes) override {
    return device::PinnedHostBuffer::Allocate(&memory(), bytes);
  }
  absl::StatusOr<std::unique_ptr<device::Event>> UploadBeside(void* dst, const void* pinned_src,
                                                              size_t bytes) override {
    if (deferred_ == nullptr) {
      // The copy runs here and now, on the calling thread; its event is
      // complete when returned.
      if (bytes > 0) std::memcpy(dst, pinned_src, bytes);
      return runtime_.CreateEvent();
    }
    device::Stream* copies = nullptr;
    {
      absl::MutexLock lock(&copy_stream_mutex_);
      if (copy_stream_ == nullptr) copy_stream_ = *deferred_->CreateStream();
      copies = copy_stream_.get();
    }
    auto copied = deferred_->CreateEvent();
    if (!copied.ok()) return copied.status();
    if (absl::Status s = deferred_->CopyAsync(dst, pinned_src, bytes, device::CopyKind::kHostToDevice, *copies);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = copies->Record(**copied); !s.ok()) return s;
    return copied;
  }
  absl::Status WaitFor(device::Event& event) override {
    return queue_ != nullptr ? queue_->Wait(event) : absl::OkStatus();
  }
  absl::Status StageThrough(float* host, int64_t n, float* const staging[2], int64_t chunk,
                            device::StagingPipeline::ChunkKernel kernel) override {
    device::ProfileSpan span(op_profile_.active(), "StageThrough");
    if (staging_ == nullptr) {
      device::Stream* compute = queue_.get();
      if (compute == nullptr) {
        // The kernels run as they are called: a CPU stream orders nothing more.
        auto stream = runtime_.CreateStream();
        if (!stream.ok()) return stream.status();
        compute_stream_ = *std::move(stream);
        compute = compute_stream_.get();
      }
      auto pipeline = device::StagingPipeline::Create(&memory(), compute);
      if (!pipeline.ok()) return pipeline.status();
      staging_ = *std::move(pipeline);
    }
    return staging_->Run(host, n, staging, chunk, kernel);
  }
  absl::Status CastToBf16(const float* fp32, uint16_t* bf16, int64_t n) override {
    return Issue("CastToBf16", [=] {
      for (int64_t i = 0; i < n; ++i) bf16[i] = kernels::cuda::Bf16FromFloat(fp32[i]);
    });
  }

  absl::Status EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                                int64_t rows, int64_t dim) override {
    return Issue("EmbeddingForward", [=] {
      kernels::EmbeddingForward(tokens, table, out, rows, dim);
    });
  }
  absl::Status EmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table,
                                 int64_t rows, int64_t dim) override {
    return Issue("EmbeddingBackward", [=] {
      kernels::EmbeddingBackward(tokens, d_out, d_table, rows, dim);
    });
  }
  absl::Status RmsNormForward(const float* x, const float* weight, float* y, float* rstd,
                              int64_t rows, int64_t dim, float eps) override {
    return Issue("RmsNormForward", [=] {
      kernels::RmsNormForward(x, weight, y, rstd, rows, dim, eps);
    });
  }
  absl::Status RmsNormBackward(const float* x, const float* weight, const float* rstd,
                               const float* dy, float* dx, float* dweight, int64_t rows,
                               int64_t dim) override {
    return Issue("RmsNormBackward", [=] {
      kernels::RmsNormBackward(x, weight, rstd, dy, dx, dweight, rows, dim);
    });
  }
  absl::Status LinearForward(const float* x, WeightView w, float* y, int64_t m, int64_t k,
                             int64_t n) override {
    return Issue("LinearForward", [=] {
      kernels::LinearForward(x, w.fp32, y, m, k, n);
    });
  }
  absl::Status LinearBackward(const float* x, WeightView w, const float* dy, float* dx,
                              float* dw, int64_t m, int64_t k, int64_t n) override {
    return Issue("LinearBackward", [=] {
      kernels::LinearBackward(x, w.fp32, dy, dx, dw, m, k, n);
    });
  }
  absl::Status RopeForward(float* x, const int32_t* positions, int64_t rows, int heads,
                           int head_dim, double theta) override {
    return Issue("RopeForward", [=] {
      kernels::RopeForward(x, positions, rows, heads, head_dim, theta);
    });
  }
  absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t rows, int heads,
                            int head_dim, double theta) override {
    return Issue("RopeBackward", [=] {
      kernels::RopeBackward(dx, positions, rows, heads, head_dim, theta);
    });
  }
  absl::Status SwiGluForward(const float* gate, const float* up, float* h, int64_t n) override {
    return Issue("SwiGluForward", [=] {
      kernels::SwiGluForward(gate, up, h, n);
    });
  }
  absl::Status SwiGluBackward(const float* gate, const float* up, const float* d_h,
                              float* d_gate, float* d_up, int64_t n) override {
    return Issue("SwiGluBackward", [=] {
      kernels::SwiGluBackward(gate, up, d_h, d_gate, d_up, n);
    });
  }
  absl::Status AddInto(float* dst, const float* src, int64_t n) override {
    return Issue("AddInto", [=] {
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    });
  }
  absl::Status AdamWUpdate(float* theta, float* m, float* v, const float* g,
                           const uint8_t* decays, int64_t n,
                           const kernels::host_device::AdamWScalars& scalars) override {
    return Issue("AdamWUpdate", [=] {
      optim::AdamWElements(theta, m, v, g, decays, n, scalars);
    });
  }
  absl::Status AdamSUpdate(float* theta, float* m, const float* g, const uint8_t* decays,
                           int64_t n, const kernels::host_device::AdamSScalars& scalars) override {
    return Issue("AdamSUpdate", [=] {
      optim::AdamSElements(theta, m, g, decays, n, scalars);
    });
  }
  absl::StatusOr<double> ClipByGlobalNorm(float* g, int64_t n, double max_norm) override {
    // The norm comes back to the host: after the queue's earlier work.
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    device::ProfileSpan span(op_profile_.active(), "ClipByGlobalNorm");
    return optim::ClipGradientNorm(g, n, max_norm);
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    return Issue("Copy", [=] {
      if (bytes > 0) std::memmove(dst, src, bytes);
    });
  }
  absl::Status Scale(float* x, int64_t n, float scale) override {
    return Issue("Scale", [=] {
      for (int64_t i = 0; i < n; ++i) x[i] *= scale;
    });
  }
  absl::Status ScapePayload(float* residual, const float* m, const float* g, int64_t n,
                            const kernels::host_device::ScapeReferenceScalars& scalars) override {
    return Issue("ScapePayload", [=] {
      for (int64_t j = 0; j < n; ++j) kernels::host_device::ScapePayloadElement(residual[j], m[j], g[j], scalars);
    });
  }
  absl::Status ScapePack(const int64_t* mask, int64_t count, float* residual,
                         float* values) override {
    return Issue("ScapePack", [=] {
      if (mask == nullptr) {
        std::memmove(values, residual, static_cast<size_t>(count) * sizeof(float));
        std::fill(residual, residual + count, 0.0f);
        return;
      }
      for (int64_t p = 0; p < count; ++p) kernels::host_device::PackAtMaskElement(p, mask, residual, values);
    });
  }
  absl::Status UnpackAtMask(const int64_t* mask, int64_t count, const float* values,
                            float* dense) override {
    return Issue("UnpackAtMask", [=] {
      for (int64_t p = 0; p < count; ++p) kernels::host_device::UnpackAtMaskElement(p, mask, values, dense);
    });
  }
  absl::Status ScapeReconstruct(float* values, const int64_t* mask, int64_t count, const float* m,
                                const kernels::host_device::ScapeReferenceScalars& scalars) override {
    return Issue("ScapeReconstruct", [=] {
      for (int64_t p = 0; p < count; ++p) {
        kernels::host_device::ScapeReconstructElement(values[p], m[mask != nullptr ? mask[p] : p], scalars);
      }
    });
  }
  absl::Status ScapeReferenceApply(float* theta, float* m, const float* g_hat, const int64_t* mask,
                                   int64_t count, const uint8_t* decays, int64_t n,
                                   const kernels::host_device::ScapeReferenceScalars& scalars) override {
    return Issue("ScapeReferenceApply", [=] {
      // Walks the coordinates once: the mask's in order, the rest between.
      int64_t p = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (p < count && (mask == nullptr ? p : mask[p]) == j) {
          kernels::host_device::ScapeReferenceOnMask(theta[j], m[j], g_hat[p++], decays[j] != 0, scalars);
        } else {
          kernels::host_device::ScapeReferenceOffMask(theta[j], m[j], decays[j] != 0, scalars);
        }
      }
    });
  }
  absl::Status ScapeAccumulate(float* residual, const float* g, int64_t n,
                               const kernels::host_device::ScapeCatchUpScalars& scalars) override {
    return Issue("ScapeAccumulate", [=] {
      for (int64_t j = 0; j < n; ++j) kernels::host_device::ScapeAccumulateElement(residual[j], g[j], scalars);
    });
  }
  absl::Status ScapeCatchUpApply(float* theta, float* m, float* vbar, const float* values,
                                 const int64_t* mask, const int32_t* windows, int64_t count,
                                 const uint8_t* decays, int64_t n,
                                 const kernels::host_device::ScapeCatchUpScalars& scalars,
                                 const kernels::host_device::CatchUpPowers& powers) override {
    return Issue("ScapeCatchUpApply", [=] {
      for (int64_t j = 0; j < n; ++j) theta[j] *= decays[j] ? scalars.decay : 1.0f;
      for (int64_t p = 0; p < count; ++p) {
        const int64_t j = mask != nullptr ? mask[p] : p;
        const int64_t k = windows[p];
        kernels::host_device::ScapeCatchUpOnMask(theta[j], m[j], vbar[j], values[p], k,
                                          kernels::host_device::CatchUpBeta1Power(k, powers),
                                          kernels::host_device::CatchUpSteps(k, powers), scalars);
      }
    });
  }
  absl::Status ScapeStampSynced(const int64_t* mask, int64_t count, int32_t stamp, int32_t* synced,
                                int32_t* windows) override {
    return Issue("ScapeStampSynced", [=] {
      for (int64_t p = 0; p < count; ++p) {
        kernels::host_device::StampSyncedElement(p, mask, stamp, synced, windows);
      }
    });
  }
  absl::Status ScapeMaskStatistic(const float* m, const float* e, const float* vbar, int64_t n,
                                  kernels::host_device::MaskStatistic statistic,
                                  const kernels::host_device::MaskStatisticScalars& scalars,
                                  float* out) override {
    return Issue("ScapeMaskStatistic", [=] {
      const bool reads_v = statistic == kernels::host_device::MaskStatistic::kNormalizedResidual;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = kernels::host_device::MaskStatisticElement(statistic, m[i], e[i], reads_v ? vbar[i] : 0.0f,
                                                     scalars);
      }
    });
  }
  absl::Status SelectLargestMagnitudes(const float* values,
                                       absl::Span<const kernels::host_device::TopKSegment> segments,
                                       int64_t begin, int64_t* out_indices) override {
    for (const kernels::host_device::TopKSegment& segment : segments) {
      if (segment.offset < 0 || segment.numel < 0) {
        return absl::InvalidArgumentError(absl::StrCat("top-k: a segment at ", segment.offset,
                                                       " of ", segment.numel, " entries"));
      }
    }
    return Issue("SelectLargestMagnitudes",
                 [=, segments = std::vector<kernels::host_device::TopKSegment>(segments.begin(), segments.end())] {
                   int64_t* out = out_indices;
                   std::vector<float> magnitudes;
                   for (const kernels::host_device::TopKSegment& segment : segments) {
                     magnitudes.resize(segment.numel);
                     for (int64_t i = 0; i < segment.numel; ++i) {
                       magnitudes[i] = std::fabs(values[segment.offset + i]);
                     }
                     const std::vector<int64_t> chosen =
                         optim::SelectTopK(magnitudes, begin + segment.offset, segment.k);
                     out = std::copy(chosen.begin(), chosen.end(), out);
                   }
                 });
  }
  absl::StatusOr<CrossEntropyResult> CrossEntropy(const float* logits, const int32_t* targets,
                                                  int64_t rows, int64_t vocab, float* d_logits,
                                                  float grad_scale) override {
    // The loss comes back to the host: after the queue's earlier work.
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    device::ProfileSpan span(op_profile_.active(), "CrossEntropy");
    const kernels::CrossEntropyResult ce =
        kernels::CrossEntropy(logits, targets, rows, vocab, d_logits, grad_scale);
    return CrossEntropyResult{ce.loss_sum, ce.tokens};
  }
  CoreAttentionExecutor& local_attention() override {
    if (queued_attention_ != nullptr) return *queued_attention_;
    return attention_;
  }
  device::OnDemandProfiler& op_profile() override { return op_profile_; }

 private:
  // The device memory's runtime: the deferred one's frees wait for its
  // streams, as cudaFree does.
  device::DeviceRuntime& memory() {
    if (deferred_ != nullptr) return *deferred_;
    return runtime_;
  }
  // Runs `kernel` now (a span of the op profile), or queues it.
  template <typename Kernel>
  absl::Status Issue(const char* name, Kernel kernel) {
    if (queue_ != nullptr) return queue_->EnqueueHost(std::move(kernel));
    device::ProfileSpan span(op_profile_.active(), name);
    kernel();
    return absl::OkStatus();
  }

  const CpuParameterMode mode_;
  device::CpuDeviceRuntime runtime_;
  std::unique_ptr<device::DeferredDeviceRuntime> deferred_;
  device::CachingAllocator allocator_;
  LocalCoreAttention attention_;
  // kDeferred*: the stream every kernel is queued on, UploadBeside's own,
  // and core attention after the queue.
  std::unique_ptr<device::Stream> queue_;
  absl::Mutex copy_stream_mutex_;
  std::unique_ptr<device::Stream> copy_stream_ ABSL_GUARDED_BY(copy_stream_mutex_);
  std::unique_ptr<QueuedAttention> queued_attention_;
  std::unique_ptr<device::Stream> compute_stream_;
  std::unique_ptr<device::StagingPipeline> staging_;
  // The kernels run on the calling thread: the profile's own stream marks
  // wall time (deferred kernels are not in it).
  device::OnDemandProfiler op_profile_{&runtime_, nullptr};
};

}  // namespace

absl::StatusOr<device::DeviceBuffer> AllocateZeroed(ModelOps& ops, size_t bytes) {
  auto buffer = ops.Allocate(bytes);
  if (!buffer.ok()) return buffer.status();
  if (absl::Status s = ops.Zero(buffer->data(), bytes); !s.ok()) return s;
  return buffer;
}

absl::StatusOr<device::DeviceBuffer> AllocateCopy(ModelOps& ops, const void* host_src,
                                                  size_t bytes) {
  auto buffer = ops.Allocate(bytes);
  if (!buffer.ok()) return buffer.status();
  if (absl::Status s = ops.Upload(buffer->data(), host_src, bytes); !s.ok()) return s;
  return buffer;
}

absl::StatusOr<std::vector<float>> DownloadFloats(ModelOps& ops, const void* src, int64_t count) {
  std::vector<float> values(count);
  if (absl::Status s = ops.Download(values.data(), src, values.size() * sizeof(float)); !s.ok()) {
    return s;
  }
  return values;
}

absl::Status EnsureCapacity(ModelOps& ops, device::DeviceBuffer& buffer, size_t bytes) {
  if (buffer.size() >= bytes) return absl::OkStatus();
  if (absl::Status s = ops.Synchronize(); !s.ok()) return s;
  buffer.Reset();
  auto grown = ops.Allocate(bytes);
  if (!grown.ok()) return grown.status();
  buffer = *std::move(grown);
  return absl::OkStatus();
}

std::unique_ptr<ModelOps> NewCpuModelOps(CpuParameterMode mode, ThreadPool* pool,
                                         int64_t capacity_bytes, CpuExecution execution) {
  if (mode == CpuParameterMode::kInPlace) execution = CpuExecution::kImmediate;
  return std::make_unique<CpuModelOps>(mode, pool, capacity_bytes, execution);
}

absl::StatusOr<std::unique_ptr<ModelOps>> OpenModelOps(const device::Device& device,
                                                       Precision precision, ThreadPool* pool) {
  if (!device.is_cuda()) {
    if (precision != Precision::kFp32) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision ", PrecisionName(precision),
                       " needs a GPU: the CPU backend computes in fp32 (the reference)"));
    }
    return NewCpuModelOps(CpuParameterMode::kInPlace, pool);
  }
#ifdef CORESCAPE_WITH_CUDA
  return NewCudaModelOps(device, precision);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", device.ToString(),
      ": this binary was built without CUDA (build it with --config=cuda, or train on cpu)"));
#endif
}

}  // namespace corescape::model
