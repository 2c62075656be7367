#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_GPU_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_GPU_TEST_UTIL_H_

// A fixture for launches on cuda:0 through the device layer: it skips
// without a GPU, and moves vectors to and from device buffers.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/device/device_runtime.h"

namespace corescape::kernels::cuda {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
    auto rt = device::OpenDevice(device::Device::Cuda(0));
    ASSERT_TRUE(rt.ok()) << rt.status();
    runtime_ = std::move(*rt);
    allocator_ = std::make_unique<device::CachingAllocator>(runtime_.get());
    auto stream = runtime_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }
  void TearDown() override {
    if (stream_) {
      EXPECT_TRUE(stream_->Synchronize().ok());
    }
  }

  cudaStream_t stream() { return device::CudaStreamOf(*stream_); }

  template <typename T>
  device::DeviceBuffer Upload(const std::vector<T>& host) {
    auto buffer = allocator_->Allocate(host.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return {};
    EXPECT_TRUE(runtime_->CopyAsync(buffer->data(), host.data(), host.size() * sizeof(T),
                                    device::CopyKind::kHostToDevice, *stream_)
                    .ok());
    return std::move(*buffer);
  }

  template <typename T>
  device::DeviceBuffer Zeros(size_t count) {
    return Upload(std::vector<T>(count, T{}));
  }

  template <typename T>
  std::vector<T> Download(const device::DeviceBuffer& buffer, size_t count) {
    std::vector<T> host(count);
    EXPECT_TRUE(runtime_->CopyAsync(host.data(), buffer.data(), count * sizeof(T),
                                    device::CopyKind::kDeviceToHost, *stream_)
                    .ok());
    EXPECT_TRUE(stream_->Synchronize().ok());
    return host;
  }

  std::unique_ptr<device::DeviceRuntime> runtime_;
  std::unique_ptr<device::CachingAllocator> allocator_;
  std::unique_ptr<device::Stream> stream_;
};

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_GPU_TEST_UTIL_H_
