#include "runtime/device/device.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace corescape::device {

std::string Device::ToString() const {
  return is_cpu() ? std::string("cpu") : absl::StrCat("cuda:", index);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  // Quoted and cut short in errors: the text may come from a job spec.
  const std::string shown = absl::CHexEscape(text.substr(0, 64));
  if (text.empty()) return absl::InvalidArgumentError("device: empty (expected cpu, cuda or cuda:N)");
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (absl::StartsWith(text, "cpu:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", shown, "': cpu takes no ordinal (expected cpu)"));
  }
  if (!absl::StartsWith(text, "cuda:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", shown, "': unknown kind (expected cpu, cuda or cuda:N)"));
  }
  const absl::string_view ordinal = text.substr(5);
  // Digits only: SimpleAtoi would take "+1" or " 1".
  if (ordinal.empty() || ordinal.size() > 3 ||
      !std::all_of(ordinal.begin(), ordinal.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", shown, "': the ordinal after 'cuda:' must be a number 0..", kMaxCudaOrdinal));
  }
  int index = 0;
  if (!absl::SimpleAtoi(ordinal, &index) || index > kMaxCudaOrdinal) {
    return absl::InvalidArgumentError(absl::StrCat("device '", shown, "': ordinal ", ordinal,
                                                   " is above ", kMaxCudaOrdinal));
  }
  return Device::Cuda(index);
}

}  // namespace corescape::device
