#include "runtime/attention/speed_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace corescape::attention {

SpeedWeights SpeedWeights::Equal(int32_t servers) {
  return SpeedWeights{0, std::vector<double>(std::max(servers, 0), 1.0)};
}

std::string SpeedWeights::Describe() const {
  return absl::StrCat("version ", version, " (",
                      absl::StrJoin(weights, ", ",
                                    [](std::string* out, double w) {
                                      absl::StrAppend(out, absl::StrFormat("%.3f", w));
                                    }),
                      ")");
}

absl::Status ValidateSpeedWeights(absl::Span<const double> weights, int32_t servers,
                                  absl::string_view source) {
  if (static_cast<int64_t>(weights.size()) != servers) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", weights.size(),
                                                   " speed weights for ", servers,
                                                   " attention servers"));
  }
  for (size_t s = 0; s < weights.size(); ++s) {
    if (!(std::isfinite(weights[s]) && weights[s] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": speed weight [", s, "] is ",
                                                     weights[s], "; weights must be finite and > 0"));
    }
  }
  return absl::OkStatus();
}

int64_t DocumentsMessageWords(int32_t num_documents, int32_t num_speed_weights) {
  return int64_t{num_documents} + (num_speed_weights > 0 ? 1 + int64_t{num_speed_weights} : 0);
}

std::vector<int64_t> EncodeDocumentsMessage(absl::Span<const int64_t> lengths,
                                            const SpeedWeights* weights) {
  std::vector<int64_t> words(lengths.begin(), lengths.end());
  if (weights == nullptr || weights->weights.empty()) return words;
  words.push_back(static_cast<int64_t>(weights->version));
  for (double w : weights->weights) {
    int64_t bits;
    std::memcpy(&bits, &w, sizeof bits);
    words.push_back(bits);
  }
  return words;
}

absl::StatusOr<int64_t> ExpectedDocumentsWords(const ExchangeHeader& announce, int32_t worker,
                                               int32_t servers, absl::string_view who) {
  // Only rank 0's weights are planned with: a second source could disagree.
  const int32_t expected = worker == 0 ? servers : 0;
  if (announce.num_speed_weights != expected) {
    return absl::DataLossError(absl::StrCat(
        who, " announces ", announce.num_speed_weights, " speed weights with ",
        announce.Describe(), "; expected ", expected,
        worker == 0 ? " (one per attention server)" : " (only worker 0 sends them)"));
  }
  return DocumentsMessageWords(announce.num_documents, announce.num_speed_weights);
}

absl::StatusOr<DocumentsMessage> DecodeDocumentsMessage(absl::Span<const int64_t> words,
                                                        const ExchangeHeader& announce,
                                                        int32_t servers, absl::string_view who) {
  const int64_t expected = DocumentsMessageWords(announce.num_documents, announce.num_speed_weights);
  if (static_cast<int64_t>(words.size()) != expected) {
    return absl::InternalError(absl::StrCat("documents message from ", who, " has ", words.size(),
                                            " words, its header says ", expected));
  }
  DocumentsMessage message;
  message.lengths.assign(words.begin(), words.begin() + announce.num_documents);
  if (announce.num_speed_weights == 0) return message;
  SpeedWeights weights;
  weights.version = static_cast<uint64_t>(words[announce.num_documents]);
  for (int64_t i = announce.num_documents + 1; i < expected; ++i) {
    double w;
    std::memcpy(&w, &words[i], sizeof w);
    weights.weights.push_back(w);
  }
  if (absl::Status s = ValidateSpeedWeights(
          weights.weights, servers, absl::StrCat("speed weights from ", who, " with ",
                                                 announce.Describe()));
      !s.ok()) {
    return absl::DataLossError(s.message());
  }
  message.weights = std::move(weights);
  return message;
}

}  // namespace corescape::attention
