#include "runtime/optim/data_parallel_optimizer.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/optim/optimizer_state.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {
namespace {

// Counter deltas around one step.
class StepBytes {
 public:
  explicit StepBytes(const RankGroup& group)
      : group_(group), sent_(group.bytes_sent()), received_(group.bytes_received()) {}
  void Record(OptimizerStepStats& stats) const {
    stats.bytes_sent = group_.bytes_sent() - sent_;
    stats.bytes_received = group_.bytes_received() - received_;
  }

 private:
  const RankGroup& group_;
  int64_t sent_, received_;
};

absl::Status CheckSize(int64_t size, int64_t expected, absl::string_view who) {
  if (size != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": buffer of ", size, " entries, optimizer built for ", expected));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeAdamState(absl::string_view kind, const AdamState& state) {
  StateWriter w;
  w.AddString("kind", kind);
  w.AddInt64("step", state.step);
  w.AddFloats("m", state.m);
  if (state.has_v) w.AddFloats("v", state.v);
  if (state.has_residual) w.AddFloats("residual", state.residual);
  return w.Finish();
}

absl::StatusOr<AdamState> DecodeAdamState(absl::string_view blob, absl::string_view kind,
                                          int64_t size, bool has_v, bool has_residual) {
  auto reader = StateReader::Parse(blob);
  if (!reader.ok()) return reader.status();
  auto stored_kind = reader->String("kind");
  if (!stored_kind.ok()) return stored_kind.status();
  if (*stored_kind != kind) {
    return absl::FailedPreconditionError(
        absl::StrCat("optimizer state is for '", *stored_kind, "', not '", kind, "'"));
  }
  AdamState state;
  state.has_v = has_v;
  state.has_residual = has_residual;
  auto step = reader->Count("step");
  if (!step.ok()) return step.status();
  state.step = *step;
  auto m = reader->FloatsOfSize("m", size);
  if (!m.ok()) return m.status();
  state.m = *std::move(m);
  if (has_v) {
    auto v = reader->FloatsOfSize("v", size);
    if (!v.ok()) return v.status();
    state.v = *std::move(v);
  }
  if (has_residual) {
    auto r = reader->FloatsOfSize("residual", size);
    if (!r.ok()) return r.status();
    state.residual = *std::move(r);
  }
  return state;
}

namespace {

std::string SaveAdamW(const AdamW& adamw, absl::string_view kind,
                      const std::vector<float>* residual) {
  AdamState state;
  state.step = adamw.step_count();
  state.m = adamw.first_moment();
  state.has_v = true;
  state.v = adamw.second_moment();
  if (residual) {
    state.has_residual = true;
    state.residual = *residual;
  }
  return EncodeAdamState(kind, state);
}

absl::Status RestoreAdamW(absl::string_view blob, absl::string_view kind, AdamW& adamw,
                          std::vector<float>* residual) {
  auto state = DecodeAdamState(blob, kind, static_cast<int64_t>(adamw.first_moment().size()),
                               /*has_v=*/true, /*has_residual=*/residual != nullptr);
  if (!state.ok()) return state.status();
  if (residual) *residual = std::move(state->residual);
  adamw.set_step_count(state->step);
  adamw.first_moment() = std::move(state->m);
  adamw.second_moment() = std::move(state->v);
  return absl::OkStatus();
}

}  // namespace

DenseAdamWDataParallel::DenseAdamWDataParallel(RankGroup* group, AdamWConfig config,
                                               DecayMask decay_mask, double grad_clip)
    : group_(group), adamw_(config, std::move(decay_mask)), grad_clip_(grad_clip) {}

const std::vector<float>& DenseAdamWDataParallel::first_moment() const {
  return adamw_.first_moment();
}

absl::Status DenseAdamWDataParallel::Step(float* params, float* grads, int64_t size, double lr) {
  if (absl::Status s = CheckSize(size, adamw_.first_moment().size(), name()); !s.ok()) return s;
  StepBytes bytes(*group_);
  if (absl::Status s = group_->AllReduceSum(grads, size); !s.ok()) return s;
  const double grad_norm = ClipGradientNorm(grads, size, grad_clip_);
  if (absl::Status s = adamw_.Step(params, grads, size, lr); !s.ok()) return s;
  last_step_ = {};
  last_step_.grad_norm = grad_norm;
  last_step_.step = adamw_.step_count();
  last_step_.synced_values = size;
  bytes.Record(last_step_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DenseAdamWDataParallel::SaveState() {
  return SaveAdamW(adamw_, name(), nullptr);
}

absl::Status DenseAdamWDataParallel::RestoreState(absl::string_view state) {
  return RestoreAdamW(state, name(), adamw_, nullptr);
}

DenseAdamSDataParallel::DenseAdamSDataParallel(RankGroup* group, AdamSConfig config,
                                               DecayMask decay_mask)
    : group_(group), adams_(config, std::move(decay_mask)) {}

absl::Status DenseAdamSDataParallel::Step(float* params, float* grads, int64_t size, double lr) {
  if (absl::Status s = CheckSize(size, adams_.first_moment().size(), name()); !s.ok()) return s;
  StepBytes bytes(*group_);
  const absl::Time start = absl::Now();
  if (absl::Status s = group_->AllReduceSum(grads, size); !s.ok()) return s;
  const absl::Time reduced = absl::Now();
  if (absl::Status s = adams_.Step(params, grads, size, lr); !s.ok()) return s;
  last_step_ = {};
  last_step_.phases.all_reduce_wait = absl::ToDoubleSeconds(reduced - start);
  last_step_.phases.update = absl::ToDoubleSeconds(absl::Now() - reduced);
  last_step_.step = adams_.step_count();
  last_step_.synced_values = size;
  bytes.Record(last_step_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DenseAdamSDataParallel::SaveState() {
  AdamState state;
  state.step = adams_.step_count();
  state.m = adams_.first_moment();
  return EncodeAdamState(name(), state);
}

absl::Status DenseAdamSDataParallel::RestoreState(absl::string_view state) {
  auto decoded = DecodeAdamState(state, name(),
                                 static_cast<int64_t>(adams_.first_moment().size()),
                                 /*has_v=*/false, /*has_residual=*/false);
  if (!decoded.ok()) return decoded.status();
  adams_.set_step_count(decoded->step);
  adams_.first_moment() = std::move(decoded->m);
  return absl::OkStatus();
}

absl::StatusOr<SparseSum> AllGatherSparseSum(RankGroup& group, absl::Span<const int64_t> indices,
                                             absl::Span<const float> values, int64_t size,
                                             absl::string_view who) {
  constexpr int64_t kPairBytes = 8;
  if (size < 0 || size > int64_t{std::numeric_limits<uint32_t>::max()}) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": a buffer of ", size, " entries does not fit uint32 indices"));
  }
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", indices.size(), " indices but ",
                                                   values.size(), " values"));
  }
  const int64_t k = static_cast<int64_t>(indices.size());
  std::vector<char> send(k * kPairBytes);
  for (int64_t p = 0; p < k; ++p) {
    if (indices[p] < 0 || indices[p] >= size || (p > 0 && indices[p] <= indices[p - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": own pick ", p, " (index ", indices[p], ") not ascending inside [0, ", size, ")"));
    }
    const uint32_t index = static_cast<uint32_t>(indices[p]);
    std::memcpy(send.data() + kPairBytes * p, &index, 4);
    std::memcpy(send.data() + kPairBytes * p + 4, &values[p], 4);
  }
  // Every rank picks as many (the same k from the same size and density).
  const int world = group.world_size();
  const std::vector<int64_t> bytes(world, k * kPairBytes);
  std::vector<int64_t> begin(world + 1, 0);
  for (int r = 0; r < world; ++r) begin[r + 1] = begin[r] + k;
  std::vector<char> received(begin[world] * kPairBytes);
  if (absl::Status s = group.AllGatherV(send.data(), k * kPairBytes, received.data(), bytes);
      !s.ok()) {
    return s;
  }
  auto index_at = [&](int64_t pair) {
    uint32_t index;
    std::memcpy(&index, received.data() + kPairBytes * pair, 4);
    return static_cast<int64_t>(index);
  };
  auto value_at = [&](int64_t pair) {
    float value;
    std::memcpy(&value, received.data() + kPairBytes * pair + 4, 4);
    return value;
  };
  for (int r = 0; r < world; ++r) {
    for (int64_t pair = begin[r]; pair < begin[r + 1]; ++pair) {
      const int64_t index = index_at(pair);
      if (index >= size || (pair > begin[r] && index <= index_at(pair - 1))) {
        return absl::DataLossError(absl::StrCat(who, ": rank ", r, "'s pick ", pair - begin[r],
                                                " (index ", index,
                                                ") not ascending inside [0, ", size, ")"));
      }
    }
  }
  // A P-way merge of the ascending parts: the smallest index first, equal
  // indices in rank order, so every sum adds in rank order.
  using Head = std::pair<int64_t, int>;  // (index, rank)
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  std::vector<int64_t> cursor(begin.begin(), begin.end() - 1);
  for (int r = 0; r < world; ++r) {
    if (cursor[r] < begin[r + 1]) heads.push({index_at(cursor[r]), r});
  }
  SparseSum sum;
  while (!heads.empty()) {
    const int64_t index = heads.top().first;
    float total = 0.0f;
    while (!heads.empty() && heads.top().first == index) {
      const int r = heads.top().second;
      heads.pop();
      total += value_at(cursor[r]);
      if (++cursor[r] < begin[r + 1]) heads.push({index_at(cursor[r]), r});
    }
    sum.indices.push_back(index);
    sum.values.push_back(total);
  }
  return sum;
}

