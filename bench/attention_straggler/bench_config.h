#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_BENCH_CONFIG_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_BENCH_CONFIG_H_

// What one straggler-benchmark run measures, shared by the launcher and every
// worker and server process it starts (they get it as the same flags).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::bench {

enum class AttentionMode { kColocated, kDisaggregated };

const char* ModeName(AttentionMode mode);

struct StragglerConfig {
  int workers = 2;
  int servers = 2;  // disaggregated mode only
  // Every worker holds exactly this many tokens: worker 0 as one document,
  // the others as documents of short_document tokens (the last one takes
  // the remainder).
  int64_t tokens_per_worker = 2048;
  int64_t short_document = 128;
  int n_heads = 8;
  int n_kv_heads = 4;
  int head_dim = 64;
  int layers = 4;
  int warmup = 1;   // untimed repeats first
  int repeats = 3;  // timed repeats (forward of every layer, then backward)
  int threads = 1;  // kernel threads per worker (colocated) or server
  double tolerance = 0.05;  // planner: max/mean server load at most 1 + this
  bool keep_qkv_for_backward = true;
  uint64_t seed = 1;

  kernels::AttentionShape shape() const;
  // Document lengths of `worker`'s micro-batch.
  std::vector<int64_t> DocumentLengths(int worker) const;
  int exchanges_per_repeat() const { return 2 * layers; }
  absl::Status Validate() const;
  // The command-line flags that give this configuration (--workers=2 ...),
  // as the launcher passes it on to the processes it starts.
  std::vector<std::string> AsFlags() const;
  // One line: "W=2 workers, S=2 servers, ...".
  std::string Describe() const;
};

// Causal (query, key) pairs of documents of these lengths.
int64_t CausalPairsOf(const std::vector<int64_t>& lengths);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_BENCH_CONFIG_H_
