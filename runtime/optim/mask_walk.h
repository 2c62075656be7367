#ifndef CORESCAPE_RUNTIME_OPTIM_MASK_WALK_H_
#define CORESCAPE_RUNTIME_OPTIM_MASK_WALK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/base/thread_pool.h"

namespace corescape::optim {

// Walks coordinates [from, to) of a step's update in order: on_mask(j, p)
// for each coordinate j synchronized at position p of the packed values (all
// of them, p = j, when dense), off_mask(begin, end) for each run between
// them. `mask` is ascending.
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

// Coordinates per chunk of a per-coordinate pass over the buffer on a pool
// (a residual's accumulation, a host update): the result does not depend
// on the chunks.
inline constexpr int64_t kUpdateChunk = 1 << 17;

// WalkMask over [0, n) in chunks on the pool's threads (null: this thread).
template <typename OnMask, typename OffMask>
void WalkMaskOn(ThreadPool* pool, int64_t n, const std::vector<int64_t>& mask, bool dense,
                OnMask on_mask, OffMask off_mask) {
  ParallelForOn(
      pool, n, [&](int64_t from, int64_t to) { WalkMask(from, to, mask, dense, on_mask, off_mask); },
      kUpdateChunk);
}

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_MASK_WALK_H_
