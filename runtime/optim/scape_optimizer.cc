#include "runtime/optim/scape_optimizer.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/kernels/cuda/optim_scalars.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/optimizer_state.h"

namespace corescape::optim {
namespace {

// Coordinates per chunk of a per-coordinate pass over the buffer on a pool
// (the residual's accumulation, the host update): the result does not
// depend on the chunks.
constexpr int64_t kUpdateChunk = 1 << 17;

// Walks coordinates [from, to) of a step's update in order: on_mask(j, p)
// for each coordinate j synchronized at position p of the packed values (all
// of them when dense), off_mask(begin, end) for each run between them.
template <typename OnMask, typename OffMask>
void WalkMask(int64_t from, int64_t to, const std::vector<int64_t>& mask, bool dense,
              OnMask on_mask, OffMask off_mask) {
  if (dense) {
    for (int64_t j = from; j < to; ++j) on_mask(j, j);
    return;
  }
  int64_t p = std::lower_bound(mask.begin(), mask.end(), from) - mask.begin();
  int64_t j = from;
  for (const int64_t size = static_cast<int64_t>(mask.size()); p < size && mask[p] < to; ++p) {
    off_mask(j, mask[p]);
    on_mask(mask[p], p);
    j = mask[p] + 1;
  }
  off_mask(j, to);
}

// What every mask (and mask part) is: strictly ascending coordinates of an
// n-entry buffer.
bool SortedWithin(const std::vector<int64_t>& indices, int64_t n) {
  return CheckMaskPartition({0, n, indices}).ok();
}

}  // namespace

const char* ScapeRuleName(ScapeRule rule) {
  switch (rule) {
    case ScapeRule::kReconstructed: return "reconstructed";
    case ScapeRule::kCatchUp: return "catch-up";
    case ScapeRule::kLinearized: return "linearized";
    case ScapeRule::kReference: return "reference";
  }
  return "?";
}

absl::StatusOr<ScapeRule> ParseScapeRule(absl::string_view name) {
  constexpr ScapeRule kRules[] = {ScapeRule::kReconstructed, ScapeRule::kCatchUp,
                                  ScapeRule::kLinearized, ScapeRule::kReference};
  for (ScapeRule rule : kRules) {
    if (name == ScapeRuleName(rule)) return rule;
  }
  std::string known;
  for (ScapeRule rule : kRules) absl::StrAppend(&known, known.empty() ? "" : ", ", ScapeRuleName(rule));
  return absl::InvalidArgumentError(absl::StrCat("unknown SCAPE rule '", name, "' (", known, ")"));
}

const char* MaskStatisticName(MaskStatistic statistic) {
  switch (statistic) {
    case MaskStatistic::kMomentumPlusResidual: return "momentum-plus-residual";
    case MaskStatistic::kResidual: return "residual";
    case MaskStatistic::kMomentum: return "momentum";
    case MaskStatistic::kNormalizedResidual: return "normalized-residual";
    case MaskStatistic::kMomentumPlusScaledResidual: return "momentum-plus-scaled-residual";
  }
  return "?";
}

absl::StatusOr<MaskStatistic> ParseMaskStatistic(absl::string_view name) {
  for (MaskStatistic statistic :
       {MaskStatistic::kMomentumPlusScaledResidual, MaskStatistic::kMomentumPlusResidual,
        MaskStatistic::kResidual, MaskStatistic::kMomentum, MaskStatistic::kNormalizedResidual}) {
    if (name == MaskStatisticName(statistic)) return statistic;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown mask statistic '", name,
      "' (momentum-plus-scaled-residual, momentum-plus-residual, residual, momentum, "
      "normalized-residual)"));
}

absl::Status ScapeConfig::Validate() const {
  if (!(density > 0 && density <= 1)) return absl::InvalidArgumentError("scape: density must be in (0, 1]");
  if (dense_warmup_steps < 0) return absl::InvalidArgumentError("scape: dense_warmup_steps < 0");
  if (dense_refresh_interval < 0) return absl::InvalidArgumentError("scape: dense_refresh_interval < 0");
  if (residual_sync_period < 0) return absl::InvalidArgumentError("scape: residual_sync_period < 0");
  if (absl::Status s = density_schedule.Validate(); !s.ok()) return s;
  if (!(exploration >= 0 && exploration <= 1)) {
    return absl::InvalidArgumentError("scape: exploration must be in [0, 1]");
  }
  if (!(catch_up_exponent >= 0 && catch_up_exponent <= 1) || catch_up_exponent_consistent > 1) {
    return absl::InvalidArgumentError("scape: catch_up_exponent must be in [0, 1]");
  }
  if (PerTensor() && exploration > 0) {
    return absl::InvalidArgumentError("scape: exploration needs range masks, not per-tensor masks");
  }
  if (PerTensor() && scope == MaskScope::kWholeBuffer) {
    return absl::InvalidArgumentError("scape: per-tensor masks need partitioned masks (scape, not scape-global)");
  }
  if (dense_small_tensors && !PerTensor()) {
    return absl::InvalidArgumentError("scape: dense_small_tensors needs per-tensor masks");
  }
  if (absl::Status s = CheckResidualOffload(*this); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scape: offload_residuals ", s.message()));
  }
  if (!(forecast >= 0 && forecast <= 1)) return absl::InvalidArgumentError("scape: forecast must be in [0, 1]");
  if (!(normalizer_beta >= 0 && normalizer_beta < 1)) {
    return absl::InvalidArgumentError("scape: normalizer_beta must be in [0, 1)");
  }
  if (!(adams.beta1 >= 0 && adams.beta1 < 1) || !(adams.beta2 >= 0 && adams.beta2 < 1) ||
      !(adams.epsilon > 0)) {
    return absl::InvalidArgumentError("scape: AdamS betas must be in [0, 1), epsilon > 0");
  }
  return absl::OkStatus();
}

std::string ScapeConfig::ToString() const {
  return absl::StrFormat(
      "b1=%.17g b2=%.17g eps=%.17g wd=%.17g d=%.17g warmup=%d refresh_every=%d scope=%d rule=%s off=%d stat=%d "
      "schedule={%s} explore=%.17g forecast=%.17g rho=%.17g refresh=%d lrw=%d catchup=%.17g/%.17g decayed=%d residual_sync_period=%d "
      "per_tensor=%d dense_small=%d clip=%.17g",
      adams.beta1, adams.beta2, adams.epsilon, adams.weight_decay, density, dense_warmup_steps,
      dense_refresh_interval,
      static_cast<int>(scope), ScapeRuleName(rule), static_cast<int>(off_mask),
      static_cast<int>(statistic), density_schedule.ToString(), exploration, forecast, normalizer_beta,
      static_cast<int>(refresh), lr_weighted ? 1 : 0, catch_up_exponent,
      catch_up_exponent_consistent, decayed_residual ? 1 : 0, residual_sync_period,
      PerTensor() ? 1 : 0, dense_small_tensors ? 1 : 0, grad_clip);
}

absl::StatusOr<ParameterPartition> ScapePartition(const ScapeConfig& config,
                                                  const std::vector<int64_t>& tensor_bounds,
                                                  int world_size) {
  if (config.PerTensor()) return ParameterPartition::TensorAligned(tensor_bounds, world_size);
  if (tensor_bounds.empty()) return absl::InvalidArgumentError("partition: no tensor bounds");
  return ParameterPartition::Balanced(tensor_bounds.back(), world_size);
}

absl::Status CheckCatchUpInStore(const ScapeConfig& config) {
  if (config.exploration > 0) {
    return absl::InvalidArgumentError(
        "scape: exploration ranks coordinates by age on the host; the catch-up rule's state "
        "cannot live on a device with it");
  }
  if (config.catch_up_exponent_consistent >= 0) {
    return absl::InvalidArgumentError(
        "scape: catch_up_exponent_consistent varies the exponent per coordinate; the catch-up "
        "rule's state cannot live on a device with it");
  }
  return absl::OkStatus();
}

absl::Status CheckResidualOffload(const ScapeConfig& config) {
  if (!config.offload_residuals || config.rule == ScapeRule::kReference ||
      (config.rule == ScapeRule::kCatchUp && CheckCatchUpInStore(config).ok())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "needs rule reference or catch-up (without exploration or catch_up_exponent_consistent): "
      "the other forms keep all their state in host memory");
}

