#include "scheduler/state_store.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + name;
}

TEST(SqliteStateStoreTest, RecordsSurviveReopen) {
  const std::string dir = TestDir("reopen");
  {
    auto store = SqliteStateStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put("node", "b", std::string("\0binary\xff", 8)).ok());
    ASSERT_TRUE((*store)->Put("node", "a", "first").ok());
    ASSERT_TRUE((*store)->Put("node", "a", "replaced").ok());
    ASSERT_TRUE((*store)->Put("job", "j1", "job").ok());
    ASSERT_TRUE((*store)->Put("node", "gone", "x").ok());
    ASSERT_TRUE((*store)->Delete("node", "gone").ok());
  }
  auto store = SqliteStateStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto nodes = (*store)->LoadAll("node");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0], (std::pair<std::string, std::string>{"a", "replaced"}));
  EXPECT_EQ((*nodes)[1].second, std::string("\0binary\xff", 8));
  EXPECT_EQ((*store)->LoadAll("job")->size(), 1u);
}

TEST(SqliteStateStoreTest, BatchWritesAndDeletesTogether) {
  const std::string dir = TestDir("batch");
  {
    auto store = SqliteStateStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put("job", "old", "x").ok());
    ASSERT_TRUE((*store)
                    ->WriteBatch({{"job", "j1", "record"},
                                  {"jobtoken", "j1", "token"},
                                  {"job", "old", std::nullopt}})
                    .ok());
  }
  auto store = SqliteStateStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = (*store)->LoadAll("job");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0], (std::pair<std::string, std::string>{"j1", "record"}));
  EXPECT_EQ((*store)->LoadAll("jobtoken")->size(), 1u);
  // A second batch after the first: the transaction was closed.
  EXPECT_TRUE((*store)->WriteBatch({{"job", "j2", "record"}}).ok());
  EXPECT_TRUE((*store)->WriteBatch({}).ok());
  EXPECT_EQ((*store)->LoadAll("job")->size(), 2u);
}

TEST(SqliteStateStoreTest, SecondOpenOfSameDirectoryIsRefused) {
  const std::string dir = TestDir("locked");
  auto first = SqliteStateStore::Open(dir);
  ASSERT_TRUE(first.ok());
  auto second = SqliteStateStore::Open(dir);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();
  EXPECT_TRUE(SqliteStateStore::Open(dir).ok());
}

TEST(SqliteStateStoreTest, TrimKeepsNewestKeys) {
  auto store = SqliteStateStore::Open(TestDir("trim"));
  ASSERT_TRUE(store.ok());
  for (int i = 10; i < 20; ++i) {
    ASSERT_TRUE((*store)->Put("event", std::to_string(i), "e").ok());
  }
  ASSERT_TRUE((*store)->TrimToNewest("event", 3).ok());
  auto events = (*store)->LoadAll("event");
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].first, "17");
}

TEST(SqliteStateStoreTest, GarbageFileIsAClearError) {
  const std::string dir = TestDir("garbage");
  std::system(("mkdir -p " + dir + " && echo 'not a database at all, not at all' > " +
               dir + "/scheduler.db").c_str());
  auto store = SqliteStateStore::Open(dir);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("scheduler.db"), std::string::npos)
      << store.status();
}

}  // namespace
}  // namespace corescape::scheduler
