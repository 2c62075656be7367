#ifndef CORESCAPE_RUNTIME_DATA_GPT2_TOKENIZER_H_
#define CORESCAPE_RUNTIME_DATA_GPT2_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/data/tokenizer.h"

namespace corescape::data {

// GPT-2's byte-level BPE from its two files: encoder.json (token string ->
// id, tokens spelled in GPT-2's byte-to-unicode alphabet) and vocab.bpe
// (merges, best first, after a "#version" line). Pre-tokenization is
// Gpt2PreTokenize (exact for valid UTF-8). "<|endoftext|>" must be in
// encoder.json: it is the end-of-document id, and also bos_id() and
// pad_id() (GPT-2 has no others). Loading checks that every byte and every
// merge result has an id, so Encode never fails on any input.
class Gpt2Tokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Load(const std::string& encoder_json_path,
                                                            const std::string& vocab_bpe_path);
  // The same from the files' contents; the names only label errors.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromContents(
      absl::string_view encoder_json, absl::string_view vocab_bpe,
      const std::string& encoder_name = "encoder.json",
      const std::string& vocab_name = "vocab.bpe");

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }
  int32_t bos_id() const override { return end_of_text_id_; }
  int32_t eos_id() const override { return end_of_text_id_; }
  int32_t pad_id() const override { return end_of_text_id_; }
  std::string name() const override { return "gpt2"; }

  int merge_count() const { return static_cast<int>(merge_ranks_.size()); }

 private:
  Gpt2Tokenizer() = default;
  // BPE of one pre-token, appended to `ids`.
  void EncodePiece(absl::string_view piece, std::vector<int32_t>& ids) const;

  std::string byte_to_symbol_[256];                       // UTF-8 of each byte's stand-in
  absl::flat_hash_map<int32_t, unsigned char> symbol_to_byte_;  // code point -> byte
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;                  // "" where encoder.json has a gap
  std::vector<bool> id_defined_;
  absl::flat_hash_map<std::string, int32_t> merge_ranks_;  // key: left + '\n' + right
  int32_t end_of_text_id_ = -1;

  // Pre-token -> ids: text repeats words heavily.
  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_GPT2_TOKENIZER_H_
