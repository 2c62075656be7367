#include "tools/scape/rank_report.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "runtime/base/atomic_file.h"

namespace corescape::scape_tool {
namespace {

std::string Hex32(uint32_t value) { return absl::StrFormat("%08x", value); }

std::string Bits(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return absl::StrFormat("%016x", bits);
}

}  // namespace

nlohmann::json RankOutcomeToJson(const RankOutcome& o) {
  nlohmann::json j;
  j["rank"] = o.rank;
  j["world_size"] = o.world_size;
  j["parameters"] = o.parameters;
  j["dense_bytes_per_step"] = o.dense_bytes_per_step;
  j["initial_val_loss"] = o.initial_val_loss;
  j["final_val_loss"] = o.final_val_loss;
  j["final_val_loss_bits"] = Bits(o.final_val_loss);
  j["parameters_crc32c"] = Hex32(o.parameters_crc32c);
  j["first_moment_crc32c"] = Hex32(o.first_moment_crc32c);
  j["has_residual"] = o.has_residual;
  if (o.has_residual) {
    j["residual_crc32c"] = Hex32(o.residual_crc32c);
    j["last_sync_crc32c"] = Hex32(o.last_sync_crc32c);
  }
  j["coverage"] = o.coverage;
  j["mean_age"] = o.mean_age;
  j["residual_to_momentum"] = o.residual_to_momentum;
  j["seconds"] = o.seconds;
  nlohmann::json steps = nlohmann::json::array();
  for (const StepTrace& t : o.steps) {
    nlohmann::json s;
    s["step"] = t.step;
    s["train_loss"] = t.train_loss;
    s["train_loss_bits"] = Bits(t.train_loss);
    if (t.val_loss >= 0) s["val_loss"] = t.val_loss;
    s["lr"] = t.lr;
    s["dense"] = t.dense;
    s["synced_values"] = t.synced_values;
    s["bytes_sent"] = t.bytes_sent;
    s["bytes_received"] = t.bytes_received;
    s["window_bytes_sent"] = t.window_bytes_sent;
    s["window_bytes_received"] = t.window_bytes_received;
    s["mask_part_bytes"] = t.mask_part_bytes;
    s["step_seconds"] = t.step_seconds;
    s["comm_seconds"] = t.comm_seconds;
    s["control_seconds"] = t.control_seconds;
    s["elapsed_seconds"] = t.elapsed_seconds;
    steps.push_back(std::move(s));
  }
  j["steps"] = std::move(steps);
  return j;
}

nlohmann::json DriverConfigToJson(const DriverConfig& c) {
  nlohmann::json j;
  j["model"] = c.model;
  j["ranks"] = c.ranks;
  j["seq_len"] = c.seq_len;
  j["micro_batch"] = c.micro_batch;
  j["steps"] = c.steps;
  j["method"] = c.method;
  j["lr"] = c.lr;
  j["lr_warmup"] = c.lr_warmup;
  j["schedule"] = c.schedule;
  j["density"] = c.scape.density;
  j["dense_warmup"] = c.scape.dense_warmup_steps;
  j["seed"] = c.seed;
  j["scape_config"] = c.scape.ToString();
  return j;
}

absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  return WriteFileAtomically(path, j.dump(1) + "\n");
}

}  // namespace corescape::scape_tool
