#ifndef CORESCAPE_RUNTIME_DATA_DATASET_MANIFEST_H_
#define CORESCAPE_RUNTIME_DATA_DATASET_MANIFEST_H_

// manifest.json: what a prepared dataset directory holds. Written last by
// PrepareDataset, so its presence means the shards beside it are complete.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::data {

inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr int kManifestVersion = 1;

struct ShardEntry {
  std::string file;  // relative to the dataset directory
  int64_t tokens = 0;
  int64_t documents = 0;
};

struct SplitEntry {
  std::vector<ShardEntry> shards;
  int64_t tokens = 0;
  int64_t documents = 0;
};

struct DatasetManifest {
  int version = kManifestVersion;
  // Tokenizer. For "gpt2" the two files are copied into the directory and
  // named here relative to it.
  std::string tokenizer = "byte";
  std::string gpt2_encoder_file;
  std::string gpt2_vocab_file;
  int32_t vocab_size = 0;
  int32_t bos_id = 0;
  int32_t eos_id = 0;
  int32_t pad_id = 0;
  uint32_t token_width_bytes = 0;
  // How the corpus was split.
  std::vector<std::string> input_files;
  std::string delimiter;  // "" = one document per file
  double validation_fraction = 0;
  uint64_t seed = 0;
  int64_t corpus_documents = 0;  // non-blank documents read
  int64_t corpus_bytes = 0;      // bytes of those documents
  SplitEntry train;
  SplitEntry validation;
  // Unigram entropy of the training shards' tokens in nats per token: the
  // loss of a model that learned token frequencies only. The second figure
  // also counts one end-of-document token per document, as the packer
  // feeds it.
  double train_unigram_entropy_nats = 0;
  double train_unigram_entropy_with_eos_nats = 0;
};

std::string ManifestToJson(const DatasetManifest& manifest);

// `source` only names the manifest in errors.
absl::StatusOr<DatasetManifest> ParseManifest(absl::string_view json, const std::string& source);

// Reads <dataset_dir>/manifest.json.
absl::StatusOr<DatasetManifest> ReadManifest(const std::string& dataset_dir);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_DATASET_MANIFEST_H_
