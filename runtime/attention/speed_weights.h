#ifndef CORESCAPE_RUNTIME_ATTENTION_SPEED_WEIGHTS_H_
#define CORESCAPE_RUNTIME_ATTENTION_SPEED_WEIGHTS_H_

// The attention servers' relative speeds the participants plan with. The
// scheduler learns them and pushes them to the workers; worker rank 0 sends
// its newest ones to every other rank with its document lengths at the
// forward of layer 0 of every micro-batch, and every participant plans that
// micro-batch with rank 0's weights — so all compute the same plan, whatever
// each worker has received from the scheduler by then.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/attention/wire_format.h"

namespace corescape::attention {

struct SpeedWeights {
  uint64_t version = 0;         // 0: equal speeds (nothing received yet)
  std::vector<double> weights;  // one per attention server, in rank order

  static SpeedWeights Equal(int32_t servers);
  bool operator==(const SpeedWeights&) const = default;
  // "version 3 (1.333, 0.667)"
  std::string Describe() const;
};

// OK if there is one weight per server, each finite and > 0; otherwise
// InvalidArgument naming `source`, and the count or the bad weight.
absl::Status ValidateSpeedWeights(absl::Span<const double> weights, int32_t servers,
                                  absl::string_view source);

// The documents message (kDocumentsTag), in int64 words: the worker's
// document lengths, then — from worker 0 only, with
// ExchangeHeader::num_speed_weights = k > 0 — the weights' version and k
// weights (IEEE doubles, bit for bit).
int64_t DocumentsMessageWords(int32_t num_documents, int32_t num_speed_weights);
std::vector<int64_t> EncodeDocumentsMessage(absl::Span<const int64_t> lengths,
                                            const SpeedWeights* weights);

struct DocumentsMessage {
  std::vector<int64_t> lengths;
  std::optional<SpeedWeights> weights;  // worker 0's
};

// Checks the announce header of `worker` (worker 0 carries one weight per
// server, the others none) and returns the size of its documents message
// in words. DataLoss naming `who` and the exchange otherwise.
absl::StatusOr<int64_t> ExpectedDocumentsWords(const ExchangeHeader& announce, int32_t worker,
                                               int32_t servers, absl::string_view who);

// Splits a received documents message (ExpectedDocumentsWords long) and
// validates worker 0's weights; DataLoss naming `who` and the exchange.
absl::StatusOr<DocumentsMessage> DecodeDocumentsMessage(absl::Span<const int64_t> words,
                                                        const ExchangeHeader& announce,
                                                        int32_t servers, absl::string_view who);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_SPEED_WEIGHTS_H_
