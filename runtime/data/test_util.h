#ifndef CORESCAPE_RUNTIME_DATA_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_DATA_TEST_UTIL_H_

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/data/prepare.h"

namespace corescape::data::testing {

// `name` under $TEST_TMPDIR (or /tmp); nothing is created or removed.
inline std::string TestPath(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return absl::StrCat(root ? root : "/tmp", "/", name);
}

// A fresh directory under $TEST_TMPDIR (or /tmp) named `name`.
inline std::string MakeTestDir(const std::string& name) {
  std::string dir = TestPath(name);
  std::string command = absl::StrCat("rm -rf '", dir, "'");
  (void)std::system(command.c_str());
  (void)MakeDirectories(dir);
  return dir;
}

// Writes `text` (documents separated by '%' lines, like the fortunes files)
// to TestPath("corpus")/corpus.txt and prepares it, with `options` (whose
// inputs, delimiter and output_dir are set here), into TestPath("dataset").
// Returns that directory.
inline absl::StatusOr<std::string> PrepareTestDataset(const std::string& text,
                                                      PrepareOptions options = {}) {
  const std::string corpus_dir = TestPath("corpus");
  if (absl::Status s = MakeDirectories(corpus_dir); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(corpus_dir + "/corpus.txt", text); !s.ok()) return s;
  options.inputs = {corpus_dir + "/corpus.txt"};
  options.delimiter = "%";
  options.output_dir = TestPath("dataset");
  if (auto prepared = PrepareDataset(options); !prepared.ok()) return prepared.status();
  return options.output_dir;
}

// GPT-2's bytes_to_unicode(), written out independently of the tokenizer:
// the UTF-8 spelling of each byte's stand-in character.
inline std::vector<std::string> Gpt2ByteSymbols() {
  std::vector<std::string> symbols(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int code_point = printable ? b : next++;
    std::string utf8;
    if (code_point < 0x80) {
      utf8.push_back(static_cast<char>(code_point));
    } else {
      utf8.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      utf8.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
    symbols[b] = utf8;
  }
  return symbols;
}

// A tiny byte-level BPE vocabulary: the 256 bytes (ids 0..255 in byte
// order), 13 merges (ids 256..268 in rank order), then <|endoftext|> (269).
struct TinyGpt2Vocabulary {
  std::string encoder_json;
  std::string vocab_bpe;
  nlohmann::json encoder;
};

inline TinyGpt2Vocabulary MakeTinyGpt2Vocabulary() {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"},   {"h", "e"}, {"l", "l"},   {"he", "ll"}, {"hell", "o"},
      {"Ġ", "w"},   {"o", "r"}, {"Ġw", "or"}, {"l", "d"},   {"Ġwor", "ld"},
      {"Ġt", "he"}, {"i", "n"}, {"in", "g"},
  };
  TinyGpt2Vocabulary vocabulary;
  int id = 0;
  for (const std::string& symbol : Gpt2ByteSymbols()) vocabulary.encoder[symbol] = id++;
  vocabulary.vocab_bpe = "#version: 0.2\n";
  for (const auto& [left, right] : merges) {
    vocabulary.encoder[left + right] = id++;
    vocabulary.vocab_bpe += left + " " + right + "\n";
  }
  vocabulary.encoder["<|endoftext|>"] = id++;
  vocabulary.encoder_json = vocabulary.encoder.dump();
  return vocabulary;
}

}  // namespace corescape::data::testing

#endif  // CORESCAPE_RUNTIME_DATA_TEST_UTIL_H_
