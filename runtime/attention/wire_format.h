#ifndef CORESCAPE_RUNTIME_ATTENTION_WIRE_FORMAT_H_
#define CORESCAPE_RUNTIME_ATTENTION_WIRE_FORMAT_H_

// The messages workers and attention servers exchange for one executor call
// (an "exchange": one layer of one micro-batch, forward or backward), over a
// job's attention communicator (ranks 0..W-1 workers, W..W+S-1 servers).
//
// Per exchange, every worker sends (point to point, FIFO per (peer, tag)):
//   at the forward of layer 0 (a new micro-batch), to every other rank,
//   workers and servers:
//     kDocumentsHeaderTag  ExchangeHeader with num_documents = n
//     kDocumentsTag        n int64 document lengths, and from worker 0 the
//                          servers' speed weights (versioned_speed_weights.h); omitted
//                          when empty
//   then to every server:
//     kHeaderTag           ExchangeHeader (64 bytes), payload_bytes set
//     kPayloadTag          fp32 payload (omitted when empty)
// and every server answers every worker:
//   kReplyHeaderTag   ExchangeHeader (payload_bytes = its reply's size)
//   kReplyPayloadTag  fp32 payload (omitted when empty)
//
// Payloads, per (worker, server) in plan order (micro_batch_plan.h):
//   forward request:   Q rows of the worker's tasks there | K rows of each
//                      document prefix there | V rows of the same prefixes
//   forward reply:     O rows | LSE rows
//   backward request:  dO rows [| Q | K | V | O | LSE when the server does not
//                      keep the forward tensors (kCarriesForwardTensors)]
//   backward reply:    dQ rows | dK prefixes | dV prefixes, each prefix's
//                      gradient summed over the server's tasks of it
// fp32 on the wire: the result must match colocated attention to 1e-5.
//
// Ping-pong: a split micro-batch is two micro-batches m (flag
// kPingPongHalfA) and m + 1 (kPingPongHalfB), each with its own documents
// message; their exchanges alternate, A's then B's call of each pass and
// layer, and a worker has both in flight at once.

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/model/model_config.h"

namespace corescape::attention {

inline constexpr uint64_t kDocumentsHeaderTag = 1;
inline constexpr uint64_t kDocumentsTag = 2;
inline constexpr uint64_t kHeaderTag = 3;
inline constexpr uint64_t kPayloadTag = 4;
inline constexpr uint64_t kReplyHeaderTag = 5;
inline constexpr uint64_t kReplyPayloadTag = 6;

enum class Pass : uint8_t {
  kForward = 1,
  kBackward = 2,
  kEnd = 3,  // the worker is done with this communicator (job finished)
};
absl::string_view PassName(Pass pass);

// Header flags.
inline constexpr uint8_t kCarriesForwardTensors = 1;  // backward request resends Q/K/V/O/LSE
// Ping-pong: the micro-batch is the first (A) or second (B) half of a split
// one; the halves' calls alternate, A's then B's of each layer (at most one
// of the two bits; neither: a plain micro-batch).
inline constexpr uint8_t kPingPongHalfA = 2;
inline constexpr uint8_t kPingPongHalfB = 4;

// Upper bounds on every count and length a peer announces. DecodeHeader
// (and, for document lengths, CheckAnnouncedLengths) refuses anything
// beyond them, naming the field, before a receiver allocates or multiplies
// anything from it: with these, every row count × row width product stays
// far inside int64 and no buffer is sized by an unchecked number.
inline constexpr int32_t kMaxWireLayers = model::kMaxLayers;    // n_layers
inline constexpr int32_t kMaxWireHeads = model::kMaxHeads;      // n_heads, n_kv_heads
inline constexpr int32_t kMaxWireRowWidth = model::kMaxDModel;  // n_heads × head_dim
inline constexpr int32_t kMaxDocumentsPerMicroBatch = 1 << 24;  // num_documents
inline constexpr int32_t kMaxSpeedWeights = 1 << 16;  // num_speed_weights (servers per job)
// One worker's tokens in one micro-batch (the sum of its document lengths).
inline constexpr int64_t kMaxTokensPerMicroBatch = model::kMaxMicroBatchTokens;
// payload_bytes of one message (16 GiB).
inline constexpr int64_t kMaxPayloadBytes = int64_t{1} << 34;

struct ExchangeHeader {
  Pass pass = Pass::kForward;
  uint8_t flags = 0;
  uint64_t exchange = 0;     // executor calls since the communicator formed
  uint64_t micro_batch = 0;  // forwards of layer 0 since then, minus one
  int32_t layer = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  float softmax_scale = 0;
  int32_t num_documents = 0;  // documents header only: lengths that follow
  // Documents header of worker 0 only: speed weights after the lengths
  // (versioned_speed_weights.h), one per server.
  int32_t num_speed_weights = 0;
  // Size of the payload message that follows (0: none); in worker 0's
  // documents header, of the scheduler's plan in its documents message.
  int64_t payload_bytes = 0;

  bool operator==(const ExchangeHeader&) const = default;
  bool ping_pong() const { return (flags & (kPingPongHalfA | kPingPongHalfB)) != 0; }
  int half() const { return (flags & kPingPongHalfB) != 0 ? 1 : 0; }  // 0 when not ping-pong
  kernels::AttentionShape shape() const {
    return {n_heads, n_kv_heads, head_dim, softmax_scale};
  }
  // "forward layer 2 of micro-batch 7 (exchange 15)"; ping-pong halves:
  // "forward layer 2 of micro-batch 7, half B (exchange 15)"
  std::string Describe() const;
};

// The header of an executor's call `exchange`: `pass` of `layer` (of
// `n_layers`) of `micro_batch` over `shape`; kCarriesForwardTensors on a
// backward whose receiver did not keep the forward tensors; the ping-pong
// flag of `half` (-1: a plain call).
ExchangeHeader CallHeader(uint64_t exchange, int64_t micro_batch, int half, Pass pass, int layer,
                          int n_layers, const kernels::AttentionShape& shape,
                          bool keep_qkv_for_backward);

inline constexpr int64_t kHeaderBytes = 64;
using HeaderBytes = std::array<char, kHeaderBytes>;

HeaderBytes EncodeHeader(const ExchangeHeader& header);
// Checks magic, version, pass and every field's range (the bounds above);
// errors name the field and `peer`.
absl::StatusOr<ExchangeHeader> DecodeHeader(const HeaderBytes& bytes, absl::string_view peer);

// Checks that `got` is the exchange the receiver expects: same sequence
// numbers, pass, layer, model shape, flags. Names the peer and both sides.
absl::Status CheckHeaderMatches(const ExchangeHeader& expected, const ExchangeHeader& got,
                                absl::string_view peer);

// The job id of a job's attention communicator in an attention epoch:
// "<job>/attn", then "<job>/attn/<epoch>" after each re-plan over other
// servers. Peers check it at connect, so a participant still in an older
// epoch is refused, never mixed in.
std::string AttentionCommunicatorId(absl::string_view job_id, uint64_t attention_epoch);
// The id of an IN_PLACE job's attention communicator (its workers only):
// "<job>/attn-inplace".
std::string InPlaceAttentionCommunicatorId(absl::string_view job_id);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_WIRE_FORMAT_H_
