#include "tools/data/flags.h"

#include "absl/flags/flag.h"

// prepare
ABSL_FLAG(std::string, input, "",
          "comma-separated files and directories of text (directories are walked recursively; "
          "hidden and binary files are skipped)");
ABSL_FLAG(std::string, delimiter, "",
          "a line equal to this ends a document (\"%\" for fortune files); empty: one document "
          "per file");
ABSL_FLAG(std::string, output, "", "directory for the shards and manifest.json");
ABSL_FLAG(double, validation_fraction, 0.05, "fraction of documents held out for validation");
ABSL_FLAG(uint64_t, seed, 1, "seed of the train/validation split");
ABSL_FLAG(int64_t, max_shard_tokens, int64_t{1} << 30,
          "start a new shard once one holds this many tokens");
ABSL_FLAG(int32_t, progress_seconds, 10, "log progress this often");
// prepare and inspect
ABSL_FLAG(std::string, tokenizer, "",
          "byte or gpt2; prepare defaults to byte, inspect to the dataset's own");
ABSL_FLAG(std::string, gpt2_encoder, "", "GPT-2 encoder.json (with --tokenizer=gpt2)");
ABSL_FLAG(std::string, gpt2_vocab, "", "GPT-2 vocab.bpe (with --tokenizer=gpt2)");
// inspect
ABSL_FLAG(int32_t, documents, 3, "how many documents to decode and print");
ABSL_FLAG(int32_t, max_chars, 400, "print at most this many characters of each document");
