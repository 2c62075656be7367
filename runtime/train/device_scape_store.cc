#include "runtime/train/device_scape_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::train {
namespace {

absl::Status CheckSize(const std::vector<float>& values, int64_t size, const char* what) {
  if (static_cast<int64_t>(values.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat("scape device state: ", what, " of ",
                                                   values.size(), " entries, not ", size));
  }
  return absl::OkStatus();
}

}  // namespace

bool DeviceScapeStore::Supports(const optim::OptimizerOptions& options) {
  auto traits = optim::FindOptimizer(options.name);
  if (!traits.ok()) return false;
  const optim::OptimizerKind kind = (*traits)->kind;
  return kind == optim::OptimizerKind::kScape || kind == optim::OptimizerKind::kScapeGlobal;
}

absl::StatusOr<std::unique_ptr<DeviceScapeStore>> DeviceScapeStore::Create(
    model::ModelOps* ops, const optim::DecayMask& decay_mask, optim::ScapeRule rule,
    ResidualPlacement placement, int64_t staging_floats) {
  if (staging_floats <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape device state: staging chunks of ", staging_floats, " floats"));
  }
  const int64_t size = static_cast<int64_t>(decay_mask.size());
  std::unique_ptr<DeviceScapeStore> store(
      new DeviceScapeStore(ops, size, rule, placement, staging_floats));
  const size_t float_bytes = static_cast<size_t>(size) * sizeof(float);
  std::vector<device::DeviceBuffer*> zeroed_buffers = {&store->m_, &store->values_};
  if (store->catch_up()) zeroed_buffers.push_back(&store->vbar_);
  if (store->offloaded()) {
    auto pinned = ops->AllocatePinned(float_bytes);
    if (!pinned.ok()) return pinned.status();
    store->host_residual_ = *std::move(pinned);
    if (float_bytes > 0) std::memset(store->host_residual_.data(), 0, float_bytes);
    const size_t chunk_bytes = static_cast<size_t>(std::min(staging_floats, size)) * sizeof(float);
    for (device::DeviceBuffer& chunk : store->staging_) {
      auto allocated = ops->Allocate(chunk_bytes);
      if (!allocated.ok()) return allocated.status();
      chunk = *std::move(allocated);
    }
  } else {
    zeroed_buffers.push_back(&store->residual_);
  }
  for (device::DeviceBuffer* buffer : zeroed_buffers) {
    auto zeroed = model::AllocateZeroed(*ops, float_bytes);
    if (!zeroed.ok()) return zeroed.status();
    *buffer = *std::move(zeroed);
  }
  if (!store->ages_on_device()) {
    store->host_last_sync_.assign(size, -1);  // never synchronized
  } else {
    // Zeroed: never synchronized.
    auto synced = model::AllocateZeroed(*ops, static_cast<size_t>(size) * sizeof(int32_t));
    if (!synced.ok()) return synced.status();
    store->synced_ = *std::move(synced);
  }
  auto decays = model::AllocateCopy(*ops, decay_mask.data(), decay_mask.size());
  if (!decays.ok()) return decays.status();
  store->decays_ = *std::move(decays);
  return store;
}

DeviceScapeStore::~DeviceScapeStore() {
  for (int slot = 0; slot < 2; ++slot) {
    if (absl::Status settled = SettleStagedUpload(slot); !settled.ok()) {
      LOG(ERROR) << "scape device state: " << settled;
    }
  }
}

