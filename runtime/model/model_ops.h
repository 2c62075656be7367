#ifndef CORESCAPE_RUNTIME_MODEL_MODEL_OPS_H_
#define CORESCAPE_RUNTIME_MODEL_MODEL_OPS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/device/staging_pipeline.h"
#include "runtime/device/stream_profiler.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/precision.h"

namespace corescape::model {

// A matrix of the model's parameters as the GEMMs read it: the fp32 master
// copy in the backend's memory and, under bf16, its bf16 shadow.
struct WeightView {
  const float* fp32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

// The kernels of one training step over one device: the transformer is
// written once against this, and a backend decides where its arrays live
// and what runs on them. Every pointer argument points into the backend's
// memory (Allocate), except the host-side arguments named as such. Calls
// are ordered as issued (one stream); Synchronize waits for all of them.
// Every call validates what it can and returns an error naming the kernel.
class ModelOps {
 public:
  virtual ~ModelOps() = default;

  virtual device::Device device() const = 0;
  virtual Precision precision() const = 0;
  // Whether the backend's memory is this process's host memory, so host
  // code (the CPU attention executors) may read and write it directly.
  virtual bool host_addressable() const = 0;
  // Whether the kernels work on the host parameter and gradient vectors
  // themselves (no uploads or downloads).
  virtual bool parameters_in_place() const = 0;

  // Memory. Allocate does not clear; Zero does.
  virtual absl::StatusOr<device::DeviceBuffer> Allocate(size_t bytes) = 0;
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  virtual absl::Status Upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status Download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;
  // Writes the bf16 rounding of fp32[0, n) (round to nearest even).
  virtual absl::Status CastToBf16(const float* fp32, uint16_t* bf16, int64_t n) = 0;

  // Host memory this backend copies to and from asynchronously (page-locked
  // under CUDA): state kept off the device between steps.
  virtual absl::StatusOr<device::PinnedHostBuffer> AllocatePinned(size_t bytes) = 0;
  // Copies `bytes` from `pinned_src` (AllocatePinned memory) to `dst` on a
  // copy stream of the backend's own, beside the kernels: returns once the
  // copy is issued, with an event that completes with it. The one call that
  // may come from another thread than the one issuing the kernels (it
  // touches no other state of the backend's). WaitFor orders the kernels
  // issued after it behind such an event; `dst` must not be read before.
  // On an error nothing it issued is still in flight.
  virtual absl::StatusOr<std::unique_ptr<device::Event>> UploadBeside(void* dst,
                                                                      const void* pinned_src,
                                                                      size_t bytes) = 0;
  virtual absl::Status WaitFor(device::Event& event) = 0;
  // Runs `kernel` (which issues this backend's calls) over host[0, n), from
  // AllocatePinned, `chunk` floats at a time through two staging buffers in
  // this backend's memory (device::StagingPipeline: chunk i+1 uploads and
  // chunk i−1 downloads while chunk i computes). Returns once host holds the
  // results.
  virtual absl::Status StageThrough(float* host, int64_t n, float* const staging[2], int64_t chunk,
                                    device::StagingPipeline::ChunkKernel kernel) = 0;

  // The dense kernels (runtime/kernels/cpu/*.h say what each computes).
  virtual absl::Status EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                                        int64_t rows, int64_t dim) = 0;
  // d_table += (accumulated).
  virtual absl::Status EmbeddingBackward(const int32_t* tokens, const float* d_out,
                                         float* d_table, int64_t rows, int64_t dim) = 0;
  virtual absl::Status RmsNormForward(const float* x, const float* weight, float* y, float* rstd,
                                      int64_t rows, int64_t dim, float eps) = 0;
  // dx += and dweight += (both accumulated).
  virtual absl::Status RmsNormBackward(const float* x, const float* weight, const float* rstd,
                                       const float* dy, float* dx, float* dweight, int64_t rows,
                                       int64_t dim) = 0;
  // y[m, n] = x[m, k] · w[n, k]ᵀ.
  virtual absl::Status LinearForward(const float* x, WeightView w, float* y, int64_t m, int64_t k,
                                     int64_t n) = 0;
  // dx = dy · w (overwritten; skipped when null); dw += dyᵀ · x.
  virtual absl::Status LinearBackward(const float* x, WeightView w, const float* dy, float* dx,
                                      float* dw, int64_t m, int64_t k, int64_t n) = 0;
  // In place; `positions` has one entry per row.
  virtual absl::Status RopeForward(float* x, const int32_t* positions, int64_t rows, int heads,
                                   int head_dim, double theta) = 0;
  virtual absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t rows, int heads,
                                    int head_dim, double theta) = 0;
  virtual absl::Status SwiGluForward(const float* gate, const float* up, float* h, int64_t n) = 0;
  virtual absl::Status SwiGluBackward(const float* gate, const float* up, const float* d_h,
                                      float* d_gate, float* d_up, int64_t n) = 0;
  // dst[i] += src[i].
  virtual absl::Status AddInto(float* dst, const float* src, int64_t n) = 0;
  // Softmax cross-entropy (kernels::CrossEntropy); `host_targets` is the
  // same targets in host memory (for counting); d_logits may be null.
  // Returns the summed loss and counted tokens on the host (synchronizes).
  struct CrossEntropyResult {
    double loss_sum = 0.0;
    int64_t tokens = 0;
  };
  virtual absl::StatusOr<CrossEntropyResult> CrossEntropy(const float* logits,
                                                          const int32_t* targets, int64_t rows,
                                                          int64_t vocab, float* d_logits,
                                                          float grad_scale) = 0;

