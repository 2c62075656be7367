#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_CUDA_H_

// Launches of the optimizer bodies (optim_updates.h) on device buffers, in
// stream order. `decays` holds one 0/1 byte per coordinate (the decay mask).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/kernels/cuda/optim_updates.h"

namespace corescape::kernels::cuda {

absl::Status LaunchAdamW(float* theta, float* m, float* v, const float* g, const uint8_t* decays,
                         int64_t n, const host_device::AdamWScalars& s, cudaStream_t stream);
absl::Status LaunchAdamS(float* theta, float* m, const float* g, const uint8_t* decays, int64_t n,
                         const host_device::AdamSScalars& s, cudaStream_t stream);

// SCAPE's reference rule, one rank's step on the device:
//   LaunchScapePayload            e ← β1·m + (1−β1)·P·g + e
//   LaunchPackAtMask              values[p] = e[mask[p]], e[mask[p]] = 0
//   (all-reduce of values: the communicator's business)
//   LaunchScapeReconstruct        values → ĝ
//   LaunchClipByGlobalNorm        ĝ scaled to norm ≤ max_norm
//   LaunchScapeReferenceApply     AdamS on the mask, decay off it
absl::Status LaunchScapePayload(float* residual, const float* m, const float* g, int64_t n,
                                const host_device::ScapeReferenceScalars& s, cudaStream_t stream);
absl::Status LaunchPackAtMask(const int64_t* mask, int64_t count, float* residual, float* values,
                              cudaStream_t stream);
absl::Status LaunchUnpackAtMask(const int64_t* mask, int64_t count, const float* values, float* dense,
                                cudaStream_t stream);
// A null `mask` in LaunchScapeReconstruct and LaunchScapeReferenceApply is
// every coordinate in order (a dense step: count = n, no mask words).
absl::Status LaunchScapeReconstruct(float* values, const int64_t* mask, int64_t count, const float* m,
                                    const host_device::ScapeReferenceScalars& s, cudaStream_t stream);
// The sum of squares behind the global norm runs in a fixed order, so equal
// buffers on different ranks give the same bits.
inline constexpr int kClipSumBlocks = 1024;
// Scales values[0, count) so their L2 norm is at most max_norm (max_norm <=
// 0: no scaling), as optim::ClipGradientNorm does. `sums` holds
// kClipSumBlocks + 1 doubles of device scratch; afterwards
// sums[kClipSumBlocks] is Σ values² before the scaling, for the caller's
// norm.
absl::Status LaunchClipByGlobalNorm(float* values, int64_t count, double max_norm, double* sums,
                                    cudaStream_t stream);
// `mask_words`: the mask as 1-bit words over [0, n) (LaunchSetMaskBits).
absl::Status LaunchScapeReferenceApply(float* theta, float* m, const float* g_hat, const int64_t* mask,
                                       int64_t count, const uint32_t* mask_words, const uint8_t* decays,
                                       int64_t n, const host_device::ScapeReferenceScalars& s, cudaStream_t stream);

// SCAPE's catch-up rule on the device:
//   LaunchScapeAccumulate     e ← e + (1−β1)·g
//   LaunchPackAtMask, the all-reduce, then
//   LaunchScapeCatchUpApply   θ decays everywhere; the mask (null: every
//                             coordinate) catches up from the summed values,
//                             entry p over windows[p] steps
//   LaunchStampSynced         before it, the windows from the ages kept on
//                             the device (host_device::StampSyncedElement)
//   LaunchMaskStatistic       the statistic the next mask's top-k ranks
absl::Status LaunchScapeAccumulate(float* residual, const float* g, int64_t n,
                                   const host_device::ScapeCatchUpScalars& s, cudaStream_t stream);
absl::Status LaunchScapeCatchUpApply(float* theta, float* m, float* vbar, const float* values,
                                     const int64_t* mask, const int32_t* windows, int64_t count,
                                     const uint8_t* decays, int64_t n, const host_device::ScapeCatchUpScalars& s,
                                     const host_device::CatchUpPowers& powers, cudaStream_t stream);
absl::Status LaunchMaskStatistic(const float* m, const float* e, const float* vbar, int64_t n,
                                 host_device::MaskStatistic statistic, const host_device::MaskStatisticScalars& s, float* out,
                                 cudaStream_t stream);
absl::Status LaunchStampSynced(const int64_t* mask, int64_t count, int32_t stamp, int32_t* synced,
                               int32_t* windows, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_CUDA_H_