absl::Status DeviceScapeStore::Payload(const float* grads,
                                       const kernels::host_device::ScapeReferenceScalars& scalars,
                                       int64_t begin, int64_t end, std::vector<float>& statistic) {
  if (catch_up()) {
    return absl::FailedPreconditionError("scape device state: holds the catch-up rule's state");
  }
  if (begin < 0 || end < begin || end > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape device state: range [", begin, ", ", end, ") of ", size_));
  }
  if (offloaded()) {
    statistic.resize(end - begin);
    float* const staging[2] = {staging_[0].as<float>(), staging_[1].as<float>()};
    const float* m = m_.as<float>();
    float* e = host_residual_.as<float>();
    CORESCAPE_RETURN_IF_ERROR(ops_->StageThrough(
        e, size_, staging, staging_floats_, [&](float* staged, int64_t first, int64_t count) {
          return ops_->ScapePayload(staged, m + first, grads + first, count, scalars);
        }));
    // |e| for the host's ranking (the residual statistic reads no scalars).
    optim::FillMaskStatistic(optim::MaskStatistic::kResidual, nullptr, e + begin, nullptr,
                             end - begin, {}, statistic.data(), pool_);
    return absl::OkStatus();
  }
  // SelectByStatistic ranks e on the device: nothing comes down. The
  // wait keeps the payload's time out of the selection's in the step's
  // phases (the pack waits for the stream anyway).
  statistic.clear();
  CORESCAPE_RETURN_IF_ERROR(
      ops_->ScapePayload(residual_.as<float>(), m_.as<float>(), grads, size_, scalars));
  return ops_->Synchronize();
}

absl::StatusOr<int64_t> DeviceScapeStore::CheckSelection(absl::Span<const TopKSegment> segments,
                                                         optim::MaskStatistic statistic) const {
  if (offloaded() && !catch_up()) {
    return absl::FailedPreconditionError(
        "scape device state: the reference rule's offloaded residual is ranked by the optimizer");
  }
  if (statistic == optim::MaskStatistic::kNormalizedResidual && !catch_up()) {
    return absl::FailedPreconditionError(
        "scape device state: the normalized-residual statistic needs the catch-up rule's v̄");
  }
  int64_t total = 0;
  for (const TopKSegment& segment : segments) {
    if (segment.offset < 0 || segment.numel < 0 || segment.offset > size_ - segment.numel) {
      return absl::InvalidArgumentError(absl::StrCat("scape device state: a segment [",
                                                     segment.offset, ", +", segment.numel,
                                                     ") of ", size_));
    }
    total += std::clamp<int64_t>(segment.k, 0, segment.numel);
  }
  return total;
}

absl::StatusOr<std::vector<int64_t>> DeviceScapeStore::SelectByStatistic(
    absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
    const kernels::host_device::MaskStatisticScalars& scalars) {
  auto checked = CheckSelection(segments, statistic);
  if (!checked.ok()) return checked.status();
  if (offloaded()) return SelectOnHost(segments, statistic, scalars);
  CORESCAPE_RETURN_IF_ERROR(SelectOnDevice(segments, statistic, scalars, *checked));
  std::vector<int64_t> chosen(*checked);
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Download(chosen.data(), selected_.data(), chosen.size() * sizeof(int64_t)));
  return chosen;
}

absl::StatusOr<int64_t> DeviceScapeStore::HoldSelection(
    absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
    const kernels::host_device::MaskStatisticScalars& scalars) {
  if (!holds_masks()) {
    return absl::FailedPreconditionError(
        "scape device state: an offloaded residual's selection is made on the host");
  }
  if (held_waiting_ == 2) {
    return absl::FailedPreconditionError("scape device state: two held masks wait already");
  }
  auto checked = CheckSelection(segments, statistic);
  if (!checked.ok()) return checked.status();
  CORESCAPE_RETURN_IF_ERROR(SelectOnDevice(segments, statistic, scalars, *checked));
  const int slot = (held_front_ + held_waiting_) % 2;
  std::swap(held_[slot], selected_);
  held_count_[slot] = *checked;
  ++held_waiting_;
  return *checked;
}

absl::StatusOr<std::vector<int64_t>> DeviceScapeStore::ReadMask(bool held) {
  if (held && held_waiting_ == 0) {
    return absl::FailedPreconditionError("scape device state: no held mask to read");
  }
  if (!held && dense_) {
    return absl::FailedPreconditionError("scape device state: the last Pack was dense");
  }
  const device::DeviceBuffer& buffer = held ? held_[held_front_] : mask_;
  std::vector<int64_t> indices(held ? held_count_[held_front_] : count_);
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Download(indices.data(), buffer.data(), indices.size() * sizeof(int64_t)));
  return indices;
}

