#include <dirent.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/crc32c.h"
#include "runtime/data/shard_format.h"
#include "runtime/data/shard_reader.h"
#include "runtime/data/shard_writer.h"
#include "runtime/data/test_util.h"

namespace corescape::data {
namespace {

using ::testing::HasSubstr;

std::vector<std::vector<int32_t>> SampleDocuments(int32_t vocab_size) {
  std::vector<std::vector<int32_t>> documents;
  for (int d = 0; d < 7; ++d) {
    std::vector<int32_t> document;
    for (int i = 0; i < 3 + d * 5; ++i) document.push_back((d * 7919 + i * 104729) % vocab_size);
    documents.push_back(document);
  }
  documents.push_back({});  // empty documents are legal in the format
  documents.push_back({vocab_size - 1, 0});
  return documents;
}

int CountFiles(const std::string& dir) {
  int entries = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++entries;
  }
  closedir(d);
  return entries;
}

std::string Contents(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

class ShardRoundTripTest : public ::testing::TestWithParam<std::pair<uint32_t, int32_t>> {};

TEST_P(ShardRoundTripTest, ReadsBackWhatWasWritten) {
  const auto [width, vocab_size] = GetParam();
  std::string dir = testing::MakeTestDir(absl::StrCat("round_trip_", width));
  std::string path = dir + "/a.shard";
  auto documents = SampleDocuments(vocab_size);
  absl::StatusOr<ShardSummary> summary = WriteShard(path, vocab_size, documents, width);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->token_width_bytes, width);
  EXPECT_EQ(CountFiles(dir), 1) << "no temp file left behind";

  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->token_width_bytes(), width);
  EXPECT_EQ((*reader)->vocab_size(), static_cast<uint32_t>(vocab_size));
  ASSERT_EQ((*reader)->document_count(), static_cast<int64_t>(documents.size()));
  int64_t tokens = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    EXPECT_EQ((*reader)->Document(d).ToVector(), documents[d]) << "document " << d;
    EXPECT_EQ((*reader)->DocumentBegin(d), tokens);
    tokens += documents[d].size();
  }
  EXPECT_EQ((*reader)->token_count(), tokens);
  EXPECT_EQ((*reader)->file_bytes(), summary->file_bytes);
  EXPECT_EQ(Contents(path).size(), static_cast<size_t>(summary->file_bytes));
}

INSTANTIATE_TEST_SUITE_P(Widths, ShardRoundTripTest,
                         ::testing::Values(std::make_pair(2u, 259), std::make_pair(2u, 65536),
                                           std::make_pair(4u, 259), std::make_pair(4u, 100000)));

TEST(ShardWriterTest, PicksTheNarrowestWidth) {
  std::string dir = testing::MakeTestDir("width");
  auto narrow = WriteShard(dir + "/n.shard", 65536, {{65535}});
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_EQ(narrow->token_width_bytes, 2u);
  auto wide = WriteShard(dir + "/w.shard", 65537, {{65536}});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->token_width_bytes, 4u);
  EXPECT_FALSE(WriteShard(dir + "/x.shard", 70000, {{1}}, 2).ok());
}

TEST(ShardWriterTest, EmptyShardRoundTrips) {
  std::string dir = testing::MakeTestDir("empty_shard");
  ASSERT_TRUE(WriteShard(dir + "/e.shard", 259, {}).ok());
  auto reader = ShardReader::Open(dir + "/e.shard");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->document_count(), 0);
  EXPECT_EQ((*reader)->token_count(), 0);
}

TEST(ShardWriterTest, RejectsTokensOutsideTheVocabulary) {
  std::string dir = testing::MakeTestDir("writer_rejects");
  auto writer = ShardWriter::Create(dir + "/a.shard", 259);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->AddDocument({1, 2, 3}).ok());
  absl::Status status = (*writer)->AddDocument({4, 259});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("document 1 token 1 is 259"));
  EXPECT_FALSE((*writer)->AddDocument({-1}).ok());
  // The failed documents were not written.
  auto summary = (*writer)->Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->document_count, 1);
}

TEST(ShardWriterTest, AbandonedWriterLeavesNothing) {
  std::string dir = testing::MakeTestDir("abandoned");
  {
    auto writer = ShardWriter::Create(dir + "/a.shard", 259);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->AddDocument({1, 2, 3}).ok());
  }
  EXPECT_EQ(CountFiles(dir), 0);
}

