#include "runtime/attention/versioned_speed_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace corescape::attention {

VersionedSpeedWeights VersionedSpeedWeights::Equal(int32_t servers) {
  return VersionedSpeedWeights{0, std::vector<double>(std::max(servers, 0), 1.0)};
}

std::string VersionedSpeedWeights::Describe() const {
  return absl::StrCat("version ", version, " (",
                      absl::StrJoin(weights, ", ",
                                    [](std::string* out, double w) {
                                      absl::StrAppend(out, absl::StrFormat("%.3f", w));
                                    }),
                      ")");
}

int64_t DoubleToWord(double value) {
  int64_t word;
  std::memcpy(&word, &value, sizeof word);
  return word;
}

double WordToDouble(int64_t word) {
  double value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

absl::Status ValidateSpeedWeights(absl::Span<const double> weights, int32_t servers,
                                  absl::string_view source, double max_weight) {
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
    if (weights[s] > max_weight || weights[s] < 1.0 / max_weight) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": speed weight [", s, "] is ", weights[s],
                       "; relative weights must lie in [", 1.0 / max_weight, ", ", max_weight, "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace corescape::attention
