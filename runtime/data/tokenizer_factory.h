#ifndef CORESCAPE_RUNTIME_DATA_TOKENIZER_FACTORY_H_
#define CORESCAPE_RUNTIME_DATA_TOKENIZER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/data/tokenizer.h"

namespace corescape::data {

struct TokenizerSpec {
  std::string kind = "byte";      // "byte" or "gpt2"
  std::string gpt2_encoder_path;  // encoder.json, for "gpt2"
  std::string gpt2_vocab_path;    // vocab.bpe, for "gpt2"
};

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const TokenizerSpec& spec);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_TOKENIZER_FACTORY_H_
