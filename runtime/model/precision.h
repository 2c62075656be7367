#ifndef CORESCAPE_RUNTIME_MODEL_PRECISION_H_
#define CORESCAPE_RUNTIME_MODEL_PRECISION_H_

// Kept apart from model_ops.h so that what only names a precision (job
// specs, the scheduler, the CLI) links no kernels.
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/device/device.h"

namespace corescape::model {

// What the matrix products compute in. Master weights, gradients and
// optimizer state are fp32 either way.
enum class Precision {
  kFp32,
  kBf16,  // bf16 inputs to every GEMM, fp32 accumulation and outputs
};

// "fp32" | "bf16"; anything else INVALID_ARGUMENT naming the value.
absl::StatusOr<Precision> ParsePrecision(absl::string_view text);
absl::string_view PrecisionName(Precision precision);
// fp32 on the CPU (the reference), bf16 on a GPU.
Precision DefaultPrecision(const device::Device& device);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_PRECISION_H_
