#ifndef CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_
#define CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/scape_host_ages.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::train {

// SCAPE's state (the first moment, this rank's residual and, for the
// catch-up rule, the smoothed normalizer v̄) in a model backend's memory
// beside the parameters, its per-coordinate work run by the backend's
// kernels (ModelOps::Scape*). The ages (each coordinate's last synchronized
// step) are kept there too, as int32, and the catch-up windows worked out
// from them beside the update; the optimizer keeps the masks on the host:
// per step the next mask's top-k runs on the device (the reference rule:
// |e|, one per tensor of the rank's range; the catch-up rule: its statistic
// over the range, or per tensor), and only the chosen indices come down;
// the mask's indices go up; the values all-reduce and everything else
// stays on the device. A group of one (whose selection is the whole mask)
// keeps its selection on the device as the next mask instead
// (HoldSelection): no index crosses to the host at all.
//
// With ResidualPlacement::kPinnedHost the residual (N floats per rank, the
// largest piece of SCAPE's state) lives in pinned host memory instead:
// the payload (the catch-up rule: the accumulation) streams it through two
// staging chunks on the device (device::StagingPipeline), the pack reads it
// on the host and uploads only the packed values, and the top-k runs on
// the host (the reference rule: over |e|, no download; the catch-up rule:
// its statistic, with the rank's range of m, or of v̄, downloaded), never
// copying e to the device to rank it. The device then holds m (and v̄), the
// values and the staging chunks; the ages are kept on the host as the host
// store keeps them (optim::ScapeHostAges: device memory is what the
// placement saves); the bits are the same.
class DeviceScapeStore final : public optim::ScapeStateStore {
 public:
  // Whether `options` names SCAPE (either rule's state fits here).
  static bool Supports(const optim::OptimizerOptions& options);

  enum class ResidualPlacement { kDevice, kPinnedHost };
  // Floats per staging chunk of an offloaded residual (16 MiB each).
  static constexpr int64_t kDefaultStagingFloats = int64_t{1} << 22;

  // For `rule` (kReference or kCatchUp) over a buffer of decay_mask.size()
  // coordinates; the backend's errors (out of memory) for the state.
  // `staging_floats` (kPinnedHost) bounds each of the two staging chunks.
  static absl::StatusOr<std::unique_ptr<DeviceScapeStore>> Create(
      model::ModelOps* ops, const optim::DecayMask& decay_mask, optim::ScapeRule rule,
      ResidualPlacement placement = ResidualPlacement::kDevice,
      int64_t staging_floats = kDefaultStagingFloats);

  // Waits for a staged upload still in flight into the store's memory.
  ~DeviceScapeStore() override;

