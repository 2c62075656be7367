// Fuzzes the decoder of SCAPE's mask partitions (what a rank receives from
// every other rank each step) in all four encodings, and checks that what
// it accepts is a valid mask of the range that re-encodes to itself.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/optim/mask_codec.h"
#include "fuzz/fuzz_target.h"

namespace {

using namespace corescape::optim;

constexpr int64_t kBegin = 4096, kEnd = kBegin + 3000;

const std::vector<int64_t>& Previous() {
  static const std::vector<int64_t> previous = [] {
    std::vector<int64_t> p;
    for (int64_t i = kBegin; i < kEnd; i += 7) p.push_back(i);
    return p;
  }();
  return previous;
}

}  // namespace

bool corescape::fuzz::ParseFuzzInput(absl::string_view input) {
  const auto* data = reinterpret_cast<const uint8_t*>(input.data());
  const size_t size = input.size();
  auto decoded = DecodeMaskPartition(input,
                                     kBegin, kEnd, &Previous());
  if (!decoded.ok()) return false;
  const std::vector<int64_t>& indices = decoded->indices;
  // Accepted means: sorted, distinct, inside the range, as many as announced.
  if (static_cast<int64_t>(indices.size()) != decoded->header.count) std::abort();
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < kBegin || indices[i] >= kEnd) std::abort();
    if (i > 0 && indices[i] <= indices[i - 1]) std::abort();
  }
  // And it survives a round trip in the encoding it came in.
  const MaskPartitionView view{kBegin, kEnd, indices};
  auto again = EncodeMaskPartition(decoded->header, view, &Previous(), decoded->header.encoding);
  if (!again.ok()) std::abort();
  auto redecoded = DecodeMaskPartition(*again, kBegin, kEnd, &Previous());
  if (!redecoded.ok() || redecoded->indices != indices) std::abort();
  // The automatic choice is no larger and decodes to the same mask (its
  // change-from-previous is written within a bound and may give up).
  auto automatic = EncodeMaskPartition(decoded->header, view, &Previous());
  if (!automatic.ok() || automatic->size() > again->size()) std::abort();
  auto from_automatic = DecodeMaskPartition(*automatic, kBegin, kEnd, &Previous());
  if (!from_automatic.ok() || from_automatic->indices != indices) std::abort();
  return true;
}

namespace corescape::fuzz {

std::vector<std::string> FuzzSeeds() {
  std::vector<int64_t> mask;
  for (int64_t i = kBegin; i < kEnd; i += 13) mask.push_back(i);
  for (int64_t i = kBegin + 1000; i < kBegin + 1040; ++i) mask.push_back(i);
  std::sort(mask.begin(), mask.end());
  mask.erase(std::unique(mask.begin(), mask.end()), mask.end());
  const MaskPartitionView view{kBegin, kEnd, mask};
  std::vector<std::string> seeds;
  for (MaskEncoding encoding : {MaskEncoding::kBitmask, MaskEncoding::kIndexList,
                                MaskEncoding::kDeltaIndices, MaskEncoding::kChangeFromPrevious}) {
    MaskPartitionHeader header;
    header.mask_epoch = 2;
    header.step = 17;
    header.rank = 1;
    header.count = static_cast<int64_t>(mask.size());
    auto encoded = EncodeMaskPartition(header, view, &Previous(), encoding);
    if (encoded.ok()) seeds.push_back(*encoded);
  }
  MaskPartitionHeader empty;
  auto encoded = EncodeMaskPartition(empty, {kBegin, kEnd, {}}, nullptr);
  if (encoded.ok()) seeds.push_back(*encoded);
  return seeds;
}

}  // namespace corescape::fuzz