absl::Status DeviceScapeStore::SelectOnDevice(absl::Span<const TopKSegment> segments,
                                              optim::MaskStatistic statistic,
                                              const kernels::host_device::MaskStatisticScalars& scalars,
                                              int64_t total) {
  CORESCAPE_RETURN_IF_ERROR(
      model::EnsureCapacity(*ops_, selected_, static_cast<size_t>(total) * sizeof(int64_t)));
  if (statistic == optim::MaskStatistic::kResidual) {
    // |e| is the residual's magnitude: every segment ranked in place, in one
    // selection.
    return ops_->SelectLargestMagnitudes(residual_.as<float>(), segments, 0,
                                         selected_.as<int64_t>());
  }
  // Any other statistic is computed into its own buffer first, a segment
  // at a time.
  int64_t written = 0;
  for (const TopKSegment& segment : segments) {
    const int64_t k = std::clamp<int64_t>(segment.k, 0, segment.numel);
    if (k == 0) continue;
    CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(
        *ops_, statistic_, static_cast<size_t>(segment.numel) * sizeof(float)));
    const float* vbar = catch_up() ? vbar_.as<float>() + segment.offset : nullptr;
    CORESCAPE_RETURN_IF_ERROR(ops_->ScapeMaskStatistic(
        m_.as<float>() + segment.offset, residual_.as<float>() + segment.offset, vbar,
        segment.numel, statistic, scalars, statistic_.as<float>()));
    const TopKSegment whole{0, segment.numel, k};
    CORESCAPE_RETURN_IF_ERROR(ops_->SelectLargestMagnitudes(
        statistic_.as<float>(), absl::MakeConstSpan(&whole, 1), segment.offset,
        selected_.as<int64_t>() + written));
    written += k;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> DeviceScapeStore::SelectOnHost(
    absl::Span<const TopKSegment> segments, optim::MaskStatistic statistic,
    const kernels::host_device::MaskStatisticScalars& scalars) {
  const bool reads_m = statistic != optim::MaskStatistic::kResidual &&
                       statistic != optim::MaskStatistic::kNormalizedResidual;
  const bool reads_v = statistic == optim::MaskStatistic::kNormalizedResidual;
  std::vector<int64_t> chosen;
  for (const TopKSegment& segment : segments) {
    const int64_t k = std::clamp<int64_t>(segment.k, 0, segment.numel);
    if (k == 0) continue;
    const size_t bytes = static_cast<size_t>(segment.numel) * sizeof(float);
    host_statistic_.resize(segment.numel);
    if (reads_m) {
      host_m_.resize(segment.numel);
      CORESCAPE_RETURN_IF_ERROR(ops_->Download(host_m_.data(), m_.as<float>() + segment.offset, bytes));
    }
    if (reads_v) {
      host_vbar_.resize(segment.numel);
      CORESCAPE_RETURN_IF_ERROR(
          ops_->Download(host_vbar_.data(), vbar_.as<float>() + segment.offset, bytes));
    }
    optim::FillMaskStatistic(statistic, reads_m ? host_m_.data() : nullptr,
                             host_residual_.as<float>() + segment.offset,
                             reads_v ? host_vbar_.data() : nullptr, segment.numel, scalars,
                             host_statistic_.data(), pool_);
    const std::vector<int64_t> top = optim::SelectTopK(host_statistic_, segment.offset, k, pool_);
    chosen.insert(chosen.end(), top.begin(), top.end());
  }
  return chosen;
}

absl::Status DeviceScapeStore::PackOnHost(const std::vector<int64_t>& mask, bool dense) {
  float* e = host_residual_.as<float>();
  const size_t bytes = static_cast<size_t>(count_) * sizeof(float);
  if (dense) {
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(values_.data(), e, bytes));
    std::fill(e, e + size_, 0.0f);
    return absl::OkStatus();
  }
  if (host_values_.size() < bytes) {
    auto grown = ops_->AllocatePinned(bytes);
    if (!grown.ok()) return grown.status();
    host_values_ = *std::move(grown);
  }
  // Ascending: the ends bound every index.
  if (count_ > 0 && (mask.front() < 0 || mask.back() >= size_)) {
    return absl::InvalidArgumentError(absl::StrCat("scape device state: a mask over [",
                                                   mask.front(), ", ", mask.back(), "] of ", size_));
  }
  float* packed = host_values_.as<float>();
  for (int64_t p = 0; p < count_; ++p) kernels::host_device::PackAtMaskElement(p, mask.data(), e, packed);
  return ops_->Upload(values_.data(), packed, bytes);
}

