// The main() of the benchmark binaries that link //bench:bench_main: it
// parses the absl flags, then runs the benchmark.
#ifndef CORESCAPE_BENCH_BENCH_MAIN_H_
#define CORESCAPE_BENCH_BENCH_MAIN_H_

namespace corescape::bench {

// Defined once by each benchmark binary; returns the process exit status.
int RunBenchmark();

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_BENCH_MAIN_H_
