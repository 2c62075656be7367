#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/gpt2_pretokenizer.h"
#include "runtime/data/gpt2_tokenizer.h"
#include "runtime/data/test_util.h"
#include "runtime/data/tokenizer_factory.h"
#include "runtime/data/unicode_classes.h"

namespace corescape::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ByteTokenizerTest, EveryByteRoundTrips) {
  ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.vocab_size(), 259);
  EXPECT_EQ(tokenizer.bos_id(), 256);
  EXPECT_EQ(tokenizer.eos_id(), 257);
  EXPECT_EQ(tokenizer.pad_id(), 258);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  auto ids = tokenizer.Encode(all_bytes);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ((*ids)[b], b);
  auto text = tokenizer.Decode(*ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, all_bytes);
}

TEST(ByteTokenizerTest, SpecialsDecodeByNameAndStrangersFail) {
  ByteTokenizer tokenizer;
  auto text = tokenizer.Decode({256, 'h', 'i', 257, 258});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|bos|>hi<|eos|><|pad|>");
  auto bad = tokenizer.Decode({'a', 259});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("token 1 is 259"));
  EXPECT_FALSE(tokenizer.Decode({-1}).ok());
}

TEST(TokenizerFactoryTest, KnowsByteAndRejectsStrangers) {
  auto byte = MakeTokenizer({"byte", "", ""});
  ASSERT_TRUE(byte.ok());
  EXPECT_EQ((*byte)->name(), "byte");
  EXPECT_FALSE(MakeTokenizer({"sentencepiece", "", ""}).ok());
  EXPECT_FALSE(MakeTokenizer({"gpt2", "", ""}).ok());
}

