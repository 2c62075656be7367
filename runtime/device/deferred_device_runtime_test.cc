#include "runtime/device/deferred_device_runtime.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace corescape::device {
namespace {

// Appends `c` to `log` when the op runs.
absl::Status Note(Stream& stream, std::string& log, char c) {
  return stream.EnqueueHost([&log, c] { log.push_back(c); });
}

TEST(DeferredDeviceRuntimeTest, WorkRunsOnlyWhenTheHostBlocks) {
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> stream = *runtime.CreateStream();
  std::string log;
  ASSERT_TRUE(Note(*stream, log, 'a').ok());
  ASSERT_TRUE(Note(*stream, log, 'b').ok());
  EXPECT_EQ(log, "");
  EXPECT_EQ(runtime.ops_run(), 0);
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(log, "ab");
  EXPECT_EQ(runtime.ops_run(), 2);

  // Querying an event is blocking enough: it runs what the event covers.
  std::unique_ptr<Event> event = *runtime.CreateEvent();
  ASSERT_TRUE(Note(*stream, log, 'c').ok());
  ASSERT_TRUE(stream->Record(*event).ok());
  ASSERT_TRUE(Note(*stream, log, 'd').ok());
  EXPECT_TRUE(*event->Query());
  EXPECT_EQ(log, "abc");
  ASSERT_TRUE(runtime.Synchronize().ok());
  EXPECT_EQ(log, "abcd");
}

TEST(DeferredDeviceRuntimeTest, StreamsRunInTheRuntimesPreferenceUnlessEventsOrderThem) {
  for (auto order : {DeferredDeviceRuntime::Order::kNewestStreamFirst,
                     DeferredDeviceRuntime::Order::kOldestStreamFirst}) {
    const bool newest = order == DeferredDeviceRuntime::Order::kNewestStreamFirst;
    DeferredDeviceRuntime runtime(order);
    std::unique_ptr<Stream> older = *runtime.CreateStream();
    std::unique_ptr<Stream> newer = *runtime.CreateStream();
    std::string log;
    ASSERT_TRUE(Note(*older, log, 'o').ok());
    ASSERT_TRUE(Note(*newer, log, 'n').ok());
    ASSERT_TRUE(runtime.Synchronize().ok());
    EXPECT_EQ(log, newest ? "no" : "on");

    // The newer stream's op waits for the older one's first op, not its
    // second (the wait takes the record as it stood).
    log.clear();
    std::unique_ptr<Event> first_done = *runtime.CreateEvent();
    ASSERT_TRUE(Note(*older, log, '1').ok());
    ASSERT_TRUE(older->Record(*first_done).ok());
    ASSERT_TRUE(newer->Wait(*first_done).ok());
    ASSERT_TRUE(Note(*newer, log, 'n').ok());
    ASSERT_TRUE(Note(*older, log, '2').ok());
    ASSERT_TRUE(older->Record(*first_done).ok());  // recorded again: the wait above is not moved
    ASSERT_TRUE(newer->Synchronize().ok());
    EXPECT_EQ(log, newest ? "1n" : "12n");
    ASSERT_TRUE(runtime.Synchronize().ok());
    EXPECT_EQ(log, newest ? "1n2" : "12n");
  }
}

TEST(DeferredDeviceRuntimeTest, AWaitForAnEventNeverRecordedIsMetAtOnce) {
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> stream = *runtime.CreateStream();
  std::unique_ptr<Event> never = *runtime.CreateEvent();
  std::string log;
  ASSERT_TRUE(stream->Wait(*never).ok());
  ASSERT_TRUE(Note(*stream, log, 'a').ok());
  ASSERT_TRUE(never->Synchronize().ok());
  EXPECT_EQ(log, "");  // nothing was needed for it
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(log, "a");
}

TEST(DeferredDeviceRuntimeTest, CopiesAreQueuedAndValidated) {
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> stream = *runtime.CreateStream();
  std::vector<float> src = {1, 2, 3}, dst(3, 0.0f);
  ASSERT_TRUE(runtime.CopyAsync(dst.data(), src.data(), sizeof(float) * 3, CopyKind::kHostToDevice, *stream).ok());
  src[0] = 9;  // the copy has not read it yet
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(dst, (std::vector<float>{9, 2, 3}));

  EXPECT_EQ(runtime.CopyAsync(nullptr, src.data(), 4, CopyKind::kHostToDevice, *stream).code(),
            absl::StatusCode::kInvalidArgument);
  DeferredDeviceRuntime other;
  std::unique_ptr<Stream> foreign = *other.CreateStream();
  EXPECT_EQ(runtime.CopyAsync(dst.data(), src.data(), 4, CopyKind::kHostToDevice, *foreign).code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<Event> foreign_event = *other.CreateEvent();
  EXPECT_EQ(stream->Record(*foreign_event).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->Wait(*foreign_event).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime.ElapsedMilliseconds(*foreign_event, *foreign_event).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(DeferredDeviceRuntimeTest, FreesWaitForTheStreamsAsCudaFreeDoes) {
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> stream = *runtime.CreateStream();
  void* block = *runtime.AllocateDevice(sizeof(float));
  float seen = 0.0f;
  ASSERT_TRUE(stream->EnqueueHost([block] { *static_cast<float*>(block) = 4.0f; }).ok());
  ASSERT_TRUE(stream->EnqueueHost([block, &seen] { seen = *static_cast<float*>(block); }).ok());
  ASSERT_TRUE(runtime.FreeDevice(block).ok());  // the queued ops ran on the live block first
  EXPECT_EQ(seen, 4.0f);
  EXPECT_EQ(runtime.ops_run(), 2);
  void* pinned = *runtime.AllocatePinnedHost(8);
  ASSERT_TRUE(stream->EnqueueHost([&seen] { seen = 5.0f; }).ok());
  ASSERT_TRUE(runtime.FreePinnedHost(pinned).ok());
  EXPECT_EQ(seen, 5.0f);
}

TEST(DeferredDeviceRuntimeTest, ADestroyedStreamsWorkStillRuns) {
  DeferredDeviceRuntime runtime;
  std::string log;
  {
    std::unique_ptr<Stream> stream = *runtime.CreateStream();
    ASSERT_TRUE(Note(*stream, log, 'a').ok());
  }
  EXPECT_EQ(log, "a");
  ASSERT_TRUE(runtime.Synchronize().ok());
}

TEST(DeferredDeviceRuntimeTest, StreamsFedFromSeveralThreads) {
  DeferredDeviceRuntime runtime;
  std::unique_ptr<Stream> a = *runtime.CreateStream();
  std::unique_ptr<Stream> b = *runtime.CreateStream();
  int a_count = 0, b_count = 0;
  constexpr int kOps = 500;
  std::thread feed_a([&] {
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(a->EnqueueHost([&a_count] { ++a_count; }).ok());
      if (i % 50 == 0) {
        ASSERT_TRUE(a->Synchronize().ok());
      }
    }
  });
  std::thread feed_b([&] {
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(b->EnqueueHost([&b_count] { ++b_count; }).ok());
      if (i % 70 == 0) {
        ASSERT_TRUE(runtime.Synchronize().ok());
      }
    }
  });
  feed_a.join();
  feed_b.join();
  ASSERT_TRUE(runtime.Synchronize().ok());
  EXPECT_EQ(a_count, kOps);
  EXPECT_EQ(b_count, kOps);
  EXPECT_EQ(runtime.ops_run(), 2 * kOps);
}

}  // namespace
}  // namespace corescape::device
