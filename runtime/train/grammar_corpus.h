#ifndef CORESCAPE_RUNTIME_TRAIN_GRAMMAR_CORPUS_H_
#define CORESCAPE_RUNTIME_TRAIN_GRAMMAR_CORPUS_H_

// For tests: a prepared dataset with learnable structure, short sentences
// from a small grammar separated by '%' lines like the fortunes files, made
// in the test's temporary directory (so it travels nowhere).
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/data/prepare.h"
#include "runtime/data/test_util.h"

namespace corescape::train {

inline std::string PrepareGrammarCorpus(int documents = 400) {
  const std::vector<std::string> subjects = {"the cat", "a dog", "my friend", "the old man"};
  const std::vector<std::string> verbs = {"sees", "likes", "follows", "remembers"};
  const std::vector<std::string> objects = {"the moon.", "a red ball.", "the river.", "its home."};
  std::string text;
  uint32_t state = 7;
  for (int doc = 0; doc < documents; ++doc) {
    const int sentences = 1 + doc % 3;
    for (int s = 0; s < sentences; ++s) {
      state = state * 1664525u + 1013904223u;
      text += subjects[(state >> 8) % 4] + " " + verbs[(state >> 12) % 4] + " " +
              objects[(state >> 16) % 4] + "\n";
    }
    text += "%\n";
  }
  data::PrepareOptions options;
  options.validation_fraction = 0.1;
  absl::StatusOr<std::string> dataset = data::testing::PrepareTestDataset(text, options);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.value_or("");
}

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_GRAMMAR_CORPUS_H_
