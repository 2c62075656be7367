#include "runtime/optim/scape_optimizer.h"

#include <algorithm>
#include <future>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/optim/mask_codec.h"
#include "runtime/optim/scape_host_store.h"
#include "runtime/optim/scape_state_codec.h"
#include "runtime/optim/scape_step_clock.h"

namespace corescape::optim {

absl::StatusOr<std::unique_ptr<ScapeOptimizer>> ScapeOptimizer::Create(
    RankGroup* group, ScapeConfig config, DecayMask decay_mask, std::vector<int64_t> tensor_bounds,
    std::unique_ptr<ScapeStateStore> state_store) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  const int64_t total = static_cast<int64_t>(decay_mask.size());
  if (tensor_bounds.empty()) tensor_bounds = {0, total};
  auto partition = ScapePartitionOfBuffer(config, tensor_bounds, total, group->world_size());
  if (!partition.ok()) return partition.status();
  return std::unique_ptr<ScapeOptimizer>(
      new ScapeOptimizer(group, config, std::move(decay_mask), std::move(tensor_bounds),
                         std::move(*partition), std::move(state_store)));
}

ScapeOptimizer::ScapeOptimizer(RankGroup* group, ScapeConfig config, DecayMask decay_mask,
                               std::vector<int64_t> tensor_bounds, ParameterPartition partition,
                               std::unique_ptr<ScapeStateStore> state_store)
    : group_(group),
      config_(config),
      decay_mask_(std::move(decay_mask)),
      tensor_bounds_(std::move(tensor_bounds)),
      partition_(std::move(partition)),
      exchange_(&partition_, config.scope, config.mask_sending),
      catch_up_(config_),
      reference_(config_, group->world_size()),
      state_store_(std::move(state_store)),
      host_state_(state_store_ == nullptr) {
  const size_t n = decay_mask_.size();
  // Another store's state is copied here only on demand (ReadStore).
  if (host_state_) {
    m_.assign(n, 0.0f);
    vbar_.assign(n, 0.0f);
    residual_.assign(n, 0.0f);
    last_sync_.assign(n, -1);
    state_store_ = std::make_unique<HostScapeStore>(config_.rule, &m_, &residual_, &vbar_,
                                                    &last_sync_, &values_, &decay_mask_);
  }
  const int rank = group_->rank();
  selector_.emplace(&config_, &tensor_bounds_, &decay_mask_, exchange_.RangeBegin(rank),
                    exchange_.RangeEnd(rank), group_->world_size(), state_store_.get(),
                    ScapeMaskSelector::HostState{&m_, &residual_, &vbar_});
}

int64_t ScapeOptimizer::host_state_bytes() const {
  return static_cast<int64_t>((m_.capacity() + vbar_.capacity() + residual_.capacity() +
                               values_.capacity()) *
                                  sizeof(float) +
                              last_sync_.capacity() * sizeof(int64_t));
}

absl::Status ScapeOptimizer::ReadStore() const {
  // The host store's Read is nothing: m_, residual_ and vbar_ are its state.
  if (absl::Status s = state_store_->Read(m_, residual_, vbar_); !s.ok()) return s;
  // A store that keeps no v̄ (the reference rule) has zeros, as the host's.
  if (vbar_.size() != decay_mask_.size()) vbar_.assign(decay_mask_.size(), 0.0f);
  return absl::OkStatus();
}

void ScapeOptimizer::SyncHostCopies() const {
  if (absl::Status s = ReadStore(); !s.ok()) {
    LOG(ERROR) << "scape: state not downloaded: " << s;
    m_.clear();
    residual_.clear();
    vbar_.clear();
  }
}

ScapeOptimizer::~ScapeOptimizer() {
  // The exchange's thread may be using the ages (ReceivedMaskHook).
  (void)FinishExchange();
}

