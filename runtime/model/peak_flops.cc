#include "runtime/model/peak_flops.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace corescape::model {

namespace {

struct PeakEntry {
  const char* name_part;  // matched case-insensitively, first entry first
  double bf16_tflops;     // dense (without 2:4 sparsity)
  double fp32_tflops;     // CUDA cores, no TF32
};

// NVIDIA's datasheet figures. The form factors of one generation differ in
// clocks and power, so the specific names come before the generic ones.
constexpr PeakEntry kPeaks[] = {
    {"H100 PCIe", 756, 51},   {"H100 NVL", 835, 60},  {"H200 NVL", 835, 60},
    {"GH200", 989, 67},       {"H200", 989, 67},      {"H100", 989, 67},
    {"A100", 312, 19.5},
};

}  // namespace

double DensePeakTflops(absl::string_view gpu_name, Precision precision) {
  const std::string name = absl::AsciiStrToLower(gpu_name);
  for (const PeakEntry& entry : kPeaks) {
    if (absl::StrContains(name, absl::AsciiStrToLower(entry.name_part))) {
      return precision == Precision::kBf16 ? entry.bf16_tflops : entry.fp32_tflops;
    }
  }
  return 0;
}

double ModelTflopsPerSecond(double flops, double seconds) {
  return seconds > 0 ? flops / seconds / 1e12 : 0;
}

double Mfu(double tflops, double peak_tflops) { return peak_tflops > 0 ? tflops / peak_tflops : 0; }

}  // namespace corescape::model
