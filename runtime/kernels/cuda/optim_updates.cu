#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/mask_bits.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/kernels/cuda/optim_updates_cuda.h"

namespace corescape::kernels::cuda {

using host_device::AdamSElement;
using host_device::AdamSScalars;
using host_device::AdamWElement;
using host_device::AdamWScalars;
using host_device::CatchUpBeta1Power;
using host_device::CatchUpPowers;
using host_device::CatchUpSteps;
using host_device::ClipScale;
using host_device::MaskStatistic;
using host_device::MaskStatisticElement;
using host_device::MaskStatisticScalars;
using host_device::PackAtMaskElement;
using host_device::ScapeAccumulateElement;
using host_device::ScapeCatchUpOnMask;
using host_device::ScapeCatchUpScalars;
using host_device::ScapePayloadElement;
using host_device::ScapeReconstructElement;
using host_device::ScapeReferenceOffMask;
using host_device::ScapeReferenceOnMask;
using host_device::ScapeReferenceScalars;
using host_device::StampSyncedElement;
using host_device::UnpackAtMaskElement;

namespace {

__global__ void AdamWKernel(float* theta, float* m, float* v, const float* g, const uint8_t* decays,
                            int64_t n, AdamWScalars s) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    AdamWElement(theta[i], m[i], v[i], g[i], decays[i] != 0, s);
  }
}

__global__ void AdamSKernel(float* theta, float* m, const float* g, const uint8_t* decays, int64_t n,
                            AdamSScalars s) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    AdamSElement(theta[i], m[i], g[i], decays[i] != 0, s);
  }
}

__global__ void ScapePayloadKernel(float* residual, const float* m, const float* g, int64_t n,
                                   ScapeReferenceScalars s) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) ScapePayloadElement(residual[i], m[i], g[i], s);
}

__global__ void PackAtMaskKernel(const int64_t* mask, int64_t count, float* residual, float* values) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) PackAtMaskElement(p, mask, residual, values);
}

__global__ void UnpackAtMaskKernel(const int64_t* mask, int64_t count, const float* values, float* dense) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) UnpackAtMaskElement(p, mask, values, dense);
}

__global__ void ReconstructKernel(float* values, const int64_t* mask, int64_t count, const float* m,
                                  ScapeReferenceScalars s) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) {
    ScapeReconstructElement(values[p], m[mask != nullptr ? mask[p] : p], s);
  }
}

// Σ values² in a fixed order, so every rank that holds the same values gets
// the same bits (an atomicAdd would not): kClipSumBlocks partial sums, then
// one block adds them as a tree into sums[kClipSumBlocks].

__global__ void PartialSumsOfSquaresKernel(const float* values, int64_t count, double* sums) {
  __shared__ double partial[kThreads];
  double acc = 0.0;
  for (int64_t p = GridStart(); p < count; p += GridStride()) acc += double{values[p]} * values[p];
  partial[threadIdx.x] = acc;
  __syncthreads();
  BlockTreeReduce(partial, DeviceSum());
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

__global__ void FinalSumKernel(double* sums) {
  __shared__ double partial[kThreads];
  double acc = 0.0;
  for (int b = threadIdx.x; b < kClipSumBlocks; b += kThreads) acc += sums[b];
  partial[threadIdx.x] = acc;
  __syncthreads();
  BlockTreeReduce(partial, DeviceSum());
  if (threadIdx.x == 0) sums[kClipSumBlocks] = partial[0];
}

__global__ void ClipKernel(float* values, int64_t count, double max_norm, const double* sum) {
  const float scale = ClipScale(sqrt(*sum), max_norm);
  if (scale == 1.0f) return;
  for (int64_t p = GridStart(); p < count; p += GridStride()) values[p] *= scale;
}

__global__ void OffMaskKernel(float* theta, float* m, const uint32_t* mask_words, const uint8_t* decays,
                              int64_t n, ScapeReferenceScalars s) {
  for (int64_t j = GridStart(); j < n; j += GridStride()) {
    if (!MaskBit(mask_words, j)) ScapeReferenceOffMask(theta[j], m[j], decays[j] != 0, s);
  }
}

__global__ void OnMaskKernel(float* theta, float* m, const float* g_hat, const int64_t* mask, int64_t count,
                             const uint8_t* decays, ScapeReferenceScalars s) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) {
    const int64_t j = mask != nullptr ? mask[p] : p;
    ScapeReferenceOnMask(theta[j], m[j], g_hat[p], decays[j] != 0, s);
  }
}

