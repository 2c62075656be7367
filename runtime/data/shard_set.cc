#include "runtime/data/shard_set.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace corescape::data {

absl::StatusOr<std::shared_ptr<const ShardSet>> ShardSet::Open(
    const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no shards to open");
  std::shared_ptr<ShardSet> set(new ShardSet());
  for (const std::string& path : paths) {
    absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(path);
    if (!shard.ok()) return shard.status();
    if (set->shards_.empty()) {
      set->vocab_size_ = (*shard)->vocab_size();
    } else if ((*shard)->vocab_size() != set->vocab_size_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", path, " has a vocabulary of ", (*shard)->vocab_size(), " but ", paths[0],
          " has ", set->vocab_size_, ": they come from different tokenizers"));
    }
    set->first_document_.push_back(set->document_count());
    for (int64_t d = 0; d < (*shard)->document_count(); ++d) {
      set->document_lengths_.push_back((*shard)->DocumentLength(d));
    }
    set->token_count_ += (*shard)->token_count();
    set->shards_.push_back(std::move(*shard));
  }
  set->first_document_.push_back(set->document_count());
  return std::shared_ptr<const ShardSet>(std::move(set));
}

TokenSpan ShardSet::Document(int64_t d) const {
  // The last shard whose first document is <= d.
  auto next = std::upper_bound(first_document_.begin(), first_document_.end() - 1, d);
  size_t shard = static_cast<size_t>(next - first_document_.begin()) - 1;
  return shards_[shard]->Document(d - first_document_[shard]);
}

absl::StatusOr<std::shared_ptr<const ShardSet>> OpenDatasetSplit(const std::string& dataset_dir,
                                                                 absl::string_view split_name) {
  absl::StatusOr<DatasetManifest> manifest = ReadManifest(dataset_dir);
  if (!manifest.ok()) return manifest.status();
  const SplitEntry* split = nullptr;
  if (split_name == "train") split = &manifest->train;
  if (split_name == "validation") split = &manifest->validation;
  if (split == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown split \"", split_name, "\" (expected train or validation)"));
  }
  if (split->shards.empty()) {
    return absl::NotFoundError(
        absl::StrCat("dataset ", dataset_dir, " has no ", split_name, " shards"));
  }
  std::vector<std::string> paths;
  for (const ShardEntry& entry : split->shards) {
    paths.push_back(absl::StrCat(dataset_dir, "/", entry.file));
  }
  absl::StatusOr<std::shared_ptr<const ShardSet>> set = ShardSet::Open(paths);
  if (!set.ok()) return set.status();
  if (static_cast<int64_t>((*set)->vocab_size()) != manifest->vocab_size) {
    return absl::DataLossError(absl::StrCat("dataset ", dataset_dir, ": manifest vocabulary ",
                                            manifest->vocab_size, " but shards have ",
                                            (*set)->vocab_size()));
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    const ShardReader& shard = *(*set)->shards()[i];
    const ShardEntry& entry = split->shards[i];
    if (shard.token_count() != entry.tokens || shard.document_count() != entry.documents) {
      return absl::DataLossError(absl::StrCat(
          "shard ", paths[i], " holds ", shard.token_count(), " tokens in ",
          shard.document_count(), " documents but the manifest says ", entry.tokens, " in ",
          entry.documents, ": it was replaced after the manifest was written"));
    }
  }
  return set;
}

TokenizerSpec TokenizerSpecOf(const DatasetManifest& manifest, const std::string& dataset_dir) {
  TokenizerSpec spec;
  spec.kind = manifest.tokenizer;
  if (manifest.tokenizer == "gpt2") {
    spec.gpt2_encoder_path = absl::StrCat(dataset_dir, "/", manifest.gpt2_encoder_file);
    spec.gpt2_vocab_path = absl::StrCat(dataset_dir, "/", manifest.gpt2_vocab_file);
  }
  return spec;
}

}  // namespace corescape::data
