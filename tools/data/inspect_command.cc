#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_reader.h"
#include "runtime/data/shard_set.h"
#include "runtime/data/tokenizer_factory.h"
#include "tools/data/commands.h"
#include "tools/data/flags.h"

namespace corescape::data::tools {
namespace {

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The tokenizer to decode with: --tokenizer if given, else the dataset's
// (manifest.json in `dataset_dir`), else the byte tokenizer when the
// vocabulary matches; nullptr prints raw ids.
std::unique_ptr<Tokenizer> ChooseTokenizer(const std::string& dataset_dir, uint32_t vocab_size,
                                           std::string& source) {
  TokenizerSpec spec;
  if (std::string kind = absl::GetFlag(FLAGS_tokenizer); !kind.empty()) {
    spec = {kind, absl::GetFlag(FLAGS_gpt2_encoder), absl::GetFlag(FLAGS_gpt2_vocab)};
    source = "--tokenizer";
  } else if (absl::StatusOr<DatasetManifest> manifest = ReadManifest(dataset_dir); manifest.ok()) {
    spec = TokenizerSpecOf(*manifest, dataset_dir);
    source = absl::StrCat(dataset_dir, "/", kManifestFileName);
  } else {
    spec.kind = "byte";
    source = "no manifest; guessed from the vocabulary size";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = MakeTokenizer(spec);
  if (!tokenizer.ok()) {
    source = absl::StrCat("none (", tokenizer.status().message(), ")");
    return nullptr;
  }
  if (static_cast<uint32_t>((*tokenizer)->vocab_size()) != vocab_size) {
    source = absl::StrCat("none (", spec.kind, " has ", (*tokenizer)->vocab_size(),
                          " ids, the shard ", vocab_size, ")");
    return nullptr;
  }
  return std::move(*tokenizer);
}

// Control characters as \xNN so a document cannot drive the terminal.
std::string Printable(absl::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void PrintDocuments(const ShardReader& shard, const Tokenizer* tokenizer) {
  const int64_t count = std::min<int64_t>(absl::GetFlag(FLAGS_documents), shard.document_count());
  const size_t max_chars = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_max_chars)));
  for (int64_t d = 0; d < count; ++d) {
    std::vector<int32_t> ids = shard.Document(d).ToVector();
    std::printf("\ndocument %lld: %zu tokens\n", static_cast<long long>(d), ids.size());
    std::string text;
    if (tokenizer != nullptr) {
      absl::StatusOr<std::string> decoded = tokenizer->Decode(ids);
      text = decoded.ok() ? *decoded : absl::StrCat("(cannot decode: ", decoded.status().message(), ")");
    } else {
      for (int32_t id : ids) absl::StrAppend(&text, text.empty() ? "" : " ", id);
    }
    const size_t full = text.size();
    if (full > max_chars) {
      size_t cut = max_chars;
      // Not inside a UTF-8 sequence.
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      text.resize(cut);
    }
    std::string shown = Printable(text);
    std::string indented = "  | ";
    for (char c : shown) {
      indented.push_back(c);
      if (c == '\n') indented += "  | ";
    }
    if (absl::EndsWith(indented, "  | ")) indented.resize(indented.size() - 4);
    std::printf("%s%s", indented.c_str(), absl::EndsWith(indented, "\n") ? "" : "\n");
    if (full > text.size()) std::printf("  ... (%zu more bytes)\n", full - text.size());
  }
}

void PrintShardHeader(const ShardReader& shard) {
  const ShardHeader& h = shard.header();
  std::printf("shard %s\n", shard.path().c_str());
  std::printf("  format version   %u\n", h.format_version);
  std::printf("  token width      %u bytes\n", h.token_width_bytes);
  std::printf("  vocab size       %u\n", h.vocab_size);
  std::printf("  tokens           %llu\n", static_cast<unsigned long long>(h.token_count));
  std::printf("  documents        %llu\n", static_cast<unsigned long long>(h.document_count));
  std::printf("  file bytes       %lld\n", static_cast<long long>(shard.file_bytes()));
  std::printf("  payload crc32c   0x%08x (verified)\n", h.payload_crc32c);
  if (shard.document_count() > 0) {
    std::vector<int64_t> lengths;
    for (int64_t d = 0; d < shard.document_count(); ++d) lengths.push_back(shard.DocumentLength(d));
    std::sort(lengths.begin(), lengths.end());
    std::printf("  document tokens  min %lld, median %lld, mean %.1f, max %lld\n",
                static_cast<long long>(lengths.front()),
                static_cast<long long>(lengths[lengths.size() / 2]),
                static_cast<double>(shard.token_count()) / shard.document_count(),
                static_cast<long long>(lengths.back()));
  }
}

int InspectShard(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(path);
  if (!shard.ok()) return Fail(kExitFailure, std::string(shard.status().message()));
  PrintShardHeader(**shard);
  std::string source;
  std::unique_ptr<Tokenizer> tokenizer =
      ChooseTokenizer(DirectoryOf(path), (*shard)->vocab_size(), source);
  std::printf("  tokenizer        %s (%s)\n", tokenizer ? tokenizer->name().c_str() : "ids",
              source.c_str());
  PrintDocuments(**shard, tokenizer.get());
  return kExitOk;
}

int InspectDataset(const std::string& dir) {
  absl::StatusOr<DatasetManifest> m = ReadManifest(dir);
  if (!m.ok()) return Fail(kExitFailure, std::string(m.status().message()));
  std::printf("dataset %s\n", dir.c_str());
  std::printf("  tokenizer        %s (vocab %d, bos %d, eos %d, pad %d)\n", m->tokenizer.c_str(),
              m->vocab_size, m->bos_id, m->eos_id, m->pad_id);
  std::printf("  corpus           %zu files, %lld documents, %lld bytes, delimiter \"%s\"\n",
              m->input_files.size(), static_cast<long long>(m->corpus_documents),
              static_cast<long long>(m->corpus_bytes), m->delimiter.c_str());
  std::printf("  split            validation fraction %g, seed %llu\n", m->validation_fraction,
              static_cast<unsigned long long>(m->seed));
  std::printf("  unigram entropy  %.4f nats/token (%.4f with end-of-document)\n",
              m->train_unigram_entropy_nats, m->train_unigram_entropy_with_eos_nats);
  std::shared_ptr<const ShardSet> train;
  for (const char* split : {"train", "validation"}) {
    const SplitEntry& entry = std::string(split) == "train" ? m->train : m->validation;
    std::printf("  %-16s %lld documents, %lld tokens in %zu shard(s)\n", split,
                static_cast<long long>(entry.documents), static_cast<long long>(entry.tokens),
                entry.shards.size());
    if (entry.shards.empty()) continue;
    // Opening verifies every shard against its checksum and the manifest.
    absl::StatusOr<std::shared_ptr<const ShardSet>> set = OpenDatasetSplit(dir, split);
    if (!set.ok()) return Fail(kExitFailure, std::string(set.status().message()));
    if (std::string(split) == "train") train = *set;
  }
  std::printf("  all shards verified\n");
  if (train == nullptr) return kExitOk;
  std::string source;
  std::unique_ptr<Tokenizer> tokenizer = ChooseTokenizer(dir, train->vocab_size(), source);
  std::printf("\nfirst train shard: %s\n", train->shards().front()->path().c_str());
  PrintDocuments(*train->shards().front(), tokenizer.get());
  return kExitOk;
}

}  // namespace

const std::set<std::string> kInspectFlags = {"documents", "max_chars", "tokenizer",
                                             "gpt2_encoder", "gpt2_vocab"};

int RunInspect(const std::vector<std::string>& positional) {
  if (positional.size() != 1) {
    return Fail(kExitUsage, "inspect takes one shard file or dataset directory");
  }
  struct stat st;
  if (stat(positional[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InspectDataset(positional[0]);
  }
  return InspectShard(positional[0]);
}

}  // namespace corescape::data::tools
