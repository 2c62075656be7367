#include "runtime/data/byte_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace corescape::data {

absl::StatusOr<std::vector<int32_t>> ByteTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

absl::StatusOr<std::string> ByteTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(id));
    } else if (id == kBos) {
      text += "<|bos|>";
    } else if (id == kEos) {
      text += "<|eos|>";
    } else if (id == kPad) {
      text += "<|pad|>";
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", i, " is ", id, ", outside the byte vocabulary [0, ", kVocabSize, ")"));
    }
  }
  return text;
}

}  // namespace corescape::data
