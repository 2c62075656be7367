// The NCCL optimizer group on one GPU (world size 1: NCCL's own single-rank
// communicator), and its refusal in a build without CUDA.
#include "worker/device_group.h"

#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/device_runtime.h"

namespace corescape::worker {
namespace {

v1::JobAssignment Assignment() {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-7");
  assignment.set_generation(2);
  assignment.set_world_size(1);
  return assignment;
}

TEST(DeviceGroupTest, WithoutCudaIsRefusedWithTheReason) {
  if (device::CudaCompiledIn()) GTEST_SKIP() << "a CUDA build: see the GPU case";
  auto group = ConnectDeviceGroup(std::make_unique<train::SingleProcessGroup>(), Assignment(),
                                  device::Device::Cuda(0), absl::Seconds(5));
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(group.status().message().find("--config=cuda"), std::string::npos) << group.status();
  EXPECT_NE(group.status().message().find("job-7"), std::string::npos) << group.status();
}

TEST(DeviceGroupTest, CollectivesOnOneGpuAndAbort) {
  if (!device::CudaCompiledIn() || !device::OpenDevice(device::Device::Cuda(0)).ok()) {
    GTEST_SKIP() << "needs a CUDA build and a GPU";
  }
  auto group = ConnectDeviceGroup(std::make_unique<train::SingleProcessGroup>(), Assignment(),
                                  device::Device::Cuda(0), absl::Seconds(10));
  ASSERT_TRUE(group.ok()) << group.status();
  train::DataParallelGroup& g = **group;
  EXPECT_EQ(g.world_size(), 1);

  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  const std::vector<float> before = values;
  ASSERT_TRUE(g.AllReduceSum(values.data(), static_cast<int64_t>(values.size())).ok());
  EXPECT_EQ(values, before);  // one rank: the sum is itself, through the device

  // A buffer already in device memory is reduced where it is.
  auto runtime = device::OpenDevice(device::Device::Cuda(0));
  ASSERT_TRUE(runtime.ok());
  const size_t bytes = values.size() * sizeof(float);
  auto on_device = (*runtime)->AllocateDevice(bytes);
  ASSERT_TRUE(on_device.ok());
  auto stream = (*runtime)->CreateStream();
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*runtime)->CopyAsync(*on_device, values.data(), bytes,
                                    device::CopyKind::kHostToDevice, **stream).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  ASSERT_TRUE(g.AllReduceSumOnDevice(static_cast<float*>(*on_device),
                                     static_cast<int64_t>(values.size())).ok());
  std::vector<float> reduced(values.size(), 0.0f);
  ASSERT_TRUE((*runtime)->CopyAsync(reduced.data(), *on_device, bytes,
                                    device::CopyKind::kDeviceToHost, **stream).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ(reduced, before);
  ASSERT_TRUE((*runtime)->FreeDevice(*on_device).ok());

  const char send[] = "mask bits";
  std::vector<char> recv(sizeof(send), 0);
  const std::vector<int64_t> sizes = {static_cast<int64_t>(sizeof(send))};
  auto pending = g.StartAllGatherV(send, sizeof(send), recv.data(), sizes);
  ASSERT_TRUE(pending.ok()) << pending.status();
  // One asynchronous gather at a time; the blocking collectives go on meanwhile.
  EXPECT_EQ(g.StartAllGatherV(send, sizeof(send), recv.data(), sizes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<char> blocking(sizeof(send), 0);
  ASSERT_TRUE(g.AllGatherV(send, sizeof(send), blocking.data(), sizes).ok());
  EXPECT_EQ(std::memcmp(blocking.data(), send, sizeof(send)), 0);
  ASSERT_TRUE((*pending)->Wait().ok());
  EXPECT_EQ(std::memcmp(recv.data(), send, sizeof(send)), 0);

  const std::vector<int64_t> wrong = {3};
  EXPECT_EQ(g.AllGatherV(send, sizeof(send), recv.data(), wrong).code(),
            absl::StatusCode::kInvalidArgument);

  // The group offers the data-plane group its ids came over for a trainer's
  // control collectives, and takes its own from another thread (a mask
  // exchange's: the sizes, then the payloads), the GPU made current there.
  train::DataParallelGroup* control = g.control_channel();
  ASSERT_NE(control, nullptr);
  EXPECT_NE(control, &g);
  EXPECT_EQ(control->world_size(), 1);
  absl::Status on_thread;
  std::vector<char> from_thread(sizeof(send), 0);
  std::thread exchange([&] {
    std::vector<int64_t> each(1, 0);
    on_thread = g.AllGatherInt64(sizeof(send), absl::MakeSpan(each));
    if (!on_thread.ok()) return;
    auto started = g.StartAllGatherV(send, each[0], from_thread.data(), each);
    on_thread = started.ok() ? (*started)->Wait() : started.status();
  });
  exchange.join();
  ASSERT_TRUE(on_thread.ok()) << on_thread;
  EXPECT_EQ(std::memcmp(from_thread.data(), send, sizeof(send)), 0);

  g.Abort("job stopped");
  absl::Status after = g.AllReduceSum(values.data(), static_cast<int64_t>(values.size()));
  EXPECT_EQ(after.code(), absl::StatusCode::kCancelled) << after;
  EXPECT_NE(after.message().find("job stopped"), std::string::npos) << after;
}

}  // namespace
}  // namespace corescape::worker
