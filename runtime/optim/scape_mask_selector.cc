#include "runtime/optim/scape_mask_selector.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::optim {

MaskStatistic ScapeMaskSelector::RankedStatistic() const {
  // The reference rule ranks its payload c^r, which e holds until the pack.
  return config_.rule == ScapeRule::kReference ? MaskStatistic::kResidual : config_.statistic;
}

kernels::host_device::MaskStatisticScalars ScapeMaskSelector::StatisticScalars() const {
  return MaskStatisticScalarsOf(config_.adams, world_size_);
}

void ScapeMaskSelector::FillStatistic(int64_t from, int64_t to, float* out,
                                      ThreadPool* pool) const {
  FillMaskStatistic(config_.statistic, host_.m->data() + from, host_.residual->data() + from,
                    host_.vbar->data() + from, to - from, StatisticScalars(), out, pool);
}

const std::vector<float>& ScapeMaskSelector::StatisticOfRange() {
  if (config_.rule == ScapeRule::kReference) return reference_statistic_;
  statistic_.resize(end_ - begin_);
  FillStatistic(begin_, end_, statistic_.data(), pool_);
  return statistic_;
}

std::vector<float> ScapeMaskSelector::StatisticValues() const {
  if (config_.rule == ScapeRule::kReference) return reference_statistic_;
  std::vector<float> out(end_ - begin_);
  FillStatistic(begin_, end_, out.data(), pool_);
  return out;
}

std::vector<ScapeStateStore::TopKSegment> ScapeMaskSelector::TensorPlan(double density) const {
  // The rank owns whole tensors (CheckTensorAligned at construction).
  std::vector<ScapeStateStore::TopKSegment> plan;
  auto first = std::lower_bound(tensor_bounds_.begin(), tensor_bounds_.end(), begin_);
  for (auto it = first; it + 1 != tensor_bounds_.end() && *it < end_; ++it) {
    const int64_t offset = *it, numel = *(it + 1) - *it;
    const bool whole = config_.dense_small_tensors && !decay_mask_[offset];
    plan.push_back({offset, numel, whole ? -1 : MaskCountForTensor(numel, density)});
  }
  return plan;
}

absl::StatusOr<int64_t> ScapeMaskSelector::HoldOwnPart(int64_t step) {
  const double density = config_.DensityAt(step);
  std::vector<ScapeStateStore::TopKSegment> plan;
  if (config_.PerTensor()) {
    plan = TensorPlan(density);
    // A tensor taken whole is its own top numel.
    for (ScapeStateStore::TopKSegment& segment : plan) {
      if (segment.k < 0) segment.k = segment.numel;
    }
  } else {
    plan.push_back({begin_, end_ - begin_, MaskCountForRange(end_ - begin_, density)});
  }
  return store_->HoldSelection(plan, RankedStatistic(), StatisticScalars());
}

absl::StatusOr<std::vector<int64_t>> ScapeMaskSelector::SelectPerTensor(double density) {
  // A segment with k < 0 is taken whole.
  const std::vector<ScapeStateStore::TopKSegment> plan = TensorPlan(density);
  // The store ranks every tensor at once (one download); the host, each
  // from the statistic.
  const bool by_store = store_->selects();
  std::vector<int64_t> stored;
  if (by_store) {
    std::vector<ScapeStateStore::TopKSegment> ranked;
    for (const auto& segment : plan) {
      if (segment.k >= 0) ranked.push_back(segment);
    }
    auto top = store_->SelectByStatistic(ranked, RankedStatistic(), StatisticScalars());
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
          absl::MakeConstSpan(*statistic).subspan(segment.offset - begin_, segment.numel),
          segment.offset, segment.k, pool_);
      chosen.insert(chosen.end(), top.begin(), top.end());
    }
  }
  return chosen;
}

absl::StatusOr<std::vector<int64_t>> ScapeMaskSelector::SelectOwnPart(int64_t step) {
  const double density = config_.DensityAt(step);
  if (config_.PerTensor()) return SelectPerTensor(density);
  const int64_t k = MaskCountForRange(end_ - begin_, density);
  if (store_->selects()) {
    const ScapeStateStore::TopKSegment range[] = {{begin_, end_ - begin_, k}};
    return store_->SelectByStatistic(range, RankedStatistic(), StatisticScalars());
  }
  return SelectTopK(StatisticOfRange(), begin_, k, pool_);
}

std::vector<int64_t> ScapeMaskSelector::SelectOffMaskCandidates(int64_t step,
                                                                const std::vector<int64_t>& mask) {
  statistic_.resize(end_ - begin_);
  // The mask's entries count as −∞ (NaN) here: every one of the true top k
  // that is off the mask is then among these k (only entries the true order
  // ranks above it can rank above it here). Their state is being updated
  // beside this, so it is not read: the gaps between them are, in chunks
  // of the range (on the pool's threads where there is one).
  auto fill = [&](int64_t chunk_begin, int64_t chunk_end) {
    int64_t from = begin_ + chunk_begin;
    const int64_t to = begin_ + chunk_end;
    for (auto it = std::lower_bound(mask.begin(), mask.end(), from); it != mask.end() && *it < to;
         ++it) {
      FillStatistic(from, *it, statistic_.data() + (from - begin_), nullptr);
      statistic_[*it - begin_] = NAN;
      from = *it + 1;
    }
    FillStatistic(from, to, statistic_.data() + (from - begin_), nullptr);
  };
  ParallelForOn(pool_, end_ - begin_, fill, kMaskStatisticChunk);
  return SelectTopK(statistic_, begin_, MaskCountForRange(end_ - begin_, config_.DensityAt(step)),
                    pool_);
}

std::vector<int64_t> ScapeMaskSelector::SelectFromCandidates(
    int64_t step, const std::vector<int64_t>& candidates, const std::vector<int64_t>& mask) {
  std::vector<int64_t> entries;
  entries.reserve(candidates.size() + mask.size());
  std::set_union(candidates.begin(), candidates.end(),
                 std::lower_bound(mask.begin(), mask.end(), begin_),
                 std::lower_bound(mask.begin(), mask.end(), end_), std::back_inserter(entries));
  std::vector<float> values(entries.size());
  FillMaskStatisticAt(config_.statistic, host_.m->data(), host_.residual->data(),
                      host_.vbar->data(), entries, StatisticScalars(), values.data(), pool_);
  // The entries are ascending, so ties still go to the lower coordinate.
  std::vector<int64_t> chosen =
      SelectTopK(values, 0, MaskCountForRange(end_ - begin_, config_.DensityAt(step)), pool_);
  for (int64_t& i : chosen) i = entries[i];
  return chosen;
}

}  // namespace corescape::optim