// Golden splits from GPT-2's regex run by Python's `regex` module. (A
// check outside the suite compared 50,000 random strings over all code
// points with the regex: no differences.)
TEST(Gpt2PreTokenizeTest, MatchesTheRegex) {
  struct Case {
    std::string text;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {"Hello world's 123  foo!!\n\nbar",
       {"Hello", " world", "'s", " 123", " ", " foo", "!!", "\n", "\n", "bar"}},
      {"naïve café ²½ ٣ x", {"naïve", " café", " ²½", " ٣", " x"}},
      {"  ", {"  "}},
      {"a \n b", {"a", " \n", " b"}},
      {"I'M don't 'sup you'll", {"I", "'", "M", " don", "'t", " '", "sup", " you", "'ll"}},
      {"tab\t\tx\r\n", {"tab", "\t", "\t", "x", "\r\n"}},
      {" 's", {" '", "s"}},
      {"日本語 テキスト。", {"日本語", " テキスト", "。"}},
      {"x\u3000y  \u2003z", {"x", "\u3000", "y", "  ", "\u2003", "z"}},
      {"emoji 😀😀 ok", {"emoji", " 😀😀", " ok"}},
      {"\x1c\x1f\u0085\u00a0 a", {"\x1c\x1f", "\u0085\u00a0", " a"}},
      // Combining marks are not letters; Devanagari digits and roman
      // numerals are numbers.
      {"नमस्ते दुनिया १२३",
       {"नमस", "्", "त", "े", " द", "ु", "न", "ि", "य", "ा", " १२३"}},
      {"שָׁלוֹם Ⅻ৪৫", {"ש", "ָׁ", "לו", "ֹ", "ם", " Ⅻ৪৫"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> pieces;
    for (absl::string_view piece : Gpt2PreTokenize(c.text)) pieces.emplace_back(piece);
    EXPECT_EQ(pieces, c.pieces) << "text: " << c.text << "\n got: " << absl::StrJoin(pieces, "|");
  }
}

TEST(UnicodeClassesTest, SpotChecks) {
  EXPECT_EQ(ClassifyCodePoint('a'), UnicodeClass::kLetter);
  EXPECT_EQ(ClassifyCodePoint('7'), UnicodeClass::kNumber);
  EXPECT_EQ(ClassifyCodePoint('!'), UnicodeClass::kOther);
  EXPECT_EQ(ClassifyCodePoint(0x00E9), UnicodeClass::kLetter);   // é
  EXPECT_EQ(ClassifyCodePoint(0x00BD), UnicodeClass::kNumber);   // ½
  EXPECT_EQ(ClassifyCodePoint(0x0301), UnicodeClass::kOther);    // combining acute
  EXPECT_EQ(ClassifyCodePoint(0x65E5), UnicodeClass::kLetter);   // 日
  EXPECT_EQ(ClassifyCodePoint(0x0663), UnicodeClass::kNumber);   // ٣
  EXPECT_EQ(ClassifyCodePoint(0x1F600), UnicodeClass::kOther);   // 😀
  EXPECT_EQ(ClassifyCodePoint(0x20000), UnicodeClass::kLetter);  // CJK extension B
  EXPECT_EQ(ClassifyCodePoint(0x10FFFF), UnicodeClass::kOther);
}

TEST(Gpt2PreTokenizeTest, InvalidUtf8StillSplitsAndConcatenatesBack) {
  std::string text = "ok \xff\xfe bad \xe2\x82 end\xc0\xaf";
  std::string joined;
  for (absl::string_view piece : Gpt2PreTokenize(text)) joined.append(piece.data(), piece.size());
  EXPECT_EQ(joined, text);
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vocabulary_ = testing::MakeTinyGpt2Vocabulary();
    std::string dir = testing::MakeTestDir("gpt2");
    encoder_path_ = dir + "/encoder.json";
    vocab_path_ = dir + "/vocab.bpe";
    ASSERT_TRUE(WriteFileAtomically(encoder_path_, vocabulary_.encoder_json).ok());
    ASSERT_TRUE(WriteFileAtomically(vocab_path_, vocabulary_.vocab_bpe).ok());
    auto tokenizer = MakeTokenizer({"gpt2", encoder_path_, vocab_path_});
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
  }
  int32_t Id(const std::string& token) { return vocabulary_.encoder[token].get<int32_t>(); }

  testing::TinyGpt2Vocabulary vocabulary_;
  std::string encoder_path_, vocab_path_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(Gpt2TokenizerTest, ByteAlphabetIsGpt2s) {
  std::vector<std::string> symbols = testing::Gpt2ByteSymbols();
  EXPECT_EQ(symbols[' '], "Ġ");
  EXPECT_EQ(symbols['\n'], "Ċ");
  EXPECT_EQ(symbols['A'], "A");
  EXPECT_EQ(symbols[0xAD], "Ń");  // the soft hyphen is not "printable"
}

TEST_F(Gpt2TokenizerTest, AppliesMergesByRank) {
  EXPECT_EQ(tokenizer_->name(), "gpt2");
  EXPECT_EQ(tokenizer_->vocab_size(), 256 + 13 + 1);
  EXPECT_EQ(tokenizer_->eos_id(), Id("<|endoftext|>"));
  EXPECT_EQ(tokenizer_->bos_id(), tokenizer_->eos_id());
  auto ids = tokenizer_->Encode("hello world the thing");
  ASSERT_TRUE(ids.ok());
  // " thing": "Ġt" (rank 0), then "in", "ing"; "Ġt h" has no merge.
  EXPECT_THAT(*ids, ElementsAre(Id("hello"), Id("Ġworld"), Id("Ġthe"), Id("Ġt"), Id("h"),
                                Id("ing")));
  // Every occurrence of the best pair merges in one step.
  auto repeated = tokenizer_->Encode("llll");
  ASSERT_TRUE(repeated.ok());
  EXPECT_THAT(*repeated, ElementsAre(Id("ll"), Id("ll")));
  // Merges never cross pre-token boundaries: "o" "r" are in different words.
  auto split = tokenizer_->Encode("o r");
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(*split, ElementsAre(Id("o"), Id("Ġ"), Id("r")));
}

TEST_F(Gpt2TokenizerTest, RoundTripsAnyText) {
  for (const std::string& text :
       {std::string("hello world\n\n\tthe thing's 42 naïve café 日本 😀  "),
        std::string("\xff\xfe invalid \xc0 utf-8\x00 with nul", 28), std::string(""),
        std::string("<|endoftext|>")}) {
    auto ids = tokenizer_->Encode(text);
    ASSERT_TRUE(ids.ok());
    auto decoded = tokenizer_->Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, text);
  }
  // The special's spelling in text is text, not the special id.
  auto ids = tokenizer_->Encode("<|endoftext|>");
  ASSERT_TRUE(ids.ok());
  EXPECT_GT(ids->size(), 1u);
  auto eos = tokenizer_->Decode({tokenizer_->eos_id()});
  ASSERT_TRUE(eos.ok());
  EXPECT_EQ(*eos, "<|endoftext|>");
}

TEST_F(Gpt2TokenizerTest, DecodeRejectsUnknownIds) {
  auto bad = tokenizer_->Decode({Id("hello"), 270});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("token 1 is 270"));
}

TEST_F(Gpt2TokenizerTest, BadFilesGiveClearErrors) {
  auto error_of = [](const std::string& encoder, const std::string& merges) {
    auto tokenizer = Gpt2Tokenizer::FromContents(encoder, merges, "enc.json", "merges.bpe");
    EXPECT_FALSE(tokenizer.ok());
    return std::string(tokenizer.status().message());
  };
  EXPECT_THAT(error_of("[1, 2", vocabulary_.vocab_bpe), HasSubstr("enc.json: not a JSON object"));
  nlohmann::json no_eot = vocabulary_.encoder;
  no_eot.erase("<|endoftext|>");
  EXPECT_THAT(error_of(no_eot.dump(), vocabulary_.vocab_bpe), HasSubstr("no \"<|endoftext|>\""));
  nlohmann::json no_byte = vocabulary_.encoder;
  no_byte.erase("Ġ");
  EXPECT_THAT(error_of(no_byte.dump(), vocabulary_.vocab_bpe), HasSubstr("no token for byte 32"));
  EXPECT_THAT(error_of(vocabulary_.encoder_json, "#version: 0.2\nh e\nthree parts here\n"),
              HasSubstr("merges.bpe: line 3"));
  EXPECT_THAT(error_of(vocabulary_.encoder_json, "q z\n"),
              HasSubstr("merge result \"qz\" is not in enc.json"));
  EXPECT_FALSE(MakeTokenizer({"gpt2", encoder_path_ + ".missing", vocab_path_}).ok());
}

}  // namespace
}  // namespace corescape::data
