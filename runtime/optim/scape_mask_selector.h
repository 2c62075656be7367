#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_MASK_SELECTOR_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_MASK_SELECTOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/base/thread_pool.h"
#include "runtime/optim/scape_config.h"
#include "runtime/optim/scape_state_store.h"

namespace corescape::optim {

// How one rank chooses its part of SCAPE's next mask: inside its range
// [begin, end) of the buffer, the top ceil(d·|range|) coordinates by the
// rule's statistic, or per tensor (each of its tensors' top
// MaskCountForTensor; norm gains whole with dense_small_tensors). The
// ranking runs in the state store where it selects() (on a device, beside
// the state), else on the host over the optimizer's host vectors.
class ScapeMaskSelector {
 public:
  // The optimizer's host state the host ranking reads (its vectors: the
  // host store's state, or a device store's host copies).
  struct HostState {
    const std::vector<float>* m;
    const std::vector<float>* residual;
    const std::vector<float>* vbar;
  };
  // Everything pointed to outlives the selector.
  ScapeMaskSelector(const ScapeConfig* config, const std::vector<int64_t>* tensor_bounds,
                    const std::vector<uint8_t>* decay_mask, int64_t begin, int64_t end,
                    int world_size, ScapeStateStore* store, HostState host)
      : config_(*config),
        tensor_bounds_(*tensor_bounds),
        decay_mask_(*decay_mask),
        begin_(begin),
        end_(end),
        world_size_(world_size),
        store_(store),
        host_(host) {}

  void UseThreadPool(ThreadPool* pool) { pool_ = pool; }

  // The reference rule's statistic |c^r| over the range, which its payload
  // fills (empty where the store ranks it itself).
  std::vector<float>& reference_statistic() { return reference_statistic_; }

  // This rank's part of the mask for step `step`, ascending.
  absl::StatusOr<std::vector<int64_t>> SelectOwnPart(int64_t step);
  // The same, left in the store as its next held mask (a group of one over
  // a store that holds_masks()); returns its entry count.
  absl::StatusOr<int64_t> HoldOwnPart(int64_t step);
  // Before the catch-up rule's host update: the top k of the range with
  // `mask`'s entries left out, reading the state off the mask only (the
  // update changes the mask's entries alone, so this runs beside it).
  std::vector<int64_t> SelectOffMaskCandidates(int64_t step, const std::vector<int64_t>& mask);
  // After the update: the top k of the candidates and `mask`'s entries in
  // the range, which holds the true top k.
  std::vector<int64_t> SelectFromCandidates(int64_t step, const std::vector<int64_t>& candidates,
                                            const std::vector<int64_t>& mask);
  // The statistic over the range as the host ranks it (the reference rule:
  // its |c^r|, empty where the store ranks it).
  std::vector<float> StatisticValues() const;

 private:
  // What the store ranks by (the reference rule: |e| = |c^r|), and its
  // per-step scalars.
  MaskStatistic RankedStatistic() const;
  kernels::host_device::MaskStatisticScalars StatisticScalars() const;
  // The statistic of coordinates [from, to) into out[0, to − from).
  void FillStatistic(int64_t from, int64_t to, float* out, ThreadPool* pool) const;
  // The statistic over the range (the reference rule: its |c^r|).
  const std::vector<float>& StatisticOfRange();
  // The range's tensors with their counts at `density` (k < 0: the tensor
  // whole).
  std::vector<ScapeStateStore::TopKSegment> TensorPlan(double density) const;
  absl::StatusOr<std::vector<int64_t>> SelectPerTensor(double density);

  const ScapeConfig& config_;
  const std::vector<int64_t>& tensor_bounds_;  // T + 1 offsets
  const std::vector<uint8_t>& decay_mask_;
  const int64_t begin_, end_;
  const int world_size_;
  ScapeStateStore* store_;
  HostState host_;
  ThreadPool* pool_ = nullptr;
  std::vector<float> reference_statistic_;
  std::vector<float> statistic_;  // the statistic over the range, reused
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_MASK_SELECTOR_H_
