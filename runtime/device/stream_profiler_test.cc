#include "runtime/device/stream_profiler.h"

#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "runtime/device/cpu_device_runtime.h"

namespace corescape::device {
namespace {

class StreamProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto stream = runtime_.CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
    profiler_ = std::make_unique<StreamProfiler>(&runtime_, stream_.get());
  }

  CpuDeviceRuntime runtime_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<StreamProfiler> profiler_;
};

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST_F(StreamProfilerTest, SumsSpansByNameLargestFirst) {
  {
    ProfileSpan span(profiler_.get(), "matmul");
    SleepMs(30);
  }
  { ProfileSpan span(profiler_.get(), "norm"); }
  {
    ProfileSpan span(profiler_.get(), "matmul");
    SleepMs(10);
  }
  auto totals = profiler_->Take();
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 2u);
  EXPECT_EQ((*totals)[0].name, "matmul");
  EXPECT_EQ((*totals)[0].spans, 2);
  EXPECT_GE((*totals)[0].milliseconds, 40.0);
  EXPECT_EQ((*totals)[1].name, "norm");
  EXPECT_EQ((*totals)[1].spans, 1);
  EXPECT_LT((*totals)[1].milliseconds, (*totals)[0].milliseconds);

  // Taking starts over.
  auto empty = profiler_->Take();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST_F(StreamProfilerTest, NestedSpansCountAsTheOutermost) {
  {
    ProfileSpan outer(profiler_.get(), "cross_entropy");
    SleepMs(10);
    { ProfileSpan inner(profiler_.get(), "download"); }
  }
  { ProfileSpan alone(profiler_.get(), "download"); }
  auto totals = profiler_->Take();
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 2u);
  EXPECT_EQ((*totals)[0].name, "cross_entropy");
  EXPECT_GE((*totals)[0].milliseconds, 10.0);
  EXPECT_EQ((*totals)[1].name, "download");
  EXPECT_EQ((*totals)[1].spans, 1);  // the inner one is part of cross_entropy
}

TEST_F(StreamProfilerTest, UnbalancedEndsAreReported) {
  profiler_->End();
  EXPECT_EQ(profiler_->Take().status().code(), absl::StatusCode::kFailedPrecondition);
  profiler_->Begin("left open");
  auto totals = profiler_->Take();
  EXPECT_EQ(totals.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(totals.status().message().find("span open"), std::string::npos) << totals.status();
}

TEST_F(StreamProfilerTest, EventsOfAnotherRuntimeAreReported) {
  CpuDeviceRuntime other;
  auto other_stream = other.CreateStream();
  ASSERT_TRUE(other_stream.ok());
  StreamProfiler mixed(&runtime_, other_stream->get());  // events from runtime_, stream from `other`
  { ProfileSpan span(&mixed, "x"); }
  EXPECT_EQ(mixed.Take().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProfileSpan, NullProfilerRecordsNothing) { ProfileSpan span(nullptr, "nothing"); }

TEST(OnDemandProfiler, ProfilesOnlyBetweenStartAndTake) {
  CpuDeviceRuntime runtime;
  OnDemandProfiler profile(&runtime, nullptr);
  EXPECT_EQ(profile.active(), nullptr);
  EXPECT_EQ(profile.Take().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(profile.Start().ok());
  ASSERT_NE(profile.active(), nullptr);
  { ProfileSpan span(profile.active(), "op"); }
  auto totals = profile.Take();
  ASSERT_TRUE(totals.ok()) << totals.status();
  ASSERT_EQ(totals->size(), 1u);
  EXPECT_EQ((*totals)[0].name, "op");
  EXPECT_EQ(profile.active(), nullptr);
}

}  // namespace
}  // namespace corescape::device
