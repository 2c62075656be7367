#include "runtime/device/staging_pipeline.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu_device_runtime.h"

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


// A runtime whose streams run nothing until the host blocks on one of them,
// and then run the most recently created stream that can make progress
// first: a copy stream races as far ahead of the compute stream as its
// waits allow, which is what a GPU may do. Only the pipeline's event
// ordering keeps it correct here.
class DeferredRuntime final : public DeviceRuntime {
 public:
  struct DeferredStream;
  // Where a record captured its stream: done once `ops` of it have run.
  struct Mark {
    const DeferredStream* stream = nullptr;
    int64_t ops = 0;
  };
  struct DeferredEvent final : Event {
    DeferredRuntime* owner;
    Mark mark;
    explicit DeferredEvent(DeferredRuntime* o) : owner(o) {}
    absl::StatusOr<bool> Query() override { return owner->Done(mark); }
    absl::Status Synchronize() override { return owner->RunUntil([this] { return owner->Done(mark); }); }
  };
  struct Op {
    absl::AnyInvocable<void() &&> run;  // null: a wait
    Mark wait;
  };
  struct DeferredStream final : Stream {
    DeferredRuntime* owner;
    std::deque<Op> queue;
    int64_t enqueued = 0, ran = 0;
    explicit DeferredStream(DeferredRuntime* o) : owner(o) {}
    void Push(Op op) {
      queue.push_back(std::move(op));
      ++enqueued;
    }
    absl::Status Record(Event& event) override {
      static_cast<DeferredEvent&>(event).mark = {this, enqueued};
      return absl::OkStatus();
    }
    absl::Status Wait(Event& event) override {
      Push({nullptr, static_cast<DeferredEvent&>(event).mark});
      return absl::OkStatus();
    }
    absl::Status EnqueueHost(absl::AnyInvocable<void() &&> fn) override {
      Push({std::move(fn), {}});
      return absl::OkStatus();
    }
    absl::Status Synchronize() override { return owner->RunUntil([this] { return queue.empty(); }); }
    void* native_handle() override { return nullptr; }
  };

  bool Done(const Mark& mark) const { return mark.stream == nullptr || mark.stream->ran >= mark.ops; }

  // Runs one op of the newest stream that can, until `done` or nothing can.
  template <typename Finished>
  absl::Status RunUntil(Finished done) {
    while (!done()) {
      bool progressed = false;
      for (auto it = streams_.rbegin(); it != streams_.rend() && !progressed; ++it) {
        DeferredStream* stream = *it;
        if (stream->queue.empty()) continue;
        Op& op = stream->queue.front();
        if (op.run == nullptr && !Done(op.wait)) continue;
        Op taken = std::move(op);
        stream->queue.pop_front();
        if (taken.run != nullptr) std::move(taken.run)();
        ++stream->ran;
        progressed = true;
      }
      if (!progressed) return absl::InternalError("deferred runtime: every stream waits");
    }
    return absl::OkStatus();
  }

  Device device() const override { return Device::Cpu(); }
  absl::StatusOr<DeviceInfo> Info() override { return DeviceInfo{"deferred", 0, 0}; }
  absl::StatusOr<void*> AllocateDevice(size_t bytes) override { return std::malloc(bytes); }
  absl::Status FreeDevice(void* ptr) override {
    std::free(ptr);
    return absl::OkStatus();
  }
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override { return std::malloc(bytes); }
  absl::Status FreePinnedHost(void* ptr) override { return FreeDevice(ptr); }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    auto stream = std::make_unique<DeferredStream>(this);
    streams_.push_back(stream.get());
    return stream;
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override { return std::make_unique<DeferredEvent>(this); }
  absl::StatusOr<float> ElapsedMilliseconds(Event&, Event&) override {
    return absl::UnimplementedError("deferred runtime: no timing");
  }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind, Stream& stream) override {
    if (absl::Status s = ValidateCopy(dst, src, bytes); !s.ok()) return s;
    static_cast<DeferredStream&>(stream).Push({[dst, src, bytes] { std::memcpy(dst, src, bytes); }, {}});
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    return RunUntil([this] {
      for (const DeferredStream* stream : streams_) {
        if (!stream->queue.empty()) return false;
      }
      return true;
    });
  }

 private:
  std::vector<DeferredStream*> streams_;  // in creation order; they outlive their use here
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
    DeferredRuntime runtime;
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
  DeferredRuntime runtime;
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
