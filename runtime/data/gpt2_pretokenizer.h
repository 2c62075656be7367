#ifndef CORESCAPE_RUNTIME_DATA_GPT2_PRETOKENIZER_H_
#define CORESCAPE_RUNTIME_DATA_GPT2_PRETOKENIZER_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace corescape::data {

// Splits text into the pieces GPT-2 runs BPE on, reproducing its regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// by hand over UTF-8 (no regex library). Character classes are exact:
// whitespace is Unicode White_Space (the regex's \s), letters and numbers
// come from tables generated from the `regex` module GPT-2 uses
// (unicode_classes.h), so the split does not depend on the C library or
// locale. Bytes that are not part of valid UTF-8 count as "other", so any
// byte string splits, and the pieces round-trip.
// The pieces are views into `text` and concatenate back to it exactly.
std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_GPT2_PRETOKENIZER_H_
