#ifndef CORESCAPE_RUNTIME_DATA_SHARD_SET_H_
#define CORESCAPE_RUNTIME_DATA_SHARD_SET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_reader.h"
#include "runtime/data/tokenizer_factory.h"

namespace corescape::data {

// The documents of one or more shards, numbered 0.. across them in the
// order the shards are given. Immutable; share it between loaders.
class ShardSet {
 public:
  // Opens (and so fully validates) every shard; all must share a vocabulary.
  static absl::StatusOr<std::shared_ptr<const ShardSet>> Open(const std::vector<std::string>& paths);

  int64_t document_count() const { return static_cast<int64_t>(document_lengths_.size()); }
  int64_t token_count() const { return token_count_; }
  uint32_t vocab_size() const { return vocab_size_; }
  int64_t DocumentLength(int64_t d) const { return document_lengths_[d]; }
  TokenSpan Document(int64_t d) const;
  const std::vector<std::unique_ptr<ShardReader>>& shards() const { return shards_; }

 private:
  ShardSet() = default;

  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<int64_t> first_document_;  // per shard, plus the total at the end
  std::vector<int64_t> document_lengths_;
  int64_t token_count_ = 0;
  uint32_t vocab_size_ = 0;
};

// One split ("train" or "validation") of a prepared dataset directory,
// checked against its manifest (vocabulary and per-shard counts).
absl::StatusOr<std::shared_ptr<const ShardSet>> OpenDatasetSplit(const std::string& dataset_dir,
                                                                 absl::string_view split);

// The tokenizer a dataset was prepared with (GPT-2 files resolved inside
// the directory).
TokenizerSpec TokenizerSpecOf(const DatasetManifest& manifest, const std::string& dataset_dir);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_SHARD_SET_H_
