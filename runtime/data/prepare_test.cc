#include "runtime/data/prepare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_set.h"
#include "runtime/data/shard_writer.h"
#include "runtime/data/test_util.h"

namespace corescape::data {
namespace {

using ::testing::HasSubstr;

// Two fortune-style files in dir/corpus: 40 documents, blank ones in between.
std::vector<std::string> WriteCorpus(const std::string& dir) {
  EXPECT_TRUE(MakeDirectories(dir + "/corpus").ok());
  std::vector<std::string> documents;
  for (int file = 0; file < 2; ++file) {
    std::string text;
    for (int i = 0; i < 20; ++i) {
      std::string document = absl::StrCat("Fortune ", file, "-", i, ": ",
                                          std::string(1 + (i * 7) % 23, 'a' + i % 26), "\n",
                                          i % 3 == 0 ? "\t-- Someone\n" : "");
      documents.push_back(document);
      text += document + "%\n";
      if (i % 5 == 0) text += "\n%\n";  // a blank document
    }
    EXPECT_TRUE(WriteFileAtomically(absl::StrCat(dir, "/corpus/part", file), text).ok());
  }
  return documents;
}

PrepareOptions Options(const std::string& dir, const std::string& output) {
  PrepareOptions options;
  options.inputs = {dir + "/corpus"};
  options.delimiter = "%";
  options.output_dir = output;
  options.validation_fraction = 0.25;
  options.seed = 7;
  return options;
}

std::vector<std::string> DecodeSplit(const std::string& dir, const char* split) {
  auto set = OpenDatasetSplit(dir, split);
  EXPECT_TRUE(set.ok()) << set.status();
  std::vector<std::string> documents;
  if (!set.ok()) return documents;
  for (int64_t d = 0; d < (*set)->document_count(); ++d) {
    std::string text;
    for (int32_t id : (*set)->Document(d).ToVector()) text.push_back(static_cast<char>(id));
    documents.push_back(text);
  }
  return documents;
}

TEST(PrepareTest, SplitsTokenizesAndDescribesTheCorpus) {
  std::string dir = testing::MakeTestDir("prepare_basic");
  std::vector<std::string> documents = WriteCorpus(dir);
  auto result = PrepareDataset(Options(dir, dir + "/out"));
  ASSERT_TRUE(result.ok()) << result.status();
  const DatasetManifest& m = result->manifest;
  EXPECT_EQ(m.corpus_documents, 40);
  EXPECT_EQ(m.validation.documents, 10);
  EXPECT_EQ(m.train.documents, 30);
  EXPECT_EQ(m.tokenizer, "byte");
  EXPECT_EQ(m.vocab_size, 259);
  EXPECT_EQ(m.eos_id, 257);
  EXPECT_EQ(m.token_width_bytes, 2u);
  ASSERT_EQ(m.train.shards.size(), 1u);
  EXPECT_EQ(m.train.shards[0].file, "train-00000.shard");
  EXPECT_EQ(m.validation.shards[0].file, "validation-00000.shard");

  // Every document lands in exactly one split, unchanged, in corpus order.
  std::vector<std::string> train = DecodeSplit(dir + "/out", "train");
  std::vector<std::string> validation = DecodeSplit(dir + "/out", "validation");
  std::vector<std::string> both = train;
  both.insert(both.end(), validation.begin(), validation.end());
  std::vector<std::string> expected = documents;
  std::sort(both.begin(), both.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(both, expected);
  EXPECT_TRUE(std::is_sorted(train.begin(), train.end(), [&](auto& a, auto& b) {
    return std::find(documents.begin(), documents.end(), a) <
           std::find(documents.begin(), documents.end(), b);
  }));

  // The manifest's entropy is the training tokens' unigram entropy.
  std::map<char, int64_t> counts;
  int64_t total = 0;
  for (const std::string& text : train) {
    for (char c : text) ++counts[c], ++total;
  }
  EXPECT_EQ(m.train.tokens, total);
  double entropy = 0;
  for (const auto& [c, n] : counts) entropy -= n / double(total) * std::log(n / double(total));
  EXPECT_NEAR(m.train_unigram_entropy_nats, entropy, 1e-9);
  EXPECT_GT(m.train_unigram_entropy_with_eos_nats, 0);

  // The manifest on disk says the same.
  auto reread = ReadManifest(dir + "/out");
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(ManifestToJson(*reread), ManifestToJson(m));
}

TEST(PrepareTest, SameOptionsGiveIdenticalBytesAndSeedsChangeTheSplit) {
  std::string dir = testing::MakeTestDir("prepare_deterministic");
  WriteCorpus(dir);
  ASSERT_TRUE(PrepareDataset(Options(dir, dir + "/one")).ok());
  ASSERT_TRUE(PrepareDataset(Options(dir, dir + "/two")).ok());
  for (const char* file : {"train-00000.shard", "validation-00000.shard", "manifest.json"}) {
    auto one = ReadFileToString(absl::StrCat(dir, "/one/", file));
    auto two = ReadFileToString(absl::StrCat(dir, "/two/", file));
    ASSERT_TRUE(one.ok() && two.ok());
    EXPECT_EQ(*one, *two) << file;
  }
  PrepareOptions reseeded = Options(dir, dir + "/three");
  reseeded.seed = 8;
  ASSERT_TRUE(PrepareDataset(reseeded).ok());
  EXPECT_NE(DecodeSplit(dir + "/one", "validation"), DecodeSplit(dir + "/three", "validation"));
}

TEST(PrepareTest, RollsShardsOverAtTheTokenLimit) {
  std::string dir = testing::MakeTestDir("prepare_rollover");
  WriteCorpus(dir);
  PrepareOptions options = Options(dir, dir + "/out");
  options.max_shard_tokens = 200;
  auto result = PrepareDataset(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->manifest.train.shards.size(), 2u);
  auto set = OpenDatasetSplit(dir + "/out", "train");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->document_count(), 30);
  EXPECT_EQ((*set)->token_count(), result->manifest.train.tokens);
}

TEST(PrepareTest, NoValidationWhenTheFractionIsZero) {
  std::string dir = testing::MakeTestDir("prepare_no_validation");
  WriteCorpus(dir);
  PrepareOptions options = Options(dir, dir + "/out");
  options.validation_fraction = 0;
  auto result = PrepareDataset(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest.train.documents, 40);
  EXPECT_EQ(OpenDatasetSplit(dir + "/out", "validation").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PrepareTest, Gpt2DatasetsCarryTheirVocabulary) {
  std::string dir = testing::MakeTestDir("prepare_gpt2");
  std::vector<std::string> documents = WriteCorpus(dir);
  testing::TinyGpt2Vocabulary vocabulary = testing::MakeTinyGpt2Vocabulary();
  ASSERT_TRUE(WriteFileAtomically(dir + "/encoder.json", vocabulary.encoder_json).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/vocab.bpe", vocabulary.vocab_bpe).ok());
  PrepareOptions options = Options(dir, dir + "/out");
  options.tokenizer = {"gpt2", dir + "/encoder.json", dir + "/vocab.bpe"};
  auto result = PrepareDataset(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest.tokenizer, "gpt2");
  EXPECT_EQ(result->manifest.vocab_size, 270);
  EXPECT_EQ(result->manifest.eos_id, 269);

  // The directory is self-contained: its own copy of the vocabulary decodes it.
  auto manifest = ReadManifest(dir + "/out");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  TokenizerSpec spec = TokenizerSpecOf(*manifest, dir + "/out");
  EXPECT_EQ(spec.gpt2_encoder_path, dir + "/out/encoder.json");
  auto tokenizer = MakeTokenizer(spec);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::vector<std::string> decoded;
  for (const char* split : {"train", "validation"}) {
    auto set = OpenDatasetSplit(dir + "/out", split);
    ASSERT_TRUE(set.ok()) << set.status();
    for (int64_t d = 0; d < (*set)->document_count(); ++d) {
      auto text = (*tokenizer)->Decode((*set)->Document(d).ToVector());
      ASSERT_TRUE(text.ok());
      decoded.push_back(*text);
    }
  }
  std::sort(decoded.begin(), decoded.end());
  std::sort(documents.begin(), documents.end());
  EXPECT_EQ(decoded, documents);
}

TEST(PrepareTest, BadInputsGiveClearErrors) {
  std::string dir = testing::MakeTestDir("prepare_errors");
  ASSERT_TRUE(MakeDirectories(dir + "/corpus").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/corpus/blank", "%\n \n%\n\n").ok());
  auto empty = PrepareDataset(Options(dir, dir + "/out"));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("the corpus is empty"));

  PrepareOptions options = Options(dir, dir + "/out");
  options.validation_fraction = 1;
  EXPECT_THAT(std::string(PrepareDataset(options).status().message()),
              HasSubstr("validation fraction 1 is not in [0, 1)"));
  options = Options(dir, dir + "/out");
  options.tokenizer.kind = "nope";
  EXPECT_FALSE(PrepareDataset(options).ok());
}

TEST(PrepareTest, ShardsReplacedBehindTheManifestAreCaught) {
  std::string dir = testing::MakeTestDir("prepare_tamper");
  WriteCorpus(dir);
  ASSERT_TRUE(PrepareDataset(Options(dir, dir + "/out")).ok());
  ASSERT_TRUE(WriteShard(dir + "/out/train-00000.shard", 259, {{1, 2, 3}}).ok());
  auto set = OpenDatasetSplit(dir + "/out", "train");
  EXPECT_EQ(set.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("replaced after the manifest"));
  ASSERT_TRUE(WriteFileAtomically(dir + "/out/manifest.json", "{\"format\": 3").ok());
  EXPECT_THAT(std::string(OpenDatasetSplit(dir + "/out", "train").status().message()),
              HasSubstr("not a JSON object"));
}

}  // namespace
}  // namespace corescape::data
