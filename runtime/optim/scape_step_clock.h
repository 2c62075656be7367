#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_STEP_CLOCK_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_STEP_CLOCK_H_

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// Where a SCAPE step's time goes (OptimizerStepPhases), lap by lap, and
// this rank's encoded part of the mask exchange the step accounts for.
struct ScapeStepClock {
  OptimizerStepPhases phases;
  absl::Time mark = absl::Now();
  int64_t part_bytes = 0;
  MaskEncoding part_encoding = MaskEncoding::kBitmask;

  // Adds the time since the last mark to `phase`.
  void Lap(double& phase) {
    const absl::Time now = absl::Now();
    phase += absl::ToDoubleSeconds(now - mark);
    mark = now;
  }
  // A mask exchange's Start or Finish just ended: its coding is `coding`
  // seconds of it, the rest was waiting.
  void LapExchange(double coding) {
    Lap(phases.mask_wait);
    phases.mask_wait -= coding;
    phases.encode += coding;
  }
  void CountPart(const MaskExchangeStats& e) {
    part_bytes = e.part_bytes;
    part_encoding = e.encoding;
  }
  // After the exchange's Start: its encoding, where the caller's thread ran
  // it (the exchange's thread's costs are read after Finish).
  void LapStarted(const MaskExchange& exchange) {
    if (exchange.encodes_on_thread()) {
      Lap(phases.mask_wait);
      return;
    }
    LapExchange(exchange.last().encode_seconds);
    CountPart(exchange.last());
  }
  // After its Finish: what ran on its thread beside the forward/backward is
  // not on the step's path.
  void LapFinished(const MaskExchangeStats& e) {
    LapExchange(e.received_on_thread ? 0.0 : e.decode_seconds);
    phases.coding_overlapped += (e.encoded_on_thread ? e.encode_seconds : 0.0) +
                                (e.received_on_thread ? e.decode_seconds : 0.0);
    if (e.encoded_on_thread) CountPart(e);
  }
  // A mask needed at once (the first): what the exchange's thread did is on
  // the step's path too.
  void LapAwaited(const MaskExchangeStats& e) {
    LapExchange((e.encoded_on_thread ? e.encode_seconds : 0.0) + e.decode_seconds);
    if (e.encoded_on_thread) CountPart(e);
  }
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_STEP_CLOCK_H_
