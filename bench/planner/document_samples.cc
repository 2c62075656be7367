#include "bench/planner/document_samples.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace corescape::bench {

std::string DataDirectory(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    return absl::StrCat(workspace, "/../shared/data");
  }
  return "../shared/data";
}

absl::StatusOr<std::vector<int64_t>> LoadLengths(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_array() || json.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON list of lengths"));
  }
  std::vector<int64_t> lengths;
  lengths.reserve(json.size());
  for (const auto& value : json) {
    if (!value.is_number_integer() || value.get<int64_t>() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": lengths must be integers >= 1"));
    }
    lengths.push_back(value.get<int64_t>());
  }
  return lengths;
}

std::vector<std::vector<int64_t>> SampleRankBatches(const std::vector<int64_t>& lengths,
                                                    const BatchSampling& sampling) {
  std::mt19937_64 rng(sampling.seed);
  std::uniform_int_distribution<size_t> pick(0, lengths.size() - 1);
  std::vector<std::vector<int64_t>> batches(sampling.ranks);
  int64_t carried = 0;  // tokens of a document continuing from the last rank
  for (auto& batch : batches) {
    int64_t room = sampling.tokens_per_rank;
    while (room > 0) {
      if (carried == 0) {
        int64_t length = lengths[pick(rng)];
        if (sampling.max_length > 0) length = std::min(length, sampling.max_length);
        const int64_t r = std::max<int64_t>(sampling.round_to, 1);
        carried = (length + r - 1) / r * r;
      }
      const int64_t piece = std::min(carried, room);
      batch.push_back(piece);
      carried -= piece;
      room -= piece;
    }
  }
  return batches;
}

}  // namespace corescape::bench
