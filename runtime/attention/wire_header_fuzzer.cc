// Fuzzes what an attention server reads from a worker before it allocates
// anything: the 64-byte exchange header, and after a forward of layer 0
// worker 0's documents message (lengths, speed weights, the scheduler's
// plan), planned as the server plans it, with the request sizes it derives.
// Input: header bytes, then the message's int64 words.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/documents_message.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/wire_format.h"

namespace {

using namespace corescape::attention;

constexpr int32_t kServers = 2;

// The server's reading of worker 0's documents message; false if refused.
bool ServeDocuments(const ExchangeHeader& header, const std::vector<int64_t>& words) {
  const DocumentsFormat format = DocumentsFormat::Disaggregated(kServers);
  auto expected = ExpectedDocumentsWords(header, 0, format, "fuzz");
  if (!expected.ok() || *expected != static_cast<int64_t>(words.size())) return false;
  auto message = DecodeDocumentsMessage(words, header, format, "fuzz");
  if (!message.ok()) return false;
  PlanOptions options;
  options.servers = kServers;
  auto plan = PlanAnnouncedMicroBatch({message->lengths}, *message, header.shape(), options,
                                      "fuzz", nullptr);
  if (!plan.ok()) return true;  // refused lengths: a clean error
  const RowWidths widths = RowWidths::Of(header.shape());
  for (const auto& shares : plan->shares) {
    for (const WorkerShare& share : shares) {
      // What the server compares payload_bytes with, then allocates.
      if (ForwardRequestFloats(share, widths) < 0 ||
          BackwardRequestFloats(share, widths, true) < 0) {
        std::abort();
      }
    }
  }
  return true;
}

}  // namespace

bool corescape::fuzz::ParseFuzzInput(absl::string_view input) {
  const auto* data = reinterpret_cast<const uint8_t*>(input.data());
  const size_t size = input.size();
  if (size < static_cast<size_t>(kHeaderBytes)) return false;
  HeaderBytes bytes;
  std::memcpy(bytes.data(), data, kHeaderBytes);
  auto header = DecodeHeader(bytes, "fuzz");
  if (!header.ok()) return false;
  // Whatever decodes encodes to the same bytes.
  if (EncodeHeader(*header) != bytes) std::abort();
  if (header->pass == Pass::kForward && header->layer == 0) {
    std::vector<int64_t> words((size - kHeaderBytes) / sizeof(int64_t));
    if (!words.empty()) {
      std::memcpy(words.data(), data + kHeaderBytes, words.size() * sizeof(int64_t));
    }
    if (!ServeDocuments(*header, words)) return false;
  }
  return true;
}

namespace corescape::fuzz {

std::vector<std::string> FuzzSeeds() {
  ExchangeHeader forward;
  forward.pass = Pass::kForward;
  forward.exchange = 12;
  forward.micro_batch = 3;
  forward.n_layers = 2;
  forward.n_heads = 4;
  forward.n_kv_heads = 2;
  forward.head_dim = 8;
  forward.softmax_scale = 0.35f;
  DocumentsMessage documents;
  documents.lengths = {40, 7, 300, 1};
  documents.weights = VersionedSpeedWeights{3, {1.25, 0.75}};
  ShippedPlan plan;
  plan.step = 3;
  plan.speed_weights_version = 3;
  plan.tasks = {{0, 0, 0, 40, 0}, {0, 1, 0, 7, 1}, {0, 2, 0, 150, 0},
                {0, 2, 150, 300, 1}, {0, 3, 0, 1, 1}};
  auto seed = [](const ExchangeHeader& header, const std::vector<int64_t>& words) {
    const HeaderBytes bytes = EncodeHeader(header);
    std::string out(bytes.begin(), bytes.end());
    out.append(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(int64_t));
    return out;
  };
  ExchangeHeader with_plan = forward;
  const std::vector<int64_t> planned = EncodeDocumentsMessage(documents, with_plan);
  documents.plan.reset();
  ExchangeHeader without_plan = forward;
  const std::vector<int64_t> unplanned = EncodeDocumentsMessage(documents, without_plan);
  ExchangeHeader backward = forward;
  backward.pass = Pass::kBackward;
  backward.layer = 1;
  backward.flags = kCarriesForwardTensors | kPingPongHalfB;
  backward.payload_bytes = 4096;
  ExchangeHeader end;
  end.pass = Pass::kEnd;
  end.exchange = 99;
  return {seed(with_plan, planned), seed(without_plan, unplanned), seed(backward, {}),
          seed(end, {})};
}

}  // namespace corescape::fuzz
