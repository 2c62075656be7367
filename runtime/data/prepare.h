#ifndef CORESCAPE_RUNTIME_DATA_PREPARE_H_
#define CORESCAPE_RUNTIME_DATA_PREPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/tokenizer_factory.h"

namespace corescape::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files and directories (see ListCorpusFiles)
  std::string delimiter;            // "" = one document per file; "%" for fortunes
  std::string output_dir;
  double validation_fraction = 0.05;
  uint64_t seed = 1;
  TokenizerSpec tokenizer;
  // A shard is closed once it holds this many tokens (at a document end).
  int64_t max_shard_tokens = int64_t{1} << 30;
  absl::Duration progress_interval = absl::Seconds(10);
};

struct PrepareResult {
  DatasetManifest manifest;
  std::string manifest_path;
  absl::Duration elapsed;
};

// Corpus -> "train-NNNNN.shard", "validation-NNNNN.shard" and manifest.json
// in output_dir. Two passes over the text: the first counts documents, so
// the split can take exactly round(validation_fraction * documents) of them
// (at least one when the fraction is > 0 and there are two or more, never
// all), chosen by `seed` independently of the tokenizer; the second
// tokenizes and writes. Documents keep corpus order inside each split (the
// loader shuffles). Same inputs and options -> byte-identical output.
absl::StatusOr<PrepareResult> PrepareDataset(const PrepareOptions& options);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_PREPARE_H_