MaskExchange::ReceivedHook ScapeOptimizer::ReceivedMaskHook() {
  // Nothing else touches the ages or the store's staging until the mask's
  // step.
  return [this](const GlobalMask& mask) -> absl::Status {
    if (absl::Status s = state_store_->MaskReceived(mask); !s.ok()) return s;
    received_step_ = mask.step;
    return absl::OkStatus();
  };
}

void ScapeOptimizer::UseThreadPool(ThreadPool* pool) {
  pool_ = pool;
  state_store_->UseThreadPool(pool);
  selector_->UseThreadPool(pool);
}

absl::Status ScapeOptimizer::FinishExchange() {
  if (!exchange_.in_flight()) return absl::OkStatus();
  auto mask = exchange_.Finish(config_.mask_epoch, step_);
  if (!mask.ok()) return mask.status();
  pending_ = std::move(*mask);
  return absl::OkStatus();
}

const std::vector<int64_t>& ScapeOptimizer::last_sync() {
  // The ages the last update owes are written on the exchange's thread, or
  // by the read.
  if (absl::Status s = FinishExchange(); !s.ok()) {
    LOG(ERROR) << "scape: the mask exchange failed while reading the ages: " << s;
    exchange_error_ = s;
  }
  if (absl::Status s = state_store_->ReadAges(last_sync_); !s.ok()) {
    LOG(ERROR) << "scape: reading the ages from the state store failed: " << s;
  }
  return last_sync_;
}

