#include "runtime/optim/scape_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape::optim {

const char* ScapeRuleName(ScapeRule rule) {
  switch (rule) {
    case ScapeRule::kCatchUp: return "catch-up";
    case ScapeRule::kReference: return "reference";
  }
  return "?";
}

absl::StatusOr<ScapeRule> ParseScapeRule(absl::string_view name) {
  for (ScapeRule rule : {ScapeRule::kCatchUp, ScapeRule::kReference}) {
    if (name == ScapeRuleName(rule)) return rule;
  }
  if (name == "reconstructed" || name == "linearized") {
    return absl::InvalidArgumentError(absl::StrCat(
        "SCAPE rule '", name,
        "' was a research variant that lost the formulation search and is no longer part of "
        "corescape (its results: docs/scape_search.md; commit 5e89607 still runs it); rules: "
        "catch-up, reference"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown SCAPE rule '", name, "' (catch-up, reference)"));
}

absl::Status ScapeConfig::Validate() const {
  if (absl::Status s = CheckDensity(density); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scape: density ", s.message()));
  }
  if (dense_warmup_steps < 0) return absl::InvalidArgumentError("scape: dense_warmup_steps < 0");
  if (dense_refresh_interval < 0) return absl::InvalidArgumentError("scape: dense_refresh_interval < 0");
  if (residual_sync_period < 0) return absl::InvalidArgumentError("scape: residual_sync_period < 0");
  if (absl::Status s = density_schedule.Validate(); !s.ok()) return s;
  if (!(catch_up_exponent >= 0 && catch_up_exponent <= 1)) {
    return absl::InvalidArgumentError("scape: catch_up_exponent must be in [0, 1]");
  }
  if (PerTensor() && scope == MaskScope::kWholeBuffer) {
    return absl::InvalidArgumentError("scape: per-tensor masks need partitioned masks (scape, not scape-global)");
  }
  if (dense_small_tensors && !PerTensor()) {
    return absl::InvalidArgumentError("scape: dense_small_tensors needs per-tensor masks");
  }
  if (!(normalizer_beta >= 0 && normalizer_beta < 1)) {
    return absl::InvalidArgumentError("scape: normalizer_beta must be in [0, 1)");
  }
  if (!(adams.beta1 >= 0 && adams.beta1 < 1) || !(adams.beta2 >= 0 && adams.beta2 < 1) ||
      !(adams.epsilon > 0)) {
    return absl::InvalidArgumentError("scape: AdamS betas must be in [0, 1), epsilon > 0");
  }
  return absl::OkStatus();
}

std::string ScapeConfig::ToString() const {
  // The fields after rule= that read as constants (off, explore, forecast,
  // refresh, lrw, the second catch-up exponent, decayed) are the removed
  // research knobs at the values every shipped configuration had: the text
  // stays what checkpoints written before their removal hold.
  return absl::StrFormat(
      "b1=%.17g b2=%.17g eps=%.17g wd=%.17g d=%.17g warmup=%d refresh_every=%d scope=%d rule=%s off=0 stat=%d "
      "schedule={%s} explore=0 forecast=0 rho=%.17g refresh=1 lrw=0 catchup=%.17g/-1 decayed=0 residual_sync_period=%d "
      "per_tensor=%d dense_small=%d clip=%.17g",
      adams.beta1, adams.beta2, adams.epsilon, adams.weight_decay, density, WarmupSteps(),
      dense_refresh_interval, static_cast<int>(scope), ScapeRuleName(rule),
      static_cast<int>(statistic), density_schedule.ToString(), normalizer_beta, catch_up_exponent,
      residual_sync_period, PerTensor() ? 1 : 0, dense_small_tensors ? 1 : 0, grad_clip);
}

int64_t ScapeConfig::WarmupSteps() const {
  return rule == ScapeRule::kReference ? dense_warmup_steps
                                       : std::max<int64_t>(1, dense_warmup_steps);
}

bool ScapeConfig::DenseAt(int64_t step) const {
  const int64_t warmup = WarmupSteps();
  if (DenseBySchedule(step, warmup, density, density_schedule)) return true;
  if (std::find(forced_dense_steps.begin(), forced_dense_steps.end(), step) !=
      forced_dense_steps.end()) {
    return true;
  }
  return dense_refresh_interval > 0 && (step - warmup + 1) % dense_refresh_interval == 0;
}

absl::StatusOr<ParameterPartition> ScapePartition(const ScapeConfig& config,
                                                  const std::vector<int64_t>& tensor_bounds,
                                                  int world_size) {
  if (config.PerTensor()) return ParameterPartition::TensorAligned(tensor_bounds, world_size);
  if (tensor_bounds.empty()) return absl::InvalidArgumentError("partition: no tensor bounds");
  return ParameterPartition::Balanced(tensor_bounds.back(), world_size);
}

absl::StatusOr<ParameterPartition> ScapePartitionOfBuffer(const ScapeConfig& config,
                                                          const std::vector<int64_t>& tensor_bounds,
                                                          int64_t n, int world_size) {
  if (tensor_bounds.empty() || tensor_bounds.front() != 0 || tensor_bounds.back() != n ||
      !std::is_sorted(tensor_bounds.begin(), tensor_bounds.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape: tensor bounds must rise from 0 to the buffer's ", n, " entries"));
  }
  auto partition = config.partition_bounds.empty()
                       ? ScapePartition(config, tensor_bounds, world_size)
                       : ParameterPartition::FromBounds(config.partition_bounds, n, world_size);
  if (!partition.ok()) return partition.status();
  if (config.PerTensor()) {
    if (absl::Status s = CheckTensorAligned(*partition, tensor_bounds); !s.ok()) return s;
  }
  return partition;
}

}  // namespace corescape::optim