__global__ void ScapeAccumulateKernel(float* residual, const float* g, int64_t n,
                                      ScapeCatchUpScalars s) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) ScapeAccumulateElement(residual[i], g[i], s);
}

__global__ void DecayKernel(float* theta, const uint8_t* decays, int64_t n, float decay) {
  for (int64_t j = GridStart(); j < n; j += GridStride()) theta[j] *= decays[j] ? decay : 1.0f;
}

__global__ void CatchUpOnMaskKernel(float* theta, float* m, float* vbar, const float* values,
                                    const int64_t* mask, const int32_t* windows, int64_t count,
                                    ScapeCatchUpScalars s, CatchUpPowers powers) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) {
    const int64_t j = mask != nullptr ? mask[p] : p;
    const int64_t k = windows[p];
    ScapeCatchUpOnMask(theta[j], m[j], vbar[j], values[p], k, CatchUpBeta1Power(k, powers),
                       CatchUpSteps(k, powers), s);
  }
}

__global__ void StampSyncedKernel(const int64_t* mask, int64_t count, int32_t stamp, int32_t* synced,
                                  int32_t* windows) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) {
    StampSyncedElement(p, mask, stamp, synced, windows);
  }
}

template <MaskStatistic kStatistic>
__global__ void MaskStatisticKernel(const float* m, const float* e, const float* vbar, int64_t n,
                                    MaskStatisticScalars s, float* out) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    out[i] = MaskStatisticElement(kStatistic, m[i], e[i],
                                  kStatistic == MaskStatistic::kNormalizedResidual ? vbar[i] : 0.0f, s);
  }
}

}  // namespace

absl::Status LaunchScapeAccumulate(float* residual, const float* g, int64_t n,
                                   const ScapeCatchUpScalars& s, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  ScapeAccumulateKernel<<<BlocksFor(n), kThreads, 0, stream>>>(residual, g, n, s);
  return LaunchStatus("LaunchScapeAccumulate");
}

absl::Status LaunchScapeCatchUpApply(float* theta, float* m, float* vbar, const float* values,
                                     const int64_t* mask, const int32_t* windows, int64_t count,
                                     const uint8_t* decays, int64_t n, const ScapeCatchUpScalars& s,
                                     const CatchUpPowers& powers, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  // Every θ decays, the mask's before their update: the host's order.
  DecayKernel<<<BlocksFor(n), kThreads, 0, stream>>>(theta, decays, n, s.decay);
  if (absl::Status st = LaunchStatus("LaunchScapeCatchUpApply (decay)"); !st.ok()) return st;
  if (count <= 0) return absl::OkStatus();
  CatchUpOnMaskKernel<<<BlocksFor(count), kThreads, 0, stream>>>(theta, m, vbar, values, mask, windows,
                                                                 count, s, powers);
  return LaunchStatus("LaunchScapeCatchUpApply (on mask)");
}

absl::Status LaunchStampSynced(const int64_t* mask, int64_t count, int32_t stamp, int32_t* synced,
                               int32_t* windows, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  StampSyncedKernel<<<BlocksFor(count), kThreads, 0, stream>>>(mask, count, stamp, synced, windows);
  return LaunchStatus("LaunchStampSynced");
}

absl::Status LaunchMaskStatistic(const float* m, const float* e, const float* vbar, int64_t n,
                                 MaskStatistic statistic, const MaskStatisticScalars& s, float* out,
                                 cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  using S = MaskStatistic;
  const unsigned blocks = BlocksFor(n);
  switch (statistic) {
    case S::kMomentumPlusResidual:
      MaskStatisticKernel<S::kMomentumPlusResidual><<<blocks, kThreads, 0, stream>>>(m, e, vbar, n, s, out);
      break;
    case S::kResidual:
      MaskStatisticKernel<S::kResidual><<<blocks, kThreads, 0, stream>>>(m, e, vbar, n, s, out);
      break;
    case S::kMomentum:
      MaskStatisticKernel<S::kMomentum><<<blocks, kThreads, 0, stream>>>(m, e, vbar, n, s, out);
      break;
    case S::kNormalizedResidual:
      MaskStatisticKernel<S::kNormalizedResidual><<<blocks, kThreads, 0, stream>>>(m, e, vbar, n, s, out);
      break;
    case S::kMomentumPlusScaledResidual:
      MaskStatisticKernel<S::kMomentumPlusScaledResidual><<<blocks, kThreads, 0, stream>>>(m, e, vbar, n, s,
                                                                                          out);
      break;
  }
  return LaunchStatus("LaunchMaskStatistic");
}