namespace {

// SCAPE's state in the optimizer's own host vectors (every rule's updates
// but the reference rule's run in the optimizer's loops).
class HostStateStore final : public ScapeStateStore {
 public:
  HostStateStore(std::vector<float>* m, std::vector<float>* residual,
                     std::vector<float>* values, const DecayMask* decay_mask)
      : m_(*m), residual_(*residual), values_(*values), decay_mask_(*decay_mask) {}

  bool host_addressable() const override { return true; }

  absl::Status Payload(const float* grads, const kernels::cuda::ScapeReferenceScalars& s,
                       int64_t begin, int64_t end, std::vector<float>& statistic) override {
    // c^r = β1·m + (1−β1)·g^r_local + e^r, with g^r_local = P·g^r (our g^r
    // sums to the global mean gradient over ranks; the mean of P·g^r is it).
    const int64_t n = static_cast<int64_t>(m_.size());
    ParallelForOn(
        pool_, n,
        [&](int64_t from, int64_t to) {
          for (int64_t j = from; j < to; ++j) {
            residual_[j] =
                s.beta1 * m_[j] + s.payload_one_minus_beta1 * (s.world * grads[j]) + residual_[j];
          }
        },
        kUpdateChunk);
    statistic.resize(end - begin);
    // |e|: the residual statistic, which reads no scalars.
    FillMaskStatistic(MaskStatistic::kResidual, nullptr, residual_.data() + begin, nullptr,
                      end - begin, {}, statistic.data(), pool_);
    return absl::OkStatus();
  }

  absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                              MaskSource source) override {
    if (source == MaskSource::kHeld) {
      return absl::FailedPreconditionError("scape: the host store holds no masks");
    }
    mask_ = &mask;
    dense_ = dense;
    const int64_t synced = dense ? static_cast<int64_t>(residual_.size())
                                 : static_cast<int64_t>(mask.size());
    values_.resize(synced);
    if (dense) {
      std::copy(residual_.begin(), residual_.end(), values_.begin());
      std::fill(residual_.begin(), residual_.end(), 0.0f);
    } else {
      for (int64_t p = 0; p < synced; ++p) {
        values_[p] = residual_[mask[p]];
        residual_[mask[p]] = 0.0f;
      }
    }
    return values_.data();
  }

  absl::StatusOr<double> Apply(float* params, int64_t /*step*/,
                               const kernels::cuda::ScapeReferenceScalars& s,
                               double grad_clip) override {
    const int64_t n = static_cast<int64_t>(m_.size());
    const std::vector<int64_t>& mask = *mask_;
    const bool dense = dense_;
    const int64_t synced = static_cast<int64_t>(values_.size());
    // b = mean_r c^r; ĝ = (b − β1·m_prev)/(1−β1), in place in values_ (0 off
    // the mask, so the packed values' norm is ĝ's global norm).
    ParallelForOn(
        pool_, synced,
        [&](int64_t from, int64_t to) {
          for (int64_t p = from; p < to; ++p) {
            kernels::cuda::ScapeReconstructElement(values_[p], m_[dense ? p : mask[p]], s);
          }
        },
        kUpdateChunk);
    // ĝ is identical on every rank, so is its clipping (its norm summed in
    // one order, on this thread).
    const double norm = ClipGradientNorm(values_.data(), synced, grad_clip);
    const uint8_t* decays = decay_mask_.data();
    ParallelForOn(
        pool_, n,
        [&](int64_t from, int64_t to) {
          WalkMask(
              from, to, mask, dense,
              [&](int64_t j, int64_t p) {
                kernels::cuda::ScapeReferenceOnMask(params[j], m_[j], values_[p], decays[j] != 0,
                                                    s);
              },
              [&](int64_t begin, int64_t end) {
                // Off the mask the first moment lives only in the residual.
                for (int64_t j = begin; j < end; ++j) {
                  kernels::cuda::ScapeReferenceOffMask(params[j], m_[j], decays[j] != 0, s);
                }
              });
        },
        kUpdateChunk);
    return norm;
  }

  void UseThreadPool(ThreadPool* pool) override { pool_ = pool; }
  absl::StatusOr<float*> Residual() override { return residual_.data(); }
  absl::Status ScaleResidual(float scale) override {
    for (float& e : residual_) e *= scale;
    return absl::OkStatus();
  }
  absl::Status Read(std::vector<float>&, std::vector<float>&, std::vector<float>&,
                    std::vector<int64_t>&) override {
    return absl::OkStatus();
  }
  absl::Status Write(const std::vector<float>&, const std::vector<float>&,
                     const std::vector<float>&, const std::vector<int64_t>&) override {
    return absl::OkStatus();
  }

 private:
  std::vector<float>& m_;
  std::vector<float>& residual_;
  std::vector<float>& values_;
  const DecayMask& decay_mask_;
  const std::vector<int64_t>* mask_ = nullptr;
  bool dense_ = true;
  ThreadPool* pool_ = nullptr;  // the loops' chunks (per element: the same bits)
};

}  // namespace

