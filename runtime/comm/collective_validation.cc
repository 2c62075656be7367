// Argument checks for the collectives: run on the calling thread before an
// operation is queued, so bad input fails at once and consumes no sequence
// number.
#include "absl/strings/str_cat.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 46;  // 64 TiB: keeps offsets far from overflow

absl::Status CheckSizes(absl::Span<const int64_t> sizes, int world_size,
                        absl::string_view what, int64_t element_bytes) {
  if (static_cast<int>(sizes.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", sizes.size(),
                                                   " entries; world size is ", world_size));
  }
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || sizes[i] > kMaxBytes / element_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] = ", sizes[i], " is out of range"));
    }
    total += sizes[i];
    if (total > kMaxBytes / element_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " sums to more than 64 TiB"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSettings(const AlgorithmSettings& settings) {
  if (settings.small_bytes < 0) {
    return absl::InvalidArgumentError("small_bytes must be >= 0");
  }
  if (settings.segment_bytes < 4) {
    return absl::InvalidArgumentError("segment_bytes must be >= 4");
  }
  if (settings.doubling_bytes < 0) {
    return absl::InvalidArgumentError("doubling_bytes must be >= 0");
  }
  if (settings.ring_receive_depth < 0) {
    return absl::InvalidArgumentError("ring_receive_depth must be >= 0");
  }
  return absl::OkStatus();
}

std::string DescribeSettings(const AlgorithmSettings& settings) {
  return absl::StrCat("small=", settings.small_bytes, ";segment=", settings.segment_bytes,
                      ";doubling=", settings.doubling_bytes,
                      ";ring_receive_depth=", settings.ring_receive_depth);
}

absl::Status ValidateAllReduceArgs(const float* data, int64_t count) {
  if (count < 0 || count > kMaxBytes / 4) {
    return absl::InvalidArgumentError(absl::StrCat("count ", count, " is out of range"));
  }
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError("data is null");
  }
  return absl::OkStatus();
}

absl::Status ValidateAllGatherVArgs(int rank, int world_size, const void* send,
                                    int64_t send_bytes, const void* recv,
                                    absl::Span<const int64_t> recv_bytes_per_rank) {
  if (absl::Status s = CheckSizes(recv_bytes_per_rank, world_size, "recv_bytes_per_rank", 1);
      !s.ok()) {
    return s;
  }
  if (send_bytes != recv_bytes_per_rank[rank]) {
    return absl::InvalidArgumentError(
        absl::StrCat("send_bytes ", send_bytes, " differs from recv_bytes_per_rank[", rank,
                     "] = ", recv_bytes_per_rank[rank]));
  }
  if (send_bytes > 0 && send == nullptr) return absl::InvalidArgumentError("send is null");
  int64_t total = 0;
  for (int64_t b : recv_bytes_per_rank) total += b;
  if (total > 0 && recv == nullptr) return absl::InvalidArgumentError("recv is null");
  return absl::OkStatus();
}

absl::Status ValidateReduceScatterArgs(int rank, int world_size, const float* send,
                                       const float* recv,
                                       absl::Span<const int64_t> counts_per_rank) {
  if (absl::Status s = CheckSizes(counts_per_rank, world_size, "counts_per_rank", 4); !s.ok()) {
    return s;
  }
  int64_t total = 0;
  for (int64_t c : counts_per_rank) total += c;
  if (total > 0 && send == nullptr) return absl::InvalidArgumentError("send is null");
  if (counts_per_rank[rank] > 0 && recv == nullptr) {
    return absl::InvalidArgumentError("recv is null");
  }
  if (counts_per_rank[rank] > 0 && recv != nullptr && send != nullptr) {
    const char* s = reinterpret_cast<const char*>(send);
    const char* r = reinterpret_cast<const char*>(recv);
    if (r < s + total * 4 && s < r + counts_per_rank[rank] * 4) {
      return absl::InvalidArgumentError("recv overlaps send");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBroadcastArgs(int world_size, const void* data, int64_t bytes,
                                   int root) {
  if (root < 0 || root >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("root ", root, " outside world size ", world_size));
  }
  if (bytes < 0 || bytes > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("bytes ", bytes, " is out of range"));
  }
  if (bytes > 0 && data == nullptr) return absl::InvalidArgumentError("data is null");
  return absl::OkStatus();
}

}  // namespace corescape::comm