absl::Status DeviceScapeStore::SettleStagedUpload(int slot) {
  if (staged_uploaded_[slot] == nullptr) return absl::OkStatus();
  absl::Status settled = staged_uploaded_[slot]->Synchronize();
  staged_uploaded_[slot].reset();
  return settled;
}

absl::Status DeviceScapeStore::ReserveStaging(int64_t count) {
  if (count > staging_capacity_) {
    const int64_t capacity = count + count / 4;
    for (int slot = 0; slot < 2; ++slot) {
      // Its memory is about to go: no copy may still read it.
      CORESCAPE_RETURN_IF_ERROR(SettleStagedUpload(slot));
      auto indices = ops_->AllocatePinned(static_cast<size_t>(capacity) * sizeof(int64_t));
      if (!indices.ok()) return indices.status();
      auto windows = ops_->AllocatePinned(static_cast<size_t>(capacity) * sizeof(int32_t));
      if (!windows.ok()) return windows.status();
      staged_indices_[slot] = *std::move(indices);
      staged_windows_[slot] = *std::move(windows);
    }
    staging_capacity_ = capacity;
    staged_count_ = -1;
    staged_in_pack_ = false;  // the windows are no longer there either
  }
  const size_t device_bytes = static_cast<size_t>(staging_capacity_) * sizeof(int64_t);
  for (int slot = 0; slot < 2; ++slot) {
    if (staged_device_[slot].size() >= device_bytes) continue;
    CORESCAPE_RETURN_IF_ERROR(SettleStagedUpload(slot));
    CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(*ops_, staged_device_[slot], device_bytes));
  }
  return absl::OkStatus();
}

absl::Status DeviceScapeStore::MaskReceived(const optim::GlobalMask& mask) {
  if (!ages_on_device()) {
    CORESCAPE_RETURN_IF_ERROR(host_ages_.Receive(mask, /*windows=*/catch_up()));
  }
  // Not staged: the Pack that takes it uploads it itself.
  if (!StageMask(mask.indices, host_ages_.received_windows())) staged_count_ = -1;
  return absl::OkStatus();
}

bool DeviceScapeStore::StageMask(absl::Span<const int64_t> indices,
                                 absl::Span<const int32_t> windows) {
  const int64_t count = static_cast<int64_t>(indices.size());
  if (count > staging_capacity_ || (!windows.empty() && windows.size() != indices.size())) {
    return false;
  }
  // What CatchUpApply checks of host windows, here instead of on the step's path.
  for (int32_t k : windows) {
    if (k < 1) return false;
  }
  const int slot = 1 - staged_slot_;
  // The slot's last upload is normally long done (a Pack took it); one a
  // Pack did not take may still read the slot.
  if (!SettleStagedUpload(slot).ok()) return false;
  std::copy(indices.begin(), indices.end(), staged_indices_[slot].as<int64_t>());
  std::copy(windows.begin(), windows.end(), staged_windows_[slot].as<int32_t>());
  if (staged_device_[slot].size() >= static_cast<size_t>(count) * sizeof(int64_t)) {
    auto uploaded = ops_->UploadBeside(staged_device_[slot].data(), staged_indices_[slot].data(),
                                       static_cast<size_t>(count) * sizeof(int64_t));
    // Without it the Pack uploads from the slot itself.
    if (uploaded.ok()) staged_uploaded_[slot] = *std::move(uploaded);
  }
  staged_slot_ = slot;
  staged_count_ = count;
  staged_has_windows_ = !windows.empty();
  return true;
}

