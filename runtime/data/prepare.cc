#include "runtime/data/prepare.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "runtime/base/atomic_file.h"
#include "runtime/data/corpus.h"
#include "runtime/base/deterministic_random.h"
#include "runtime/data/shard_format.h"
#include "runtime/data/shard_writer.h"

namespace corescape::data {
namespace {

// Salt so the split and the loader's epoch orders differ for one seed.
constexpr uint64_t kSplitSalt = 0x73706C6974ull;  // "split"

// Which of `documents` go to validation: exactly `count` of them, by
// Floyd's sampling (no n-sized index array, one bit per document).
std::vector<bool> ChooseValidation(int64_t documents, int64_t count, uint64_t seed) {
  std::vector<bool> chosen(static_cast<size_t>(documents), false);
  SplitMix64 random(MixSeed(seed, kSplitSalt));
  for (int64_t j = documents - count; j < documents; ++j) {
    int64_t t = static_cast<int64_t>(random.Below(static_cast<uint64_t>(j + 1)));
    chosen[chosen[t] ? j : t] = true;
  }
  return chosen;
}

double EntropyNats(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total == 0) return 0;
  double entropy = 0;
  for (int64_t c : counts) {
    if (c == 0) continue;
    double p = static_cast<double>(c) / static_cast<double>(total);
    entropy -= p * std::log(p);
  }
  return entropy;
}

// A split's shards, rolled over at max_shard_tokens.
class SplitWriter {
 public:
  SplitWriter(std::string output_dir, std::string name, uint32_t vocab_size, int64_t max_tokens)
      : output_dir_(std::move(output_dir)),
        name_(std::move(name)),
        vocab_size_(vocab_size),
        max_tokens_(max_tokens) {}

  absl::Status Add(absl::Span<const int32_t> tokens) {
    if (writer_ != nullptr && writer_->token_count() >= max_tokens_) {
      if (absl::Status s = Close(); !s.ok()) return s;
    }
    if (writer_ == nullptr) {
      std::string file = absl::StrFormat("%s-%05d.shard", name_, entry_.shards.size());
      absl::StatusOr<std::unique_ptr<ShardWriter>> writer =
          ShardWriter::Create(absl::StrCat(output_dir_, "/", file), vocab_size_);
      if (!writer.ok()) return writer.status();
      writer_ = std::move(*writer);
      current_file_ = file;
    }
    return writer_->AddDocument(tokens);
  }

  absl::Status Close() {
    if (writer_ == nullptr) return absl::OkStatus();
    absl::StatusOr<ShardSummary> summary = writer_->Finish();
    if (!summary.ok()) return summary.status();
    entry_.shards.push_back({current_file_, summary->token_count, summary->document_count});
    entry_.tokens += summary->token_count;
    entry_.documents += summary->document_count;
    writer_.reset();
    return absl::OkStatus();
  }

  const SplitEntry& entry() const { return entry_; }

