#include "runtime/device/staging_pipeline.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/cpu_device_runtime.h"
#include "runtime/device/deferred_device_runtime.h"

namespace corescape::device {
namespace {

struct Fixture {
  CpuDeviceRuntime runtime{0};
  std::unique_ptr<Stream> compute;
  std::unique_ptr<StagingPipeline> pipeline;
  void* staging[2] = {nullptr, nullptr};

  explicit Fixture(int64_t chunk) {
    compute = *runtime.CreateStream();
    pipeline = *StagingPipeline::Create(&runtime, compute.get());
    for (void*& buffer : staging) buffer = *runtime.AllocateDevice(chunk * sizeof(float));
  }
  ~Fixture() {
    for (void* buffer : staging) (void)runtime.FreeDevice(buffer);
  }
  float* const* buffers() const { return reinterpret_cast<float* const*>(staging); }
};


// The chunk kernel of the tests, issued on `compute`: x → 2x + 1.
auto DoubleAndAddOne(Stream& compute) {
  return [&compute](float* staged, int64_t, int64_t count) {
    return compute.EnqueueHost([staged, count] {
      for (int64_t j = 0; j < count; ++j) staged[j] = staged[j] * 2.0f + 1.0f;
    });
  };
}

TEST(StagingPipelineTest, EveryChunkComesBackTransformedThroughAlternatingBuffers) {
  for (int64_t n : {1, 7, 8, 9, 16, 23}) {
    const int64_t chunk = 4;
    Fixture f(chunk);
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
    std::vector<std::pair<int64_t, int64_t>> seen;
    std::vector<float*> used;
    ASSERT_TRUE(f.pipeline
                    ->Run(host.data(), n, f.buffers(), chunk,
                          [&](float* staged, int64_t begin, int64_t count) {
                            seen.emplace_back(begin, count);
                            used.push_back(staged);
                            // The staged chunk holds host[begin, begin + count).
                            for (int64_t j = 0; j < count; ++j) {
                              EXPECT_EQ(staged[j], static_cast<float>(begin + j) * 0.5f);
                              staged[j] = staged[j] * 2.0f + 1.0f;
                            }
                            return absl::OkStatus();
                          })
                    .ok());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(host[i], static_cast<float>(i) + 1.0f) << n << " " << i;
    ASSERT_EQ(static_cast<int64_t>(seen.size()), (n + chunk - 1) / chunk);
    for (size_t c = 0; c < seen.size(); ++c) {
      EXPECT_EQ(seen[c].first, static_cast<int64_t>(c) * chunk);
      EXPECT_EQ(seen[c].second, std::min<int64_t>(chunk, n - seen[c].first));
      EXPECT_EQ(used[c], f.buffers()[c % 2]);
    }
  }
}

TEST(StagingPipelineTest, StreamsThatRaceAheadStillBringEveryChunkHome) {
  for (int64_t n : {4, 9, 23}) {
    DeferredDeviceRuntime runtime;
    std::unique_ptr<Stream> compute = *runtime.CreateStream();
    std::unique_ptr<StagingPipeline> pipeline = *StagingPipeline::Create(&runtime, compute.get());
    std::vector<float> staging_memory[2] = {std::vector<float>(4), std::vector<float>(4)};
    float* const staging[2] = {staging_memory[0].data(), staging_memory[1].data()};
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    ASSERT_TRUE(pipeline->Run(host.data(), n, staging, 4, DoubleAndAddOne(*compute)).ok());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(host[i], 2.0f * static_cast<float>(i) + 1.0f) << n << " " << i;
  }
}

TEST(StagingPipelineTest, NoUploadOverwritesAStagingBufferTheComputeStreamStillReads) {
  // A staging buffer may be a block the caching allocator handed on from
  // work still queued on the compute stream.
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> compute = *runtime.CreateStream();
  std::unique_ptr<StagingPipeline> pipeline = *StagingPipeline::Create(&runtime, compute.get());
  std::vector<float> staging_memory[2] = {std::vector<float>(4, 7.0f), std::vector<float>(4, 7.0f)};
  float* const staging[2] = {staging_memory[0].data(), staging_memory[1].data()};
  float seen_before = 0.0f;
  ASSERT_TRUE(compute->EnqueueHost([&] { seen_before = staging[0][0]; }).ok());
  std::vector<float> host = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(pipeline->Run(host.data(), 8, staging, 4, DoubleAndAddOne(*compute)).ok());
  EXPECT_EQ(seen_before, 7.0f);
  EXPECT_EQ(host[0], 3.0f);
  EXPECT_EQ(host[7], 17.0f);
}

TEST(StagingPipelineTest, KernelErrorsNameTheChunkAndStopThePipeline) {
  Fixture f(4);
  std::vector<float> host(12, 1.0f);
  int calls = 0;
  absl::Status s = f.pipeline->Run(host.data(), 12, f.buffers(), 4,
                                   [&](float* staged, int64_t begin, int64_t) {
                                     ++calls;
                                     staged[0] = 5.0f;
                                     if (begin == 4) return absl::ResourceExhaustedError("no room");
                                     return absl::OkStatus();
                                   });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("staging chunk [4, 8): no room"), std::string::npos) << s;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(host[0], 5.0f);  // the first chunk came home
  EXPECT_EQ(host[8], 1.0f);  // the third never left
}

TEST(StagingPipelineTest, RefusesBadArguments) {
  Fixture f(4);
  std::vector<float> host(4, 0.0f);
  auto never = [](float*, int64_t, int64_t) {
    ADD_FAILURE() << "kernel ran";
    return absl::OkStatus();
  };
  EXPECT_EQ(f.pipeline->Run(host.data(), -1, f.buffers(), 4, never).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.pipeline->Run(host.data(), 4, f.buffers(), 0, never).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.pipeline->Run(nullptr, 4, f.buffers(), 4, never).code(),
            absl::StatusCode::kInvalidArgument);
  float* const missing[2] = {f.buffers()[0], nullptr};
  EXPECT_EQ(f.pipeline->Run(host.data(), 4, missing, 4, never).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.pipeline->Run(nullptr, 0, missing, 4, never).ok());
  EXPECT_EQ(StagingPipeline::Create(&f.runtime, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::device
