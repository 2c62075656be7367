#include "runtime/model/cuda_model_ops.h"

#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/base/status_macros.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/device/cuda_status.h"
#include "runtime/kernels/cuda/casts_cuda.h"
#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"
#include "runtime/kernels/cuda/cross_entropy_cuda.h"
#include "runtime/kernels/cuda/embedding_cuda.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/mask_bits.h"
#include "runtime/kernels/cuda/mask_bits_cuda.h"
#include "runtime/kernels/cuda/optim_updates_cuda.h"
#include "runtime/kernels/cuda/rmsnorm_cuda.h"
#include "runtime/kernels/cuda/rope_cuda.h"
#include "runtime/kernels/cuda/swiglu_cuda.h"
#include "runtime/kernels/cuda/topk_cuda.h"

namespace corescape::model {
namespace {

namespace kc = kernels::cuda;

// Core attention on the GPU over device pointers: the fp32 launches in fp32
// precision, the tensor-core ones in bf16 (Q, K, V and dO rounded to bf16
// into scratch first, again in the backward, which is cheaper than keeping
// every layer's copies). The tile plan depends only on the task list and
// the row count, which every layer of a micro-batch shares: it is planned
// and uploaded once per distinct list (two kept, for the two halves of
// ping-pong).
class CudaCoreAttention final : public CoreAttentionExecutor {
 public:
  CudaCoreAttention(ModelOps* ops, device::CachingAllocator* allocator, device::Stream* stream,
                    Precision precision)
      : ops_(ops), allocator_(allocator), stream_(stream), precision_(precision) {}

  absl::Status Forward(const AttentionForwardCall& c) override {
    auto tiles = TilesFor(c.in);
    if (!tiles.ok()) return tiles.status();
    if (precision_ == Precision::kFp32) {
      return kc::LaunchCoreAttentionForward((*tiles)->view(), c.in.q, c.in.k, c.in.v, c.o, c.lse,
                                            device::CudaStreamOf(*stream_));
    }
    auto inputs = Bf16Inputs(c.in, nullptr);
    if (!inputs.ok()) return inputs.status();
    return kc::LaunchCoreAttentionForwardBf16((*tiles)->view(), inputs->q, inputs->k, inputs->v, c.o,
                                              c.lse, device::CudaStreamOf(*stream_));
  }
  absl::Status Backward(const AttentionBackwardCall& c) override {
    auto tiles = TilesFor(c.in);
    if (!tiles.ok()) return tiles.status();
    const size_t delta_bytes =
        static_cast<size_t>(c.in.rows) * c.in.shape.n_heads * sizeof(float);
    CORESCAPE_RETURN_IF_ERROR(EnsureCapacity(*ops_, delta_, delta_bytes));
    if (precision_ == Precision::kFp32) {
      return kc::LaunchCoreAttentionBackward((*tiles)->view(), c.in.q, c.in.k, c.in.v, c.o, c.lse,
                                             c.d_o, delta_.as<float>(), c.d_q, c.d_k, c.d_v,
                                             device::CudaStreamOf(*stream_));
    }
    auto inputs = Bf16Inputs(c.in, c.d_o);
    if (!inputs.ok()) return inputs.status();
    return kc::LaunchCoreAttentionBackwardBf16((*tiles)->view(), inputs->q, inputs->k, inputs->v, c.o,
                                               c.lse, inputs->d_o, delta_.as<float>(), c.d_q, c.d_k,
                                               c.d_v, device::CudaStreamOf(*stream_));
  }

 private:
  struct Bf16Views {
    const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *d_o = nullptr;
  };

  // Q, K, V (and dO when given) rounded to bf16 in this executor's scratch.
  absl::StatusOr<Bf16Views> Bf16Inputs(const AttentionInputs& in, const float* d_o) {
    const int64_t q_count = in.rows * in.shape.n_heads * in.shape.head_dim;
    const int64_t kv_count = in.rows * in.shape.n_kv_heads * in.shape.head_dim;
    Bf16Views views;
    auto round = [&](int slot, const float* src, int64_t n,
                     const uint16_t** out) -> absl::Status {
      device::DeviceBuffer& buffer = bf16_inputs_[slot];
      CORESCAPE_RETURN_IF_ERROR(
          EnsureCapacity(*ops_, buffer, static_cast<size_t>(n) * sizeof(uint16_t)));
      CORESCAPE_RETURN_IF_ERROR(ops_->CastToBf16(src, buffer.as<uint16_t>(), n));
      *out = buffer.as<uint16_t>();
      return absl::OkStatus();
    };
    CORESCAPE_RETURN_IF_ERROR(round(0, in.q, q_count, &views.q));
    CORESCAPE_RETURN_IF_ERROR(round(1, in.k, kv_count, &views.k));
    CORESCAPE_RETURN_IF_ERROR(round(2, in.v, kv_count, &views.v));
    if (d_o != nullptr) CORESCAPE_RETURN_IF_ERROR(round(3, d_o, q_count, &views.d_o));
    return views;
  }