absl::StatusOr<float*> DeviceScapeStore::Pack(const std::vector<int64_t>& mask, bool dense,
                                              MaskSource source) {
  const bool held = source == MaskSource::kHeld;
  if (held && (dense || held_waiting_ == 0)) {
    return absl::FailedPreconditionError(
        dense ? "scape device state: a dense step packs no held mask"
              : "scape device state: no held mask to pack");
  }
  dense_ = dense;
  host_mask_ = &mask;
  received_ = source == MaskSource::kReceived;
  count_ = dense ? size_ : held ? held_count_[held_front_] : static_cast<int64_t>(mask.size());
  if (count_ > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape device state: a mask of ", count_, " entries for ", size_));
  }
  const int64_t* device_mask = nullptr;
  staged_in_pack_ = false;
  if (held) {
    // The held buffer becomes the mask: nothing is copied.
    std::swap(mask_, held_[held_front_]);
    held_front_ = 1 - held_front_;
    --held_waiting_;
    ++held_packs_;
    device_mask = mask_.as<int64_t>();
  } else if (!dense) {
    const bool staged = source == MaskSource::kReceived;
    const size_t bytes = mask.size() * sizeof(int64_t);
    staged_in_pack_ = staged && staged_count_ == count_;
    if (staged_in_pack_ && staged_uploaded_[staged_slot_] != nullptr) {
      // Already on the device: the slot's buffer becomes the mask once its
      // upload is done.
      CORESCAPE_RETURN_IF_ERROR(ops_->WaitFor(*staged_uploaded_[staged_slot_]));
      staged_uploaded_[staged_slot_].reset();
      std::swap(mask_, staged_device_[staged_slot_]);
      ++packs_uploaded_beside_;
    } else {
      CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(*ops_, mask_, bytes));
      const int64_t* host_mask =
          staged_in_pack_ ? staged_indices_[staged_slot_].as<int64_t>() : mask.data();
      CORESCAPE_RETURN_IF_ERROR(ops_->Upload(mask_.data(), host_mask, bytes));
    }
    if (staged_in_pack_) ++staged_packs_;
    device_mask = mask_.as<int64_t>();
    // Room for the next masks (no exchange thread runs during a Pack).
    CORESCAPE_RETURN_IF_ERROR(ReserveStaging(count_));
  }
  if (offloaded()) {
    CORESCAPE_RETURN_IF_ERROR(PackOnHost(mask, dense));
  } else {
    CORESCAPE_RETURN_IF_ERROR(
        ops_->ScapePack(device_mask, count_, residual_.as<float>(), values_.as<float>()));
  }
  // The all-reduce reads the values outside the backend's stream.
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  return values_.as<float>();
}

absl::Status DeviceScapeStore::StampAges(int64_t step, bool windows) {
  // The stamp (step + 1) and so every window must fit an int32.
  if (step < 0 || step >= std::numeric_limits<int32_t>::max()) {
    return absl::OutOfRangeError(
        absl::StrCat("scape device state: step ", step, " is past the ages' int32 range"));
  }
  if (windows) {
    CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(
        *ops_, windows_, static_cast<size_t>(count_) * sizeof(int32_t)));
  }
  return ops_->ScapeStampSynced(dense_ ? nullptr : mask_.as<int64_t>(), count_,
                                static_cast<int32_t>(step + 1), synced_.as<int32_t>(),
                                windows ? windows_.as<int32_t>() : nullptr);
}

absl::StatusOr<double> DeviceScapeStore::Apply(float* params, int64_t step,
                                               const kernels::host_device::ScapeReferenceScalars& scalars,
                                               double grad_clip) {
  if (catch_up()) {
    return absl::FailedPreconditionError("scape device state: holds the catch-up rule's state");
  }
  const int64_t* device_mask = dense_ ? nullptr : mask_.as<int64_t>();
  CORESCAPE_RETURN_IF_ERROR(
      ops_->ScapeReconstruct(values_.as<float>(), device_mask, count_, m_.as<float>(), scalars));
  auto norm = ops_->ClipByGlobalNorm(values_.as<float>(), count_, grad_clip);
  if (!norm.ok()) return norm.status();
  CORESCAPE_RETURN_IF_ERROR(ops_->ScapeReferenceApply(params, m_.as<float>(), values_.as<float>(),
                                                      device_mask, count_,
                                                      decays_.as<uint8_t>(), size_, scalars));
  if (ages_on_device()) {
    CORESCAPE_RETURN_IF_ERROR(StampAges(step, /*windows=*/false));
  } else {
    host_ages_.Owe(step, dense_ ? nullptr : host_mask_);
  }
  return *norm;
}

