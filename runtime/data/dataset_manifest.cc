#include "runtime/data/dataset_manifest.h"

#include <cstdint>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"

namespace corescape::data {
namespace {

using nlohmann::json;

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

json SplitToJson(const SplitEntry& split) {
  json shards = json::array();
  for (const ShardEntry& shard : split.shards) {
    shards.push_back({{"file", shard.file}, {"tokens", shard.tokens}, {"documents", shard.documents}});
  }
  return {{"tokens", split.tokens}, {"documents", split.documents}, {"shards", shards}};
}

// Field readers that record the first problem instead of throwing.
class Fields {
 public:
  explicit Fields(const std::string& source) : source_(source) {}

  const json* Get(const json& object, const char* key, json::value_t kind, const char* what) {
    auto it = object.find(key);
    bool matches = it != object.end() &&
                   (it->type() == kind ||
                    (kind == json::value_t::number_float && it->is_number()) ||
                    (kind == json::value_t::number_integer && it->is_number_integer()));
    if (!matches) {
      Fail(absl::StrCat("missing or mistyped \"", key, "\" (", what, ")"));
      return nullptr;
    }
    return &*it;
  }
  std::string String(const json& object, const char* key) {
    const json* value = Get(object, key, json::value_t::string, "a string");
    return value ? value->get<std::string>() : "";
  }
  // A file inside the dataset directory: a plain name, so a manifest cannot
  // make a reader open anything outside it.
  std::string FileName(const json& object, const char* key) {
    std::string name = String(object, key);
    if (status_.ok() && !IsPlainFileName(name)) {
      Fail(absl::StrCat("\"", key, "\" is \"", absl::CHexEscape(name.substr(0, 80)),
                        "\": expected a file name in the dataset directory (no '/', not '.' or "
                        "'..', at most 255 bytes)"));
    }
    return name;
  }
  // An integer in [min, max]: one outside is refused naming its value, never
  // truncated into range.
  int64_t Bounded(const json& object, const char* key, int64_t min, int64_t max) {
    const json* value = Get(object, key, json::value_t::number_integer, "an integer");
    if (value == nullptr) return 0;
    const bool is_unsigned = value->is_number_unsigned();
    const uint64_t as_unsigned = is_unsigned ? value->get<uint64_t>() : 0;
    const int64_t as_signed = is_unsigned ? 0 : value->get<int64_t>();
    if ((is_unsigned && (as_unsigned > static_cast<uint64_t>(max) ||
                         static_cast<int64_t>(as_unsigned) < min)) ||
        (!is_unsigned && (as_signed < min || as_signed > max))) {
      Fail(absl::StrCat("\"", key, "\" is ",
                        is_unsigned ? absl::StrCat(as_unsigned) : absl::StrCat(as_signed),
                        ", outside [", min, ", ", max, "]"));
      return 0;
    }
    return is_unsigned ? static_cast<int64_t>(as_unsigned) : as_signed;
  }
  int64_t Integer(const json& object, const char* key) {
    const json* value = Get(object, key, json::value_t::number_integer, "an integer");
    return value ? value->get<int64_t>() : 0;
  }
  uint64_t Unsigned(const json& object, const char* key) {
    const json* value = Get(object, key, json::value_t::number_integer, "an integer");
    return value ? value->get<uint64_t>() : 0;
  }
  double Number(const json& object, const char* key) {
    const json* value = Get(object, key, json::value_t::number_float, "a number");
    return value ? value->get<double>() : 0;
  }
  SplitEntry Split(const json& object, const char* key) {
    SplitEntry split;
    const json* value = Get(object, key, json::value_t::object, "an object");
    if (value == nullptr) return split;
    split.tokens = Integer(*value, "tokens");
    split.documents = Integer(*value, "documents");
    const json* shards = Get(*value, "shards", json::value_t::array, "an array");
    if (shards == nullptr) return split;
    for (const json& shard : *shards) {
      if (!shard.is_object()) {
        Fail(absl::StrCat("\"", key, "\".shards holds a non-object"));
        return split;
      }
      split.shards.push_back({FileName(shard, "file"), Integer(shard, "tokens"),
                              Integer(shard, "documents")});
    }
    return split;
  }
  void Fail(absl::string_view what) {
    if (status_.ok()) status_ = absl::DataLossError(absl::StrCat("manifest ", source_, ": ", what));
  }
  const absl::Status& status() const { return status_; }

