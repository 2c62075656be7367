#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_HOST_DEVICE_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_HOST_DEVICE_H_

// Kernel bodies are written once and compiled twice: by nvcc into the CUDA
// launches, and by the host compiler into the CPU tests that compare them
// with the CPU reference. They use the C math functions (sqrtf, expf, exp,
// log, ...) that both sides provide; on the host these are the very
// functions std::sqrt/std::exp call, so host results match the CPU kernels
// bit for bit where the operation order does.
#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define CORESCAPE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CORESCAPE_HOST_DEVICE inline
#endif

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_HOST_DEVICE_H_
