#include "runtime/device/caching_allocator.h"

#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu_device_runtime.h"

namespace corescape::device {
namespace {

TEST(CachingAllocator, SizeClassesRoundUpByAtMostAQuarter) {
  EXPECT_EQ(CachingAllocator::SizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(513), 640u);
  EXPECT_EQ(CachingAllocator::SizeClass(1024), 1024u);
  EXPECT_EQ(CachingAllocator::SizeClass(1025), 1280u);
  EXPECT_EQ(CachingAllocator::SizeClass(3 << 20), size_t{3} << 20);
  for (size_t bytes = 1; bytes < (size_t{1} << 22); bytes = bytes * 3 / 2 + 1) {
    const size_t c = CachingAllocator::SizeClass(bytes);
    EXPECT_GE(c, bytes);
    if (bytes > 512) {
      EXPECT_LE(c, bytes + bytes / 4) << bytes;
    }
    EXPECT_EQ(CachingAllocator::SizeClass(c), c) << "a class is its own class";
  }
}

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameClass) {
  CpuDeviceRuntime runtime;
  CachingAllocator allocator(&runtime);
  void* first = nullptr;
  {
    auto buffer = allocator.Allocate(1000);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_EQ(buffer->size(), 1000u);
    std::memset(buffer->data(), 1, 1000);
    first = buffer->data();
  }
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_cached, 1024);
  EXPECT_EQ(s.device_allocations, 1);
  // 900 bytes is the same class (1024): the cached block comes back.
  auto again = allocator.Allocate(900);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  s = allocator.stats();
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.device_allocations, 1);
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.bytes_in_use, 1024);
  // Another class does not take it.
  auto other = allocator.Allocate(5000);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->data(), first);
  EXPECT_EQ(allocator.stats().device_allocations, 2);
}

TEST(CachingAllocator, TracksPeakAndReleasesCachedMemory) {
  CpuDeviceRuntime runtime;
  CachingAllocator allocator(&runtime);
  {
    std::vector<DeviceBuffer> buffers;
    for (int i = 0; i < 4; ++i) {
      auto b = allocator.Allocate(4096);
      ASSERT_TRUE(b.ok());
      buffers.push_back(std::move(*b));
    }
    EXPECT_EQ(allocator.stats().bytes_in_use, 4 * 4096);
    buffers.pop_back();
    EXPECT_EQ(allocator.stats().bytes_in_use, 3 * 4096);
    EXPECT_EQ(allocator.stats().bytes_cached, 4096);
  }
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.peak_bytes_in_use, 4 * 4096);
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_cached, 4 * 4096);
  ASSERT_TRUE(allocator.ReleaseCached().ok());
  s = allocator.stats();
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.device_frees, 4);
  allocator.ResetPeak();
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, 0);
  // Released blocks went back to the runtime: it refuses to free them again.
  auto fresh = allocator.Allocate(4096);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(allocator.stats().device_allocations, 5);
}

TEST(CachingAllocator, MovedBuffersAreFreedOnce) {
  CpuDeviceRuntime runtime;
  CachingAllocator allocator(&runtime);
  auto a = allocator.Allocate(100);
  ASSERT_TRUE(a.ok());
  DeviceBuffer b = std::move(*a);
  DeviceBuffer c;
  c = std::move(b);
  EXPECT_EQ(a->data(), nullptr);
  EXPECT_EQ(b.data(), nullptr);
  ASSERT_NE(c.data(), nullptr);
  c.Reset();
  c.Reset();
  EXPECT_EQ(allocator.stats().bytes_cached, 512);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
}

TEST(CachingAllocator, RefusesOversizedRequestsAndGivesEmptyBuffersForZero) {
  CpuDeviceRuntime runtime;
  CachingAllocator allocator(&runtime);
  auto huge = allocator.Allocate(CachingAllocator::kMaxRequestBytes + 1);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("cpu"), std::string::npos) << huge.status();
  auto zero = allocator.Allocate(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->data(), nullptr);
  EXPECT_EQ(allocator.stats().allocations, 0);
}

// A device of 4 KiB: a request that fits only once the cache is handed back
// succeeds (released, retried); one that never fits is RESOURCE_EXHAUSTED
// with the allocator's occupancy in the message.
TEST(CachingAllocator, ReleasesTheCacheWhenTheDeviceIsFull) {
  CpuDeviceRuntime runtime(4096);
  CachingAllocator allocator(&runtime);
  { auto small = allocator.Allocate(1000); ASSERT_TRUE(small.ok()); }
  EXPECT_EQ(allocator.stats().bytes_cached, 1024);
  auto large = allocator.Allocate(3500);  // class 3584: with the cached 1024 it does not fit
  ASSERT_TRUE(large.ok()) << large.status();
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.bytes_cached, 0);
  EXPECT_EQ(s.device_frees, 1);
  EXPECT_EQ(s.bytes_in_use, 3584);

  auto too_big = allocator.Allocate(1024);
  ASSERT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted) << too_big.status();
  EXPECT_NE(too_big.status().message().find("3584 bytes in use"), std::string::npos) << too_big.status();
  large->Reset();
  auto fits_again = allocator.Allocate(1024);
  EXPECT_TRUE(fits_again.ok()) << fits_again.status();
}

TEST(CachingAllocator, ConcurrentAllocationsKeepStatsConsistent) {
  CpuDeviceRuntime runtime;
  CachingAllocator allocator(&runtime);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 500; ++i) {
        auto b = allocator.Allocate(256 + 100 * ((i + t) % 7));
        ASSERT_TRUE(b.ok());
        std::memset(b->data(), t, b->size());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.allocations, 2000);
  EXPECT_EQ(s.allocations, s.cache_hits + s.device_allocations);
  // At most four live at once per class: the cache bounds fresh blocks.
  EXPECT_LE(s.device_allocations, 4 * 7);
}

}  // namespace
}  // namespace corescape::device
