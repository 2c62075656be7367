#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_

namespace corescape::kernels {

// OpenBLAS starts its threads when the library loads, before a daemon blocks
// SIGTERM for its signal thread; a SIGTERM delivered to one of them would
// kill the process instead of shutting it down cleanly. Daemons call this
// first thing in main(): OpenBLAS then starts fresh threads, with the
// daemon's signal mask, on first use.
void StopBlasThreads();

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_
