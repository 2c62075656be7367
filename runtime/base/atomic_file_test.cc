#include "runtime/base/atomic_file.h"

#include <dirent.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace corescape {
namespace {

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

TEST(AtomicFileTest, WritesReplacesAndLeavesNoTempFiles) {
  std::string dir = TestDir() + "/atomic/nested";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  std::string path = dir + "/state";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  auto contents = ReadFileToString(path);
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(*contents, "second, longer");

  int entries = 0;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++entries;
  }
  closedir(d);
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFileTest, MissingFileIsNotFound) {
  auto contents = ReadFileToString(TestDir() + "/does-not-exist");
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
}

TEST(AtomicFileTest, MakeDirectoriesRejectsFile) {
  std::string path = TestDir() + "/plain-file";
  ASSERT_TRUE(WriteFileAtomically(path, "x").ok());
  EXPECT_FALSE(MakeDirectories(path).ok());
}

}  // namespace
}  // namespace corescape
