// The CUDA runtime on a real GPU; every test skips without one.
#include "runtime/device/cuda_device_runtime.h"

#include <atomic>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {
namespace {

class CudaDeviceRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
    auto rt = OpenDevice(Device::Cuda(0));
    ASSERT_TRUE(rt.ok()) << rt.status();
    runtime_ = std::move(*rt);
  }
  std::unique_ptr<DeviceRuntime> runtime_;
};

TEST_F(CudaDeviceRuntimeTest, ReportsTheGpu) {
  auto info = runtime_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->total_bytes, int64_t{1} << 30);
  EXPECT_EQ(runtime_->device(), Device::Cuda(0));
}

TEST_F(CudaDeviceRuntimeTest, CopiesRoundTripThroughPinnedAndDeviceMemory) {
  auto stream = runtime_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr size_t kCount = 1 << 20;
  const size_t bytes = kCount * sizeof(float);
  auto host = PinnedHostBuffer::Allocate(runtime_.get(), bytes);
  auto back = PinnedHostBuffer::Allocate(runtime_.get(), bytes);
  ASSERT_TRUE(host.ok() && back.ok());
  std::iota(host->as<float>(), host->as<float>() + kCount, 1.0f);
  CachingAllocator allocator(runtime_.get());
  auto a = allocator.Allocate(bytes);
  auto b = allocator.Allocate(bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(runtime_->CopyAsync(a->data(), host->data(), bytes, CopyKind::kHostToDevice, **stream).ok());
  ASSERT_TRUE(runtime_->CopyAsync(b->data(), a->data(), bytes, CopyKind::kDeviceToDevice, **stream).ok());
  ASSERT_TRUE(runtime_->CopyAsync(back->data(), b->data(), bytes, CopyKind::kDeviceToHost, **stream).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(back->as<float>()[i], host->as<float>()[i]) << i;
}

TEST_F(CudaDeviceRuntimeTest, EventsOrderWorkAcrossStreams) {
  auto producer = runtime_->CreateStream();
  auto consumer = runtime_->CreateStream();
  auto start = runtime_->CreateEvent();
  auto done = runtime_->CreateEvent();
  ASSERT_TRUE(producer.ok() && consumer.ok() && start.ok() && done.ok());
  std::vector<int> order;
  std::atomic<bool> release{false};
  ASSERT_TRUE((*producer)->Record(**start).ok());
  // The producer is held until the test releases it, so the consumer's
  // work can only run after it if the event orders them.
  ASSERT_TRUE((*producer)->EnqueueHost([&] {
    while (!release.load()) {
    }
    order.push_back(1);
  }).ok());
  ASSERT_TRUE((*producer)->Record(**done).ok());
  ASSERT_TRUE((*consumer)->Wait(**done).ok());
  ASSERT_TRUE((*consumer)->EnqueueHost([&] { order.push_back(2); }).ok());
  auto complete = (*done)->Query();
  ASSERT_TRUE(complete.ok());
  EXPECT_FALSE(*complete);
  release.store(true);
  ASSERT_TRUE((*consumer)->Synchronize().ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  auto ms = runtime_->ElapsedMilliseconds(**start, **done);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
}

TEST_F(CudaDeviceRuntimeTest, OutOfMemoryIsResourceExhaustedNamingTheCall) {
  auto huge = runtime_->AllocateDevice(size_t{1} << 40);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("cudaMalloc"), std::string::npos) << huge.status();
  // The device still works afterwards.
  auto small = runtime_->AllocateDevice(1024);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(runtime_->FreeDevice(*small).ok());
}

TEST_F(CudaDeviceRuntimeTest, AllocatorReusesDeviceBlocks) {
  CachingAllocator allocator(runtime_.get());
  void* first = nullptr;
  {
    auto a = allocator.Allocate(3 << 20);
    ASSERT_TRUE(a.ok());
    first = a->data();
  }
  auto b = allocator.Allocate(3 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(allocator.stats().device_allocations, 1);
  b->Reset();
  ASSERT_TRUE(allocator.ReleaseCached().ok());
  EXPECT_EQ(allocator.stats().device_frees, 1);
}

TEST(CudaDevice, OrdinalPastTheGpusIsRefused) {
  auto rt = OpenDevice(Device::Cuda(kMaxCudaOrdinal));
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(rt.status().message().find("cuda:255"), std::string::npos) << rt.status();
}

}  // namespace
}  // namespace corescape::device
