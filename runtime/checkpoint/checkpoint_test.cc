#include "runtime/checkpoint/checkpoint.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace corescape::checkpoint {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

Checkpoint Make(int64_t step, size_t size) {
  Checkpoint c;
  c.step = step;
  c.blobs["params"] = std::string(size, static_cast<char>('a' + step % 26));
  c.blobs["loader.json"] = "{\"epoch\": 0}";
  return c;
}

TEST(CheckpointTest, RoundTripAndNewest) {
  const std::string dir = FreshDir("roundtrip");
  ASSERT_TRUE(WriteCheckpoint(dir, Make(10, 1000)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, Make(20, 2000)).ok());
  auto newest = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->step, 20);
  EXPECT_EQ(newest->blobs["params"], Make(20, 2000).blobs["params"]);
  auto older = LoadNewestCheckpoint(dir, 15);
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(older->step, 10);
  EXPECT_EQ(LoadNewestCheckpoint(dir, 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadNewestCheckpoint(FreshDir("empty")).status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, KeepsNewestK) {
  const std::string dir = FreshDir("keep");
  for (int step = 1; step <= 5; ++step) ASSERT_TRUE(WriteCheckpoint(dir, Make(step, 10), 2).ok());
  EXPECT_EQ(ListCheckpointSteps(dir), (std::vector<int64_t>{4, 5}));
}

TEST(CheckpointTest, CorruptNewestFallsBackToPrevious) {
  const std::string dir = FreshDir("corrupt");
  ASSERT_TRUE(WriteCheckpoint(dir, Make(1, 100)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, Make(2, 100)).ok());
  {
    std::fstream f(dir + "/step-000000000002/params", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50);
    f.put('#');
  }
  auto newest = LoadNewestCheckpoint(dir);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 1);
}

// A manifest that parses as JSON but holds the wrong types (a blob entry
// that is a number, a string step) is a damaged checkpoint like any other:
// the previous one loads, nothing throws.
TEST(CheckpointTest, WrongTypedManifestFallsBackToPrevious) {
  const std::string dir = FreshDir("wrong_type");
  ASSERT_TRUE(WriteCheckpoint(dir, Make(1, 100)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, Make(2, 100)).ok());
  for (const char* manifest :
       {R"({"step": 2, "format": 1, "blobs": {"params": 5}})",
        R"({"step": "2", "format": 1, "blobs": {}})",
        R"({"step": 2, "format": 1, "blobs": {"params": {"bytes": "100", "crc32c": 1}}})",
        R"({"step": 2, "format": 1, "blobs": {"params": {"bytes": -1, "crc32c": 1}}})",
        R"({"step": 2, "format": 1, "blobs": {"params": {"bytes": 100, "crc32c": 99999999999}}})",
        R"({"step": 2, "format": 1, "blobs": {"../params": {"bytes": 100, "crc32c": 1}}})",
        R"({"step": 2, "format": 1, "blobs": []})", R"([1, 2])"}) {
    {
      std::ofstream f(dir + "/step-000000000002/manifest.json", std::ios::trunc);
      f << manifest;
    }
    auto newest = LoadNewestCheckpoint(dir);
    ASSERT_TRUE(newest.ok()) << manifest << ": " << newest.status();
    EXPECT_EQ(newest->step, 1) << manifest;
  }
}

TEST(CheckpointTest, ManifestRoundTripsAndNamesTheProblem) {
  CheckpointManifest manifest{.step = 9};
  manifest.blobs["params"] = {.bytes = 12, .crc32c = 0xdeadbeef};
  auto parsed = ParseCheckpointManifest(CheckpointManifestToJson(manifest), "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->step, 9);
  EXPECT_EQ(parsed->blobs["params"].crc32c, 0xdeadbeef);
  auto bad = ParseCheckpointManifest(R"({"step": 1, "blobs": {"params": {"bytes": 1}}})",
                                     "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("m.json"), absl::string_view::npos);
  EXPECT_NE(bad.status().message().find("crc32c"), absl::string_view::npos);
}

// kill -9 in the middle of writing a large checkpoint: the previous one
// still loads, and the half-written one is never taken for complete.
TEST(CheckpointTest, KillDuringWriteLeavesPreviousLoadable) {
  const std::string dir = FreshDir("kill");
  ASSERT_TRUE(WriteCheckpoint(dir, Make(1, 1000)).ok());
  for (int attempt = 0; attempt < 5; ++attempt) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Checkpoint big = Make(2, 64 << 20);
      big.blobs["optimizer"] = std::string(64 << 20, 'o');
      WriteCheckpoint(dir, big).IgnoreError();
      _exit(0);
    }
    usleep(20000 + attempt * 30000);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    auto newest = LoadNewestCheckpoint(dir);
    ASSERT_TRUE(newest.ok()) << newest.status();
    // Either the old one, or (if the child got to finish) a complete new one.
    if (newest->step == 2) {
      EXPECT_EQ(newest->blobs["optimizer"].size(), size_t{64 << 20});
    } else {
      EXPECT_EQ(newest->step, 1);
      EXPECT_EQ(newest->blobs["params"], Make(1, 1000).blobs["params"]);
    }
  }
}

TEST(CheckpointTest, RejectsBadBlobNames) {
  Checkpoint c;
  c.step = 1;
  c.blobs["../escape"] = "x";
  EXPECT_EQ(WriteCheckpoint(FreshDir("badname"), c).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::checkpoint