  struct Plan {
    std::vector<kernels::AttentionTask> tasks;
    int64_t rows = 0;
    kernels::AttentionShape shape;
    kc::UploadedCoreAttentionTiles tiles;
  };

  absl::StatusOr<const kc::UploadedCoreAttentionTiles*> TilesFor(const AttentionInputs& in) {
    for (const std::unique_ptr<Plan>& plan : plans_) {
      if (plan->rows == in.rows && plan->shape.n_heads == in.shape.n_heads &&
          plan->shape.n_kv_heads == in.shape.n_kv_heads &&
          plan->shape.head_dim == in.shape.head_dim &&
          std::equal(in.tasks.begin(), in.tasks.end(), plan->tasks.begin(), plan->tasks.end())) {
        return &plan->tiles;
      }
    }
    auto planned = kc::PlanCoreAttentionTiles(in.shape, in.tasks, in.rows, in.rows);
    if (!planned.ok()) return planned.status();
    auto uploaded = kc::UploadCoreAttentionTiles(*planned, *allocator_, *stream_);
    if (!uploaded.ok()) return uploaded.status();
    auto plan = std::make_unique<Plan>();
    plan->tasks.assign(in.tasks.begin(), in.tasks.end());
    plan->rows = in.rows;
    plan->shape = in.shape;
    plan->tiles = *std::move(uploaded);
    if (plans_.size() == kPlansKept) plans_.erase(plans_.begin());
    plans_.push_back(std::move(plan));
    return &plans_.back()->tiles;
  }

  static constexpr size_t kPlansKept = 2;
  ModelOps* ops_;
  device::CachingAllocator* allocator_;
  device::Stream* stream_;
  const Precision precision_;
  std::vector<std::unique_ptr<Plan>> plans_;
  device::DeviceBuffer delta_;
  device::DeviceBuffer bf16_inputs_[4];  // q, k, v, d_o
};

class CudaModelOps final : public ModelOps {
 public:
  CudaModelOps(device::Device device, Precision precision,
               std::unique_ptr<device::DeviceRuntime> runtime,
               std::unique_ptr<device::Stream> stream, std::unique_ptr<kc::CublasHandle> cublas)
      : device_(device),
        precision_(precision),
        runtime_(std::move(runtime)),
        allocator_(std::make_unique<device::CachingAllocator>(runtime_.get())),
        stream_(std::move(stream)),
        cublas_(std::move(cublas)),
        attention_(this, allocator_.get(), stream_.get(), precision) {}

  ~CudaModelOps() override {
    // Work in flight may still read buffers about to go back to the cache.
    (void)stream_->Synchronize();
  }

  device::Device device() const override { return device_; }
  Precision precision() const override { return precision_; }
  bool host_addressable() const override { return false; }
  bool parameters_in_place() const override { return false; }

