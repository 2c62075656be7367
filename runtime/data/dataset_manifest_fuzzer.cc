// Fuzzes the dataset manifest parser (manifest.json of a prepared dataset).
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/data/dataset_manifest.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) { return data::ParseManifest(input, "fuzz").ok(); }

std::vector<std::string> FuzzSeeds() {
  data::DatasetManifest byte;
  byte.tokenizer = "byte";
  byte.vocab_size = 257;
  byte.eos_id = 256;
  byte.pad_id = 256;
  byte.input_files = {"/usr/share/games/fortunes/fortunes"};
  byte.delimiter = "%";
  byte.train.tokens = 1000;
  byte.train.documents = 10;
  byte.train.shards = {{"train-00000.shard", 600, 6}, {"train-00001.shard", 400, 4}};
  byte.validation.shards = {{"validation-00000.shard", 100, 1}};
  data::DatasetManifest gpt2 = byte;
  gpt2.tokenizer = "gpt2";
  gpt2.vocab_size = 50257;
  gpt2.eos_id = 50256;
  gpt2.gpt2_encoder_file = "encoder.json";
  gpt2.gpt2_vocab_file = "vocab.bpe";
  return {data::ManifestToJson(byte), data::ManifestToJson(gpt2)};
}

}  // namespace corescape::fuzz
