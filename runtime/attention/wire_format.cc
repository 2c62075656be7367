#include "runtime/attention/wire_format.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape::attention {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the attention wire format is little-endian");

constexpr uint32_t kMagic = 0x54415343;  // "CSAT"
constexpr uint16_t kVersion = 3;  // 3: the scheduler's plan in worker 0's documents message

// Fixed offsets: the layout is the wire format, not the struct's.
struct Field {
  size_t offset;
  size_t size;
};
constexpr Field kMagicField{0, 4}, kVersionField{4, 2}, kPassField{6, 1}, kFlagsField{7, 1},
    kExchangeField{8, 8}, kMicroBatchField{16, 8}, kLayerField{24, 4}, kLayersField{28, 4},
    kHeadsField{32, 4}, kKvHeadsField{36, 4}, kHeadDimField{40, 4}, kScaleField{44, 4},
    kDocumentsField{48, 4}, kSpeedWeightsField{52, 4}, kPayloadField{56, 8};

template <typename T>
void Put(HeaderBytes& bytes, Field field, T value) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(bytes.data() + field.offset, &value, sizeof(T));
}
template <typename T>
T Get(const HeaderBytes& bytes, Field field) {
  T value;
  std::memcpy(&value, bytes.data() + field.offset, sizeof(T));
  return value;
}

}  // namespace

absl::string_view PassName(Pass pass) {
  switch (pass) {
    case Pass::kForward: return "forward";
    case Pass::kBackward: return "backward";
    case Pass::kEnd: return "end";
  }
  return "unknown";
}

std::string ExchangeHeader::Describe() const {
  if (pass == Pass::kEnd) return absl::StrCat("end of job (exchange ", exchange, ")");
  return absl::StrFormat("%s layer %d of micro-batch %d%s (exchange %d)", PassName(pass), layer,
                         micro_batch, ping_pong() ? (half() == 0 ? ", half A" : ", half B") : "",
                         exchange);
}

ExchangeHeader CallHeader(uint64_t exchange, int64_t micro_batch, int half, Pass pass, int layer,
                          int n_layers, const kernels::AttentionShape& shape,
                          bool keep_qkv_for_backward) {
  ExchangeHeader h;
  h.exchange = exchange;
  h.micro_batch = static_cast<uint64_t>(micro_batch);
  h.pass = pass;
  h.flags = pass == Pass::kBackward && !keep_qkv_for_backward ? kCarriesForwardTensors : 0;
  if (half >= 0) h.flags |= half == 0 ? kPingPongHalfA : kPingPongHalfB;
  h.layer = layer;
  h.n_layers = n_layers;
  h.n_heads = shape.n_heads;
  h.n_kv_heads = shape.n_kv_heads;
  h.head_dim = shape.head_dim;
  h.softmax_scale = shape.softmax_scale;
  return h;
}

HeaderBytes EncodeHeader(const ExchangeHeader& h) {
  HeaderBytes bytes{};
  Put<uint32_t>(bytes, kMagicField, kMagic);
  Put<uint16_t>(bytes, kVersionField, kVersion);
  Put<uint8_t>(bytes, kPassField, static_cast<uint8_t>(h.pass));
  Put<uint8_t>(bytes, kFlagsField, h.flags);
  Put<uint64_t>(bytes, kExchangeField, h.exchange);
  Put<uint64_t>(bytes, kMicroBatchField, h.micro_batch);
  Put<int32_t>(bytes, kLayerField, h.layer);
  Put<int32_t>(bytes, kLayersField, h.n_layers);
  Put<int32_t>(bytes, kHeadsField, h.n_heads);
  Put<int32_t>(bytes, kKvHeadsField, h.n_kv_heads);
  Put<int32_t>(bytes, kHeadDimField, h.head_dim);
  Put<float>(bytes, kScaleField, h.softmax_scale);
  Put<int32_t>(bytes, kDocumentsField, h.num_documents);
  Put<int32_t>(bytes, kSpeedWeightsField, h.num_speed_weights);
  Put<int64_t>(bytes, kPayloadField, h.payload_bytes);
  return bytes;
}

