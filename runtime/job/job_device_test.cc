#include "runtime/job/job_device.h"

#include <string>

#include "gtest/gtest.h"
#include "runtime/job/job_spec.h"

namespace corescape::job {
namespace {

v1::ServedDevice Gpu(int index) {
  v1::ServedDevice device;
  device.set_kind(v1::CUDA);
  device.set_cuda_index(index);
  device.set_gpu_model("NVIDIA H200");
  device.set_gpu_memory_bytes(int64_t{150} * 1000 * 1000 * 1000);
  return device;
}

v1::JobSpec CudaJob() {
  v1::JobSpec spec;
  spec.set_device(v1::CUDA);
  return spec;
}

TEST(JobDeviceTest, UnsetMeansCpuAndDefaultsFillIt) {
  v1::JobSpec spec;
  EXPECT_EQ(JobDevice(spec), v1::CPU);
  ApplyJobDefaults(spec);
  EXPECT_EQ(spec.device(), v1::CPU);
  EXPECT_EQ(JobDevice(CudaJob()), v1::CUDA);
  v1::JobSpec cuda = CudaJob();
  ApplyJobDefaults(cuda);
  EXPECT_EQ(cuda.device(), v1::CUDA);  // defaults never overwrite a choice
}

TEST(JobDeviceTest, ValidationNamesTheFieldOfAnUnknownDevice) {
  v1::JobSpec spec;
  spec.set_device(static_cast<v1::Device>(7));
  absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "spec.device: unknown device 7 (cpu, cuda)");
}

TEST(JobDeviceTest, Names) {
  EXPECT_EQ(DeviceKindName(v1::DEVICE_UNSPECIFIED), "cpu");
  EXPECT_EQ(DeviceKindName(v1::CPU), "cpu");
  EXPECT_EQ(DeviceKindName(v1::CUDA), "cuda");
  EXPECT_EQ(DescribeServedDevice(v1::ServedDevice()), "cpu");
  EXPECT_EQ(DescribeServedDevice(Gpu(3)), "cuda:3 (NVIDIA H200, 139.7 GiB)");
  v1::ServedDevice bare;
  bare.set_kind(v1::CUDA);
  EXPECT_EQ(DescribeServedDevice(bare), "cuda:0 (unknown GPU)");
}

TEST(JobDeviceTest, NamesParseBackInAnyCase) {
  EXPECT_EQ(JobDeviceNames(), "cpu, cuda");
  EXPECT_EQ(*ParseJobDevice("cpu"), v1::CPU);
  EXPECT_EQ(*ParseJobDevice("CUDA"), v1::CUDA);
  for (const char* bad : {"", "gpu", "cuda:0", "cpu "}) {
    absl::StatusOr<v1::Device> parsed = ParseJobDevice(bad);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("unknown device '", bad, "' (cpu, cuda)"));
  }
}

TEST(JobDeviceTest, CpuJobsTrainOnEveryWorkersCpuInFp32) {
  for (const v1::ServedDevice& served : {v1::ServedDevice(), Gpu(0)}) {
    auto training = TrainingDeviceFor("job-1", v1::JobSpec(), served);
    ASSERT_TRUE(training.ok()) << training.status();
    EXPECT_FALSE(training->device.is_cuda());
    EXPECT_EQ(training->precision, model::Precision::kFp32);
  }
}

TEST(JobDeviceTest, CudaJobOnCpuWorkerIsRefusedNamingBothDevices) {
  auto training = TrainingDeviceFor("job-4", CudaJob(), v1::ServedDevice());
  ASSERT_FALSE(training.ok());
  EXPECT_EQ(training.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(training.status().message(),
            "job job-4 asks for device cuda but this worker serves cpu (no CUDA GPU; start a "
            "worker with --device=cuda:N)");
}

TEST(JobDeviceTest, CudaJobTrainsOnTheWorkersGpuInBf16) {
  auto training = TrainingDeviceFor("job-5", CudaJob(), Gpu(1));
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(training->device.ToString(), "cuda:1");
  EXPECT_EQ(training->precision, model::Precision::kBf16);
}

// A job's MFU is measured against the device it trains on, and only
// when that is the device the worker serves.
TEST(JobDeviceTest, MfuPeakIsTheTrainingDevicesOwn) {
  const TrainingDevice on_gpu{device::Device::Cuda(1), model::Precision::kBf16};
  const TrainingDevice on_gpu_fp32{device::Device::Cuda(1), model::Precision::kFp32};
  const TrainingDevice on_cpu{device::Device::Cpu(), model::Precision::kFp32};
  EXPECT_EQ(MfuPeakTflops(Gpu(1), on_gpu, 0), 989);
  EXPECT_EQ(MfuPeakTflops(Gpu(1), on_gpu_fp32, 0), 67);
  EXPECT_EQ(MfuPeakTflops(Gpu(1), on_gpu, 500), 500) << "the operator's figure wins";
  // A GPU worker's CPU trains a CPU job: its GPU's peak says nothing of it.
  EXPECT_EQ(MfuPeakTflops(Gpu(1), on_cpu, 0), 0);
  EXPECT_EQ(MfuPeakTflops(Gpu(1), on_cpu, 500), 0);
  // A CPU worker: unknown unless the operator says.
  EXPECT_EQ(MfuPeakTflops(v1::ServedDevice(), on_cpu, 0), 0);
  EXPECT_EQ(MfuPeakTflops(v1::ServedDevice(), on_cpu, 2.5), 2.5);
  v1::ServedDevice unknown = Gpu(0);
  unknown.set_gpu_model("NVIDIA GeForce RTX 4090");
  EXPECT_EQ(MfuPeakTflops(unknown, on_gpu, 0), 0);
}

TEST(JobDeviceTest, CudaJobsRunTheirCoreAttentionColocated) {
  for (v1::AttentionMode mode : {v1::DISAGGREGATED, v1::IN_PLACE}) {
    v1::JobSpec spec = CudaJob();
    spec.mutable_attention()->set_mode(mode);
    if (mode == v1::DISAGGREGATED) spec.mutable_attention()->set_attention_servers(1);
    absl::Status status = ValidateJobSpec(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("attention.mode"), std::string::npos) << status;
    EXPECT_NE(status.message().find("device: cuda"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace corescape::job
