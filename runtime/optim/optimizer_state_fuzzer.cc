// Fuzzes optimizer state restore (a checkpoint's optimizer blob) for every
// optimizer of the registry, then takes a step and saves again from
// whatever was accepted, so a restored state that is inconsistent (mask
// indices, sizes) shows up as a crash. Input: one byte choosing the
// optimizer, then the blob without its checksum, which is resealed here so
// that mutations reach past it (the raw bytes are tried as well).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/optimizer_state.h"
#include "fuzz/fuzz_target.h"

namespace {

using namespace corescape::optim;

constexpr int64_t kSize = 96;

const std::vector<std::string>& Names() {
  static const std::vector<std::string> names = OptimizerNames();
  return names;
}

// One rank (world 1) with its optimizer.
struct Rank {
  InProcessHub hub{1};
  InProcessRankGroup group{&hub, 0};
  std::unique_ptr<DataParallelOptimizer> optimizer;
  std::vector<float> params = std::vector<float>(kSize, 0.5f);

  explicit Rank(const std::string& name) {
    OptimizerOptions options;
    options.name = name;
    options.scape.density = 0.25;
    options.scape.dense_warmup_steps = 1;
    auto created = CreateOptimizer(options, &group, DecayMask(kSize, 1));
    if (created.ok()) optimizer = *std::move(created);
  }

  absl::Status Step(int64_t step) {
    std::vector<float> grads(kSize);
    for (int64_t i = 0; i < kSize; ++i) grads[i] = std::sin(0.37 * i + step) * 0.1f;
    return optimizer->Step(params.data(), grads.data(), kSize, 0.01);
  }
};

std::string Seal(absl::string_view body) {
  std::string blob(body);
  const uint64_t checksum = StateChecksum(blob);
  blob.append(reinterpret_cast<const char*>(&checksum), sizeof(checksum));
  return blob;
}

}  // namespace

bool corescape::fuzz::ParseFuzzInput(absl::string_view input) {
  const auto* data = reinterpret_cast<const uint8_t*>(input.data());
  const size_t size = input.size();
  if (size < 1) return false;
  Rank rank(Names()[data[0] % Names().size()]);
  if (rank.optimizer == nullptr) std::abort();
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  rank.optimizer->RestoreState(body).IgnoreError();
  if (!rank.optimizer->RestoreState(Seal(body)).ok()) return false;
  // A refused step is fine; a crash or an out-of-bounds access is not.
  rank.Step(1000).IgnoreError();
  rank.optimizer->SaveState().IgnoreError();
  return true;
}

namespace corescape::fuzz {

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (size_t i = 0; i < Names().size(); ++i) {
    Rank rank(Names()[i]);
    if (rank.optimizer == nullptr) continue;
    for (int64_t step = 0; step < 4; ++step) rank.Step(step).IgnoreError();
    auto saved = rank.optimizer->SaveState();
    if (!saved.ok() || saved->size() < sizeof(uint64_t)) continue;
    seeds.push_back(std::string(1, static_cast<char>(i)) +
                    saved->substr(0, saved->size() - sizeof(uint64_t)));
  }
  return seeds;
}

}  // namespace corescape::fuzz