// Corruption: each case must be an error naming the file and a byte offset.
class ShardCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    good_path_ = dir_ + "/good.shard";
    ASSERT_TRUE(WriteShard(good_path_, 1000, {{1, 2, 3}, {4, 5, 6, 7}, {999, 8}}).ok());
    good_ = Contents(good_path_);
    ASSERT_EQ(good_.size(), 64u + 18u + 6u + 32u);  // header, tokens, padding, 4 offsets
  }

  // Writes `bytes` as a shard and returns the error opening it.
  absl::Status OpenBytes(const std::string& bytes, const std::string& name = "bad.shard") {
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, bytes).ok());
    auto reader = ShardReader::Open(path);
    EXPECT_FALSE(reader.ok()) << "opened a corrupted shard";
    if (reader.ok()) return absl::OkStatus();
    EXPECT_THAT(std::string(reader.status().message()), HasSubstr(path));
    EXPECT_THAT(std::string(reader.status().message()), HasSubstr("byte offset"));
    return reader.status();
  }

  // A header re-encoded with a valid header checksum.
  std::string WithHeader(std::string bytes, const ShardHeader& header) {
    std::string encoded = EncodeShardHeader(header);
    bytes.replace(0, encoded.size(), encoded);
    return bytes;
  }

  ShardHeader GoodHeader() {
    auto header = DecodeShardHeader(good_, good_path_);
    EXPECT_TRUE(header.ok());
    return *header;
  }

  std::string dir_, good_path_, good_;
};

TEST_F(ShardCorruptionTest, TruncatedAnywhere) {
  for (size_t size : {size_t{0}, size_t{10}, size_t{63}, size_t{64}, size_t{65}, size_t{81},
                      size_t{88}, good_.size() - 8, good_.size() - 1}) {
    SCOPED_TRACE(size);
    absl::Status status = OpenBytes(good_.substr(0, size));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    if (size < 64) {
      EXPECT_THAT(std::string(status.message()), HasSubstr("shorter than the 64-byte header"));
    } else {
      EXPECT_THAT(std::string(status.message()), HasSubstr("(truncated)"));
      EXPECT_THAT(std::string(status.message()), HasSubstr("needs exactly 120"));
    }
  }
}

TEST_F(ShardCorruptionTest, TrailingBytes) {
  absl::Status status = OpenBytes(good_ + "x");
  EXPECT_THAT(std::string(status.message()), HasSubstr("trailing bytes"));
}

TEST_F(ShardCorruptionTest, FlippedPayloadByteFailsTheChecksum) {
  for (size_t at : {size_t{64}, size_t{70}, size_t{83}, good_.size() - 1}) {
    SCOPED_TRACE(at);
    std::string bytes = good_;
    bytes[at] ^= 0x10;
    absl::Status status = OpenBytes(bytes);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(status.message()), HasSubstr("payload checksum mismatch"));
  }
}

TEST_F(ShardCorruptionTest, FlippedHeaderByteFailsTheHeaderChecksum) {
  std::string bytes = good_;
  bytes[21] ^= 0x01;  // vocab_size
  absl::Status status = OpenBytes(bytes);
  EXPECT_THAT(std::string(status.message()), HasSubstr("byte offset 60: header checksum"));
}

TEST_F(ShardCorruptionTest, BadMagic) {
  std::string bytes = good_;
  bytes.replace(0, 8, "GGUF\0\0\0\0", 8);
  absl::Status status = OpenBytes(bytes);
  EXPECT_THAT(std::string(status.message()), HasSubstr("byte offset 0: bad magic"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a token shard"));
}

TEST_F(ShardCorruptionTest, WrongVersion) {
  std::string bytes = good_;
  bytes[8] = 2;
  absl::Status status = OpenBytes(bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("format version 2 is not supported"));
}

TEST_F(ShardCorruptionTest, TokenOutsideTheVocabulary) {
  // Shrinking the vocabulary leaves the payload (and its checksum) intact,
  // so only the token scan can catch token 999.
  ShardHeader header = GoodHeader();
  header.vocab_size = 500;
  absl::Status status = OpenBytes(WithHeader(good_, header));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("byte offset 78: token 7 (document 2) is 999, outside the vocabulary "
                        "[0, 500)"));
}

TEST_F(ShardCorruptionTest, CountsThatDisagreeWithTheFileSize) {
  ShardHeader header = GoodHeader();
  header.token_count = 1000;
  absl::Status status = OpenBytes(WithHeader(good_, header));
  EXPECT_THAT(std::string(status.message()), HasSubstr("(truncated)"));
  header = GoodHeader();
  header.document_count = uint64_t{1} << 62;
  EXPECT_THAT(std::string(OpenBytes(WithHeader(good_, header)).message()), HasSubstr("too large"));
}

TEST_F(ShardCorruptionTest, OffsetsOutOfOrder) {
  std::string bytes = good_;
  const size_t second_offset = 64 + 24 + 8;  // offsets start at byte 88
  uint64_t bad = 5;                          // document 1 would start after document 2 (at 7)
  uint64_t after = 3;
  std::memcpy(&bytes[second_offset], &bad, 8);
  std::memcpy(&bytes[second_offset + 8], &after, 8);
  ShardHeader header = GoodHeader();
  header.payload_crc32c = Crc32c(bytes.data() + 64, bytes.size() - 64);
  absl::Status status = OpenBytes(WithHeader(bytes, header));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("byte offset 104: offset of document 2 is 3, before the previous"));
}

TEST(ShardReaderTest, MissingFileIsNotFound) {
  auto reader = ShardReader::Open(testing::MakeTestDir("missing") + "/nope.shard");
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace corescape::data
