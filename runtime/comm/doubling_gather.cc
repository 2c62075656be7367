#include "runtime/comm/doubling_gather.h"

#include <vector>

#include "glog/logging.h"
#include "runtime/comm/algorithm_util.h"

namespace corescape::comm {

bool UseDoublingGather(int world_size, int64_t total_bytes, int64_t doubling_bytes) {
  const bool power_of_two = world_size > 1 && (world_size & (world_size - 1)) == 0;
  return power_of_two && total_bytes <= doubling_bytes;
}

absl::Status RunDoublingGather(MessageChannel& channel, const BlockLayout& layout, char* buffer,
                               uint32_t first_message_index) {
  const int world = channel.world_size();
  const int rank = channel.rank();
  DCHECK_EQ(world & (world - 1), 0);
  // Bytes [offset, offset + bytes) of the `size` blocks starting at `first`.
  auto group_offset = [&](int first) { return layout.offset[first]; };
  auto group_bytes = [&](int first, int size) {
    const int last = first + size - 1;
    return layout.offset[last] + layout.bytes[last] - layout.offset[first];
  };
  uint32_t index = first_message_index;
  for (int mask = 1; mask < world; mask <<= 1, ++index) {
    const int partner = rank ^ mask;
    const int own_first = rank & ~(mask - 1);
    const int partner_first = partner & ~(mask - 1);
    std::vector<MessageChannel::MessageId> ids;
    // The receive goes up first: with rendezvous a send completes only once
    // the peer's receive is posted, and both partners do the same.
    if (auto s = Track(channel.Recv(partner, index, buffer + group_offset(partner_first),
                                    group_bytes(partner_first, mask)),
                       ids);
        !s.ok()) {
      return s;
    }
    if (auto s = Track(channel.Send(partner, index, buffer + group_offset(own_first),
                                    group_bytes(own_first, mask)),
                       ids);
        !s.ok()) {
      return s;
    }
    if (auto s = WaitAll(channel, ids); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace corescape::comm
