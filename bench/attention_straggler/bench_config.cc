#include "bench/attention_straggler/bench_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape::bench {

const char* ModeName(AttentionMode mode) {
  return mode == AttentionMode::kColocated ? "colocated" : "disaggregated";
}

kernels::AttentionShape StragglerConfig::shape() const {
  return {n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
}

std::vector<int64_t> StragglerConfig::DocumentLengths(int worker) const {
  if (worker == 0) return {tokens_per_worker};
  std::vector<int64_t> lengths;
  for (int64_t left = tokens_per_worker; left > 0; left -= short_document) {
    lengths.push_back(std::min(left, short_document));
  }
  return lengths;
}

absl::Status StragglerConfig::Validate() const {
  auto at_least = [](const char* name, int64_t value, int64_t min) -> absl::Status {
    if (value >= min) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= ", min, ", got ",
                                                   value));
  };
  for (absl::Status s :
       {at_least("workers", workers, 1), at_least("servers", servers, 1),
        at_least("tokens_per_worker", tokens_per_worker, 1),
        at_least("short_document", short_document, 1), at_least("heads", n_heads, 1),
        at_least("kv_heads", n_kv_heads, 1), at_least("head_dim", head_dim, 1),
        at_least("layers", layers, 1), at_least("warmup", warmup, 0),
        at_least("repeats", repeats, 1), at_least("threads", threads, 1)}) {
    if (!s.ok()) return s;
  }
  if (n_heads % n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_heads ", n_kv_heads, " must divide --heads ", n_heads));
  }
  if (tolerance < 0) return absl::InvalidArgumentError("--tolerance must be >= 0");
  return absl::OkStatus();
}

std::vector<std::string> StragglerConfig::AsFlags() const {
  return {absl::StrCat("--workers=", workers),
          absl::StrCat("--servers=", servers),
          absl::StrCat("--tokens_per_worker=", tokens_per_worker),
          absl::StrCat("--short_document=", short_document),
          absl::StrCat("--heads=", n_heads),
          absl::StrCat("--kv_heads=", n_kv_heads),
          absl::StrCat("--head_dim=", head_dim),
          absl::StrCat("--layers=", layers),
          absl::StrCat("--warmup=", warmup),
          absl::StrCat("--repeats=", repeats),
          absl::StrCat("--threads=", threads),
          absl::StrFormat("--tolerance=%.17g", tolerance),
          absl::StrCat("--keep_qkv_for_backward=", keep_qkv_for_backward ? "true" : "false"),
          absl::StrCat("--seed=", seed)};
}

std::string StragglerConfig::Describe() const {
  const std::vector<int64_t> shorts = DocumentLengths(workers > 1 ? 1 : 0);
  return absl::StrFormat(
      "W=%d workers, S=%d servers (disaggregated), %d tokens per worker: worker 0 one "
      "document of %d, the others %d documents of <= %d; attention %d heads, %d KV heads, "
      "head_dim %d, fp32; %d layers; %d timed repeats after %d warm-up; %d kernel thread(s) "
      "per worker (colocated) or server (disaggregated); planner tolerance %.2f, %s",
      workers, servers, tokens_per_worker, tokens_per_worker, shorts.size(), short_document,
      n_heads, n_kv_heads, head_dim, layers, repeats, warmup, threads, tolerance,
      keep_qkv_for_backward ? "servers keep Q/K/V for backward" : "backward resends Q/K/V");
}

int64_t CausalPairsOf(const std::vector<int64_t>& lengths) {
  int64_t pairs = 0;
  for (int64_t n : lengths) pairs += n * (n + 1) / 2;
  return pairs;
}

}  // namespace corescape::bench