 private:
  const std::string& source_;
  absl::Status status_;
};

}  // namespace

std::string ManifestToJson(const DatasetManifest& m) {
  json tokenizer = {{"kind", m.tokenizer}, {"vocab_size", m.vocab_size}, {"bos_id", m.bos_id},
                    {"eos_id", m.eos_id},  {"pad_id", m.pad_id}};
  if (m.tokenizer == "gpt2") {
    tokenizer["gpt2_encoder_file"] = m.gpt2_encoder_file;
    tokenizer["gpt2_vocab_file"] = m.gpt2_vocab_file;
  }
  json out = {
      {"format", "corescape-dataset"},
      {"version", m.version},
      {"tokenizer", tokenizer},
      {"token_width_bytes", m.token_width_bytes},
      {"input_files", m.input_files},
      {"delimiter", m.delimiter},
      {"validation_fraction", m.validation_fraction},
      {"seed", m.seed},
      {"corpus_documents", m.corpus_documents},
      {"corpus_bytes", m.corpus_bytes},
      {"train", SplitToJson(m.train)},
      {"validation", SplitToJson(m.validation)},
      {"train_unigram_entropy_nats", m.train_unigram_entropy_nats},
      {"train_unigram_entropy_with_eos_nats", m.train_unigram_entropy_with_eos_nats},
  };
  return out.dump(2) + "\n";
}

absl::StatusOr<DatasetManifest> ParseManifest(absl::string_view text, const std::string& source) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::DataLossError(absl::StrCat("manifest ", source, ": not a JSON object"));
  }
  Fields fields(source);
  DatasetManifest m;
  if (fields.String(root, "format") != "corescape-dataset") {
    fields.Fail("\"format\" is not \"corescape-dataset\"");
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  m.version = static_cast<int>(fields.Bounded(root, "version", 0, kInt32Max));
  if (fields.status().ok() && m.version != kManifestVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "manifest ", source, ": version ", m.version, " is not supported (this build reads ",
        kManifestVersion, ")"));
  }
  if (const json* tokenizer = fields.Get(root, "tokenizer", json::value_t::object, "an object")) {
    m.tokenizer = fields.String(*tokenizer, "kind");
    m.vocab_size = static_cast<int32_t>(fields.Bounded(*tokenizer, "vocab_size", 1, kInt32Max));
    m.bos_id = static_cast<int32_t>(fields.Bounded(*tokenizer, "bos_id", 0, kInt32Max));
    m.eos_id = static_cast<int32_t>(fields.Bounded(*tokenizer, "eos_id", 0, kInt32Max));
    m.pad_id = static_cast<int32_t>(fields.Bounded(*tokenizer, "pad_id", 0, kInt32Max));
    if (m.tokenizer == "gpt2") {
      m.gpt2_encoder_file = fields.FileName(*tokenizer, "gpt2_encoder_file");
      m.gpt2_vocab_file = fields.FileName(*tokenizer, "gpt2_vocab_file");
    }
  }
  m.token_width_bytes = static_cast<uint32_t>(fields.Bounded(root, "token_width_bytes", 0, 8));
  if (const json* files = fields.Get(root, "input_files", json::value_t::array, "an array")) {
    for (const json& file : *files) {
      if (file.is_string()) m.input_files.push_back(file.get<std::string>());
    }
  }
  m.delimiter = fields.String(root, "delimiter");
  m.validation_fraction = fields.Number(root, "validation_fraction");
  m.seed = fields.Unsigned(root, "seed");
  m.corpus_documents = fields.Integer(root, "corpus_documents");
  m.corpus_bytes = fields.Integer(root, "corpus_bytes");
  m.train = fields.Split(root, "train");
  m.validation = fields.Split(root, "validation");
  m.train_unigram_entropy_nats = fields.Number(root, "train_unigram_entropy_nats");
  m.train_unigram_entropy_with_eos_nats = fields.Number(root, "train_unigram_entropy_with_eos_nats");
  if (!fields.status().ok()) return fields.status();
  if (m.vocab_size <= 0 || m.eos_id < 0 || m.eos_id >= m.vocab_size) {
    return absl::DataLossError(absl::StrCat("manifest ", source, ": eos id ", m.eos_id,
                                            " is outside the vocabulary of ", m.vocab_size));
  }
  return m;
}

absl::StatusOr<DatasetManifest> ReadManifest(const std::string& dataset_dir) {
  std::string path = absl::StrCat(dataset_dir, "/", kManifestFileName);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseManifest(*text, path);
}

}  // namespace corescape::data
