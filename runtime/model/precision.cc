#include "runtime/model/precision.h"

#include "absl/strings/str_cat.h"

namespace corescape::model {

absl::StatusOr<Precision> ParsePrecision(absl::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("precision: unknown value \"", text, "\" (fp32, bf16)"));
}

absl::string_view PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

Precision DefaultPrecision(const device::Device& device) {
  return device.is_cuda() ? Precision::kBf16 : Precision::kFp32;
}

}  // namespace corescape::model