TopKGradientAdamW::TopKGradientAdamW(RankGroup* group, AdamWConfig config, DecayMask decay_mask,
                                     double density, DensitySchedule schedule,
                                     int64_t dense_warmup_steps)
    : group_(group),
      adamw_(config, std::move(decay_mask)),
      density_(density),
      schedule_(schedule),
      dense_warmup_steps_(dense_warmup_steps),
      residual_(adamw_.first_moment().size(), 0.0f) {}

const std::vector<float>& TopKGradientAdamW::first_moment() const {
  return adamw_.first_moment();
}

absl::Status TopKGradientAdamW::Step(float* params, float* grads, int64_t size, double lr) {
  if (absl::Status s = CheckSize(size, residual_.size(), name()); !s.ok()) return s;
  StepBytes bytes(*group_);
  const int64_t t = adamw_.step_count();
  const double density = schedule_.At(t, density_);
  if (DenseBySchedule(t, dense_warmup_steps_, density_, schedule_)) {
    for (int64_t i = 0; i < size; ++i) residual_[i] += grads[i];
    if (absl::Status s = group_->AllReduceSum(residual_.data(), size); !s.ok()) return s;
    if (absl::Status s = adamw_.Step(params, residual_.data(), size, lr); !s.ok()) return s;
    std::fill(residual_.begin(), residual_.end(), 0.0f);
    last_step_ = {};
    last_step_.step = adamw_.step_count();
    last_step_.synced_values = size;
    bytes.Record(last_step_);
    return absl::OkStatus();
  }
  magnitude_.resize(size);
  for (int64_t i = 0; i < size; ++i) {
    residual_[i] += grads[i];
    magnitude_[i] = std::fabs(residual_[i]);
  }
  const int64_t k = MaskCountForRange(size, density);
  const std::vector<int64_t> picked = SelectTopK(magnitude_, 0, k);
  std::vector<float> sent(picked.size());
  for (size_t p = 0; p < picked.size(); ++p) {
    sent[p] = residual_[picked[p]];
    residual_[picked[p]] = 0.0f;
  }
  auto sum = AllGatherSparseSum(*group_, picked, sent, size, name());
  if (!sum.ok()) return sum.status();
  summed_.assign(size, 0.0f);
  for (size_t p = 0; p < sum->indices.size(); ++p) summed_[sum->indices[p]] = sum->values[p];
  last_union_size_ = static_cast<int64_t>(sum->indices.size());
  if (absl::Status s = adamw_.Step(params, summed_.data(), size, lr); !s.ok()) return s;
  last_step_ = {};
  last_step_.step = adamw_.step_count();
  last_step_.dense = false;
  last_step_.synced_values = k;
  last_step_.mask_entries = last_union_size_;
  bytes.Record(last_step_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TopKGradientAdamW::SaveState() {
  return SaveAdamW(adamw_, name(), &residual_);
}

absl::Status TopKGradientAdamW::RestoreState(absl::string_view state) {
  return RestoreAdamW(state, name(), adamw_, &residual_);
}

}  // namespace corescape::optim