absl::Status DeviceScapeStore::Accumulate(const float* grads,
                                          const kernels::host_device::ScapeCatchUpScalars& scalars) {
  if (!catch_up()) {
    return absl::FailedPreconditionError("scape device state: holds the reference rule's state");
  }
  if (!offloaded()) return ops_->ScapeAccumulate(residual_.as<float>(), grads, size_, scalars);
  float* const staging[2] = {staging_[0].as<float>(), staging_[1].as<float>()};
  return ops_->StageThrough(host_residual_.as<float>(), size_, staging, staging_floats_,
                            [&](float* staged, int64_t first, int64_t count) {
                              return ops_->ScapeAccumulate(staged, grads + first, count, scalars);
                            });
}

absl::Status DeviceScapeStore::CatchUpApply(float* params, int64_t step,
                                            const kernels::host_device::ScapeCatchUpScalars& scalars,
                                            const optim::CatchUpPowerTables& powers) {
  if (!catch_up()) {
    return absl::FailedPreconditionError("scape device state: holds the reference rule's state");
  }
  // Host ages: the windows worked out on the host (the received ones, if
  // this is the received mask) and the ages owed.
  std::vector<int32_t>& windows = host_windows_;
  windows.clear();
  if (!ages_on_device()) {
    CORESCAPE_RETURN_IF_ERROR(
        host_ages_.UpdateWindows(step, dense_ ? nullptr : host_mask_, received_, windows));
  }
  // Staged with the last Pack's mask: checked by StageMask.
  const bool from_staging = staged_in_pack_ && staged_has_windows_;
  if (!from_staging) {
    for (int32_t k : windows) {
      if (k < 1) return absl::InvalidArgumentError(absl::StrCat("scape device state: a window of ", k));
    }
  }
  const int64_t cached = powers.size();
  if (static_cast<int64_t>(powers.k_to_alpha.size()) != cached) {
    return absl::InvalidArgumentError("scape device state: power tables of unequal length");
  }
  const size_t table_bytes = static_cast<size_t>(cached) * sizeof(float);
  if (powers_size_ != cached) {
    CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(*ops_, powers_, 2 * table_bytes));
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(powers_.data(), powers.b1_to_k.data(), table_bytes));
    CORESCAPE_RETURN_IF_ERROR(
        ops_->Upload(powers_.as<float>() + cached, powers.k_to_alpha.data(), table_bytes));
    powers_size_ = cached;
  }
  if (ages_on_device()) {
    CORESCAPE_RETURN_IF_ERROR(StampAges(step, /*windows=*/true));
  } else {
    const size_t window_bytes = windows.size() * sizeof(int32_t);
    CORESCAPE_RETURN_IF_ERROR(model::EnsureCapacity(*ops_, windows_, window_bytes));
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(
        windows_.data(), from_staging ? staged_windows_[staged_slot_].as<int32_t>() : windows.data(),
        window_bytes));
  }
  const kernels::host_device::CatchUpPowers device_powers{powers_.as<float>(), powers_.as<float>() + cached,
                                                   cached, powers.beta1, powers.exponent};
  return ops_->ScapeCatchUpApply(params, m_.as<float>(), vbar_.as<float>(), values_.as<float>(),
                                 dense_ ? nullptr : mask_.as<int64_t>(), windows_.as<int32_t>(),
                                 count_, decays_.as<uint8_t>(), size_, scalars, device_powers);
}

