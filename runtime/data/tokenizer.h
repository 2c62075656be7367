#ifndef CORESCAPE_RUNTIME_DATA_TOKENIZER_H_
#define CORESCAPE_RUNTIME_DATA_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace corescape::data {

// Text <-> token ids. Implementations are immutable after construction and
// safe to share between threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Plain text only: special-token spellings such as "<|endoftext|>" inside
  // `text` are encoded as ordinary text, never as the special id.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const = 0;
  // Fails on an id outside [0, vocab_size()), naming its index.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;  // also marks the end of a document
  virtual int32_t pad_id() const = 0;
  virtual std::string name() const = 0;  // "byte" or "gpt2"
};

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_TOKENIZER_H_
