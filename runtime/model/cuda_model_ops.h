#ifndef CORESCAPE_RUNTIME_MODEL_CUDA_MODEL_OPS_H_
#define CORESCAPE_RUNTIME_MODEL_CUDA_MODEL_OPS_H_

// Built only with --config=cuda.
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device/device.h"
#include "runtime/model/model_ops.h"

namespace corescape::model {

// The training step's kernels on one CUDA GPU, in stream order on one
// stream: cuBLAS GEMMs (fp32, or bf16 inputs with fp32 accumulation), the
// runtime/kernels/cuda launches, and core attention by the FlashAttention-
// style kernel of runtime/kernels/cuda (fp32; its tile plan made once per
// task list and kept for every layer's forward and backward).
absl::StatusOr<std::unique_ptr<ModelOps>> NewCudaModelOps(const device::Device& device,
                                                          Precision precision);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_CUDA_MODEL_OPS_H_