absl::StatusOr<float*> DeviceScapeStore::Residual() {
  if (offloaded()) {
    // The step's values are consumed by now: their buffer (N floats) holds
    // the residual while it all-reduces.
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(values_.data(), host_residual_.data(),
                                           static_cast<size_t>(size_) * sizeof(float)));
    residual_in_values_ = true;
    return values_.as<float>();
  }
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  return residual_.as<float>();
}

absl::Status DeviceScapeStore::ScaleResidual(float scale) {
  if (!offloaded()) return ops_->Scale(residual_.as<float>(), size_, scale);
  float* e = host_residual_.as<float>();
  if (!residual_in_values_) {
    for (int64_t j = 0; j < size_; ++j) e[j] *= scale;
    return absl::OkStatus();
  }
  residual_in_values_ = false;
  CORESCAPE_RETURN_IF_ERROR(ops_->Scale(values_.as<float>(), size_, scale));
  return ops_->Download(e, values_.data(), static_cast<size_t>(size_) * sizeof(float));
}

absl::Status DeviceScapeStore::ReadAges(std::vector<int64_t>& last_sync) {
  if (!ages_on_device()) {
    host_ages_.Settle();
    last_sync = host_last_sync_;
    return absl::OkStatus();
  }
  std::vector<int32_t> synced(size_);
  CORESCAPE_RETURN_IF_ERROR(ops_->Download(synced.data(), synced_.data(),
                                           static_cast<size_t>(size_) * sizeof(int32_t)));
  last_sync.resize(size_);
  for (int64_t j = 0; j < size_; ++j) last_sync[j] = int64_t{synced[j]} - 1;
  return absl::OkStatus();
}

absl::Status DeviceScapeStore::Read(std::vector<float>& m, std::vector<float>& e,
                                    std::vector<float>& vbar) {
  m.resize(size_);
  e.resize(size_);
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  CORESCAPE_RETURN_IF_ERROR(ops_->Download(m.data(), m_.data(), bytes));
  if (catch_up()) {
    vbar.resize(size_);
    CORESCAPE_RETURN_IF_ERROR(ops_->Download(vbar.data(), vbar_.data(), bytes));
  }
  if (offloaded()) {
    std::copy(host_residual_.as<float>(), host_residual_.as<float>() + size_, e.begin());
    return absl::OkStatus();
  }
  return ops_->Download(e.data(), residual_.data(), bytes);
}

absl::Status DeviceScapeStore::Write(const std::vector<float>& m, const std::vector<float>& e,
                                     const std::vector<float>& vbar,
                                     const std::vector<int64_t>& last_sync) {
  DropHeldMasks();  // chosen from the state being replaced
  CORESCAPE_RETURN_IF_ERROR(CheckSize(m, size_, "first moment"));
  CORESCAPE_RETURN_IF_ERROR(CheckSize(e, size_, "residual"));
  if (static_cast<int64_t>(last_sync.size()) != size_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scape device state: ages of ", last_sync.size(), " entries, not ", size_));
  }
  if (!ages_on_device()) {
    host_last_sync_ = last_sync;
    host_ages_.Forget();
  } else {
    std::vector<int32_t> synced(size_);
    for (int64_t j = 0; j < size_; ++j) {
      if (last_sync[j] < -1 || last_sync[j] >= std::numeric_limits<int32_t>::max() - 1) {
        return absl::OutOfRangeError(absl::StrCat("scape device state: coordinate ", j,
                                                  " last synchronized at step ", last_sync[j],
                                                  ", outside the ages' int32 range"));
      }
      synced[j] = static_cast<int32_t>(last_sync[j] + 1);
    }
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(synced_.data(), synced.data(),
                                           static_cast<size_t>(size_) * sizeof(int32_t)));
  }
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(m_.data(), m.data(), bytes));
  if (catch_up()) {
    CORESCAPE_RETURN_IF_ERROR(CheckSize(vbar, size_, "normalizer"));
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(vbar_.data(), vbar.data(), bytes));
  }
  if (offloaded()) {
    std::copy(e.begin(), e.end(), host_residual_.as<float>());
    return absl::OkStatus();
  }
  return ops_->Upload(residual_.data(), e.data(), bytes);
}

}  // namespace corescape::train
