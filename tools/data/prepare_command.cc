#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "runtime/data/prepare.h"
#include "tools/data/commands.h"
#include "tools/data/flags.h"

namespace corescape::data::tools {

const std::set<std::string> kPrepareFlags = {
    "input",  "delimiter", "output",       "validation_fraction", "seed",
    "max_shard_tokens", "progress_seconds", "tokenizer", "gpt2_encoder", "gpt2_vocab"};

int RunPrepare(const std::vector<std::string>& positional) {
  if (!positional.empty()) {
    return Fail(kExitUsage, "prepare takes no positional arguments (use --input=PATH,...)");
  }
  PrepareOptions options;
  for (absl::string_view input :
       absl::StrSplit(absl::GetFlag(FLAGS_input), ',', absl::SkipWhitespace())) {
    options.inputs.emplace_back(input);
  }
  options.output_dir = absl::GetFlag(FLAGS_output);
  if (options.inputs.empty() || options.output_dir.empty()) {
    return Fail(kExitUsage, "prepare needs --input=PATH[,PATH...] and --output=DIR");
  }
  options.delimiter = absl::GetFlag(FLAGS_delimiter);
  options.validation_fraction = absl::GetFlag(FLAGS_validation_fraction);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.max_shard_tokens = absl::GetFlag(FLAGS_max_shard_tokens);
  options.progress_interval = absl::Seconds(absl::GetFlag(FLAGS_progress_seconds));
  std::string tokenizer = absl::GetFlag(FLAGS_tokenizer);
  options.tokenizer.kind = tokenizer.empty() ? "byte" : tokenizer;
  options.tokenizer.gpt2_encoder_path = absl::GetFlag(FLAGS_gpt2_encoder);
  options.tokenizer.gpt2_vocab_path = absl::GetFlag(FLAGS_gpt2_vocab);
  if (options.tokenizer.kind != "byte" && options.tokenizer.kind != "gpt2") {
    return Fail(kExitUsage, "--tokenizer must be byte or gpt2");
  }
  if (options.tokenizer.kind == "gpt2" &&
      (options.tokenizer.gpt2_encoder_path.empty() || options.tokenizer.gpt2_vocab_path.empty())) {
    return Fail(kExitUsage, "--tokenizer=gpt2 needs --gpt2_encoder and --gpt2_vocab");
  }

  absl::StatusOr<PrepareResult> result = PrepareDataset(options);
  if (!result.ok()) return Fail(kExitFailure, std::string(result.status().message()));
  const DatasetManifest& m = result->manifest;
  std::printf("prepared %s\n", result->manifest_path.c_str());
  std::printf("  input files                %zu\n", m.input_files.size());
  std::printf("  documents                  %lld (%lld bytes)\n",
              static_cast<long long>(m.corpus_documents), static_cast<long long>(m.corpus_bytes));
  std::printf("  tokenizer                  %s (vocab %d, eos %d)\n", m.tokenizer.c_str(),
              m.vocab_size, m.eos_id);
  std::printf("  train                      %lld documents, %lld tokens, %zu shard(s)\n",
              static_cast<long long>(m.train.documents), static_cast<long long>(m.train.tokens),
              m.train.shards.size());
  std::printf("  validation                 %lld documents, %lld tokens, %zu shard(s)\n",
              static_cast<long long>(m.validation.documents),
              static_cast<long long>(m.validation.tokens), m.validation.shards.size());
  std::printf("  train unigram entropy      %.4f nats/token (%.4f with end-of-document)\n",
              m.train_unigram_entropy_nats, m.train_unigram_entropy_with_eos_nats);
  std::printf("  time                       %.2f s\n", absl::ToDoubleSeconds(result->elapsed));
  return kExitOk;
}

}  // namespace corescape::data::tools
