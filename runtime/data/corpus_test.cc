#include "runtime/data/corpus.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/data/test_util.h"

namespace corescape::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Documents(const std::string& path, absl::string_view delimiter) {
  std::vector<std::string> documents;
  absl::Status status = ForEachDocument(path, delimiter, [&](absl::string_view text) {
    documents.emplace_back(text);
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
  return documents;
}

TEST(CorpusTest, ListsDirectoriesInOrderSkippingHiddenBinaryAndDuplicates) {
  std::string dir = testing::MakeTestDir("corpus_list");
  ASSERT_TRUE(MakeDirectories(dir + "/texts/nested").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/texts/b", "b\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/texts/a", "a\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/texts/nested/c", "c\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/texts/.hidden", "h\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/texts/a.dat", std::string("\0\0\0\2index", 9)).ok());
  ASSERT_EQ(symlink("a", (dir + "/texts/a.u8").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(dir + "/extra", "x\n").ok());

  auto files = ListCorpusFiles({dir + "/extra", dir + "/texts/", dir + "/texts/b"});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir + "/extra", dir + "/texts/a", dir + "/texts/b",
                                  dir + "/texts/nested/c"));
}

TEST(CorpusTest, MissingOrEmptyInputsFail) {
  std::string dir = testing::MakeTestDir("corpus_missing");
  auto missing = ListCorpusFiles({dir + "/nope"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(dir + "/nope"));
  auto empty = ListCorpusFiles({dir});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ListCorpusFiles({}).ok());
}

TEST(CorpusTest, SplitsAtDelimiterLines) {
  std::string path = testing::MakeTestDir("corpus_split") + "/fortunes";
  ASSERT_TRUE(WriteFileAtomically(path,
                                  "one\n%\n\n  \n%\ntwo\nlines\n%\r\n100% sure\n %\n%%\nlast").ok());
  EXPECT_THAT(Documents(path, "%"),
              ElementsAre("one\n", "two\nlines\n", "100% sure\n %\n%%\nlast"));
  EXPECT_THAT(Documents(path, ""), ElementsAre("one\n%\n\n  \n%\ntwo\nlines\n%\r\n100% sure\n %\n%%\nlast"));
}

TEST(CorpusTest, BlankFilesAndLeadingDelimitersYieldNothing) {
  std::string dir = testing::MakeTestDir("corpus_blank");
  ASSERT_TRUE(WriteFileAtomically(dir + "/blank", " \n\t\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/only", "%\n%\n").ok());
  EXPECT_TRUE(Documents(dir + "/blank", "").empty());
  EXPECT_TRUE(Documents(dir + "/blank", "%").empty());
  EXPECT_TRUE(Documents(dir + "/only", "%").empty());
}

TEST(CorpusTest, VisitorErrorsStopTheWalk) {
  std::string path = testing::MakeTestDir("corpus_stop") + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "a\n%\nb\n%\nc\n").ok());
  int visits = 0;
  absl::Status status = ForEachDocument(path, "%", [&](absl::string_view) {
    return ++visits == 2 ? absl::CancelledError("stop") : absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(visits, 2);
}

}  // namespace
}  // namespace corescape::data
