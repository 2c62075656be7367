// Fuzzes the data plane's control messages (goodbye, goodbye-ack, abort).
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/comm/control_message.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) { return comm::ControlMessage::Parse(input).ok(); }

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (comm::ControlType type :
       {comm::ControlType::kGoodbye, comm::ControlType::kGoodbyeAck, comm::ControlType::kAbort}) {
    comm::ControlMessage message;
    message.type = type;
    message.generation = 3;
    message.from_rank = 2;
    message.completed_collectives = 1234;
    if (type == comm::ControlType::kAbort) message.reason = "rank 2: out of memory";
    const comm::ControlMessage::Bytes bytes = message.Serialize();
    seeds.emplace_back(bytes.data(), bytes.size());
  }
  return seeds;
}

}  // namespace corescape::fuzz