absl::StatusOr<ExchangeHeader> DecodeHeader(const HeaderBytes& bytes, absl::string_view peer) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("attention exchange header from ", peer, ": ", what));
  };
  if (Get<uint32_t>(bytes, kMagicField) != kMagic) {
    return bad(absl::StrFormat("bad magic 0x%08x (not an attention header)",
                               Get<uint32_t>(bytes, kMagicField)));
  }
  if (const uint16_t version = Get<uint16_t>(bytes, kVersionField); version != kVersion) {
    return bad(absl::StrCat("version ", version, ", this build speaks ", kVersion));
  }
  ExchangeHeader h;
  const uint8_t pass = Get<uint8_t>(bytes, kPassField);
  if (pass < 1 || pass > 3) return bad(absl::StrCat("unknown pass ", pass));
  h.pass = static_cast<Pass>(pass);
  h.flags = Get<uint8_t>(bytes, kFlagsField);
  if (h.flags & ~(kCarriesForwardTensors | kPingPongHalfA | kPingPongHalfB)) {
    return bad(absl::StrCat("unknown flags ", h.flags));
  }
  if ((h.flags & kPingPongHalfA) && (h.flags & kPingPongHalfB)) {
    return bad("both ping-pong halves flagged");
  }
  h.exchange = Get<uint64_t>(bytes, kExchangeField);
  h.micro_batch = Get<uint64_t>(bytes, kMicroBatchField);
  h.layer = Get<int32_t>(bytes, kLayerField);
  h.n_layers = Get<int32_t>(bytes, kLayersField);
  h.n_heads = Get<int32_t>(bytes, kHeadsField);
  h.n_kv_heads = Get<int32_t>(bytes, kKvHeadsField);
  h.head_dim = Get<int32_t>(bytes, kHeadDimField);
  h.softmax_scale = Get<float>(bytes, kScaleField);
  h.num_documents = Get<int32_t>(bytes, kDocumentsField);
  h.num_speed_weights = Get<int32_t>(bytes, kSpeedWeightsField);
  h.payload_bytes = Get<int64_t>(bytes, kPayloadField);
  if (h.pass == Pass::kEnd) return h;
  if (h.n_layers < 1 || h.n_layers > kMaxWireLayers) {
    return bad(absl::StrCat("n_layers ", h.n_layers, " is not in [1, ", kMaxWireLayers, "]"));
  }
  if (h.layer < 0 || h.layer >= h.n_layers) {
    return bad(absl::StrCat("layer ", h.layer, " of ", h.n_layers));
  }
  if (h.n_heads < 1 || h.n_heads > kMaxWireHeads) {
    return bad(absl::StrCat("bad attention shape: n_heads ", h.n_heads, " is not in [1, ",
                            kMaxWireHeads, "]"));
  }
  if (h.n_kv_heads < 1 || h.n_heads % h.n_kv_heads != 0) {
    return bad(absl::StrCat("bad attention shape: n_kv_heads ", h.n_kv_heads,
                            " does not divide n_heads ", h.n_heads));
  }
  if (h.head_dim < 1 || int64_t{h.n_heads} * h.head_dim > kMaxWireRowWidth) {
    return bad(absl::StrCat("bad attention shape: head_dim ", h.head_dim, " with ", h.n_heads,
                            " heads is not in [1, ", kMaxWireRowWidth, " / n_heads]"));
  }
  if (!(std::isfinite(h.softmax_scale) && h.softmax_scale > 0)) {
    return bad(absl::StrCat("bad attention shape: softmax_scale ", h.softmax_scale,
                            " is not finite and positive"));
  }
  if (h.num_documents < 0 || h.num_documents > kMaxDocumentsPerMicroBatch) {
    return bad(absl::StrCat("num_documents ", h.num_documents, " is not in [0, ",
                            kMaxDocumentsPerMicroBatch, "]"));
  }
  if (h.num_documents > 0 && !(h.pass == Pass::kForward && h.layer == 0)) {
    return bad("documents are sent only with the forward of layer 0");
  }
  if (h.num_speed_weights < 0 || h.num_speed_weights > kMaxSpeedWeights) {
    return bad(absl::StrCat("num_speed_weights ", h.num_speed_weights, " is not in [0, ",
                            kMaxSpeedWeights, "]"));
  }
  if (h.num_speed_weights > 0 && !(h.pass == Pass::kForward && h.layer == 0)) {
    return bad("speed weights are sent only with the forward of layer 0");
  }
  if (h.payload_bytes < 0 || h.payload_bytes > kMaxPayloadBytes ||
      h.payload_bytes % sizeof(float) != 0) {
    return bad(absl::StrCat("payload_bytes ", h.payload_bytes,
                            " is not a whole number of floats in [0, ", kMaxPayloadBytes, "]"));
  }
  return h;
}

absl::Status CheckHeaderMatches(const ExchangeHeader& expected, const ExchangeHeader& got,
                                absl::string_view peer) {
  ExchangeHeader comparable = got;
  comparable.num_documents = expected.num_documents;
  comparable.num_speed_weights = expected.num_speed_weights;
  comparable.payload_bytes = expected.payload_bytes;
  if (comparable == expected) return absl::OkStatus();
  std::string detail;
  if (got.exchange != expected.exchange || got.pass != expected.pass ||
      got.layer != expected.layer || got.micro_batch != expected.micro_batch) {
    detail = "the two sides are out of step";
  } else if (got.ping_pong() != expected.ping_pong() || got.half() != expected.half()) {
    detail = "they disagree on ping-pong halves (attention.ping_pong)";
  } else if (got.flags != expected.flags) {
    detail = "they disagree on resending forward tensors for backward (keep_qkv_for_backward)";
  } else {
    detail = "they disagree on the model's attention shape";
  }
  return absl::FailedPreconditionError(
      absl::StrCat("attention exchange mismatch with ", peer, ": expected ", expected.Describe(),
                   ", got ", got.Describe(), "; ", detail));
}

std::string AttentionCommunicatorId(absl::string_view job_id, uint64_t attention_epoch) {
  if (attention_epoch == 0) return absl::StrCat(job_id, "/attn");
  return absl::StrCat(job_id, "/attn/", attention_epoch);
}

std::string InPlaceAttentionCommunicatorId(absl::string_view job_id) {
  return absl::StrCat(job_id, "/attn-inplace");
}

}  // namespace corescape::attention