  absl::Status Payload(const float* grads, const kernels::host_device::ScapeReferenceScalars& scalars,
                       int64_t begin, int64_t end, std::vector<float>& statistic) override;
  // With the residual on the device the top-k runs there too; the
  // catch-up rule's offloaded residual is ranked on the host by the store.
  bool selects() const override { return !offloaded() || catch_up(); }
  // An offloaded residual is ranked on the host: there, on the pool's threads.
  void UseThreadPool(ThreadPool* pool) override { pool_ = pool; }
  absl::StatusOr<std::vector<int64_t>> SelectByStatistic(
      absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
      const kernels::host_device::MaskStatisticScalars& scalars) override;
  // Held on the device beside the state it is chosen from (kDevice).
  bool holds_masks() const override { return !offloaded(); }
  absl::StatusOr<int64_t> HoldSelection(
      absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
      const kernels::host_device::MaskStatisticScalars& scalars) override;
  absl::StatusOr<std::vector<int64_t>> ReadMask(bool held) override;
  void DropHeldMasks() override { held_waiting_ = 0; }
  // The host ages (kPinnedHost) written and the catch-up windows worked
  // out from them; then the mask (and those windows) staged (StageMask).
  absl::Status MaskReceived(const optim::GlobalMask& mask) override;
  // Into pinned memory (two slots in turn), room for what the last Pack
  // reserved (a quarter more than its mask; a larger mask is not staged);
  // the indices then go on up to the device on the backend's copy stream
  // (ModelOps::UploadBeside), beside the step, so the Pack that takes them
  // copies nothing and only orders its kernels after that upload. The
  // windows are uploaded at the step, by DMA from the pinned slot. Returns
  // whether it staged them.
  bool StageMask(absl::Span<const int64_t> indices, absl::Span<const int32_t> windows);
  absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                              MaskSource source) override;
  absl::StatusOr<double> Apply(float* params, int64_t step,
                               const kernels::host_device::ScapeReferenceScalars& scalars,
                               double grad_clip) override;
  absl::Status Accumulate(const float* grads,
                          const kernels::host_device::ScapeCatchUpScalars& scalars) override;
  absl::Status CatchUpApply(float* params, int64_t step,
                            const kernels::host_device::ScapeCatchUpScalars& scalars,
                            const optim::CatchUpPowerTables& powers) override;
  // Packs whose mask came from the staging (of them, those whose indices
  // were already on the device) and from a held selection (tests).
  int64_t staged_packs() const { return staged_packs_; }
  int64_t packs_uploaded_beside() const { return packs_uploaded_beside_; }
  int64_t held_packs() const { return held_packs_; }
  absl::StatusOr<float*> Residual() override;
  absl::Status ScaleResidual(float scale) override;
  // In the backend's memory: the host's (the CPU backend) or its GPU's.
  absl::Status SumOverRanks(optim::RankGroup& group, float* data, int64_t count) override {
    return group.AllReduceSumIn(data, count, ops_->host_addressable());
  }
  void SettleAges() override { host_ages_.Settle(); }
  absl::Status Read(std::vector<float>& m, std::vector<float>& e,
                    std::vector<float>& vbar) override;
  absl::Status ReadAges(std::vector<int64_t>& last_sync) override;
  absl::Status Write(const std::vector<float>& m, const std::vector<float>& e,
                     const std::vector<float>& vbar,
                     const std::vector<int64_t>& last_sync) override;

 private:
  DeviceScapeStore(model::ModelOps* ops, int64_t size, optim::ScapeRule rule,
                   ResidualPlacement placement, int64_t staging_floats)
      : ops_(ops),
        size_(size),
        rule_(rule),
        placement_(placement),
        staging_floats_(staging_floats) {}
  bool offloaded() const { return placement_ == ResidualPlacement::kPinnedHost; }
  // The ages live on the device beside m, set by the update's launches;
  // with an offloaded residual, on the host (host_ages_).
  bool ages_on_device() const { return !offloaded(); }
  bool catch_up() const { return rule_ == optim::ScapeRule::kCatchUp; }
  // kDevice: the segments' top k by `statistic` into selected_ (`total`
  // entries: CheckSelection's), on the device.
  absl::Status SelectOnDevice(absl::Span<const TopKSegment> segments,
                              optim::MaskStatistic statistic,
                              const kernels::host_device::MaskStatisticScalars& scalars, int64_t total);
  // The checks SelectByStatistic and HoldSelection make first; the
  // selection's entries.
  absl::StatusOr<int64_t> CheckSelection(absl::Span<const TopKSegment> segments,
                                         optim::MaskStatistic statistic) const;
  // kPinnedHost: the packed values, on the host, uploaded into values_.
  absl::Status PackOnHost(const std::vector<int64_t>& mask, bool dense);
  // ages_on_device(): the last Pack's mask synchronized at `step` (the
  // catch-up rule: its windows into windows_ first).
  absl::Status StampAges(int64_t step, bool windows);
  // Grows the staging to hold masks a quarter larger than `count`, and
  // gives each slot's device side that room (a Pack may have traded it for
  // a smaller buffer).
  absl::Status ReserveStaging(int64_t count);
  // Waits for slot's upload beside the step, if one is in flight, and
  // forgets it.
  absl::Status SettleStagedUpload(int slot);
  // kPinnedHost, the catch-up rule: each segment's statistic on the host
  // from the pinned residual and the segment's m (or v̄) downloaded, ranked
  // by optim::SelectTopK.
  absl::StatusOr<std::vector<int64_t>> SelectOnHost(
      absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
      const kernels::host_device::MaskStatisticScalars& scalars);

  model::ModelOps* ops_;
  int64_t size_;
  optim::ScapeRule rule_;
  ResidualPlacement placement_;
  int64_t staging_floats_;
  // kDevice: residual_ holds e. kPinnedHost: host_residual_ does, through
  // staging_; Residual() stages the whole of it in values_ (free by then)
  // for the all-reduce and ScaleResidual brings the result home.
  device::DeviceBuffer m_, residual_, values_, decays_, mask_;
  device::DeviceBuffer staging_[2];
  device::DeviceBuffer selected_;  // SelectOnDevice's indices, grown as needed
  // HoldSelection's masks, oldest at held_front_: a queue of at most two
  // (the buffers trade places with selected_ and mask_, never copied).
  device::DeviceBuffer held_[2];
  int64_t held_count_[2] = {0, 0};
  int held_front_ = 0;
  int held_waiting_ = 0;
  // kCatchUp: v̄; the windows of the last mask; the power tables (uploaded
  // once: they depend on the configuration only); a segment's statistic.
  device::DeviceBuffer vbar_, windows_, powers_, statistic_;
  // ages_on_device(): int32 per coordinate, 1 + its last synchronized step
  // (0: never; kernels::host_device::StampSyncedElement).
  device::DeviceBuffer synced_;
  // Otherwise: the ages on the host, and the last update's windows there.
  std::vector<int64_t> host_last_sync_;
  optim::ScapeHostAges host_ages_{&host_last_sync_};
  std::vector<int32_t> host_windows_;
  int64_t powers_size_ = -1;
  device::PinnedHostBuffer host_residual_, host_values_;
  // SelectOnHost's segment: m or v̄ downloaded, and the statistic.
  std::vector<float> host_m_, host_vbar_, host_statistic_;
  ThreadPool* pool_ = nullptr;
  bool residual_in_values_ = false;
  // StageMask's pinned slots, used in turn: a slot's uploads finished long
  // before it comes round again (the step between them synchronizes).
  // Written on the exchange's thread only between the step's uses.
  device::PinnedHostBuffer staged_indices_[2], staged_windows_[2];
  // Each slot's indices on the device and their upload's event (null: none
  // in flight or waiting for a Pack). A Pack trades the buffer with mask_.
  device::DeviceBuffer staged_device_[2];
  std::unique_ptr<device::Event> staged_uploaded_[2];
  int64_t staging_capacity_ = 0;  // entries per slot
  int staged_slot_ = 0;           // the slot StageMask filled last
  int64_t staged_count_ = -1;     // its entries (−1: none)
  bool staged_has_windows_ = false;
  bool staged_in_pack_ = false;  // the last Pack's mask came from the staging
  int64_t staged_packs_ = 0;
  int64_t packs_uploaded_beside_ = 0;
  int64_t held_packs_ = 0;
  // The last Pack's mask: `count` indices in mask_, or every coordinate;
  // its host indices (kept by the caller until the next Pack: the host
  // ages are written from them), and whether it is the received one.
  int64_t count_ = 0;
  bool dense_ = true;
  const std::vector<int64_t>* host_mask_ = nullptr;
  bool received_ = false;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_
