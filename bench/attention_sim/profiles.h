#ifndef CORESCAPE_BENCH_ATTENTION_SIM_PROFILES_H_
#define CORESCAPE_BENCH_ATTENTION_SIM_PROFILES_H_

// Measured profiles shipped with DistCA (../shared/data): causal attention
// time per document on H100 and NCCL bandwidth on H200, as lookup curves.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace corescape::bench {

// Forward time of a fused variable-length causal attention call on one GPU,
// from distca_compute_attn_H100.csv (64 query heads, 4 KV heads, head_dim
// 128; rows for tensor-parallel degree tp have 64/tp heads per GPU, cp = 1).
// The CSV times one document per call: t(L) = launch + pairs(L) * tau(L).
// launch is t at the shortest length (64 tokens, where the work is ~nil);
// tau(L) = (t(L) - launch) / pairs(L) is the per-pair time, interpolated
// log-log between measured lengths, held at the 512-token value below it
// (shorter rows are launch-dominated noise) and at the 65,536-token value
// above (the kernel is saturated there: per-pair time flat from 16k on).
class AttentionTimeModel {
 public:
  static absl::StatusOr<AttentionTimeModel> FromCsv(const std::string& path, int tp);

  double launch_ms() const { return launch_ms_; }
  double PerPairMs(double length) const;
  // One whole document alone in a call: the CSV's own number at its lengths.
  double DocumentMs(int64_t length) const;

 private:
  double launch_ms_ = 0;
  std::vector<double> log_length_;
  std::vector<double> log_per_pair_;
};

// Bus bandwidth (GB/s) of an NCCL collective from distca_nccl_perf_H200.csv
// (out-of-place), interpolated in log message size, clamped at the ends.
class NcclBandwidth {
 public:
  static absl::StatusOr<NcclBandwidth> FromCsv(const std::string& path, const std::string& op,
                                               int gpus);
  double BusGBps(double bytes) const;

 private:
  std::vector<double> log_size_;
  std::vector<double> gbps_;
};

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_SIM_PROFILES_H_
