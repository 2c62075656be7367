#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_GEMM_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_GEMM_H_

// The linear layer's GEMMs on the GPU through cuBLAS: bf16 inputs (uint16_t
// bit patterns, casts.h), fp32 accumulation and fp32 outputs. Same shapes
// and layouts as runtime/kernels/cpu/linear.h (row-major, torch.nn.Linear's
// w[n, k]). Built only with --config=cuda.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace corescape::kernels::cuda {

// A cuBLAS handle bound to the current device.
class CublasHandle {
 public:
  static absl::StatusOr<std::unique_ptr<CublasHandle>> Create();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  explicit CublasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_;
};

// A cuBLAS result as a status naming the call.
absl::Status CublasStatus(cublasStatus_t status, const char* call);

// y[m, n] = x[m, k] · w[n, k]^T.
absl::Status LinearForwardBf16(CublasHandle& handle, const uint16_t* x, const uint16_t* w, float* y, int64_t m,
                               int64_t k, int64_t n, cudaStream_t stream);

// dx[m, k] = dy[m, n] · w[n, k] (overwritten; skipped when dx is null);
// dw[n, k] += dy^T · x (accumulated, as on the CPU).
absl::Status LinearBackwardBf16(CublasHandle& handle, const uint16_t* x, const uint16_t* w, const uint16_t* dy,
                                float* dx, float* dw, int64_t m, int64_t k, int64_t n, cudaStream_t stream);

// The same products on fp32 inputs (fp32 compute: no TF32), for the fp32
// training step that is compared with the CPU within 1e-5.
absl::Status LinearForwardF32(CublasHandle& handle, const float* x, const float* w, float* y, int64_t m,
                              int64_t k, int64_t n, cudaStream_t stream);
absl::Status LinearBackwardF32(CublasHandle& handle, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, int64_t m, int64_t k, int64_t n, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_GEMM_H_
