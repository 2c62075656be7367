#ifndef CORESCAPE_RUNTIME_DATA_BYTE_TOKENIZER_H_
#define CORESCAPE_RUNTIME_DATA_BYTE_TOKENIZER_H_

#include "runtime/data/tokenizer.h"

namespace corescape::data {

// The default tokenizer: every byte of the text is one token (ids 0..255,
// so any byte string, valid UTF-8 or not, round-trips), plus three specials:
//   256 <|bos|>   257 <|eos|> (end of document)   258 <|pad|>
// vocab_size() is 259. Decode renders the specials by those names.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kPad = 258;
  static constexpr int32_t kVocabSize = 259;

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  int32_t pad_id() const override { return kPad; }
  std::string name() const override { return "byte"; }
};

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_BYTE_TOKENIZER_H_
