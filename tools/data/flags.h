#ifndef CORESCAPE_TOOLS_DATA_FLAGS_H_
#define CORESCAPE_TOOLS_DATA_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, input);
ABSL_DECLARE_FLAG(std::string, delimiter);
ABSL_DECLARE_FLAG(std::string, output);
ABSL_DECLARE_FLAG(double, validation_fraction);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int64_t, max_shard_tokens);
ABSL_DECLARE_FLAG(int32_t, progress_seconds);
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, gpt2_encoder);
ABSL_DECLARE_FLAG(std::string, gpt2_vocab);
ABSL_DECLARE_FLAG(int32_t, documents);
ABSL_DECLARE_FLAG(int32_t, max_chars);

#endif  // CORESCAPE_TOOLS_DATA_FLAGS_H_