  absl::StatusOr<device::DeviceBuffer> Allocate(size_t bytes) override {
    return allocator_->Allocate(bytes);
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    device::ProfileSpan span(op_profile_.active(), "Zero");
    if (bytes == 0) return absl::OkStatus();
    return device::CudaStatus(cudaMemsetAsync(dst, 0, bytes, stream()), "cudaMemsetAsync");
  }
  absl::Status Upload(void* dst, const void* host_src, size_t bytes) override {
    device::ProfileSpan span(op_profile_.active(), "Upload");
    if (bytes == 0) return absl::OkStatus();
    CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(dst, host_src, bytes,
                                                  device::CopyKind::kHostToDevice, *stream_));
    // Pageable host memory: the caller may reuse it once this returns.
    return stream_->Synchronize();
  }
  absl::Status Download(void* host_dst, const void* src, size_t bytes) override {
    device::ProfileSpan span(op_profile_.active(), "Download");
    if (bytes == 0) return absl::OkStatus();
    CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(host_dst, src, bytes,
                                                  device::CopyKind::kDeviceToHost, *stream_));
    return stream_->Synchronize();
  }
  absl::Status Synchronize() override { return stream_->Synchronize(); }
  absl::StatusOr<device::PinnedHostBuffer> AllocatePinned(size_t bytes) override {
    return device::PinnedHostBuffer::Allocate(runtime_.get(), bytes);
  }
  absl::StatusOr<std::unique_ptr<device::Event>> UploadBeside(void* dst, const void* pinned_src,
                                                              size_t bytes) override {
    device::Stream* copies = nullptr;
    {
      absl::MutexLock lock(&copy_stream_mutex_);
      if (copy_stream_ == nullptr) {
        auto created = runtime_->CreateStream();
        if (!created.ok()) return created.status();
        copy_stream_ = *std::move(created);
      }
      copies = copy_stream_.get();
    }
    auto copied = runtime_->CreateEvent();
    if (!copied.ok()) return copied.status();
    absl::Status status = bytes > 0 ? runtime_->CopyAsync(dst, pinned_src, bytes,
                                                          device::CopyKind::kHostToDevice, *copies)
                                    : absl::OkStatus();
    if (status.ok()) status = copies->Record(**copied);
    if (!status.ok()) {
      // No event will tell the caller when dst and pinned_src are free:
      // they are once nothing is left in flight.
      copies->Synchronize().IgnoreError();
      return status;
    }
    return copied;
  }
  absl::Status WaitFor(device::Event& event) override { return stream_->Wait(event); }
  absl::Status StageThrough(float* host, int64_t n, float* const staging[2], int64_t chunk,
                            device::StagingPipeline::ChunkKernel kernel) override {
    device::ProfileSpan span(op_profile_.active(), "StageThrough");
    if (staging_ == nullptr) {
      auto pipeline = device::StagingPipeline::Create(runtime_.get(), stream_.get());
      if (!pipeline.ok()) return pipeline.status();
      staging_ = *std::move(pipeline);
    }
    return staging_->Run(host, n, staging, chunk, kernel);
  }
  absl::Status CastToBf16(const float* fp32, uint16_t* bf16, int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "CastToBf16");
    return kc::LaunchBf16FromFloat(fp32, bf16, n, stream());
  }

  absl::Status EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                                int64_t rows, int64_t dim) override {
    device::ProfileSpan span(op_profile_.active(), "EmbeddingForward");
    return kc::LaunchEmbeddingForward(tokens, table, out, rows, dim, stream());
  }
  absl::Status EmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table,
                                 int64_t rows, int64_t dim) override {
    device::ProfileSpan span(op_profile_.active(), "EmbeddingBackward");
    return kc::LaunchEmbeddingBackward(tokens, d_out, d_table, rows, dim, stream());
  }
  absl::Status RmsNormForward(const float* x, const float* weight, float* y, float* rstd,
                              int64_t rows, int64_t dim, float eps) override {
    device::ProfileSpan span(op_profile_.active(), "RmsNormForward");
    return kc::LaunchRmsNormForward(x, weight, y, rstd, rows, dim, eps, stream());
  }
  absl::Status RmsNormBackward(const float* x, const float* weight, const float* rstd,
                               const float* dy, float* dx, float* dweight, int64_t rows,
                               int64_t dim) override {
    device::ProfileSpan span(op_profile_.active(), "RmsNormBackward");
    return kc::LaunchRmsNormBackward(x, weight, rstd, dy, dx, dweight, rows, dim, stream());
  }
  absl::Status LinearForward(const float* x, WeightView w, float* y, int64_t m, int64_t k,
                             int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "LinearForward");
    if (precision_ == Precision::kFp32) {
      return kc::LinearForwardF32(*cublas_, x, w.fp32, y, m, k, n, stream());
    }
    if (w.bf16 == nullptr) return MissingShadow("LinearForward");
    auto x16 = Bf16Scratch(0, x, m * k);
    if (!x16.ok()) return x16.status();
    return kc::LinearForwardBf16(*cublas_, *x16, w.bf16, y, m, k, n, stream());
  }
  absl::Status LinearBackward(const float* x, WeightView w, const float* dy, float* dx,
                              float* dw, int64_t m, int64_t k, int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "LinearBackward");
    if (precision_ == Precision::kFp32) {
      return kc::LinearBackwardF32(*cublas_, x, w.fp32, dy, dx, dw, m, k, n, stream());
    }
    if (w.bf16 == nullptr) return MissingShadow("LinearBackward");
    auto x16 = Bf16Scratch(0, x, m * k);
    if (!x16.ok()) return x16.status();
    auto dy16 = Bf16Scratch(1, dy, m * n);
    if (!dy16.ok()) return dy16.status();
    return kc::LinearBackwardBf16(*cublas_, *x16, w.bf16, *dy16, dx, dw, m, k, n, stream());
  }
  absl::Status RopeForward(float* x, const int32_t* positions, int64_t rows, int heads,
                           int head_dim, double theta) override {
    device::ProfileSpan span(op_profile_.active(), "RopeForward");
    return kc::LaunchRope(x, positions, rows, heads, head_dim, theta, 1.0, stream());
  }
  absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t rows, int heads,
                            int head_dim, double theta) override {
    device::ProfileSpan span(op_profile_.active(), "RopeBackward");
    return kc::LaunchRope(dx, positions, rows, heads, head_dim, theta, -1.0, stream());
  }
  absl::Status SwiGluForward(const float* gate, const float* up, float* h, int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "SwiGluForward");
    return kc::LaunchSwiGluForward(gate, up, h, n, stream());
  }
  absl::Status SwiGluBackward(const float* gate, const float* up, const float* d_h,
                              float* d_gate, float* d_up, int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "SwiGluBackward");
    return kc::LaunchSwiGluBackward(gate, up, d_h, d_gate, d_up, n, stream());
  }
  absl::Status AddInto(float* dst, const float* src, int64_t n) override {
    device::ProfileSpan span(op_profile_.active(), "AddInto");
    if (n <= 0) return absl::OkStatus();
    if (n > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("AddInto: ", n, " values (at most ", INT_MAX, ")"));
    }
    const float one = 1.0f;
    CORESCAPE_RETURN_IF_ERROR(kc::CublasStatus(cublasSetStream(cublas_->get(), stream()),
                                               "cublasSetStream"));
    return kc::CublasStatus(
        cublasSaxpy(cublas_->get(), static_cast<int>(n), &one, src, 1, dst, 1), "cublasSaxpy");
  }
  absl::StatusOr<CrossEntropyResult> CrossEntropy(const float* logits, const int32_t* targets,
                                                  int64_t rows, int64_t vocab, float* d_logits,
                                                  float grad_scale) override {
    device::ProfileSpan span(op_profile_.active(), "CrossEntropy");
    const size_t loss_bytes = static_cast<size_t>(rows) * sizeof(double);
    const size_t counted_bytes = static_cast<size_t>(rows);
    auto losses = allocator_->Allocate(loss_bytes);
    if (!losses.ok()) return losses.status();
    auto counted = allocator_->Allocate(counted_bytes);
    if (!counted.ok()) return counted.status();
    CORESCAPE_RETURN_IF_ERROR(kc::LaunchCrossEntropy(logits, targets, rows, vocab, d_logits,
                                                     grad_scale, losses->as<double>(),
                                                     counted->as<uint8_t>(), stream()));
    std::vector<double> host_losses(rows);
    std::vector<uint8_t> host_counted(rows);
    CORESCAPE_RETURN_IF_ERROR(Download(host_losses.data(), losses->data(), loss_bytes));
    CORESCAPE_RETURN_IF_ERROR(Download(host_counted.data(), counted->data(), counted_bytes));
    // Rows summed in order, as the CPU kernel sums them.
    CrossEntropyResult result;
    for (int64_t r = 0; r < rows; ++r) {
      if (!host_counted[r]) continue;
      result.loss_sum += host_losses[r];
      ++result.tokens;
    }
    return result;
  }
  absl::Status AdamWUpdate(float* theta, float* m, float* v, const float* g,
                           const uint8_t* decays, int64_t n,
                           const kernels::host_device::AdamWScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "AdamWUpdate");
    return kc::LaunchAdamW(theta, m, v, g, decays, n, scalars, stream());
  }
  absl::Status AdamSUpdate(float* theta, float* m, const float* g, const uint8_t* decays,
                           int64_t n, const kernels::host_device::AdamSScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "AdamSUpdate");
    return kc::LaunchAdamS(theta, m, g, decays, n, scalars, stream());
  }
  absl::StatusOr<double> ClipByGlobalNorm(float* g, int64_t n, double max_norm) override {
    device::ProfileSpan span(op_profile_.active(), "ClipByGlobalNorm");
    constexpr size_t kSumsBytes = (kc::kClipSumBlocks + 1) * sizeof(double);
    auto sums = allocator_->Allocate(kSumsBytes);
    if (!sums.ok()) return sums.status();
    CORESCAPE_RETURN_IF_ERROR(
        kc::LaunchClipByGlobalNorm(g, n, max_norm, sums->as<double>(), stream()));
    double sum_squares = 0.0;
    CORESCAPE_RETURN_IF_ERROR(Download(&sum_squares, sums->as<double>() + kc::kClipSumBlocks,
                                       sizeof(double)));
    return std::sqrt(sum_squares);
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    device::ProfileSpan span(op_profile_.active(), "Copy");
    return runtime_->CopyAsync(dst, src, bytes, device::CopyKind::kDeviceToDevice, *stream_);
  }
  absl::Status Scale(float* x, int64_t n, float scale) override {
    device::ProfileSpan span(op_profile_.active(), "Scale");
    if (n <= 0) return absl::OkStatus();
    if (n > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("Scale: ", n, " values (at most ", INT_MAX, ")"));
    }
    CORESCAPE_RETURN_IF_ERROR(kc::CublasStatus(cublasSetStream(cublas_->get(), stream()),
                                               "cublasSetStream"));
    return kc::CublasStatus(cublasSscal(cublas_->get(), static_cast<int>(n), &scale, x, 1),
                            "cublasSscal");
  }
  absl::Status ScapePayload(float* residual, const float* m, const float* g, int64_t n,
                            const kernels::host_device::ScapeReferenceScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "ScapePayload");
    return kc::LaunchScapePayload(residual, m, g, n, scalars, stream());
  }
  absl::Status ScapePack(const int64_t* mask, int64_t count, float* residual,
                         float* values) override {
    device::ProfileSpan span(op_profile_.active(), "ScapePack");
    if (mask != nullptr) return kc::LaunchPackAtMask(mask, count, residual, values, stream());
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    CORESCAPE_RETURN_IF_ERROR(Copy(values, residual, bytes));
    return Zero(residual, bytes);
  }
  absl::Status UnpackAtMask(const int64_t* mask, int64_t count, const float* values,
                            float* dense) override {
    device::ProfileSpan span(op_profile_.active(), "UnpackAtMask");
    return kc::LaunchUnpackAtMask(mask, count, values, dense, stream());
  }
  absl::Status ScapeReconstruct(float* values, const int64_t* mask, int64_t count, const float* m,
                                const kernels::host_device::ScapeReferenceScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeReconstruct");
    return kc::LaunchScapeReconstruct(values, mask, count, m, scalars, stream());
  }
  absl::Status ScapeReferenceApply(float* theta, float* m, const float* g_hat, const int64_t* mask,
                                   int64_t count, const uint8_t* decays, int64_t n,
                                   const kernels::host_device::ScapeReferenceScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeReferenceApply");
    const uint32_t* words = nullptr;
    device::DeviceBuffer mask_words;
    if (mask != nullptr) {
      auto allocated = allocator_->Allocate(static_cast<size_t>(kc::MaskWords(n)) * sizeof(uint32_t));
      if (!allocated.ok()) return allocated.status();
      mask_words = *std::move(allocated);
      CORESCAPE_RETURN_IF_ERROR(
          kc::LaunchSetMaskBits(mask, count, 0, n, mask_words.as<uint32_t>(), stream()));
      words = mask_words.as<uint32_t>();
    }
    CORESCAPE_RETURN_IF_ERROR(kc::LaunchScapeReferenceApply(theta, m, g_hat, mask, count, words,
                                                            decays, n, scalars, stream()));
    // The words go back to the cache when this returns; the stream still reads them.
    return stream_->Synchronize();
  }
  absl::Status ScapeAccumulate(float* residual, const float* g, int64_t n,
                               const kernels::host_device::ScapeCatchUpScalars& scalars) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeAccumulate");
    return kc::LaunchScapeAccumulate(residual, g, n, scalars, stream());
  }
  absl::Status ScapeCatchUpApply(float* theta, float* m, float* vbar, const float* values,
                                 const int64_t* mask, const int32_t* windows, int64_t count,
                                 const uint8_t* decays, int64_t n,
                                 const kernels::host_device::ScapeCatchUpScalars& scalars,
                                 const kernels::host_device::CatchUpPowers& powers) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeCatchUpApply");
    return kc::LaunchScapeCatchUpApply(theta, m, vbar, values, mask, windows, count, decays, n,
                                       scalars, powers, stream());
  }
  absl::Status ScapeStampSynced(const int64_t* mask, int64_t count, int32_t stamp, int32_t* synced,
                                int32_t* windows) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeStampSynced");
    return kc::LaunchStampSynced(mask, count, stamp, synced, windows, stream());
  }
  absl::Status ScapeMaskStatistic(const float* m, const float* e, const float* vbar, int64_t n,
                                  kernels::host_device::MaskStatistic statistic,
                                  const kernels::host_device::MaskStatisticScalars& scalars, float* out) override {
    device::ProfileSpan span(op_profile_.active(), "ScapeMaskStatistic");
    return kc::LaunchMaskStatistic(m, e, vbar, n, statistic, scalars, out, stream());
  }
  absl::Status SelectLargestMagnitudes(const float* values,
                                       absl::Span<const kernels::host_device::TopKSegment> segments, int64_t begin,
                                       int64_t* out_indices) override {
    device::ProfileSpan span(op_profile_.active(), "SelectLargestMagnitudes");
    auto bytes = kc::TopKScratchBytes(segments);
    if (!bytes.ok()) return bytes.status();
    CORESCAPE_RETURN_IF_ERROR(EnsureCapacity(*this, topk_scratch_, *bytes));
    return kc::SelectTopKInSegments(values, segments, begin, out_indices, topk_scratch_.data(),
                                    topk_scratch_.size(), stream(), kernels::host_device::TopKBy::kMagnitude);
  }
  CoreAttentionExecutor& local_attention() override { return attention_; }
  device::OnDemandProfiler& op_profile() override { return op_profile_; }

 private:
  cudaStream_t stream() { return device::CudaStreamOf(*stream_); }

  static absl::Status MissingShadow(const char* what) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": bf16 precision without the weights' bf16 copy"));
  }

  // The bf16 rounding of src[0, n) in scratch slot `slot` (two: a
  // backward GEMM needs x and dy at once), grown as needed.
  absl::StatusOr<const uint16_t*> Bf16Scratch(int slot, const float* src, int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(uint16_t);
    device::DeviceBuffer& buffer = bf16_scratch_[slot];
    CORESCAPE_RETURN_IF_ERROR(EnsureCapacity(*this, buffer, bytes));
    CORESCAPE_RETURN_IF_ERROR(kc::LaunchBf16FromFloat(src, buffer.as<uint16_t>(), n, stream()));
    return buffer.as<uint16_t>();
  }

  const device::Device device_;
  const Precision precision_;
  std::unique_ptr<device::DeviceRuntime> runtime_;
  std::unique_ptr<device::CachingAllocator> allocator_;
  std::unique_ptr<device::Stream> stream_;
  std::unique_ptr<kc::CublasHandle> cublas_;
  device::DeviceBuffer bf16_scratch_[2];
  device::DeviceBuffer topk_scratch_;  // the largest top-k's, grown as needed
  CudaCoreAttention attention_;
  std::unique_ptr<device::StagingPipeline> staging_;  // made at the first StageThrough
  // UploadBeside's stream, made at its first call (from whichever thread).
  absl::Mutex copy_stream_mutex_;
  std::unique_ptr<device::Stream> copy_stream_ ABSL_GUARDED_BY(copy_stream_mutex_);
  device::OnDemandProfiler op_profile_{runtime_.get(), stream_.get()};
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelOps>> NewCudaModelOps(const device::Device& device,
                                                          Precision precision) {
  auto runtime = device::OpenDevice(device);
  if (!runtime.ok()) return runtime.status();
  auto stream = (*runtime)->CreateStream();
  if (!stream.ok()) return stream.status();
  // cuBLAS binds its handle to the current device.
  CORESCAPE_RETURN_IF_ERROR(device::CudaStatus(cudaSetDevice(device.index), "cudaSetDevice"));
  auto cublas = kc::CublasHandle::Create();
  if (!cublas.ok()) return cublas.status();
  return std::unique_ptr<ModelOps>(new CudaModelOps(device, precision, *std::move(runtime),
                                                    *std::move(stream), *std::move(cublas)));
}

}  // namespace corescape::model