absl::StatusOr<std::unique_ptr<ScapeOptimizer>> ScapeOptimizer::Create(
    RankGroup* group, ScapeConfig config, DecayMask decay_mask, std::vector<int64_t> tensor_bounds,
    std::unique_ptr<ScapeStateStore> state_store) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  if (state_store != nullptr && config.rule != ScapeRule::kReference) {
    if (config.rule != ScapeRule::kCatchUp || !state_store->runs_catch_up()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scape: only the reference and catch-up rules keep their state on a device, not '",
          ScapeRuleName(config.rule), "'"));
    }
    if (absl::Status s = CheckCatchUpInStore(config); !s.ok()) return s;
  }
  const int64_t total = static_cast<int64_t>(decay_mask.size());
  if (tensor_bounds.empty()) tensor_bounds = {0, total};
  if (tensor_bounds.front() != 0 || tensor_bounds.back() != total ||
      !std::is_sorted(tensor_bounds.begin(), tensor_bounds.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scape: tensor bounds must rise from 0 to the buffer's ", total, " entries"));
  }
  auto partition = config.partition_bounds.empty()
                       ? ScapePartition(config, tensor_bounds, group->world_size())
                       : ParameterPartition::FromBounds(config.partition_bounds, total,
                                                        group->world_size());
  if (!partition.ok()) return partition.status();
  if (config.PerTensor()) {
    if (absl::Status s = CheckTensorAligned(*partition, tensor_bounds); !s.ok()) return s;
  }
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
      state_store_(std::move(state_store)),
      host_state_(state_store_ == nullptr) {
  const size_t n = decay_mask_.size();
  if (host_state_) {
    m_.assign(n, 0.0f);
    vbar_.assign(n, 0.0f);
    residual_.assign(n, 0.0f);
    state_store_ =
        std::make_unique<HostStateStore>(&m_, &residual_, &values_, &decay_mask_);
  }
  // A store's state is copied here only on demand (ReadStore); the ages
  // live here unless the store keeps them.
  if (!state_store_->keeps_ages()) last_sync_.assign(n, -1);
}

int64_t ScapeOptimizer::host_state_bytes() const {
  return static_cast<int64_t>((m_.capacity() + vbar_.capacity() + residual_.capacity() +
                               values_.capacity()) *
                                  sizeof(float) +
                              last_sync_.capacity() * sizeof(int64_t));
}

absl::Status ScapeOptimizer::ReadStore() const {
  // The host store's Read is nothing: m_, residual_ and vbar_ are its state.
  if (absl::Status s = state_store_->Read(m_, residual_, vbar_, last_sync_); !s.ok()) return s;
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

bool ScapeOptimizer::DenseAt(int64_t step) const {
  // The reference rule may start sparse: its first mask is then chosen
  // synchronously from step 0's payload.
  const int64_t warmup = config_.rule == ScapeRule::kReference
                             ? config_.dense_warmup_steps
                             : std::max<int64_t>(1, config_.dense_warmup_steps);
  if (config_.density >= 1.0 || step < warmup || DensityAt(step) >= 1.0) return true;
  if (step == dense_after_restore_) return true;
  if (std::find(config_.forced_dense_steps.begin(), config_.forced_dense_steps.end(), step) !=
      config_.forced_dense_steps.end()) {
    return true;
  }
  return config_.dense_refresh_interval > 0 &&
         (step - warmup + 1) % config_.dense_refresh_interval == 0;
}

void ScapeOptimizer::DecayRun(float* params, int64_t begin, int64_t end, float decay) const {
  const uint8_t* decays = decay_mask_.data();
  for (int64_t j = begin; j < end; ++j) params[j] *= decays[j] ? decay : 1.0f;
}

bool ScapeOptimizer::ResidualSyncAfter(int64_t step) const {
  return config_.residual_sync_period > 0 && (step + 1) % config_.residual_sync_period == 0;
}

double ScapeOptimizer::DensityAt(int64_t step) const {
  return config_.density_schedule.At(step, config_.density);
}

ScapeOptimizer::~ScapeOptimizer() {
  // The exchange's thread may be using the ages (ReceivedMaskHook).
  (void)FinishExchange();
}

MaskExchange::ReceivedHook ScapeOptimizer::ReceivedMaskHook() {
  const bool windows = state_store_->runs_catch_up() && !state_store_->keeps_ages();
  // The ages the last update owes, then the catch-up windows of the mask's
  // entries from them (nothing else touches the ages until the mask's
  // step), and the mask staged where the store uploads it from. A store
  // that keeps the ages works out the windows itself, beside its update.
  return [this, windows](const GlobalMask& mask) -> absl::Status {
    PayOwedAges();
    prepared_.windows.clear();
    if (windows) {
      prepared_.windows.resize(mask.indices.size());
      for (size_t p = 0; p < mask.indices.size(); ++p) {
        const int64_t window = mask.step - last_sync_[mask.indices[p]];
        if (window > std::numeric_limits<int32_t>::max()) {
          return absl::OutOfRangeError(absl::StrCat("scape: a window of ", window, " steps"));
        }
        prepared_.windows[p] = static_cast<int32_t>(window);
      }
    }
    prepared_.staged = state_store_->StageMask(mask.indices, prepared_.windows);
    prepared_.step = mask.step;
    return absl::OkStatus();
  };
}

void ScapeOptimizer::PayOwedAges() {
  if (owed_ages_step_ < 0) return;
  if (owed_ages_dense_) {
    std::fill(last_sync_.begin(), last_sync_.end(), owed_ages_step_);
  } else {
    for (int64_t j : current_.indices) last_sync_[j] = owed_ages_step_;
  }
  owed_ages_step_ = -1;
}

void ScapeOptimizer::OweAges(int64_t step, bool dense) {
  owed_ages_step_ = step;
  owed_ages_dense_ = dense;
}

void ScapeOptimizer::UseThreadPool(ThreadPool* pool) {
  pool_ = pool;
  state_store_->UseThreadPool(pool);
}

absl::Status ScapeOptimizer::FinishExchange() {
  if (!exchange_.in_flight()) return absl::OkStatus();
  auto mask = exchange_.Finish(config_.mask_epoch, step_);
  if (!mask.ok()) return mask.status();
  pending_ = std::move(*mask);
  return absl::OkStatus();
}

const std::vector<int64_t>& ScapeOptimizer::last_sync() {
  // The ages the last update owes are paid on the exchange's thread, or here.
  if (absl::Status s = FinishExchange(); !s.ok()) {
    LOG(ERROR) << "scape: the mask exchange failed while reading the ages: " << s;
    exchange_error_ = s;
  }
  PayOwedAges();
  if (state_store_->keeps_ages()) {
    if (absl::Status s = ReadStore(); !s.ok()) {
      LOG(ERROR) << "scape: reading the ages from the state store failed: " << s;
    }
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
  prepared_.step = -1;
  pending_held_ = -1;
  state_store_->DropHeldMasks();
}

absl::Status ScapeOptimizer::StartExchange(int64_t step, std::vector<int64_t> own) {
  prepared_.step = -1;
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
  if (!checked && !SortedWithin(pending_->indices, BufferSize())) {
    return absl::FailedPreconditionError("scape: mask indices not sorted or out of range");
  }
  current_ = std::move(*pending_);
  current_held_ = std::exchange(pending_held_, -1);
  pending_.reset();
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::Step(float* params, float* grads, int64_t size, double lr) {
  const int64_t n = BufferSize();
  if (size != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape: buffer of ", size, " entries, optimizer built for ", n));
  }
  // The step's traffic: with the exchange's collectives on its thread, since
  // the last step ended (the group is the optimizer's alone, and the mask
  // this step applies was exchanged in between); else since now, as other
  // collectives may come between steps.
  if (config_.mask_sending == MaskSending::kOnCaller || !traffic_mark_) {
    traffic_mark_ = {group_->bytes_sent(), group_->bytes_received()};
  }
  const int64_t t = step_;
  OptimizerStepPhases phases;
  absl::Time mark = absl::Now();
  // Adds the time since the last mark to `phase`.
  auto lap = [&mark](double& phase) {
    const absl::Time now = absl::Now();
    phase += absl::ToDoubleSeconds(now - mark);
    mark = now;
  };
  // A mask exchange's Start or Finish just ended: its coding is `coding`
  // seconds of it, the rest was waiting.
  auto lap_exchange = [&](double coding) {
    lap(phases.mask_wait);
    phases.mask_wait -= coding;
    phases.encode += coding;
  };
  // This rank's encoded part of the exchange the step accounts for: the one
  // it started where the caller's thread encodes, else the one it finished.
  int64_t part_bytes = 0;
  MaskEncoding part_encoding = MaskEncoding::kBitmask;
  auto count_part = [&](const MaskExchangeStats& e) {
    part_bytes = e.part_bytes;
    part_encoding = e.encoding;
  };
  // After the exchange's Start: its encoding, where the caller's thread ran
  // it (the exchange's thread's costs are read after Finish).
  auto lap_started = [&] {
    if (exchange_.encodes_on_thread()) {
      lap(phases.mask_wait);
      return;
    }
    lap_exchange(exchange_.last().encode_seconds);
    count_part(exchange_.last());
  };
  // After its Finish: what ran on its thread beside the forward/backward is
  // not on the step's path.
  auto lap_finished = [&] {
    const MaskExchangeStats& e = exchange_.last();
    lap_exchange(e.received_on_thread ? 0.0 : e.decode_seconds);
    phases.coding_overlapped += (e.encoded_on_thread ? e.encode_seconds : 0.0) +
                                (e.received_on_thread ? e.decode_seconds : 0.0);
    if (e.encoded_on_thread) count_part(e);
  };
  const bool dense = DenseAt(t);
  const bool reference = config_.rule == ScapeRule::kReference;
  const bool catch_up_in_store = state_store_->runs_catch_up();
  const bool first_mask_now = reference && !dense && !exchange_.in_flight() && !pending_;
  // A group of one whose store holds masks: each selection stays there as
  // the next mask (no exchange: the selection is the whole mask).
  const bool holds = HoldsMasks();
  bool held_next = false;
  if (dense) {
    if (exchange_.in_flight() || pending_) {
      return absl::FailedPreconditionError("scape: a mask is pending at a dense step");
    }
    current_ = GlobalMask{config_.mask_epoch, t, {}, {}};
    current_held_ = -1;
  } else if (reference && !exchange_.in_flight() && !pending_) {
    // kReference's first mask: chosen below from this step's payload.
  } else {
    const bool receiving = exchange_.in_flight();
    if (absl::Status s = TakeMask(t); !s.ok()) return s;
    if (receiving) {
      lap_finished();
    } else {
      lap(phases.mask_wait);
    }
  }

  // Error-compensated increments: e ← e + (1−β1)·g (minus this rank's share
  // of the momentum forecast, which the synchronized value corrects).
  const bool lr_weighted = config_.lr_weighted && config_.rule == ScapeRule::kLinearized;
  if (lr_weighted && !(lr > 0)) {
    return absl::InvalidArgumentError("scape: lr-weighted residuals need a positive lr");
  }
  lr_sum_.push_back((lr_sum_.empty() ? 0.0 : lr_sum_.back()) + lr);
  const float one_minus_b1 =
      static_cast<float>((1.0 - config_.adams.beta1) * (lr_weighted ? lr : 1.0));
  const float forecast_share =
      config_.rule == ScapeRule::kLinearized
          ? static_cast<float>((1.0 - config_.adams.beta1) * config_.forecast *
                               (lr_weighted ? lr : 1.0) / group_->world_size())
          : 0.0f;
  const bool decayed = config_.decayed_residual && config_.rule == ScapeRule::kCatchUp;
  // The reference rule's per-step scalars (t + 1: bias correction counts
  // steps from 1), for its payload and its update.
  const kernels::cuda::ScapeReferenceScalars reference_scalars =
      kernels::cuda::ScapeReferenceScalarsAt(config_.adams, t + 1, lr, group_->world_size());
  std::optional<std::vector<int64_t>> preselected;
  if (reference) {
    const int64_t begin = exchange_.RangeBegin(group_->rank()), end = exchange_.RangeEnd(group_->rank());
    if (absl::Status s =
            state_store_->Payload(grads, reference_scalars, begin, end, reference_statistic_);
        !s.ok()) {
      return s;
    }
    if (first_mask_now && holds) {
      lap(phases.pack);
      if (absl::Status s = HoldOwnPart(t); !s.ok()) return s;
      lap(phases.select);
      if (absl::Status s = TakeMask(t); !s.ok()) return s;
    } else if (first_mask_now) {
      lap(phases.pack);
      auto own = SelectOwnPart(t);
      if (!own.ok()) return own.status();
      lap(phases.select);
      if (absl::Status s = StartExchange(t, *std::move(own)); !s.ok()) return s;
      lap_started();
      // Needed at once: what its thread does is on the step's path.
      if (absl::Status s = TakeMask(t); !s.ok()) return s;
      const MaskExchangeStats& e = exchange_.last();
      lap_exchange((e.encoded_on_thread ? e.encode_seconds : 0.0) + e.decode_seconds);
      if (e.encoded_on_thread) count_part(e);
    }
    if (holds && !DenseAt(t + 1)) {
      // The next mask stays in the store, chosen now from c^r (as below).
      lap(phases.pack);
      if (absl::Status s = HoldOwnPart(t + 1); !s.ok()) return s;
      held_next = true;
      lap(phases.select);
    } else if (state_store_->selects() && !DenseAt(t + 1)) {
      // The store ranks e where it keeps it: the next mask is chosen now,
      // from c^r, before the pack zeroes e at this one.
      lap(phases.pack);
      auto next = SelectOwnPart(t + 1);
      if (!next.ok()) return next.status();
      preselected = *std::move(next);
      lap(phases.select);
    }
  } else if (forecast_share != 0.0f) {
    ParallelForOn(
        pool_, n,
        [&](int64_t from, int64_t to) {
          for (int64_t j = from; j < to; ++j) {
            residual_[j] += one_minus_b1 * grads[j] - forecast_share * m_[j];
          }
        },
        kUpdateChunk);
  } else {
    kernels::cuda::ScapeCatchUpScalars accumulate = kernels::cuda::ScapeCatchUpScalarsAt(
        config_.adams, lr, config_.normalizer_beta, t == 0, decayed);
    accumulate.residual_one_minus_beta1 = one_minus_b1;  // lr-weighted: η·(1−β1)
    if (catch_up_in_store) {
      if (absl::Status s = state_store_->Accumulate(grads, accumulate); !s.ok()) return s;
    } else {
      ParallelForOn(
          pool_, n,
          [&](int64_t from, int64_t to) {
            for (int64_t j = from; j < to; ++j) {
              kernels::cuda::ScapeAccumulateElement(residual_[j], grads[j], accumulate);
            }
          },
          kUpdateChunk);
    }
  }

  // Pack at the mask (in mask order) and zero what is sent: ONE all-reduce.
  const std::vector<int64_t>& mask = current_.indices;
  const int64_t synced = dense ? n : CurrentMaskEntries();
  // Every rule packs the same way; a store may keep its buffers on a device
  // (the reference and catch-up rules').
  const bool host_values = state_store_->host_addressable();
  using MaskSource = ScapeStateStore::MaskSource;
  const MaskSource source = !dense && current_held_ >= 0 ? MaskSource::kHeld
                            : !dense && prepared_.step == t && prepared_.staged
                                ? MaskSource::kStaged
                                : MaskSource::kHost;
  auto packed = state_store_->Pack(mask, dense, source);
  if (!packed.ok()) return packed.status();
  float* values = *packed;
  lap(phases.pack);
  // The next mask's selection runs beside the values all-reduce and the
  // update when it does not depend on them (SelectsDuringUpdate).
  std::optional<std::future<absl::StatusOr<std::vector<int64_t>>>> selection;
  double selection_seconds = 0;
  if (!preselected && !held_next && SelectsDuringUpdate(t, dense)) {
    auto select = [this, t, &selection_seconds] {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::vector<int64_t>> chosen = config_.rule == ScapeRule::kReference
                                                        ? SelectOwnPart(t + 1)
                                                        : SelectOffMaskCandidates(t + 1);
      selection_seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return chosen;
    };
    try {
      selection = std::async(std::launch::async, select);
    } catch (const std::system_error&) {
      // No thread to spare: select after the update instead.
    }
  }
  if (absl::Status s = group_->AllReduceSumIn(values, synced, host_values); !s.ok()) {
    if (selection) selection->wait();
    return s;
  }
  lap(phases.all_reduce_wait);

  if (reference) {
    if (absl::Status s = ApplyReference(params, reference_scalars, dense); !s.ok()) {
      if (selection) selection->wait();
      return s;
    }
  } else if (catch_up_in_store) {
    // Nothing selects beside it (SelectsDuringUpdate).
    if (absl::Status s = ApplyCatchUpInStore(params, lr, dense); !s.ok()) return s;
  } else {
    Apply(params, n, lr, dense);
  }
  lap(phases.update);
  if (!dense && ResidualSyncAfter(t)) {
    // Every rank takes the ranks' mean residual (a dense step has none left).
    // Through the store, wherever it keeps the residual (the host's for
    // every rule but a device-held reference rule).
    auto residual = state_store_->Residual();
    if (!residual.ok()) return residual.status();
    if (absl::Status s = group_->AllReduceSumIn(*residual, n, host_values); !s.ok()) return s;
    lap(phases.all_reduce_wait);
    const float inverse_ranks = 1.0f / static_cast<float>(group_->world_size());
    if (absl::Status s = state_store_->ScaleResidual(inverse_ranks); !s.ok()) return s;
    lap(phases.update);
  }
  ++step_;

  // The end of this step's own traffic; the next exchange's, where its
  // thread sends it, counts towards the step that applies its mask.
  const Traffic traffic_end = {group_->bytes_sent(), group_->bytes_received()};
  if (!DenseAt(step_) && holds) {
    // Chosen above (the reference rule), or now.
    if (!held_next) {
      if (absl::Status s = HoldOwnPart(step_); !s.ok()) return s;
    }
    lap(phases.select);
  } else if (!DenseAt(step_)) {
    std::vector<int64_t> own;
    if (preselected) {
      own = *std::move(preselected);
    } else if (!selection) {
      auto chosen = SelectOwnPart(step_);
      if (!chosen.ok()) return chosen.status();
      own = *std::move(chosen);
    } else {
      absl::StatusOr<std::vector<int64_t>> chosen = selection->get();
      if (!chosen.ok()) return chosen.status();
      own = config_.rule == ScapeRule::kReference ? *std::move(chosen)
                                                  : SelectFromCandidates(step_, *chosen);
    }
    lap(phases.select);
    phases.select_overlapped = selection_seconds;
    if (absl::Status s = StartExchange(step_, std::move(own)); !s.ok()) return s;
    lap_started();
  }
  // No exchange to pay the ages on its thread: now.
  if (!exchange_.in_flight()) PayOwedAges();
  last_step_ = {};
  last_step_.step = step_;
  last_step_.dense = dense;
  last_step_.synced_values = synced;
  last_step_.mask_entries = dense ? 0 : synced;
  const Traffic traffic_now = config_.mask_sending == MaskSending::kOnCaller
                                  ? Traffic{group_->bytes_sent(), group_->bytes_received()}
                                  : traffic_end;
  last_step_.bytes_sent = traffic_now.sent - traffic_mark_->sent;
  last_step_.bytes_received = traffic_now.received - traffic_mark_->received;
  traffic_mark_ = traffic_end;
  last_step_.mask_part_bytes = part_bytes;
  last_step_.mask_encoding = part_encoding;
  last_step_.grad_norm = reference ? last_grad_norm_ : 0.0;
  last_step_.phases = phases;
  return absl::OkStatus();
}

absl::Status ScapeOptimizer::ApplyCatchUpInStore(float* params, double lr, bool dense) {
  const int64_t t = step_;
  // Each synchronized coordinate's window K = t − (its last step), ≥ 1. A
  // store that keeps the ages works them out beside its update (the mask
  // may be held there too); else the ages stay on the host: a received
  // mask's windows were worked out on the exchange's thread
  // (ReceivedMaskHook), and the ages are set there too, a step later
  // (OweAges).
  const bool prepared_now = prepared_.step == t;
  prepared_.step = -1;
  windows_.clear();
  if (!state_store_->keeps_ages()) {
    const std::vector<int64_t>& mask = current_.indices;
    const int64_t count = dense ? BufferSize() : static_cast<int64_t>(mask.size());
    if (!dense && prepared_now && static_cast<int64_t>(prepared_.windows.size()) == count) {
      windows_.swap(prepared_.windows);
    } else {
      windows_.resize(count);
      for (int64_t p = 0; p < count; ++p) {
        const int64_t since = last_sync_[dense ? p : mask[p]];
        if (t - since > std::numeric_limits<int32_t>::max()) {
          return absl::OutOfRangeError(absl::StrCat("scape: a window of ", t - since, " steps"));
        }
        windows_[p] = static_cast<int32_t>(t - since);
      }
    }
    OweAges(t, dense);
  }
  if (!catch_up_powers_) {
    // Every window of every step: the host's tables for t ≥ 254.
    catch_up_powers_ = kernels::cuda::CatchUpPowerTablesOf(
        config_.adams.beta1, config_.catch_up_exponent, kernels::cuda::kCatchUpCachedWindows);
  }
  return state_store_->CatchUpApply(
      params, t, windows_,
      kernels::cuda::ScapeCatchUpScalarsAt(config_.adams, lr, config_.normalizer_beta, t == 0,
                                           config_.decayed_residual),
      *catch_up_powers_);
}

absl::Status ScapeOptimizer::ApplyReference(
    float* params, const kernels::cuda::ScapeReferenceScalars& scalars, bool dense) {
  auto norm = state_store_->Apply(params, step_, scalars, config_.grad_clip);
  if (!norm.ok()) return norm.status();
  last_grad_norm_ = *norm;
  // The ages, where the store keeps none on the host: set beside the next
  // forward/backward (OweAges).
  if (!state_store_->keeps_ages()) OweAges(step_, dense);
  return absl::OkStatus();
}

// One step's scalars of the host update, shared by every chunk.
struct ScapeOptimizer::HostUpdate {
  int64_t t = 0;
  bool dense = false;
  float b1 = 0, b2 = 0, eps = 0, lr = 0, one_minus_b1 = 0, rho = 0;
  float decay = 1;  // 1 − ηλ, for the decayed coordinates
  double lr_double = 0;
  bool lr_weighted = false;
  // kLinearized: the momentum multiplier off the mask under the forecast,
  // β1 + (1−β1)·φ, and the noise share of AdamS's v (see ApplyLinearized).
  double a = 0, c_noise = 0;
  // kCatchUp: the powers of a window length K (every window is at most
  // t + 1) and the step's scalars.
  kernels::cuda::CatchUpPowerTables powers;
  kernels::cuda::ScapeCatchUpScalars catch_up{};
};

void ScapeOptimizer::Apply(float* params, int64_t n, double lr, bool dense) {
  const ScapeConfig& c = config_;
  HostUpdate u;
  u.t = step_;
  u.dense = dense;
  u.b1 = static_cast<float>(c.adams.beta1);
  u.b2 = static_cast<float>(c.adams.beta2);
  u.eps = static_cast<float>(c.adams.epsilon);
  u.lr = static_cast<float>(lr);
  u.lr_double = lr;
  u.decay = static_cast<float>(1.0 - lr * c.adams.weight_decay);
  u.one_minus_b1 = 1.0f - u.b1;
  u.rho = static_cast<float>(c.normalizer_beta);
  u.lr_weighted = c.lr_weighted && c.rule == ScapeRule::kLinearized;
  u.a = c.adams.beta1 + (1.0 - c.adams.beta1) * c.forecast;
  u.c_noise = c.adams.beta2 * (1.0 - c.adams.beta1) / (1.0 + c.adams.beta1) + (1.0 - c.adams.beta2);
  if (c.rule == ScapeRule::kCatchUp) {
    u.powers = kernels::cuda::CatchUpPowerTablesOf(
        c.adams.beta1, c.catch_up_exponent,
        std::min<int64_t>(kernels::cuda::kCatchUpCachedWindows, u.t + 2));
    u.catch_up = kernels::cuda::ScapeCatchUpScalarsAt(c.adams, lr, c.normalizer_beta, u.t == 0,
                                                      c.decayed_residual);
  }
  ParallelForOn(
      pool_, n,
      [&](int64_t from, int64_t to) {
        switch (c.rule) {
          case ScapeRule::kReconstructed:
            ApplyReconstructed(params, from, to, u);
            break;
          case ScapeRule::kCatchUp:
            ApplyCatchUp(params, from, to, u);
            break;
          case ScapeRule::kLinearized:
            ApplyLinearized(params, from, to, u);
            break;
          case ScapeRule::kReference:  // ApplyReference's, through the store
            break;
        }
      },
      kUpdateChunk);
}

void ScapeOptimizer::ApplyReconstructed(float* params, int64_t from, int64_t to,
                                        const HostUpdate& u) {
  const OffMaskRule off_rule = config_.off_mask;
  WalkMask(
      from, to, current_.indices, u.dense,
      [&](int64_t j, int64_t p) {
        // ĝ from the synchronized first moment alone; v from it and the
        // previous m, AdamS's normalizer, smoothed into v̄.
        last_sync_[j] = u.t;
        float& m = m_[j];
        const float g_hat = values_[p] / u.one_minus_b1;
        const float v = u.b2 * m * m + (1.0f - u.b2) * g_hat * g_hat;
        vbar_[j] = u.t == 0 ? v : u.rho * vbar_[j] + (1.0f - u.rho) * v;
        AdamSUpdate(params[j], m, g_hat, u.b1, u.b2, u.eps, u.lr, DecayFactor(j, u.decay));
      },
      [&](int64_t begin, int64_t end) {
        if (off_rule == OffMaskRule::kDecayOnly) {
          DecayRun(params, begin, end, u.decay);
        } else if (off_rule == OffMaskRule::kMomentumKeepsMoving) {
          for (int64_t j = begin; j < end; ++j) {
            AdamSUpdate(params[j], m_[j], 0.0f, u.b1, u.b2, u.eps, u.lr, DecayFactor(j, u.decay));
          }
        }
      });
}

void ScapeOptimizer::ApplyCatchUp(float* params, int64_t from, int64_t to, const HostUpdate& u) {
  const ScapeConfig& c = config_;
  WalkMask(
      from, to, current_.indices, u.dense,
      [&](int64_t j, int64_t p) {
        const float b = values_[p];
        const int64_t k = u.t - last_sync_[j];  // steps this value covers (≥ 1)
        last_sync_[j] = u.t;
        float& m = m_[j];
        const float b1k = kernels::cuda::CatchUpBeta1Power(k, u.powers.OnHost());
        double exponent = c.catch_up_exponent;
        if (c.catch_up_exponent_consistent >= 0 && k > 1) {
          const float g_hat = kernels::cuda::CatchUpMeanGradient(b, k, b1k, u.catch_up);
          const double agree = std::max(0.0, double{g_hat} * m) /
                               std::max({double{g_hat} * g_hat, double{m} * m, 1e-30});
          exponent += (c.catch_up_exponent_consistent - c.catch_up_exponent) * agree;
        }
        // The table holds K^α of the configured exponent only.
        kernels::cuda::CatchUpPowers at_exponent = u.powers.OnHost();
        if (exponent != c.catch_up_exponent) {
          at_exponent = {nullptr, nullptr, 0, c.adams.beta1, exponent};
        }
        const float steps = kernels::cuda::CatchUpSteps(k, at_exponent);
        float& theta = params[j];
        theta *= DecayFactor(j, u.decay);
        kernels::cuda::ScapeCatchUpOnMask(theta, m, vbar_[j], b, k, b1k, steps, u.catch_up);
      },
      [&](int64_t begin, int64_t end) { DecayRun(params, begin, end, u.decay); });
}

void ScapeOptimizer::ApplyLinearized(float* params, int64_t from, int64_t to,
                                     const HostUpdate& u) {
  const ScapeConfig& c = config_;
  WalkMask(
      from, to, current_.indices, u.dense,
      [&](int64_t j, int64_t p) {
        const float b_sent = values_[p];
        const int64_t since = last_sync_[j];
        const int64_t k = u.t - since;  // steps this value covers (≥ 1)
        last_sync_[j] = u.t;
        float& m = m_[j];
        float& theta = params[j];
        const float m_prev = m;
        // With lr-weighted residuals the value carries Σ η_s(1−β1)g_s: in
        // gradient units at today's η it is value/η.
        const float b = u.lr_weighted ? b_sent / u.lr : b_sent;
        // Mean gradient over the window: the forecast it carried plus the
        // synchronized correction, over the window's length (Σ η when
        // lr-weighted).
        float g_hat;
        if (k == 1) {
          g_hat = static_cast<float>(c.forecast) * m_prev + b / u.one_minus_b1;
        } else {
          double forecast_sum = 0.0;
          if (c.forecast > 0 && u.a > 0) {
            const double span = u.a == 1.0 ? static_cast<double>(k)
                                           : (std::pow(u.a, -static_cast<double>(k)) - 1.0) /
                                                 (1.0 / u.a - 1.0);
            forecast_sum = c.forecast * m_prev * span * (u.lr_weighted ? u.lr_double : 1.0);
          }
          const double window = u.lr_weighted
                                    ? lr_sum_[u.t] - (since >= 0 ? lr_sum_[since] : 0.0)
                                    : static_cast<double>(k);
          g_hat = static_cast<float>((forecast_sum + b_sent / u.one_minus_b1) / window);
        }
        const float v = u.b2 * m_prev * m_prev + (1.0f - u.b2) * g_hat * g_hat;
        m = static_cast<float>(u.a) * m_prev + b;
        float denominator;
        if (k == 1) {
          // AdamS exactly (the forecast cancels: a·m + (1−β1)(ḡ − φm) = β1m + (1−β1)ḡ).
          vbar_[j] = u.t == 0 ? v : u.rho * vbar_[j] + (1.0f - u.rho) * v;
          denominator = std::sqrt(v) + u.eps;
        } else {
          // v of a window of K steps from its mean gradient ĝ: signal ĝ²
          // plus the per-step noise AdamS's normalizer would have seen,
          // estimated from K·ĝ² (E[K·ĝ²] = K·μ² + σ²): v_window =
          // ĝ²·(1 + c_noise·(K−1)), c_noise the noise share of AdamS's v
          // (β2(1−β1)/(1+β1) + 1−β2 ≈ 0.1).
          const float v_window = static_cast<float>(
              double{g_hat} * g_hat * (1.0 + u.c_noise * static_cast<double>(k - 1)));
          if (c.refresh == NormalizerRefresh::kSmoothed) {
            const float rho_k =
                static_cast<float>(std::pow(c.normalizer_beta, static_cast<double>(k)));
            vbar_[j] = rho_k * vbar_[j] + (1.0f - rho_k) * v_window;
          } else if (c.refresh == NormalizerRefresh::kWindow) {
            vbar_[j] = v_window;
          } else if (c.refresh == NormalizerRefresh::kMax) {
            const float rho_k =
                static_cast<float>(std::pow(c.normalizer_beta, static_cast<double>(k)));
            vbar_[j] = std::max(rho_k * vbar_[j], g_hat * g_hat);
          }
          denominator = std::sqrt(vbar_[j]) + u.eps;
        }
        theta *= DecayFactor(j, u.decay);
        theta -= u.lr * m / denominator;
      },
      [&](int64_t begin, int64_t end) {
        // The momentum forecast to continue; v̄ unchanged.
        const float a = static_cast<float>(u.a);
        for (int64_t j = begin; j < end; ++j) {
          float& m = m_[j];
          float& theta = params[j];
          m = a * m;
          theta *= DecayFactor(j, u.decay);
          theta -= u.lr * m / (std::sqrt(vbar_[j]) + u.eps);
        }
      });
}

std::vector<float> ScapeOptimizer::MaskStatisticValues() const {
  if (config_.rule == ScapeRule::kReference) return reference_statistic_;
  const int rank = group_->rank();
  const int64_t begin = exchange_.RangeBegin(rank), end = exchange_.RangeEnd(rank);
  std::vector<float> out(end - begin);
  SyncHostCopies();  // a store in another memory: its state, downloaded
  FillStatistic(begin, end, out.data(), pool_);
  return out;
}

MaskStatistic ScapeOptimizer::RankedStatistic() const {
  // The reference rule ranks its payload c^r, which e holds until the pack.
  return config_.rule == ScapeRule::kReference ? MaskStatistic::kResidual : config_.statistic;
}

kernels::cuda::MaskStatisticScalars ScapeOptimizer::StatisticScalars() const {
  return kernels::cuda::MaskStatisticScalarsOf(config_.adams, group_->world_size());
}

namespace {

// Entries per chunk of a statistic pass on a thread pool.
constexpr int64_t kStatisticChunk = 1 << 16;

// out[i] = the statistic of coordinate coordinate(i), for i in [begin, end),
// on this thread.
template <typename Coordinate>
void FillMaskStatisticRange(MaskStatistic statistic, const float* m, const float* e,
                            const float* vbar, int64_t begin, int64_t end,
                            const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                            Coordinate coordinate) {
  // One loop per statistic (a constant in each), so each vectorizes and
  // reads only what its statistic needs.
  auto fill = [&](auto constant) {
    constexpr MaskStatistic kStatistic = decltype(constant)::value;
    constexpr bool kReadsM =
        kStatistic != MaskStatistic::kResidual && kStatistic != MaskStatistic::kNormalizedResidual;
    constexpr bool kReadsV = kStatistic == MaskStatistic::kNormalizedResidual;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t j = coordinate(i);
      out[i] = kernels::cuda::MaskStatisticElement(kStatistic, kReadsM ? m[j] : 0.0f, e[j],
                                                   kReadsV ? vbar[j] : 0.0f, scalars);
    }
  };
  using S = MaskStatistic;
  switch (statistic) {
    case S::kMomentumPlusResidual: fill(std::integral_constant<S, S::kMomentumPlusResidual>()); break;
    case S::kResidual: fill(std::integral_constant<S, S::kResidual>()); break;
    case S::kMomentum: fill(std::integral_constant<S, S::kMomentum>()); break;
    case S::kNormalizedResidual: fill(std::integral_constant<S, S::kNormalizedResidual>()); break;
    case S::kMomentumPlusScaledResidual:
      fill(std::integral_constant<S, S::kMomentumPlusScaledResidual>());
      break;
  }
}

// FillMaskStatisticRange over [0, n), in chunks on the pool's threads where
// there is one and n is worth it (the same values).
template <typename Coordinate>
void FillMaskStatisticOn(ThreadPool* pool, MaskStatistic statistic, const float* m,
                         const float* e, const float* vbar, int64_t n,
                         const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                         Coordinate coordinate) {
  ParallelForOn(
      n <= kStatisticChunk ? nullptr : pool, n,
      [&](int64_t begin, int64_t end) {
        FillMaskStatisticRange(statistic, m, e, vbar, begin, end, scalars, out, coordinate);
      },
      kStatisticChunk);
}

}  // namespace

void FillMaskStatistic(MaskStatistic statistic, const float* m, const float* e, const float* vbar,
                       int64_t n, const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                       ThreadPool* pool) {
  FillMaskStatisticOn(pool, statistic, m, e, vbar, n, scalars, out, [](int64_t i) { return i; });
}

void FillMaskStatisticAt(MaskStatistic statistic, const float* m, const float* e,
                         const float* vbar, absl::Span<const int64_t> coordinates,
                         const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                         ThreadPool* pool) {
  const int64_t* at = coordinates.data();
  FillMaskStatisticOn(pool, statistic, m, e, vbar, static_cast<int64_t>(coordinates.size()),
                      scalars, out, [at](int64_t i) { return at[i]; });
}

void ScapeOptimizer::FillStatistic(int64_t from, int64_t to, float* out, ThreadPool* pool) const {
  FillMaskStatistic(config_.statistic, m_.data() + from, residual_.data() + from,
                    vbar_.data() + from, to - from, StatisticScalars(), out, pool);
}

const std::vector<float>& ScapeOptimizer::StatisticOfRange() {
  if (config_.rule == ScapeRule::kReference) return reference_statistic_;
  const int rank = group_->rank();
  const int64_t begin = exchange_.RangeBegin(rank), end = exchange_.RangeEnd(rank);
  statistic_.resize(end - begin);
  FillStatistic(begin, end, statistic_.data(), pool_);
  return statistic_;
}

bool ScapeOptimizer::SelectsDuringUpdate(int64_t step, bool dense) const {
  if (dense || DenseAt(step + 1) || ResidualSyncAfter(step)) return false;
  // The reference rule selects from c^r, final before the all-reduce; a
  // store running the catch-up rule ranks after the update, in its memory.
  if (config_.rule == ScapeRule::kReference) return true;
  if (state_store_->runs_catch_up()) return false;
  // Otherwise the update must leave every off-mask coordinate's statistic
  // as it is (candidates are chosen off the mask, the mask's own entries
  // are added after the update), and the selection be by statistic alone.
  const bool off_mask_static =
      config_.rule == ScapeRule::kCatchUp ||
      (config_.rule == ScapeRule::kReconstructed &&
       config_.off_mask != OffMaskRule::kMomentumKeepsMoving);
  return off_mask_static && !config_.PerTensor() && config_.exploration == 0;
}

std::vector<int64_t> ScapeOptimizer::SelectOffMaskCandidates(int64_t step) {
  const int rank = group_->rank();
  const int64_t begin = exchange_.RangeBegin(rank), end = exchange_.RangeEnd(rank);
  const std::vector<int64_t>& mask = current_.indices;
  statistic_.resize(end - begin);
  // The mask's entries count as −∞ (NaN) here: every one of the true top k
  // that is off the mask is then among these k (only entries the true order
  // ranks above it can rank above it here). Their state is being updated
  // beside this, so it is not read: the gaps between them are, in chunks
  // of the range (on the pool's threads where there is one).
  auto fill = [&](int64_t chunk_begin, int64_t chunk_end) {
    int64_t from = begin + chunk_begin;
    const int64_t to = begin + chunk_end;
    for (auto it = std::lower_bound(mask.begin(), mask.end(), from); it != mask.end() && *it < to;
         ++it) {
      FillStatistic(from, *it, statistic_.data() + (from - begin));
      statistic_[*it - begin] = NAN;
      from = *it + 1;
    }
    FillStatistic(from, to, statistic_.data() + (from - begin));
  };
  ParallelForOn(pool_, end - begin, fill, kStatisticChunk);
  return SelectTopK(statistic_, begin, MaskCountForRange(end - begin, DensityAt(step)), pool_);
}

std::vector<int64_t> ScapeOptimizer::SelectFromCandidates(int64_t step,
                                                          const std::vector<int64_t>& candidates) {
  const int rank = group_->rank();
  const int64_t begin = exchange_.RangeBegin(rank), end = exchange_.RangeEnd(rank);
  const std::vector<int64_t>& mask = current_.indices;
  std::vector<int64_t> entries;
  entries.reserve(candidates.size() + mask.size());
  std::set_union(candidates.begin(), candidates.end(),
                 std::lower_bound(mask.begin(), mask.end(), begin),
                 std::lower_bound(mask.begin(), mask.end(), end), std::back_inserter(entries));
  std::vector<float> values(entries.size());
  FillMaskStatisticAt(config_.statistic, m_.data(), residual_.data(), vbar_.data(), entries,
                      StatisticScalars(), values.data(), pool_);
  // The entries are ascending, so ties still go to the lower coordinate.
  std::vector<int64_t> chosen =
      SelectTopK(values, 0, MaskCountForRange(end - begin, DensityAt(step)), pool_);
  for (int64_t& i : chosen) i = entries[i];
  return chosen;
}

std::vector<ScapeStateStore::TopKSegment> ScapeOptimizer::TensorPlan(int64_t begin, int64_t end,
                                                                     double density) const {
  // The rank owns whole tensors (CheckTensorAligned at construction).
  std::vector<ScapeStateStore::TopKSegment> plan;
  auto first = std::lower_bound(tensor_bounds_.begin(), tensor_bounds_.end(), begin);
  for (auto it = first; it + 1 != tensor_bounds_.end() && *it < end; ++it) {
    const int64_t offset = *it, numel = *(it + 1) - *it;
    const bool whole = config_.dense_small_tensors && !decay_mask_[offset];
    plan.push_back({offset, numel, whole ? -1 : MaskCountForTensor(numel, density)});
  }
  return plan;
}

absl::Status ScapeOptimizer::HoldOwnPart(int64_t step) {
  const int64_t begin = exchange_.RangeBegin(group_->rank()), end = exchange_.RangeEnd(group_->rank());
  std::vector<ScapeStateStore::TopKSegment> plan;
  if (config_.PerTensor()) {
    plan = TensorPlan(begin, end, DensityAt(step));
    // A tensor taken whole is its own top numel.
    for (ScapeStateStore::TopKSegment& segment : plan) {
      if (segment.k < 0) segment.k = segment.numel;
    }
  } else {
    plan.push_back({begin, end - begin, MaskCountForRange(end - begin, DensityAt(step))});
  }
  auto count = state_store_->HoldSelection(plan, RankedStatistic(), StatisticScalars());
  if (!count.ok()) return count.status();
  pending_ = GlobalMask{config_.mask_epoch, step, {}, {}};
  pending_held_ = *count;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> ScapeOptimizer::SelectPerTensor(int64_t begin, int64_t end,
                                                                      double density) {
  // A segment with k < 0 is taken whole.
  const std::vector<ScapeStateStore::TopKSegment> plan = TensorPlan(begin, end, density);
  // The store ranks every tensor at once (one download); the host, each
  // from the statistic.
  const bool by_store = state_store_->selects();
  std::vector<int64_t> stored;
  if (by_store) {
    std::vector<ScapeStateStore::TopKSegment> ranked;
    for (const auto& segment : plan) {
      if (segment.k >= 0) ranked.push_back(segment);
    }
    auto top = state_store_->SelectByStatistic(ranked, RankedStatistic(), StatisticScalars());
    if (!top.ok()) return top.status();
    stored = *std::move(top);
  }
  const std::vector<float>* statistic = by_store ? nullptr : &StatisticOfRange();
  std::vector<int64_t> chosen;
  auto next = stored.cbegin();
  for (const auto& segment : plan) {
    if (segment.k < 0) {
      for (int64_t j = segment.offset; j < segment.offset + segment.numel; ++j) chosen.push_back(j);
    } else if (by_store) {
      // Tensors in order, each one's indices ascending: the merge is a walk.
      const int64_t taken = std::clamp<int64_t>(segment.k, 0, segment.numel);
      if (stored.cend() - next < taken) {
        return absl::InternalError(absl::StrCat("scape: the store selected ", stored.size(),
                                                " coordinates, fewer than the plan's"));
      }
      chosen.insert(chosen.end(), next, next + taken);
      next += taken;
    } else {
      const std::vector<int64_t> top = SelectTopK(
          absl::MakeConstSpan(*statistic).subspan(segment.offset - begin, segment.numel),
          segment.offset, segment.k, pool_);
      chosen.insert(chosen.end(), top.begin(), top.end());
    }
  }
  return chosen;
}

absl::StatusOr<std::vector<int64_t>> ScapeOptimizer::SelectOwnPart(int64_t step) {
  const int rank = group_->rank();
  const int64_t begin = exchange_.RangeBegin(rank), end = exchange_.RangeEnd(rank);
  if (config_.PerTensor()) return SelectPerTensor(begin, end, DensityAt(step));
  const int64_t k = MaskCountForRange(end - begin, DensityAt(step));
  const int64_t k_explore = static_cast<int64_t>(std::floor(config_.exploration * k));
  if (state_store_->selects()) {
    // No exploration here (CheckCatchUpInStore): the statistic's top k.
    const ScapeStateStore::TopKSegment range[] = {{begin, end - begin, k}};
    return state_store_->SelectByStatistic(range, RankedStatistic(), StatisticScalars());
  }
  std::vector<int64_t> chosen = SelectTopK(StatisticOfRange(), begin, k - k_explore, pool_);
  if (k_explore == 0) return chosen;
  // The rest: the least recently synchronized coordinates not chosen yet.
  std::vector<float> age(end - begin);
  for (int64_t j = begin; j < end; ++j) age[j - begin] = static_cast<float>(step - last_sync_[j]);
  for (int64_t j : chosen) age[j - begin] = -1.0f;
  std::vector<int64_t> explored = SelectTopK(age, begin, k_explore);
  std::vector<int64_t> merged;
  merged.reserve(k);
  std::merge(chosen.begin(), chosen.end(), explored.begin(), explored.end(),
             std::back_inserter(merged));
  return merged;
}

namespace {

void AddMask(StateWriter& w, const std::string& prefix, const GlobalMask& mask) {
  w.AddInt64(prefix + ".step", mask.step);
  w.AddInt64(prefix + ".mask_epoch", static_cast<int64_t>(mask.mask_epoch));
  std::vector<int64_t> counts, flat;
  for (const std::vector<int64_t>& part : mask.parts) {
    counts.push_back(static_cast<int64_t>(part.size()));
    flat.insert(flat.end(), part.begin(), part.end());
  }
  w.AddInt64s(prefix + ".part_sizes", counts);
  w.AddInt64s(prefix + ".parts", flat);
  w.AddInt64s(prefix + ".indices", mask.indices);
}

// A mask of an n-entry buffer, checked like one received (TakeMask).
absl::StatusOr<GlobalMask> ReadMask(const StateReader& r, const std::string& prefix, int64_t n) {
  GlobalMask mask;
  auto step = r.Int64(prefix + ".step");
  auto mask_epoch = r.Int64(prefix + ".mask_epoch");
  auto counts = r.Int64s(prefix + ".part_sizes");
  auto flat = r.Int64s(prefix + ".parts");
  auto indices = r.Int64s(prefix + ".indices");
  for (const absl::Status& s : {step.status(), mask_epoch.status(), counts.status(),
                                flat.status(), indices.status()}) {
    if (!s.ok()) return s;
  }
  mask.step = *step;
  mask.mask_epoch = static_cast<uint64_t>(*mask_epoch);
  int64_t offset = 0;
  for (int64_t count : *counts) {
    if (count < 0 || count > static_cast<int64_t>(flat->size()) - offset) {
      return absl::DataLossError("optimizer state: mask parts do not add up");
    }
    mask.parts.emplace_back(flat->begin() + offset, flat->begin() + offset + count);
    offset += count;
    if (!SortedWithin(mask.parts.back(), n)) {
      return absl::DataLossError(absl::StrCat("optimizer state: a part of mask '", prefix,
                                              "' is not sorted inside the buffer"));
    }
  }
  mask.indices = std::move(*indices);
  if (!SortedWithin(mask.indices, n)) {
    return absl::DataLossError(absl::StrCat("optimizer state: mask '", prefix,
                                            "' is not sorted inside the buffer"));
  }
  return mask;
}

}  // namespace

absl::StatusOr<std::string> ScapeOptimizer::SaveState() {
  if (!exchange_error_.ok()) return std::exchange(exchange_error_, absl::OkStatus());
  if (absl::Status s = FinishExchange(); !s.ok()) return s;
  PayOwedAges();
  if (absl::Status s = ReadStore(); !s.ok()) return s;
  if (absl::Status s = ReadHeldMasks(); !s.ok()) return s;
  StateWriter w;
  w.AddString("kind", name());
  w.AddString("config", config_.ToString());
  w.AddInt64("rank", group_->rank());
  w.AddInt64("world_size", group_->world_size());
  w.AddInt64s("partition", partition_.bounds());
  w.AddInt64("step", step_);
  w.AddFloats("m", m_);
  w.AddFloats("vbar", vbar_);
  w.AddFloats("residual", residual_);
  w.AddInt64s("last_sync", last_sync_);
  w.AddDoubles("lr_sum", lr_sum_);
  AddMask(w, "current", current_);
  w.AddInt64("has_pending", pending_.has_value() ? 1 : 0);
  if (pending_) AddMask(w, "pending", *pending_);
  std::string state = w.Finish();
  ReleaseHostCopies();  // the checkpoint has them
  return state;
}

void ScapeOptimizer::ReleaseHostCopies() {
  if (host_state_) return;
  std::vector<float>().swap(m_);
  std::vector<float>().swap(vbar_);
  std::vector<float>().swap(residual_);
  if (state_store_->keeps_ages()) std::vector<int64_t>().swap(last_sync_);
}

absl::Status ScapeOptimizer::RestoreState(absl::string_view state) {
  if (exchange_.in_flight()) {
    return absl::FailedPreconditionError("scape: cannot restore while a mask exchange is in flight");
  }
  auto r = StateReader::Parse(state);
  if (!r.ok()) return r.status();
  auto kind = r->String("kind");
  if (!kind.ok()) return kind.status();
  if (*kind != name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("optimizer state is for '", *kind, "', not '", name(), "'"));
  }
  auto config = r->String("config");
  auto rank = r->Int64("rank");
  auto world = r->Int64("world_size");
  for (const absl::Status& s : {config.status(), rank.status(), world.status()}) {
    if (!s.ok()) return s;
  }
  if (*config != config_.ToString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scape: state from another configuration (", *config, ") than this (", config_.ToString(), ")"));
  }
  const int64_t n = BufferSize();
  auto step = r->Count("step");
  auto m = r->FloatsOfSize("m", n);
  auto vbar = r->FloatsOfSize("vbar", n);
  auto residual = r->FloatsOfSize("residual", n);
  auto last_sync = r->Int64s("last_sync");
  auto current = ReadMask(*r, "current", n);
  auto has_pending = r->Int64("has_pending");
  auto lr_sum = r->Doubles("lr_sum");
  auto partition = r->Int64s("partition");
  for (const absl::Status& s : {step.status(), m.status(), vbar.status(), residual.status(),
                                last_sync.status(), current.status(), has_pending.status(),
                                lr_sum.status(), partition.status()}) {
    if (!s.ok()) return s;
  }
  // Residuals are per rank; m, v̄, ages and masks are identical on every
  // rank. So another rank's state (rank 0 writes the job's checkpoints) is
  // only ours if its residuals are shared too: saved right after a dense
  // step (none left) or a residual sync (every rank holds the mean).
  const bool shared = *step > 0 && (DenseAt(*step - 1) || ResidualSyncAfter(*step - 1));
  if ((*rank != group_->rank() || *world != group_->world_size()) && !shared) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scape: state of rank ", *rank, " of ", *world, " holds this rank's own residuals; this is rank ",
        group_->rank(), " of ", group_->world_size(),
        " (checkpoints must follow a residual sync step: set residual_sync_period)"));
  }
  if (static_cast<int64_t>(last_sync->size()) != n) {
    return absl::FailedPreconditionError("scape: state of another buffer size");
  }
  // One learning-rate sum per step taken; every coordinate last synchronized
  // before this step (-1: never), so ages and windows index inside them.
  if (static_cast<int64_t>(lr_sum->size()) != *step) {
    return absl::DataLossError(absl::StrCat("optimizer state: ", lr_sum->size(),
                                            " learning-rate sums for step ", *step));
  }
  for (int64_t since : *last_sync) {
    if (since < -1 || since >= *step) {
      return absl::DataLossError(absl::StrCat("optimizer state: a coordinate last synchronized at step ",
                                              since, ", state of step ", *step));
    }
  }
  std::optional<GlobalMask> pending;
  if (*has_pending) {
    auto mask = ReadMask(*r, "pending", n);
    if (!mask.ok()) return mask.status();
    pending = std::move(*mask);
  }
  if (absl::Status s = state_store_->Write(*m, *residual, *vbar, *last_sync); !s.ok()) return s;
  step_ = *step;
  m_ = std::move(*m);
  vbar_ = std::move(*vbar);
  residual_ = std::move(*residual);
  last_sync_ = std::move(*last_sync);
  lr_sum_ = std::move(*lr_sum);
  current_ = std::move(*current);
  pending_ = std::move(pending);
  // The store dropped what it held when written.
  current_held_ = -1;
  pending_held_ = -1;
  ReleaseHostCopies();  // the store has them now
  prepared_.step = -1;
  owed_ages_step_ = -1;
  exchange_error_ = absl::OkStatus();
  dense_after_restore_ = -1;
  // Masks of an earlier mask epoch: still right if the partition map is the
  // same (they were agreed by every rank), so they move into this epoch and
  // the run continues exactly; cut for another map, the next step is dense.
  if (*partition == partition_.bounds()) {
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
