#include "runtime/optim/rank_group.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace corescape::optim {

absl::Status RankGroup::AllReduceSumOnDevice(float*, int64_t) {
  return absl::UnimplementedError(
      "AllReduceSumOnDevice: this group's collectives read host memory, not a GPU's");
}

absl::Status RankGroup::AllGatherInt64(int64_t value, absl::Span<int64_t> values) {
  if (static_cast<int>(values.size()) != world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("AllGatherInt64: ", values.size(),
                                                   " slots for ", world_size(), " ranks"));
  }
  const std::vector<int64_t> sizes(world_size(), sizeof(int64_t));
  return AllGatherV(&value, sizeof(int64_t), values.data(), sizes);
}

}  // namespace corescape::optim
