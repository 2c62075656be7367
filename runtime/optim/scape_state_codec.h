#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_CODEC_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// One rank's SCAPE state as its checkpoint holds it (ScapeOptimizer's
// SaveState and RestoreState): m, v̄ and the ages are the same on every
// rank, the residual is this rank's own.
struct ScapeStateView {
  absl::string_view kind;    // the optimizer's name
  absl::string_view config;  // ScapeConfig::ToString()
  int64_t rank = 0, world_size = 0;
  absl::Span<const int64_t> partition;  // the partition map's bounds
  int64_t step = 0;                     // steps taken
  absl::Span<const float> m, vbar, residual;
  absl::Span<const int64_t> last_sync;  // each coordinate's last synchronized step (−1: never)
  const GlobalMask& current;            // the mask of the last step
  const std::optional<GlobalMask>& pending;  // the next step's, where chosen
};
std::string EncodeScapeState(const ScapeStateView& state);

// The decoded state, owning its buffers.
struct ScapeState {
  int64_t rank = 0, world_size = 0;
  std::vector<int64_t> partition;
  int64_t step = 0;
  std::vector<float> m, vbar, residual;
  std::vector<int64_t> last_sync;
  GlobalMask current;
  std::optional<GlobalMask> pending;
};
// Decodes a state of optimizer `kind` written under `config` (else
// FAILED_PRECONDITION naming both) over a buffer of n entries, checked as
// a received state: sizes, masks sorted inside the buffer, every age
// before the state's step (DATA_LOSS naming what is wrong).
absl::StatusOr<ScapeState> DecodeScapeState(absl::string_view blob, absl::string_view kind,
                                            absl::string_view config, int64_t n);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_CODEC_H_
