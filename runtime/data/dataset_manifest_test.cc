#include "runtime/data/dataset_manifest.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace corescape::data {
namespace {

using ::testing::HasSubstr;

DatasetManifest Sample() {
  DatasetManifest m;
  m.tokenizer = "byte";
  m.vocab_size = 257;
  m.eos_id = 256;
  m.pad_id = 256;
  m.token_width_bytes = 2;
  m.train.tokens = 100;
  m.train.documents = 3;
  m.train.shards.push_back({"train-00000.shard", 100, 3});
  m.validation.shards.push_back({"validation-00000.shard", 10, 1});
  return m;
}

TEST(DatasetManifestTest, RoundTrips) {
  auto parsed = ParseManifest(ManifestToJson(Sample()), "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->train.shards.size(), 1u);
  EXPECT_EQ(parsed->train.shards[0].file, "train-00000.shard");
  EXPECT_EQ(parsed->validation.shards[0].tokens, 10);
}

TEST(DatasetManifestTest, ShardPathsOutsideTheDirectoryAreRefused) {
  for (const char* bad : {"../../etc/passwd", "/etc/passwd", "sub/train.shard", "..", "."}) {
    const std::string text =
        absl::StrReplaceAll(ManifestToJson(Sample()), {{"train-00000.shard", bad}});
    auto parsed = ParseManifest(text, "m.json");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("\"file\"")) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("m.json")) << bad;
  }
}

TEST(DatasetManifestTest, TokenizerFilesOutsideTheDirectoryAreRefused) {
  DatasetManifest m = Sample();
  m.tokenizer = "gpt2";
  m.vocab_size = 50257;
  m.eos_id = 50256;
  m.gpt2_encoder_file = "../encoder.json";
  m.gpt2_vocab_file = "vocab.bpe";
  auto parsed = ParseManifest(ManifestToJson(m), "m.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("gpt2_encoder_file"));
}

TEST(DatasetManifestTest, WrongTypesAreErrorsNotCrashes) {
  for (const char* text : {"[]", "{\"format\": 1}", "{\"format\": \"corescape-dataset\", "
                           "\"version\": 1, \"tokenizer\": [], \"train\": {\"shards\": [1]}}",
                           "not json"}) {
    auto parsed = ParseManifest(text, "m.json");
    EXPECT_FALSE(parsed.ok()) << text;
  }
}

// A value outside its field's range is refused naming it, never truncated
// (a vocabulary of 2^40 once read as "vocabulary of 0").
TEST(DatasetManifestTest, OutOfRangeIntegersAreRefusedNamingTheValue) {
  const std::string sample = ManifestToJson(Sample());
  const struct {
    const char* from;
    const char* to;
    const char* expected;
  } cases[] = {
      {"\"vocab_size\": 257", "\"vocab_size\": 1099511627776",
       "\"vocab_size\" is 1099511627776, outside [1, 2147483647]"},
      {"\"vocab_size\": 257", "\"vocab_size\": 18446744073709551615",
       "\"vocab_size\" is 18446744073709551615, outside [1, 2147483647]"},
      {"\"vocab_size\": 257", "\"vocab_size\": -5", "\"vocab_size\" is -5, outside [1, 2147483647]"},
      {"\"vocab_size\": 257", "\"vocab_size\": 0", "\"vocab_size\" is 0, outside [1, 2147483647]"},
      {"\"eos_id\": 256", "\"eos_id\": 4294967552", "\"eos_id\" is 4294967552, outside"},
      {"\"token_width_bytes\": 2", "\"token_width_bytes\": 4294967298",
       "\"token_width_bytes\" is 4294967298, outside [0, 8]"},
  };
  for (const auto& c : cases) {
    const std::string text = absl::StrReplaceAll(sample, {{c.from, c.to}});
    ASSERT_NE(text, sample) << c.from;
    auto parsed = ParseManifest(text, "m.json");
    ASSERT_FALSE(parsed.ok()) << c.to;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace corescape::data
