#include "runtime/device/cpu_device_runtime.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {
namespace {

TEST(CpuDeviceRuntime, CopiesRoundTripThroughDeviceMemory) {
  auto runtime = OpenDevice(Device::Cpu());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  DeviceRuntime& rt = **runtime;
  EXPECT_EQ(rt.device(), Device::Cpu());
  auto stream = rt.CreateStream();
  ASSERT_TRUE(stream.ok());
  std::vector<float> host(1000), back(1000, -1.0f);
  std::iota(host.begin(), host.end(), 0.5f);
  const size_t bytes = host.size() * sizeof(float);
  auto a = rt.AllocateDevice(bytes);
  auto b = rt.AllocateDevice(bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  ASSERT_TRUE(rt.CopyAsync(*a, host.data(), bytes, CopyKind::kHostToDevice, **stream).ok());
  ASSERT_TRUE(rt.CopyAsync(*b, *a, bytes, CopyKind::kDeviceToDevice, **stream).ok());
  ASSERT_TRUE(rt.CopyAsync(back.data(), *b, bytes, CopyKind::kDeviceToHost, **stream).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ(back, host);
  EXPECT_TRUE(rt.FreeDevice(*a).ok());
  EXPECT_TRUE(rt.FreeDevice(*b).ok());
}

TEST(CpuDeviceRuntime, RefusesBadCopies) {
  CpuDeviceRuntime rt, other;
  auto stream = rt.CreateStream();
  auto foreign = other.CreateStream();
  ASSERT_TRUE(stream.ok() && foreign.ok());
  std::vector<char> buf(64);
  EXPECT_EQ(rt.CopyAsync(nullptr, buf.data(), 8, CopyKind::kHostToDevice, **stream).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.CopyAsync(buf.data(), nullptr, 8, CopyKind::kHostToDevice, **stream).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status overlap =
      rt.CopyAsync(buf.data() + 4, buf.data(), 8, CopyKind::kDeviceToDevice, **stream);
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos) << overlap;
  EXPECT_EQ(rt.CopyAsync(buf.data() + 32, buf.data(), 8, CopyKind::kDeviceToDevice, **foreign).code(),
            absl::StatusCode::kInvalidArgument);
  // Zero bytes with null pointers is nothing to do.
  EXPECT_TRUE(rt.CopyAsync(nullptr, nullptr, 0, CopyKind::kHostToDevice, **stream).ok());
  // Adjacent ranges do not overlap.
  EXPECT_TRUE(rt.CopyAsync(buf.data() + 8, buf.data(), 8, CopyKind::kDeviceToDevice, **stream).ok());
}

TEST(CpuDeviceRuntime, RefusesFreesOfForeignPointers) {
  CpuDeviceRuntime rt;
  int local = 0;
  EXPECT_EQ(rt.FreeDevice(&local).code(), absl::StatusCode::kInvalidArgument);
  auto pinned = rt.AllocatePinnedHost(100);
  ASSERT_TRUE(pinned.ok());
  // Pinned and device blocks are separate pools.
  EXPECT_EQ(rt.FreeDevice(*pinned).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(rt.FreePinnedHost(*pinned).ok());
  EXPECT_EQ(rt.FreePinnedHost(*pinned).code(), absl::StatusCode::kInvalidArgument);  // twice
  EXPECT_EQ(rt.AllocateDevice(CpuDeviceRuntime::kMaxAllocationBytes + 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto none = rt.AllocateDevice(0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(CpuDeviceRuntime, PinnedHostBufferFreesItself) {
  CpuDeviceRuntime rt;
  void* address = nullptr;
  {
    auto buffer = PinnedHostBuffer::Allocate(&rt, 4096);
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ(buffer->size(), 4096u);
    std::memset(buffer->data(), 7, 4096);
    address = buffer->data();
    PinnedHostBuffer moved = std::move(*buffer);
    EXPECT_EQ(moved.data(), address);
    EXPECT_EQ(buffer->data(), nullptr);
  }
  // Freed exactly once: a second free is refused.
  EXPECT_EQ(rt.FreePinnedHost(address).code(), absl::StatusCode::kInvalidArgument);
}

// Work on one stream, an event after it, another stream waiting on it: the
// waiting stream's work sees the first stream's results.
TEST(CpuDeviceRuntime, EventsOrderWorkAcrossStreams) {
  CpuDeviceRuntime rt;
  auto producer = rt.CreateStream();
  auto consumer = rt.CreateStream();
  auto done = rt.CreateEvent();
  auto start = rt.CreateEvent();
  ASSERT_TRUE(producer.ok() && consumer.ok() && done.ok() && start.ok());
  std::vector<int> order;
  ASSERT_TRUE((*producer)->Record(**start).ok());
  ASSERT_TRUE((*producer)->EnqueueHost([&] { order.push_back(1); }).ok());
  ASSERT_TRUE((*producer)->EnqueueHost([&] { order.push_back(2); }).ok());
  ASSERT_TRUE((*producer)->Record(**done).ok());
  ASSERT_TRUE((*consumer)->Wait(**done).ok());
  ASSERT_TRUE((*consumer)->EnqueueHost([&] { order.push_back(3); }).ok());
  auto complete = (*done)->Query();
  ASSERT_TRUE(complete.ok());
  EXPECT_TRUE(*complete);
  EXPECT_TRUE((*done)->Synchronize().ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  auto ms = rt.ElapsedMilliseconds(**start, **done);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
  EXPECT_FALSE((*producer)->EnqueueHost(absl::AnyInvocable<void() &&>()).ok());
}

TEST(CpuDeviceRuntime, RefusesEventsOfAnotherRuntime) {
  CpuDeviceRuntime rt, other;
  auto stream = rt.CreateStream();
  auto foreign = other.CreateEvent();
  auto unrecorded = rt.CreateEvent();
  auto recorded = rt.CreateEvent();
  ASSERT_TRUE(stream.ok() && foreign.ok() && unrecorded.ok() && recorded.ok());
  EXPECT_EQ((*stream)->Record(**foreign).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*stream)->Wait(**foreign).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*stream)->Record(**recorded).ok());
  EXPECT_EQ(rt.ElapsedMilliseconds(**unrecorded, **recorded).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(OpenDevice, CudaInACpuBuildSaysHowToGetIt) {
  if (CudaCompiledIn()) GTEST_SKIP() << "a CUDA build: cuda_device_runtime_test covers it";
  auto runtime = OpenDevice(Device::Cuda(0));
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(runtime.status().message().find("cuda:0"), std::string::npos);
  EXPECT_NE(runtime.status().message().find("--config=cuda"), std::string::npos) << runtime.status();
}

TEST(CpuDeviceRuntime, CapacityBoundsLiveDeviceMemory) {
  CpuDeviceRuntime rt(10000);
  auto a = rt.AllocateDevice(6000);
  ASSERT_TRUE(a.ok());
  auto b = rt.AllocateDevice(6000);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("6000 of 10000"), std::string::npos) << b.status();
  auto info = rt.Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total_bytes, 10000);
  EXPECT_EQ(info->free_bytes, 4000);
  ASSERT_TRUE(rt.FreeDevice(*a).ok());
  auto c = rt.AllocateDevice(6000);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(rt.FreeDevice(*c).ok());
  // Pinned host memory is not device memory.
  auto pinned = rt.AllocatePinnedHost(20000);
  ASSERT_TRUE(pinned.ok());
  EXPECT_TRUE(rt.FreePinnedHost(*pinned).ok());
}

TEST(CpuDeviceRuntime, InfoReportsHostMemory) {
  CpuDeviceRuntime rt;
  auto info = rt.Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->name, "cpu");
  EXPECT_GT(info->total_bytes, int64_t{1} << 20);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

}  // namespace
}  // namespace corescape::device
