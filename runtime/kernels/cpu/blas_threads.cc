#include "runtime/kernels/cpu/blas_threads.h"

// OpenBLAS's own entry point (not in cblas.h).
extern "C" void blas_thread_shutdown_(void);

namespace corescape::kernels {

void StopBlasThreads() { blas_thread_shutdown_(); }

}  // namespace corescape::kernels
