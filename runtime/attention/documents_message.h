#ifndef CORESCAPE_RUNTIME_ATTENTION_DOCUMENTS_MESSAGE_H_
#define CORESCAPE_RUNTIME_ATTENTION_DOCUMENTS_MESSAGE_H_

// What each worker tells every other participant at the forward of layer 0
// of a micro-batch (a documents header, then this message, kDocumentsTag),
// in int64 words:
//   - its document lengths (header num_documents of them);
//   - speed weights: their version and the weights (num_speed_weights of
//     them; IEEE doubles, bit for bit). DISAGGREGATED: worker 0 only, one
//     per server. IN_PLACE: each worker its own measured speed as one
//     weight, none before it has measured one;
//   - DISAGGREGATED, worker 0 only, if it has one: the scheduler's plan of
//     this micro-batch (shipped_plan.h; header payload_bytes = 8 × its
//     words).
// Only worker 0's server weights and plan count, so everyone plans alike.

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/attention/shipped_plan.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "runtime/attention/wire_format.h"

namespace corescape::attention {

struct DocumentsMessage {
  std::vector<int64_t> lengths;
  std::optional<VersionedSpeedWeights> weights;  // worker 0's; in place: the sender's speed
  std::optional<ShippedPlan> plan;      // worker 0's, when it ships one
};

// Which weights and plans a job's documents messages carry.
struct DocumentsFormat {
  // DISAGGREGATED over `servers` attention servers.
  static DocumentsFormat Disaggregated(int32_t servers) {
    return {servers, false, kMaxRelativeSpeedWeight};
  }
  // IN_PLACE: every worker announces its own speed, nobody ships plans.
  static DocumentsFormat InPlace() {
    return {1, true, std::numeric_limits<double>::infinity()};
  }
  int32_t weights_per_sender = 1;  // from worker 0; in place from each, or none
  bool in_place = false;
  // Relative weights from the scheduler are bounded; absolute speeds only
  // finite and > 0 (ValidateSpeedWeights).
  double max_speed_weight = kMaxRelativeSpeedWeight;
};

// The words of `message`; sets the counts of `announce` (num_documents,
// num_speed_weights, payload_bytes) to match.
std::vector<int64_t> EncodeDocumentsMessage(const DocumentsMessage& message,
                                            ExchangeHeader& announce);

// Checks the announce header of `worker` against `format` (the weights it
// may carry, whether it may ship a plan) and returns the size of its
// documents message in words. DataLoss naming `who` and the exchange
// otherwise.
absl::StatusOr<int64_t> ExpectedDocumentsWords(const ExchangeHeader& announce, int32_t worker,
                                               const DocumentsFormat& format,
                                               absl::string_view who);

// Splits a received documents message (ExpectedDocumentsWords long) and
// validates its weights (finite, > 0) and the plan's encoding; DataLoss
// naming `who` and the exchange.
absl::StatusOr<DocumentsMessage> DecodeDocumentsMessage(absl::Span<const int64_t> words,
                                                        const ExchangeHeader& announce,
                                                        const DocumentsFormat& format,
                                                        absl::string_view who);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_DOCUMENTS_MESSAGE_H_
