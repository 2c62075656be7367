#include "runtime/base/thread_pool.h"

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

// Runs ParallelFor and checks every index in [0, n) is visited exactly once.
void ExpectCoversOnce(ThreadPool& pool, int64_t n, int64_t chunk_size) {
  std::vector<std::atomic<int>> visits(n);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
      },
      chunk_size);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(visits[i].load(), 1) << i;
}

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 17, 100, 1000, 12345}) {
      for (int64_t chunk_size : {0, 1, 5, 64}) {
        ExpectCoversOnce(pool, n, chunk_size);
      }
    }
  }
}

TEST(ThreadPoolTest, NonPositiveThreadCountMeansOne) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), 1);
  ExpectCoversOnce(pool, 10, 1);
}

TEST(ThreadPoolTest, SingleThreadOrSmallLoopRunsInlineInOneCall) {
  const std::thread::id caller = std::this_thread::get_id();
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    int calls = 0;
    const int64_t n = threads == 1 ? 1000 : 8;
    pool.ParallelFor(
        n,
        [&](int64_t begin, int64_t end) {
          ++calls;
          EXPECT_EQ(std::this_thread::get_id(), caller);
          EXPECT_EQ(begin, 0);
          EXPECT_EQ(end, n);
        },
        /*chunk_size=*/8);
    EXPECT_EQ(calls, 1) << threads;
  }
}

TEST(ThreadPoolTest, ChunksHaveTheRequestedSize) {
  ThreadPool pool(3);
  absl::Mutex mutex;
  std::set<std::pair<int64_t, int64_t>> chunks;
  pool.ParallelFor(
      10,
      [&](int64_t begin, int64_t end) {
        absl::MutexLock lock(&mutex);
        chunks.insert({begin, end});
      },
      /*chunk_size=*/4);
  EXPECT_EQ(chunks, (std::set<std::pair<int64_t, int64_t>>{{0, 4}, {4, 8}, {8, 10}}));
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(4);
  absl::Mutex mutex;
  std::set<std::thread::id> seen;
  std::atomic<int> arrived{0};
  // Each chunk waits (bounded) until another chunk has started, so a second
  // thread must take part.
  pool.ParallelFor(4, [&](int64_t, int64_t) {
    arrived.fetch_add(1);
    for (int spin = 0; spin < 200000 && arrived.load() < 2; ++spin) {
      std::this_thread::yield();
    }
    absl::MutexLock lock(&mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_GE(seen.size(), 2u);
}

TEST(ThreadPoolTest, NestedAndConcurrentCallsFinish) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  auto nested_sum = [&] {
    pool.ParallelFor(20, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        pool.ParallelFor(50, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      }
    });
  };
  std::thread other(nested_sum);
  nested_sum();
  other.join();
  EXPECT_EQ(total.load(), 2 * 20 * 50);
}

TEST(ThreadPoolTest, DefaultThreadCountReadsEnvironment) {
  setenv("CORESCAPE_NUM_THREADS", "3", 1);
  EXPECT_EQ(DefaultThreadCount(), 3);
  setenv("CORESCAPE_NUM_THREADS", "zero", 1);
  EXPECT_GE(DefaultThreadCount(), 1);
  setenv("CORESCAPE_NUM_THREADS", "-2", 1);
  EXPECT_GE(DefaultThreadCount(), 1);
  unsetenv("CORESCAPE_NUM_THREADS");
  EXPECT_EQ(DefaultThreadCount(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_NE(DefaultThreadPool(), nullptr);
  EXPECT_EQ(DefaultThreadPool(), DefaultThreadPool());
}

}  // namespace
}  // namespace corescape