absl::Status ScapeOptimizer::ReadHeldMasks() {
  // A group of one's mask is its one part, as an exchange would give it.
  auto read = [this](bool held, GlobalMask& mask) -> absl::Status {
    auto indices = state_store_->ReadMask(held);
    if (!indices.ok()) return indices.status();
    mask.indices = *std::move(indices);
    mask.parts = {mask.indices};
    return absl::OkStatus();
  };
  if (current_held_ >= 0 && current_.parts.empty()) {
    if (absl::Status s = read(/*held=*/false, current_); !s.ok()) return s;
  }
  if (pending_ && pending_held_ >= 0 && pending_->parts.empty()) {
    if (absl::Status s = read(/*held=*/true, *pending_); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ScapeOptimizer::ReadHeldMasksForAccessors() {
  if (absl::Status s = ReadHeldMasks(); !s.ok()) {
    LOG(ERROR) << "scape: reading the held masks from the state store failed: " << s;
  }
}

const GlobalMask& ScapeOptimizer::current_mask() {
  ReadHeldMasksForAccessors();
  return current_;
}

const std::optional<GlobalMask>& ScapeOptimizer::pending_mask() {
  ReadHeldMasksForAccessors();
  return pending_;
}

void ScapeOptimizer::SetPendingMask(GlobalMask mask) {
  pending_ = std::move(mask);
  received_step_ = -1;
  pending_held_ = -1;
  state_store_->DropHeldMasks();
}

absl::Status ScapeOptimizer::StartExchange(int64_t step, std::vector<int64_t> own) {
  received_step_ = -1;
  return exchange_.Start(*group_, config_.mask_epoch, step, std::move(own), &current_,
                         ReceivedMaskHook());
}

absl::Status ScapeOptimizer::TakeMask(int64_t step) {
  // A mask the exchange assembled is sorted inside the buffer by
  // construction (every part decoded inside its range); one set by hand is
  // checked here.
  bool checked = false;
  if (!exchange_error_.ok()) return std::exchange(exchange_error_, absl::OkStatus());
  if (exchange_.in_flight()) {
    auto mask = exchange_.Finish(config_.mask_epoch, step);
    if (!mask.ok()) return mask.status();
    pending_ = std::move(*mask);
    checked = true;
  }
  if (!pending_) return absl::FailedPreconditionError(absl::StrCat("scape: no mask for step ", step));
  if (pending_->step != step || pending_->mask_epoch != config_.mask_epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scape: refusing a mask of mask epoch ", pending_->mask_epoch, " for step ",
        pending_->step, " at step ", step, " of mask epoch ", config_.mask_epoch));
  }
  if (!checked && !CheckMaskPartition({0, BufferSize(), pending_->indices}).ok()) {
    return absl::FailedPreconditionError("scape: mask indices not sorted or out of range");
  }
  current_ = std::move(*pending_);
  current_held_ = std::exchange(pending_held_, -1);
  pending_.reset();
  return absl::OkStatus();
}

// One Step's own state, passed through its phases.
struct ScapeOptimizer::StepState {
  int64_t t = 0;
  bool dense = false;
  double lr = 0;
  ScapeStepClock clock;
  // The next mask: chosen from the reference rule's payload, held in the
  // store, or being selected beside the all-reduce and update.
  std::optional<std::vector<int64_t>> preselected;
  bool held_next = false;
  std::optional<std::future<absl::StatusOr<std::vector<int64_t>>>> selection;
  double selection_seconds = 0;
};

absl::Status ScapeOptimizer::Step(float* params, float* grads, int64_t size, double lr) {
  if (size != BufferSize()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape: buffer of ", size, " entries, optimizer built for ", BufferSize()));
  }
  // The step's traffic: with the exchange's collectives on its thread, since
  // the last step ended (the group is the optimizer's alone, and the mask
  // this step applies was exchanged in between); else since now, as other
  // collectives may come between steps.
  if (config_.mask_sending == MaskSending::kOnCaller || !traffic_mark_) {
    traffic_mark_ = {group_->bytes_sent(), group_->bytes_received()};
  }
  StepState step;
  step.t = step_;
  step.dense = DenseAt(step_);
  step.lr = lr;
  auto mask_taken = TakeStepMask(step);
  if (!mask_taken.ok()) return mask_taken.status();
  if (absl::Status s = AddIncrements(step, /*first_mask_now=*/!*mask_taken, grads); !s.ok()) return s;
  if (absl::Status s = SynchronizeAndUpdate(step, params); !s.ok()) return s;
  if (absl::Status s = SyncResiduals(step); !s.ok()) return s;
  ++step_;
  // The end of this step's own traffic; the next exchange's, where its
  // thread sends it, counts towards the step that applies its mask.
  const Traffic traffic_end = {group_->bytes_sent(), group_->bytes_received()};
  if (absl::Status s = StartNextMask(step); !s.ok()) return s;
  // No exchange to write the owed ages on its thread: now.
  if (!exchange_.in_flight()) state_store_->SettleAges();
  RecordStep(step, traffic_end);
  return absl::OkStatus();
}

absl::StatusOr<bool> ScapeOptimizer::TakeStepMask(StepState& step) {
  if (step.dense) {
    if (exchange_.in_flight() || pending_) {
      return absl::FailedPreconditionError("scape: a mask is pending at a dense step");
    }
    current_ = GlobalMask{config_.mask_epoch, step.t, {}, {}};
    current_held_ = -1;
    return true;
  }
  if (config_.rule == ScapeRule::kReference && !exchange_.in_flight() && !pending_) {
    return false;  // the first mask: chosen from this step's payload
  }
  const bool receiving = exchange_.in_flight();
  if (absl::Status s = TakeMask(step.t); !s.ok()) return s;
  if (receiving) {
    step.clock.LapFinished(exchange_.last());
  } else {
    step.clock.Lap(step.clock.phases.mask_wait);
  }
  return true;
}

absl::Status ScapeOptimizer::AddIncrements(StepState& step, bool first_mask_now,
                                           const float* grads) {
  const int64_t t = step.t;
  if (config_.rule == ScapeRule::kCatchUp) {
    return state_store_->Accumulate(grads, catch_up_.ScalarsAt(t, step.lr));
  }
  // The reference rule: e ← c^r, the payload and the statistic of the
  // masks chosen from it.
  const int rank = group_->rank();
  if (absl::Status s = state_store_->Payload(grads, reference_.ScalarsAt(t, step.lr),
                                             exchange_.RangeBegin(rank), exchange_.RangeEnd(rank),
                                             selector_->reference_statistic());
      !s.ok()) {
    return s;
  }
  const bool holds = HoldsMasks();
  if (first_mask_now && holds) {
    step.clock.Lap(step.clock.phases.pack);
    if (absl::Status s = HoldOwnPart(t); !s.ok()) return s;
    step.clock.Lap(step.clock.phases.select);
    if (absl::Status s = TakeMask(t); !s.ok()) return s;
  } else if (first_mask_now) {
    step.clock.Lap(step.clock.phases.pack);
    auto own = selector_->SelectOwnPart(t);
    if (!own.ok()) return own.status();
    step.clock.Lap(step.clock.phases.select);
    if (absl::Status s = StartExchange(t, *std::move(own)); !s.ok()) return s;
    step.clock.LapStarted(exchange_);
    // Needed at once: what its thread does is on the step's path.
    if (absl::Status s = TakeMask(t); !s.ok()) return s;
    step.clock.LapAwaited(exchange_.last());
  }
  if (DenseAt(t + 1)) return absl::OkStatus();
  if (holds) {
    // The next mask stays in the store, chosen now from c^r (as below).
    step.clock.Lap(step.clock.phases.pack);
    if (absl::Status s = HoldOwnPart(t + 1); !s.ok()) return s;
    step.held_next = true;
    step.clock.Lap(step.clock.phases.select);
  } else if (state_store_->selects()) {
    // The store ranks e where it keeps it: the next mask is chosen now,
    // from c^r, before the pack zeroes e at this one.
    step.clock.Lap(step.clock.phases.pack);
    auto next = selector_->SelectOwnPart(t + 1);
    if (!next.ok()) return next.status();
    step.preselected = *std::move(next);
    step.clock.Lap(step.clock.phases.select);
  }
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::SynchronizeAndUpdate(StepState& step, float* params) {
  const int64_t t = step.t;
  const bool dense = step.dense;
  // Pack at the mask (in mask order) and zero what is sent: ONE all-reduce.
  const int64_t synced = dense ? BufferSize() : CurrentMaskEntries();
  using MaskSource = ScapeStateStore::MaskSource;
  const MaskSource source = !dense && current_held_ >= 0 ? MaskSource::kHeld
                            : !dense && received_step_ == t ? MaskSource::kReceived
                                : MaskSource::kHost;
  auto values = state_store_->Pack(current_.indices, dense, source);
  if (!values.ok()) return values.status();
  step.clock.Lap(step.clock.phases.pack);
  // The next mask's selection runs beside the values all-reduce and the
  // update when it does not depend on them (SelectsDuringUpdate).
  if (!step.preselected && !step.held_next && SelectsDuringUpdate(t, dense)) {
    auto select = [this, t, &step] {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::vector<int64_t>> chosen =
          config_.rule == ScapeRule::kReference
              ? selector_->SelectOwnPart(t + 1)
              : selector_->SelectOffMaskCandidates(t + 1, current_.indices);
      step.selection_seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return chosen;
    };
    try {
      step.selection = std::async(std::launch::async, select);
    } catch (const std::system_error&) {
      // No thread to spare: select after the update instead.
    }
  }
  // (A selection in flight is waited for when `step` goes, on any return.)
  if (absl::Status s = state_store_->SumOverRanks(*group_, *values, synced); !s.ok()) return s;
  step.clock.Lap(step.clock.phases.all_reduce_wait);
  absl::Status updated =
      config_.rule == ScapeRule::kReference
          ? ApplyReference(params, reference_.ScalarsAt(t, step.lr))
          : state_store_->CatchUpApply(params, t, catch_up_.ScalarsAt(t, step.lr),
                                       catch_up_.powers());
  if (!updated.ok()) return updated;
  step.clock.Lap(step.clock.phases.update);
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::SyncResiduals(StepState& step) {
  // A dense step has no residual left.
  if (step.dense || !config_.ResidualSyncAfter(step.t)) return absl::OkStatus();
  auto residual = state_store_->Residual();
  if (!residual.ok()) return residual.status();
  if (absl::Status s = state_store_->SumOverRanks(*group_, *residual, BufferSize()); !s.ok()) {
    return s;
  }
  step.clock.Lap(step.clock.phases.all_reduce_wait);
  const float inverse_ranks = 1.0f / static_cast<float>(group_->world_size());
  if (absl::Status s = state_store_->ScaleResidual(inverse_ranks); !s.ok()) return s;
  step.clock.Lap(step.clock.phases.update);
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::StartNextMask(StepState& step) {
  if (DenseAt(step_)) return absl::OkStatus();
  if (HoldsMasks()) {
    // Chosen from the reference rule's payload already, or now.
    if (!step.held_next) {
      if (absl::Status s = HoldOwnPart(step_); !s.ok()) return s;
    }
    step.clock.Lap(step.clock.phases.select);
    return absl::OkStatus();
  }
  std::vector<int64_t> own;
  if (step.preselected) {
    own = *std::move(step.preselected);
  } else if (!step.selection) {
    auto chosen = selector_->SelectOwnPart(step_);
    if (!chosen.ok()) return chosen.status();
    own = *std::move(chosen);
  } else {
    absl::StatusOr<std::vector<int64_t>> chosen = step.selection->get();
    if (!chosen.ok()) return chosen.status();
    own = config_.rule == ScapeRule::kReference
              ? *std::move(chosen)
              : selector_->SelectFromCandidates(step_, *chosen, current_.indices);
  }
  step.clock.Lap(step.clock.phases.select);
  step.clock.phases.select_overlapped = step.selection_seconds;
  if (absl::Status s = StartExchange(step_, std::move(own)); !s.ok()) return s;
  step.clock.LapStarted(exchange_);
  return absl::OkStatus();
}

void ScapeOptimizer::RecordStep(const StepState& step, const Traffic& traffic_end) {
  const int64_t synced = step.dense ? BufferSize() : CurrentMaskEntries();
  last_step_ = {};
  last_step_.step = step_;
  last_step_.dense = step.dense;
  last_step_.synced_values = synced;
  last_step_.mask_entries = step.dense ? 0 : synced;
  const Traffic traffic_now = config_.mask_sending == MaskSending::kOnCaller
                                  ? Traffic{group_->bytes_sent(), group_->bytes_received()}
                                  : traffic_end;
  last_step_.bytes_sent = traffic_now.sent - traffic_mark_->sent;
  last_step_.bytes_received = traffic_now.received - traffic_mark_->received;
  traffic_mark_ = traffic_end;
  last_step_.mask_part_bytes = step.clock.part_bytes;
  last_step_.mask_encoding = step.clock.part_encoding;
  last_step_.grad_norm = config_.rule == ScapeRule::kReference ? last_grad_norm_ : 0.0;
  last_step_.phases = step.clock.phases;
}

bool ScapeOptimizer::SelectsDuringUpdate(int64_t step, bool dense) const {
  if (dense || DenseAt(step + 1) || config_.ResidualSyncAfter(step)) return false;
  // The reference rule selects from c^r, final before the all-reduce.
  if (config_.rule == ScapeRule::kReference) return true;
  // A store that ranks the catch-up rule's state does so after the update,
  // in its memory. On the host the update leaves every off-mask
  // coordinate's statistic as it is, so candidates are chosen off the mask
  // beside it and the mask's own entries added after it (ranges only).
  return !state_store_->selects() && !config_.PerTensor();
}

absl::Status ScapeOptimizer::ApplyReference(float* params, const ReferenceRule::Scalars& scalars) {
  auto norm = state_store_->Apply(params, step_, scalars, config_.grad_clip);
  if (!norm.ok()) return norm.status();
  last_grad_norm_ = *norm;
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::HoldOwnPart(int64_t step) {
  auto count = selector_->HoldOwnPart(step);
  if (!count.ok()) return count.status();
  pending_ = GlobalMask{config_.mask_epoch, step, {}, {}};
  pending_held_ = *count;
  return absl::OkStatus();
}

std::vector<float> ScapeOptimizer::MaskStatisticValues() const {
  // A store in another memory: its state, downloaded (the reference rule's
  // statistic is the payload's, already here).
  if (config_.rule != ScapeRule::kReference) SyncHostCopies();
  return selector_->StatisticValues();
}

absl::StatusOr<std::string> ScapeOptimizer::SaveState() {
  if (!exchange_error_.ok()) return std::exchange(exchange_error_, absl::OkStatus());
  if (absl::Status s = FinishExchange(); !s.ok()) return s;
  if (absl::Status s = ReadStore(); !s.ok()) return s;
  if (absl::Status s = state_store_->ReadAges(last_sync_); !s.ok()) return s;
  if (absl::Status s = ReadHeldMasks(); !s.ok()) return s;
  std::string state = EncodeScapeState({name(), config_.ToString(), group_->rank(),
                                        group_->world_size(), partition_.bounds(), step_, m_,
                                        vbar_, residual_, last_sync_, current_, pending_});
  ReleaseHostCopies();  // the checkpoint has them
  return state;
}

void ScapeOptimizer::ReleaseHostCopies() {
  if (host_state_) return;
  std::vector<float>().swap(m_);
  std::vector<float>().swap(vbar_);
  std::vector<float>().swap(residual_);
  std::vector<int64_t>().swap(last_sync_);
}

absl::Status ScapeOptimizer::RestoreState(absl::string_view state) {
  if (exchange_.in_flight()) {
    return absl::FailedPreconditionError("scape: cannot restore while a mask exchange is in flight");
  }
  auto decoded = DecodeScapeState(state, name(), config_.ToString(), BufferSize());
  if (!decoded.ok()) return decoded.status();
  ScapeState& r = *decoded;
  // Residuals are per rank; m, v̄, ages and masks are identical on every
  // rank. So another rank's state (rank 0 writes the job's checkpoints) is
  // only ours if its residuals are shared too: saved right after a dense
  // step (none left) or a residual sync (every rank holds the mean).
  const bool shared = r.step > 0 && (DenseAt(r.step - 1) || config_.ResidualSyncAfter(r.step - 1));
  if ((r.rank != group_->rank() || r.world_size != group_->world_size()) && !shared) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scape: state of rank ", r.rank, " of ", r.world_size,
        " holds this rank's own residuals; this is rank ", group_->rank(), " of ",
        group_->world_size(),
        " (checkpoints must follow a residual sync step: set residual_sync_period)"));
  }
  if (absl::Status s = state_store_->Write(r.m, r.residual, r.vbar, r.last_sync); !s.ok()) return s;
  step_ = r.step;
  m_ = std::move(r.m);
  vbar_ = std::move(r.vbar);
  residual_ = std::move(r.residual);
  last_sync_ = std::move(r.last_sync);
  current_ = std::move(r.current);
  pending_ = std::move(r.pending);
  // The store dropped what it held when written.
  current_held_ = -1;
  pending_held_ = -1;
  ReleaseHostCopies();  // the store has them now
  received_step_ = -1;
  exchange_error_ = absl::OkStatus();
  dense_after_restore_ = -1;
  // Masks of an earlier mask epoch: still right if the partition map is the
  // same (they were agreed by every rank), so they move into this epoch and
  // the run continues exactly; cut for another map, the next step is dense.
  if (r.partition == partition_.bounds()) {
    current_.mask_epoch = config_.mask_epoch;
    if (pending_) pending_->mask_epoch = config_.mask_epoch;
  } else {
    current_ = GlobalMask{config_.mask_epoch, step_ - 1, {}, {}};
    if (pending_ || !DenseAt(step_)) {
      pending_.reset();
      dense_after_restore_ = step_;
    }
  }
  return absl::OkStatus();
}

}  // namespace corescape::optim
