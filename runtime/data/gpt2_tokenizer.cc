#include "runtime/data/gpt2_tokenizer.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/data/gpt2_pretokenizer.h"

namespace corescape::data {
namespace {

constexpr size_t kMaxCachedPieces = 1 << 16;
constexpr absl::string_view kEndOfText = "<|endoftext|>";

std::string Utf8(int32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
  return out;
}

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes get code points 256, 257, ... in byte order.
std::vector<int32_t> ByteToCodePoint() {
  std::vector<int32_t> map(256, -1);
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable(b) ? b : next++;
  return map;
}

// Splits a UTF-8 token string into its characters (the symbols BPE merges);
// encoder.json and vocab.bpe are produced by Python, so valid UTF-8.
std::vector<std::string> Utf8Characters(absl::string_view text) {
  std::vector<std::string> characters;
  for (size_t i = 0; i < text.size();) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
    length = std::min(length, text.size() - i);
    characters.emplace_back(text.substr(i, length));
    i += length;
  }
  return characters;
}

int32_t FirstCodePoint(absl::string_view c) {
  const auto* p = reinterpret_cast<const unsigned char*>(c.data());
  if (c.size() == 1) return p[0];
  if (c.size() == 2) return ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  if (c.size() == 3) return ((p[0] & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  return -1;
}

std::string MergeKey(absl::string_view left, absl::string_view right) {
  return absl::StrCat(left, "\n", right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Load(
    const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  absl::StatusOr<std::string> encoder = ReadFileToString(encoder_json_path);
  if (!encoder.ok()) return encoder.status();
  absl::StatusOr<std::string> merges = ReadFileToString(vocab_bpe_path);
  if (!merges.ok()) return merges.status();
  return FromContents(*encoder, *merges, encoder_json_path, vocab_bpe_path);
}

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromContents(
    absl::string_view encoder_json, absl::string_view vocab_bpe,
    const std::string& encoder_name, const std::string& vocab_name) {
  std::unique_ptr<Gpt2Tokenizer> tokenizer(new Gpt2Tokenizer());
  std::vector<int32_t> byte_to_code_point = ByteToCodePoint();
  for (int b = 0; b < 256; ++b) {
    tokenizer->byte_to_symbol_[b] = Utf8(byte_to_code_point[b]);
    tokenizer->symbol_to_byte_[byte_to_code_point[b]] = static_cast<unsigned char>(b);
  }

  nlohmann::json encoder = nlohmann::json::parse(encoder_json, nullptr, /*allow_exceptions=*/false);
  if (encoder.is_discarded() || !encoder.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(encoder_name, ": not a JSON object of token -> id"));
  }
  int64_t max_id = -1;
  for (const auto& [token, id] : encoder.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          encoder_name, ": token \"", token, "\" has id ", id.dump(), ", not an id >= 0"));
    }
    max_id = std::max(max_id, id.get<int64_t>());
    tokenizer->token_to_id_[token] = static_cast<int32_t>(id.get<int64_t>());
  }
  if (max_id < 0) return absl::InvalidArgumentError(absl::StrCat(encoder_name, ": no tokens"));
  tokenizer->id_to_token_.assign(static_cast<size_t>(max_id + 1), "");
  tokenizer->id_defined_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : tokenizer->token_to_id_) {
    if (tokenizer->id_defined_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          encoder_name, ": id ", id, " is given to both \"", tokenizer->id_to_token_[id],
          "\" and \"", token, "\""));
    }
    tokenizer->id_to_token_[id] = token;
    tokenizer->id_defined_[id] = true;
  }
  for (int b = 0; b < 256; ++b) {
    if (!tokenizer->token_to_id_.contains(tokenizer->byte_to_symbol_[b])) {
      return absl::InvalidArgumentError(absl::StrCat(
          encoder_name, ": no token for byte ", b, " (spelled \"",
          tokenizer->byte_to_symbol_[b], "\"): not a byte-level BPE vocabulary"));
    }
  }
  auto end_of_text = tokenizer->token_to_id_.find(kEndOfText);
  if (end_of_text == tokenizer->token_to_id_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(encoder_name, ": no \"", kEndOfText, "\" token (the end-of-document id)"));
  }
  tokenizer->end_of_text_id_ = end_of_text->second;

  int line_number = 0;
  int32_t merge_rank = 0;
  for (absl::string_view line : absl::StrSplit(vocab_bpe, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || absl::StartsWith(line, "#version")) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          vocab_name, ": line ", line_number, " is \"", line, "\", expected \"left right\""));
    }
    std::string merged = absl::StrCat(parts[0], parts[1]);
    if (!tokenizer->token_to_id_.contains(merged)) {
      return absl::InvalidArgumentError(absl::StrCat(
          vocab_name, ": line ", line_number, ": the merge result \"", merged,
          "\" is not in ", encoder_name));
    }
    // Rank = position among the merge lines; a repeated pair keeps its last
    // rank, as GPT-2's dict(zip(merges, range(...))) does.
    tokenizer->merge_ranks_[MergeKey(parts[0], parts[1])] = merge_rank++;
  }
  return tokenizer;
}

void Gpt2Tokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>& ids) const {
  std::vector<std::string> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(byte_to_symbol_[static_cast<unsigned char>(c)]);
  // Repeatedly merge the best-ranked adjacent pair, every occurrence of it
  // left to right (GPT-2's bpe()).
  while (symbols.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto rank = merge_ranks_.find(MergeKey(symbols[i], symbols[i + 1]));
      if (rank != merge_ranks_.end() && rank->second < best_rank) {
        best_rank = rank->second;
        best = i;
      }
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    const std::string left = symbols[best];
    const std::string right = symbols[best + 1];
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  // Load() checked every byte and every merge result has an id.
  for (const std::string& symbol : symbols) ids.push_back(token_to_id_.find(symbol)->second);
}

absl::StatusOr<std::vector<int32_t>> Gpt2Tokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  for (absl::string_view piece : Gpt2PreTokenize(text)) {
    {
      absl::MutexLock lock(&cache_mutex_);
      auto cached = cache_.find(piece);
      if (cached != cache_.end()) {
        ids.insert(ids.end(), cached->second.begin(), cached->second.end());
        continue;
      }
    }
    size_t first = ids.size();
    EncodePiece(piece, ids);
    absl::MutexLock lock(&cache_mutex_);
    if (cache_.size() >= kMaxCachedPieces) cache_.clear();
    cache_.try_emplace(std::string(piece), ids.begin() + first, ids.end());
  }
  return ids;
}

absl::StatusOr<std::string> Gpt2Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !id_defined_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", i, " is ", id, ", which is not in the GPT-2 vocabulary (", vocab_size(),
          " ids)"));
    }
    for (const std::string& character : Utf8Characters(id_to_token_[id])) {
      auto byte = symbol_to_byte_.find(FirstCodePoint(character));
      if (byte == symbol_to_byte_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token ", i, " (id ", id, ", \"", id_to_token_[id],
            "\") holds a character outside GPT-2's byte alphabet"));
      }
      text.push_back(static_cast<char>(byte->second));
    }
  }
  return text;
}

}  // namespace corescape::data
