#include "runtime/kernels/cuda/gemm.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape::kernels::cuda {
namespace {

// cuBLAS takes int dimensions.
absl::Status CheckShape(const char* what, int64_t m, int64_t k, int64_t n) {
  for (int64_t d : {m, k, n}) {
    if (d <= 0 || d > INT_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape m=", m, " k=", k, " n=", n, " (each must be in 1..", INT_MAX, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(call, ": ", cublasGetStatusString(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED: return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_INVALID_VALUE: return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED: return absl::FailedPreconditionError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<std::unique_ptr<CublasHandle>> CublasHandle::Create() {
  cublasHandle_t handle;
  if (absl::Status s = CublasStatus(cublasCreate(&handle), "cublasCreate"); !s.ok()) return s;
  return std::unique_ptr<CublasHandle>(new CublasHandle(handle));
}

CublasHandle::~CublasHandle() {
  if (absl::Status s = CublasStatus(cublasDestroy(handle_), "cublasDestroy"); !s.ok()) LOG(ERROR) << s;
}

// Row-major A[r, c] is column-major A^T: each product is computed
// transposed, C^T = B^T·A^T, with cuBLAS's column-major conventions.
namespace {

// The linear layer's GEMMs for inputs of one cuBLAS type (fp32 or bf16),
// fp32 outputs and accumulation.
absl::Status LinearForwardOf(const char* what, CublasHandle& handle, const void* x, const void* w,
                             cudaDataType_t type, float* y, int64_t m, int64_t k, int64_t n,
                             cudaStream_t stream) {
  if (absl::Status s = CheckShape(what, m, k, n); !s.ok()) return s;
  if (absl::Status s = CublasStatus(cublasSetStream(handle.get(), stream), "cublasSetStream"); !s.ok()) return s;
  const float alpha = 1.0f, beta = 0.0f;
  // y^T[n, m] = (w^T)^T · x^T, w^T being w's column-major view [k, n].
  return CublasStatus(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                   static_cast<int>(k), &alpha, w, type, static_cast<int>(k), x, type,
                                   static_cast<int>(k), &beta, y, CUDA_R_32F, static_cast<int>(n),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx (linear forward)");
}

absl::Status LinearBackwardOf(const char* what, CublasHandle& handle, const void* x, const void* w,
                              const void* dy, cudaDataType_t type, float* dx, float* dw, int64_t m, int64_t k,
                              int64_t n, cudaStream_t stream) {
  if (absl::Status s = CheckShape(what, m, k, n); !s.ok()) return s;
  if (absl::Status s = CublasStatus(cublasSetStream(handle.get(), stream), "cublasSetStream"); !s.ok()) return s;
  const float one = 1.0f, zero = 0.0f;
  const int mi = static_cast<int>(m), ki = static_cast<int>(k), ni = static_cast<int>(n);
  if (dx != nullptr) {
    // dx^T[k, m] = w^T[k, n] · dy^T[n, m].
    if (absl::Status s = CublasStatus(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, ki, mi, ni, &one, w, type,
                                                   ki, dy, type, ni, &zero, dx, CUDA_R_32F, ki, CUBLAS_COMPUTE_32F,
                                                   CUBLAS_GEMM_DEFAULT),
                                      "cublasGemmEx (linear backward, dx)");
        !s.ok()) {
      return s;
    }
  }
  // dw^T[k, n] += x^T[k, m] · dy[m, n].
  return CublasStatus(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_T, ki, ni, mi, &one, x, type, ki, dy, type,
                                   ni, &one, dw, CUDA_R_32F, ki, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx (linear backward, dw)");
}

}  // namespace

absl::Status LinearForwardBf16(CublasHandle& handle, const uint16_t* x, const uint16_t* w, float* y, int64_t m,
                               int64_t k, int64_t n, cudaStream_t stream) {
  return LinearForwardOf("LinearForwardBf16", handle, x, w, CUDA_R_16BF, y, m, k, n, stream);
}

absl::Status LinearBackwardBf16(CublasHandle& handle, const uint16_t* x, const uint16_t* w, const uint16_t* dy,
                                float* dx, float* dw, int64_t m, int64_t k, int64_t n, cudaStream_t stream) {
  return LinearBackwardOf("LinearBackwardBf16", handle, x, w, dy, CUDA_R_16BF, dx, dw, m, k, n, stream);
}

absl::Status LinearForwardF32(CublasHandle& handle, const float* x, const float* w, float* y, int64_t m,
                              int64_t k, int64_t n, cudaStream_t stream) {
  return LinearForwardOf("LinearForwardF32", handle, x, w, CUDA_R_32F, y, m, k, n, stream);
}

absl::Status LinearBackwardF32(CublasHandle& handle, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, int64_t m, int64_t k, int64_t n, cudaStream_t stream) {
  return LinearBackwardOf("LinearBackwardF32", handle, x, w, dy, CUDA_R_32F, dx, dw, m, k, n, stream);
}

}  // namespace corescape::kernels::cuda
