#include "daemon/system_resources.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace corescape {
namespace {

const std::vector<GpuProperties> kTwoGpus = {{"NVIDIA H200", int64_t{141} << 30},
                                             {"NVIDIA H200", int64_t{141} << 30}};

TEST(SelectServedDeviceTest, CpuNeedsNoGpu) {
  auto device = SelectServedDevice("cpu", {}, /*built_with_cuda=*/false);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind(), v1::CPU);
  EXPECT_EQ(device->gpu_model(), "");
}

TEST(SelectServedDeviceTest, CudaNNamesOneOfTheMachinesGpus) {
  auto device = SelectServedDevice("cuda:1", kTwoGpus, /*built_with_cuda=*/true);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind(), v1::CUDA);
  EXPECT_EQ(device->cuda_index(), 1);
  EXPECT_EQ(device->gpu_model(), "NVIDIA H200");
  EXPECT_EQ(device->gpu_memory_bytes(), int64_t{141} << 30);
}

TEST(SelectServedDeviceTest, MissingGpuIsRefusedSayingWhatTheMachineHas) {
  auto device = SelectServedDevice("cuda:2", kTwoGpus, true);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device.status().message(),
            "--device=cuda:2: no such GPU; this machine has 2 (cuda:0 NVIDIA H200, cuda:1 "
            "NVIDIA H200)");
  device = SelectServedDevice("cuda:0", {}, true);
  EXPECT_EQ(device.status().message(),
            "--device=cuda:0: no such GPU; this machine has no CUDA GPU (no driver or device "
            "found)");
}

TEST(SelectServedDeviceTest, PlainCudaIsTheFirstGpu) {
  auto device = SelectServedDevice("cuda", kTwoGpus, true);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->cuda_index(), 0);
}

TEST(SelectServedDeviceTest, BuildWithoutCudaHasNoGpu) {
  auto device = SelectServedDevice("cuda:0", kTwoGpus, /*built_with_cuda=*/false);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(device.status().message().find("built without CUDA"), std::string::npos)
      << device.status();
}

TEST(SelectServedDeviceTest, OtherSpellingsAreNotDevices) {
  for (const char* flag : {"", "gpu", "cuda:", "cuda:-1", "cuda:+1", "cuda: 1",
                           "cuda:1x", "cuda:99999", "CPU", "cuda0", "cuda:0:1"}) {
    auto device = SelectServedDevice(flag, kTwoGpus, true);
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(device.status().message().find("--device: device"), std::string::npos)
        << device.status();
  }
}

// This machine as the daemons report it: no GPU without --config=cuda.
TEST(DetectResourcesTest, GpusMatchTheBuild) {
  const v1::Resources resources = DetectResources();
  EXPECT_GT(resources.cpu_cores(), 0);
  EXPECT_GT(resources.memory_bytes(), 0);
  if (!kBuiltWithCuda) EXPECT_EQ(resources.gpus(), 0);
  EXPECT_EQ(resources.gpus(), static_cast<int>(DetectGpus().size()));
}

}  // namespace
}  // namespace corescape