  // The optimizer's updates over n coordinates in this backend's memory,
  // so a dense optimizer's state can live beside the parameters: the bodies
  // of kernels/cuda/optim_updates.h, which runtime/optim's AdamW and AdamS
  // run on the host. `decays` holds one 0/1 byte per coordinate.
  virtual absl::Status AdamWUpdate(float* theta, float* m, float* v, const float* g,
                                   const uint8_t* decays, int64_t n,
                                   const kernels::host_device::AdamWScalars& scalars) = 0;
  virtual absl::Status AdamSUpdate(float* theta, float* m, const float* g, const uint8_t* decays,
                                   int64_t n, const kernels::host_device::AdamSScalars& scalars) = 0;
  // Scales g[0, n) so its global L2 norm is at most max_norm (<= 0: no
  // scaling) and returns the norm before (optim::ClipGradientNorm). The sum
  // runs in a fixed order: equal buffers give equal bits. Synchronizes.
  virtual absl::StatusOr<double> ClipByGlobalNorm(float* g, int64_t n, double max_norm) = 0;

  // dst ← src within this backend's memory.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // x[0, n) *= scale.
  virtual absl::Status Scale(float* x, int64_t n, float scale) = 0;

  // SCAPE's reference rule, one rank's step (kernels/cuda/optim_updates.h;
  // runtime/optim's ScapeOptimizer runs the same bodies on the host).
  // `mask` holds `count` ascending coordinates in this backend's memory, or
  // is null for every coordinate in order (a dense step, count = n).
  //   e ← β1·m + (1−β1)·P·g + e over n coordinates.
  virtual absl::Status ScapePayload(float* residual, const float* m, const float* g, int64_t n,
                                    const kernels::host_device::ScapeReferenceScalars& scalars) = 0;
  //   values[p] = e[mask[p]], e there ← 0.
  virtual absl::Status ScapePack(const int64_t* mask, int64_t count, float* residual,
                                 float* values) = 0;
  //   dense[mask[p]] = values[p], the rest of dense as it was.
  virtual absl::Status UnpackAtMask(const int64_t* mask, int64_t count, const float* values,
                                    float* dense) = 0;
  //   values (the ranks' sum at the mask) → ĝ.
  virtual absl::Status ScapeReconstruct(float* values, const int64_t* mask, int64_t count,
                                        const float* m,
                                        const kernels::host_device::ScapeReferenceScalars& scalars) = 0;
  //   Bias-corrected AdamS from ĝ on the mask; m ← 0 and decay off it.
  virtual absl::Status ScapeReferenceApply(
      float* theta, float* m, const float* g_hat, const int64_t* mask, int64_t count,
      const uint8_t* decays, int64_t n, const kernels::host_device::ScapeReferenceScalars& scalars) = 0;

  // SCAPE's catch-up rule (the same bodies; `mask` as above):
  //   e ← e + (1−β1)·g (decayed residuals: β1·e + (1−β1)·g) over n.
  virtual absl::Status ScapeAccumulate(float* residual, const float* g, int64_t n,
                                       const kernels::host_device::ScapeCatchUpScalars& scalars) = 0;
  //   θ ← θ·decay over n (decays[j] ≠ 0), then at mask entry p (window
  //   windows[p]) the catch-up from the summed value values[p]. `powers`'
  //   tables are in this backend's memory.
  virtual absl::Status ScapeCatchUpApply(float* theta, float* m, float* vbar, const float* values,
                                         const int64_t* mask, const int32_t* windows,
                                         int64_t count, const uint8_t* decays, int64_t n,
                                         const kernels::host_device::ScapeCatchUpScalars& scalars,
                                         const kernels::host_device::CatchUpPowers& powers) = 0;
  //   The ages kept beside the state (kernels::host_device::StampSyncedElement):
  //   at mask entry p, windows[p] ← stamp − synced[j], then synced[j] ←
  //   stamp. A null `windows` only sets the ages.
  virtual absl::Status ScapeStampSynced(const int64_t* mask, int64_t count, int32_t stamp,
                                        int32_t* synced, int32_t* windows) = 0;
  //   out[i] = the mask statistic of (m[i], e[i], vbar[i]) over n (vbar is
  //   read only by kNormalizedResidual).
  virtual absl::Status ScapeMaskStatistic(const float* m, const float* e, const float* vbar,
                                          int64_t n, kernels::host_device::MaskStatistic statistic,
                                          const kernels::host_device::MaskStatisticScalars& scalars,
                                          float* out) = 0;