 private:
  std::string output_dir_;
  std::string name_;
  uint32_t vocab_size_;
  int64_t max_tokens_;
  std::unique_ptr<ShardWriter> writer_;
  std::string current_file_;
  SplitEntry entry_;
};

absl::Status CopyFile(const std::string& from, const std::string& to) {
  absl::StatusOr<std::string> contents = ReadFileToString(from);
  if (!contents.ok()) return contents.status();
  return WriteFileAtomically(to, *contents);
}

absl::Status ValidateOptions(const PrepareOptions& options) {
  if (options.inputs.empty()) return absl::InvalidArgumentError("no inputs given");
  if (options.output_dir.empty()) return absl::InvalidArgumentError("no output directory given");
  if (!(options.validation_fraction >= 0 && options.validation_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation fraction ", options.validation_fraction, " is not in [0, 1)"));
  }
  if (options.max_shard_tokens <= 0) {
    return absl::InvalidArgumentError("max_shard_tokens must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PrepareResult> PrepareDataset(const PrepareOptions& options) {
  const absl::Time start = absl::Now();
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeTokenizer(options.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::vector<std::string>> files = ListCorpusFiles(options.inputs);
  if (!files.ok()) return files.status();

  // Pass 1: count the documents.
  int64_t documents = 0;
  int64_t corpus_bytes = 0;
  absl::Time last_report = absl::Now();
  for (size_t f = 0; f < files->size(); ++f) {
    absl::Status status =
        ForEachDocument((*files)[f], options.delimiter, [&](absl::string_view text) {
          ++documents;
          corpus_bytes += static_cast<int64_t>(text.size());
          return absl::OkStatus();
        });
    if (!status.ok()) return status;
    if (absl::Now() - last_report >= options.progress_interval) {
      last_report = absl::Now();
      LOG(INFO) << absl::StrFormat("counting: %d/%d files, %d documents, %s", f + 1,
                                   files->size(), documents,
                                   absl::FormatDuration(last_report - start));
    }
  }
  if (documents == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the corpus is empty: no non-blank documents in ", files->size(), " file(s)",
        options.delimiter.empty() ? "" : absl::StrCat(" split at lines \"", options.delimiter, "\"")));
  }
  int64_t validation_count = std::llround(options.validation_fraction * documents);
  if (options.validation_fraction > 0 && validation_count == 0 && documents >= 2) {
    validation_count = 1;
  }
  validation_count = std::min(validation_count, documents - 1);
  LOG(INFO) << "corpus: " << files->size() << " files, " << documents << " documents, "
            << corpus_bytes << " bytes; " << validation_count << " documents for validation";
  std::vector<bool> is_validation = ChooseValidation(documents, validation_count, options.seed);

  if (absl::Status s = MakeDirectories(options.output_dir); !s.ok()) return s;
  const Tokenizer& tok = **tokenizer;
  const uint32_t vocab_size = static_cast<uint32_t>(tok.vocab_size());
  SplitWriter train(options.output_dir, "train", vocab_size, options.max_shard_tokens);
  SplitWriter validation(options.output_dir, "validation", vocab_size, options.max_shard_tokens);
  std::vector<int64_t> train_counts(vocab_size, 0);

  // Pass 2: tokenize and write.
  int64_t index = 0;
  int64_t tokens_written = 0;
  for (const std::string& file : *files) {
    absl::Status status = ForEachDocument(file, options.delimiter, [&](absl::string_view text) {
      if (index >= documents) {
        return absl::FailedPreconditionError(
            absl::StrCat(file, " changed while preparing: more documents than the first pass"));
      }
      absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(text);
      if (!ids.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": document ", index, " (of the corpus) cannot be tokenized: ",
            ids.status().message()));
      }
      absl::Status added;
      if (is_validation[index]) {
        added = validation.Add(*ids);
      } else {
        added = train.Add(*ids);
        for (int32_t id : *ids) ++train_counts[id];
      }
      if (!added.ok()) return added;
      ++index;
      tokens_written += static_cast<int64_t>(ids->size());
      if (absl::Now() - last_report >= options.progress_interval) {
        last_report = absl::Now();
        LOG(INFO) << absl::StrFormat("%d/%d documents (%.1f%%), %d tokens, %s",
                                     index, documents, 100.0 * index / documents,
                                     tokens_written, absl::FormatDuration(last_report - start));
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
  }
  if (index != documents) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the corpus changed while preparing: ", documents, " documents in the first pass, ",
        index, " in the second"));
  }
  if (absl::Status s = train.Close(); !s.ok()) return s;
  if (absl::Status s = validation.Close(); !s.ok()) return s;

  DatasetManifest manifest;
  manifest.tokenizer = tok.name();
  manifest.vocab_size = tok.vocab_size();
  manifest.bos_id = tok.bos_id();
  manifest.eos_id = tok.eos_id();
  manifest.pad_id = tok.pad_id();
  manifest.token_width_bytes = TokenWidthFor(vocab_size);
  if (manifest.tokenizer == "gpt2") {
    // Copied so the directory is self-contained.
    manifest.gpt2_encoder_file = "encoder.json";
    manifest.gpt2_vocab_file = "vocab.bpe";
    if (absl::Status s = CopyFile(options.tokenizer.gpt2_encoder_path,
                                  absl::StrCat(options.output_dir, "/encoder.json"));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CopyFile(options.tokenizer.gpt2_vocab_path,
                                  absl::StrCat(options.output_dir, "/vocab.bpe"));
        !s.ok()) {
      return s;
    }
  }
  manifest.input_files = *files;
  manifest.delimiter = options.delimiter;
  manifest.validation_fraction = options.validation_fraction;
  manifest.seed = options.seed;
  manifest.corpus_documents = documents;
  manifest.corpus_bytes = corpus_bytes;
  manifest.train = train.entry();
  manifest.validation = validation.entry();
  manifest.train_unigram_entropy_nats = EntropyNats(train_counts);
  train_counts[manifest.eos_id] += manifest.train.documents;
  manifest.train_unigram_entropy_with_eos_nats = EntropyNats(train_counts);

  PrepareResult result;
  result.manifest_path = absl::StrCat(options.output_dir, "/", kManifestFileName);
  if (absl::Status s = WriteFileAtomically(result.manifest_path, ManifestToJson(manifest));
      !s.ok()) {
    return s;
  }
  result.manifest = std::move(manifest);
  result.elapsed = absl::Now() - start;
  LOG(INFO) << "wrote " << result.manifest_path << ": " << result.manifest.train.documents
            << " train documents (" << result.manifest.train.tokens << " tokens), "
            << result.manifest.validation.documents << " validation documents ("
            << result.manifest.validation.tokens << " tokens) in "
            << absl::FormatDuration(result.elapsed);
  return result;
}

}  // namespace corescape::data
