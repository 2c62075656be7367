// Fuzzes the data plane's connection hello, the first bytes a stranger can
// send to a listening transport.
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/comm/hello_message.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) { return comm::HelloMessage::Parse(input).ok(); }

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (comm::HelloType type :
       {comm::HelloType::kHello, comm::HelloType::kAccept, comm::HelloType::kReject,
        comm::HelloType::kConfirm}) {
    comm::HelloMessage hello;
    hello.type = type;
    hello.generation = 7;
    hello.rank = 1;
    hello.world_size = 4;
    hello.settings_fingerprint = 0x0123456789abcdefULL;
    hello.job_id = "job-42";
    if (type == comm::HelloType::kHello || type == comm::HelloType::kAccept) {
      hello.nonce = std::string(comm::kHandshakeNonceBytes, '\x5a');
    }
    if (type == comm::HelloType::kAccept || type == comm::HelloType::kConfirm) {
      hello.proof = std::string(comm::kHandshakeProofBytes, '\xa5');
    }
    if (type == comm::HelloType::kReject) hello.reason = "stale generation 7";
    auto bytes = hello.Serialize();
    if (bytes.ok()) seeds.emplace_back(bytes->data(), bytes->size());
  }
  return seeds;
}

}  // namespace corescape::fuzz