absl::Status LaunchAdamW(float* theta, float* m, float* v, const float* g, const uint8_t* decays,
                         int64_t n, const AdamWScalars& s, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  AdamWKernel<<<BlocksFor(n), kThreads, 0, stream>>>(theta, m, v, g, decays, n, s);
  return LaunchStatus("LaunchAdamW");
}

absl::Status LaunchAdamS(float* theta, float* m, const float* g, const uint8_t* decays, int64_t n,
                         const AdamSScalars& s, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  AdamSKernel<<<BlocksFor(n), kThreads, 0, stream>>>(theta, m, g, decays, n, s);
  return LaunchStatus("LaunchAdamS");
}

absl::Status LaunchScapePayload(float* residual, const float* m, const float* g, int64_t n,
                                const ScapeReferenceScalars& s, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  ScapePayloadKernel<<<BlocksFor(n), kThreads, 0, stream>>>(residual, m, g, n, s);
  return LaunchStatus("LaunchScapePayload");
}

absl::Status LaunchPackAtMask(const int64_t* mask, int64_t count, float* residual, float* values,
                              cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  PackAtMaskKernel<<<BlocksFor(count), kThreads, 0, stream>>>(mask, count, residual, values);
  return LaunchStatus("LaunchPackAtMask");
}

absl::Status LaunchUnpackAtMask(const int64_t* mask, int64_t count, const float* values, float* dense,
                                cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  UnpackAtMaskKernel<<<BlocksFor(count), kThreads, 0, stream>>>(mask, count, values, dense);
  return LaunchStatus("LaunchUnpackAtMask");
}

absl::Status LaunchScapeReconstruct(float* values, const int64_t* mask, int64_t count, const float* m,
                                    const ScapeReferenceScalars& s, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  ReconstructKernel<<<BlocksFor(count), kThreads, 0, stream>>>(values, mask, count, m, s);
  return LaunchStatus("LaunchScapeReconstruct");
}

absl::Status LaunchClipByGlobalNorm(float* values, int64_t count, double max_norm, double* sums,
                                    cudaStream_t stream) {
  if (count < 0) return absl::InvalidArgumentError("LaunchClipByGlobalNorm: negative count");
  PartialSumsOfSquaresKernel<<<kClipSumBlocks, kThreads, 0, stream>>>(values, count, sums);
  if (absl::Status s = LaunchStatus("LaunchClipByGlobalNorm (partial sums)"); !s.ok()) return s;
  FinalSumKernel<<<1, kThreads, 0, stream>>>(sums);
  if (absl::Status s = LaunchStatus("LaunchClipByGlobalNorm (sum)"); !s.ok()) return s;
  if (count == 0 || !(max_norm > 0)) return absl::OkStatus();
  ClipKernel<<<BlocksFor(count), kThreads, 0, stream>>>(values, count, max_norm, sums + kClipSumBlocks);
  return LaunchStatus("LaunchClipByGlobalNorm (scale)");
}

absl::Status LaunchScapeReferenceApply(float* theta, float* m, const float* g_hat, const int64_t* mask,
                                       int64_t count, const uint32_t* mask_words, const uint8_t* decays,
                                       int64_t n, const ScapeReferenceScalars& s, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  // Disjoint coordinates: off the mask by its bits, on it by its indices.
  // No mask: every coordinate is on it.
  if (mask != nullptr) {
    OffMaskKernel<<<BlocksFor(n), kThreads, 0, stream>>>(theta, m, mask_words, decays, n, s);
    if (absl::Status st = LaunchStatus("LaunchScapeReferenceApply (off mask)"); !st.ok()) return st;
  }
  if (count <= 0) return absl::OkStatus();
  OnMaskKernel<<<BlocksFor(count), kThreads, 0, stream>>>(theta, m, g_hat, mask, count, decays, s);
  return LaunchStatus("LaunchScapeReferenceApply (on mask)");
}

}  // namespace corescape::kernels::cuda