  // Each segment's k coordinates of values[offset, offset + numel) with the
  // largest magnitude, as begin + offset + i, ascending, the segments' one
  // after another into out_indices (Σ k entries): per segment the set
  // optim::SelectTopK picks from |values| (NaN as −∞, ties to the lower
  // index). Both arrays in this backend's memory, the segments on the host;
  // each k is clamped to [0, numel]. Every segment in one selection (on a
  // GPU, one sequence of launches).
  virtual absl::Status SelectLargestMagnitudes(
      const float* values, absl::Span<const kernels::host_device::TopKSegment> segments, int64_t begin,
      int64_t* out_indices) = 0;

  // The colocated core-attention executor for this backend's memory.
  virtual CoreAttentionExecutor& local_attention() = 0;

  // Where a step's time goes: started, every call above that runs kernels
  // is a span named after it on the backend's stream (device time; wall
  // time on the CPU), and the Transformer adds its core-attention calls.
  virtual device::OnDemandProfiler& op_profile() = 0;
};

// A buffer of `bytes` in `ops`' memory, zeroed, or holding a copy of
// `host_src` (state an optimizer keeps beside the parameters).
absl::StatusOr<device::DeviceBuffer> AllocateZeroed(ModelOps& ops, size_t bytes);
absl::StatusOr<device::DeviceBuffer> AllocateCopy(ModelOps& ops, const void* host_src,
                                                  size_t bytes);
// `count` floats at `src` (in `ops`' memory) brought to the host.
absl::StatusOr<std::vector<float>> DownloadFloats(ModelOps& ops, const void* src, int64_t count);
// Grows `buffer` (in `ops`' memory) to at least `bytes`, contents not kept.
// It synchronizes before giving the old block back: the stream may still
// use it, and the cache hands it out again.
absl::Status EnsureCapacity(ModelOps& ops, device::DeviceBuffer& buffer, size_t bytes);

// How a CPU backend holds the model's parameters and gradients.
enum class CpuParameterMode {
  // The kernels read the host parameter vector and write the host gradient
  // vector directly: no copies (the default CPU backend).
  kInPlace,
  // Like a GPU backend: parameters uploaded to the backend's own memory
  // each step, gradients accumulated there and downloaded. Same kernels,
  // same bits as kInPlace; it runs a GPU backend's data flow in CI.
  kDeviceCopies,
};

// When a CPU backend's kernels run.
enum class CpuExecution {
  kImmediate,  // each call runs its kernel before it returns
  // kDeviceCopies only (for tests of the callers' ordering): like a GPU's
  // stream, each call only queues its kernel (device::DeferredDeviceRuntime);
  // the queue runs when the host waits for it (Download, Synchronize, a
  // loss or norm it returns, core attention, freeing memory).
  // UploadBeside's copies go on a stream of their own that runs ahead of
  // the kernels' as far as events allow, or behind them.
  kDeferredCopiesAhead,
  kDeferredCopiesBehind,
};

// A backend on the CPU kernels. `pool` runs core attention (may be null:
// the calling thread). `capacity_bytes` (0: unlimited) bounds live memory
// as a GPU's is, so out-of-memory paths are testable.
std::unique_ptr<ModelOps> NewCpuModelOps(CpuParameterMode mode, ThreadPool* pool,
                                         int64_t capacity_bytes = 0,
                                         CpuExecution execution = CpuExecution::kImmediate);

// The backend for `device` and `precision`: the CPU one (fp32 only) or, in
// a --config=cuda build with that GPU present, the CUDA one. Errors say
// why not (no CUDA build, no such GPU, bf16 on the CPU).
absl::StatusOr<std::unique_ptr<ModelOps>> OpenModelOps(const device::Device& device,
                                                       Precision precision, ThreadPool* pool);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_MODEL_OPS_H_
