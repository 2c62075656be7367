#include "runtime/data/tokenizer_factory.h"

#include "absl/strings/str_cat.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/gpt2_tokenizer.h"

namespace corescape::data {

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const TokenizerSpec& spec) {
  if (spec.kind == "byte") return std::make_unique<ByteTokenizer>();
  if (spec.kind == "gpt2") {
    if (spec.gpt2_encoder_path.empty() || spec.gpt2_vocab_path.empty()) {
      return absl::InvalidArgumentError(
          "the gpt2 tokenizer needs both encoder.json and vocab.bpe paths");
    }
    absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> gpt2 =
        Gpt2Tokenizer::Load(spec.gpt2_encoder_path, spec.gpt2_vocab_path);
    if (!gpt2.ok()) return gpt2.status();
    return std::unique_ptr<Tokenizer>(std::move(*gpt2));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tokenizer \"", spec.kind, "\" (expected byte or gpt2)"));
}

}  // namespace corescape::data
