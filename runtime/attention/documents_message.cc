#include "runtime/attention/documents_message.h"

#include "absl/strings/str_cat.h"

namespace corescape::attention {
namespace {

int64_t WeightsWords(int32_t num_speed_weights) {
  return num_speed_weights > 0 ? 1 + int64_t{num_speed_weights} : 0;
}

}  // namespace

std::vector<int64_t> EncodeDocumentsMessage(const DocumentsMessage& message,
                                            ExchangeHeader& announce) {
  std::vector<int64_t> words(message.lengths.begin(), message.lengths.end());
  announce.num_documents = static_cast<int32_t>(message.lengths.size());
  announce.num_speed_weights = 0;
  announce.payload_bytes = 0;
  if (message.weights && !message.weights->weights.empty()) {
    announce.num_speed_weights = static_cast<int32_t>(message.weights->weights.size());
    words.push_back(static_cast<int64_t>(message.weights->version));
    for (double w : message.weights->weights) words.push_back(DoubleToWord(w));
  }
  if (message.plan) {
    const std::vector<int64_t> plan = EncodeShippedPlan(*message.plan);
    announce.payload_bytes = static_cast<int64_t>(plan.size() * sizeof(int64_t));
    words.insert(words.end(), plan.begin(), plan.end());
  }
  return words;
}

absl::StatusOr<int64_t> ExpectedDocumentsWords(const ExchangeHeader& announce, int32_t worker,
                                               const DocumentsFormat& format,
                                               absl::string_view who) {
  if (format.in_place) {
    if (announce.num_speed_weights != 0 && announce.num_speed_weights != 1) {
      return absl::DataLossError(absl::StrCat(
          who, " announces ", announce.num_speed_weights, " speeds with ", announce.Describe(),
          "; a worker sends at most its own"));
    }
    if (announce.payload_bytes != 0) {
      return absl::DataLossError(absl::StrCat(who, " announces an attention plan of ",
                                              announce.payload_bytes, " bytes with ",
                                              announce.Describe(),
                                              "; in-place workers ship no plans"));
    }
    return int64_t{announce.num_documents} + WeightsWords(announce.num_speed_weights);
  }
  // Only rank 0's weights are planned with: a second source could disagree.
  const int32_t expected = worker == 0 ? format.weights_per_sender : 0;
  if (announce.num_speed_weights != expected) {
    return absl::DataLossError(absl::StrCat(
        who, " announces ", announce.num_speed_weights, " speed weights with ",
        announce.Describe(), "; expected ", expected,
        worker == 0 ? " (one per attention server)" : " (only worker 0 sends them)"));
  }
  if (announce.payload_bytes != 0 && worker != 0) {
    return absl::DataLossError(absl::StrCat(who, " announces an attention plan of ",
                                            announce.payload_bytes, " bytes with ",
                                            announce.Describe(), "; only worker 0 ships plans"));
  }
  constexpr int64_t kMaxPlanBytes = (3 + 5 * kMaxShippedPlanTasks) * int64_t{sizeof(int64_t)};
  if (announce.payload_bytes % sizeof(int64_t) != 0 || announce.payload_bytes > kMaxPlanBytes) {
    return absl::DataLossError(absl::StrCat(who, " announces an attention plan of ",
                                            announce.payload_bytes, " bytes with ",
                                            announce.Describe(),
                                            "; not a whole number of words under ",
                                            kMaxPlanBytes));
  }
  return int64_t{announce.num_documents} + WeightsWords(announce.num_speed_weights) +
         announce.payload_bytes / int64_t{sizeof(int64_t)};
}

absl::StatusOr<DocumentsMessage> DecodeDocumentsMessage(absl::Span<const int64_t> words,
                                                        const ExchangeHeader& announce,
                                                        const DocumentsFormat& format,
                                                        absl::string_view who) {
  const int64_t weights_end =
      int64_t{announce.num_documents} + WeightsWords(announce.num_speed_weights);
  const int64_t expected = weights_end + announce.payload_bytes / int64_t{sizeof(int64_t)};
  if (static_cast<int64_t>(words.size()) != expected) {
    return absl::InternalError(absl::StrCat("documents message from ", who, " has ", words.size(),
                                            " words, its header says ", expected));
  }
  DocumentsMessage message;
  message.lengths.assign(words.begin(), words.begin() + announce.num_documents);
  if (announce.num_speed_weights > 0) {
    VersionedSpeedWeights weights;
    weights.version = static_cast<uint64_t>(words[announce.num_documents]);
    for (int64_t i = announce.num_documents + 1; i < weights_end; ++i) {
      weights.weights.push_back(WordToDouble(words[i]));
    }
    if (absl::Status s = ValidateSpeedWeights(
            weights.weights, format.weights_per_sender,
            absl::StrCat("speed weights from ", who, " with ", announce.Describe()),
            format.max_speed_weight);
        !s.ok()) {
      return absl::DataLossError(s.message());
    }
    message.weights = std::move(weights);
  }
  if (announce.payload_bytes > 0) {
    auto plan = DecodeShippedPlan(words.subspan(weights_end),
                                  absl::StrCat(who, " with ", announce.Describe()));
    if (!plan.ok()) return plan.status();
    message.plan = *std::move(plan);
  }
  return message;
}

}  // namespace corescape::attention
