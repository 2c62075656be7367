#include "worker/attention_reports.h"

#include <vector>

#include "gtest/gtest.h"

namespace corescape::worker {
namespace {

// Counts the calls it gets; computes nothing.
class CountingAttention final : public AbortableAttention {
 public:
  absl::Status Forward(int, const kernels::AttentionShape&,
                       absl::Span<const kernels::AttentionTask>, const float*, const float*,
                       const float*, int64_t, float*, float*) override {
    ++forwards;
    return absl::OkStatus();
  }
  absl::Status Backward(int, const kernels::AttentionShape&,
                        absl::Span<const kernels::AttentionTask>, const float*, const float*,
                        const float*, const float*, const float*, const float*, int64_t, float*,
                        float*, float*) override {
    ++backwards;
    return absl::OkStatus();
  }
  void Abort(const std::string& reason) override { aborted = reason; }
  int forwards = 0, backwards = 0;
  std::string aborted;
};

v1::JobAssignment Assignment(uint64_t generation) {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-3");
  assignment.set_generation(generation);
  assignment.set_rank(1);
  return assignment;
}

// Whole documents of lengths 5, 3 and 1, back to back.
const std::vector<kernels::AttentionTask> kTasks = {{0, 5, 0, 0}, {0, 3, 5, 5}, {0, 1, 8, 8}};

TEST(BuildAttentionDemandTest, OneLengthPerWholeDocument) {
  auto demand = BuildAttentionDemand(Assignment(2), 7, kTasks);
  ASSERT_TRUE(demand.ok()) << demand.status();
  EXPECT_EQ(demand->job_id(), "job-3");
  EXPECT_EQ(demand->generation(), 2u);
  EXPECT_EQ(demand->rank(), 1);
  EXPECT_EQ(demand->step(), 7);
  EXPECT_EQ(std::vector<int64_t>(demand->document_lengths().begin(),
                                 demand->document_lengths().end()),
            (std::vector<int64_t>{5, 3, 1}));
  std::vector<kernels::AttentionTask> piece = {{2, 5, 0, 0}};
  EXPECT_EQ(BuildAttentionDemand(Assignment(2), 7, piece).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AttentionDemandReportsTest, FirstMicroBatchOfEachExpectedStep) {
  AttentionDemandReports reports;
  auto inner = std::make_shared<CountingAttention>();
  AttentionFactory factory = reports.Wrap(
      [inner](const v1::JobAssignment&, const train::TrainerConfig&)
          -> absl::StatusOr<std::shared_ptr<AbortableAttention>> { return inner; });
  auto attention = factory(Assignment(2), train::TrainerConfig{});
  ASSERT_TRUE(attention.ok());
  std::vector<v1::NodeMessage> sent;
  auto send = [&sent](v1::NodeMessage m) { sent.push_back(std::move(m)); };
  const kernels::AttentionShape shape{4, 2, 24, 0.2f};
  auto forward = [&](int layer) {
    return (*attention)->Forward(layer, shape, kTasks, nullptr, nullptr, nullptr, 9, nullptr,
                                 nullptr);
  };

  ASSERT_TRUE(forward(0).ok());
  EXPECT_TRUE(sent.empty()) << "nothing expected yet";
  reports.ExpectStep(Assignment(2), 4, send);
  ASSERT_TRUE(forward(0).ok());
  ASSERT_TRUE(forward(1).ok());
  ASSERT_TRUE((*attention)->Backward(1, shape, kTasks, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, 9, nullptr, nullptr, nullptr)
                  .ok());
  ASSERT_TRUE(forward(0).ok());  // the step's second micro-batch, or validation
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_attention_demand());
  EXPECT_EQ(sent[0].attention_demand().step(), 4);
  EXPECT_EQ(sent[0].attention_demand().document_lengths_size(), 3);
  EXPECT_EQ(inner->forwards, 4) << "every call reaches the real executor";
  EXPECT_EQ(inner->backwards, 1);

  // Another generation's expectation is not this executor's to report.
  reports.ExpectStep(Assignment(3), 5, send);
  ASSERT_TRUE(forward(0).ok());
  EXPECT_EQ(sent.size(), 1u);

  (*attention)->Abort("stop");
  EXPECT_EQ(inner->aborted, "stop");
  EXPECT_EQ(reports.Wrap(nullptr), nullptr);
}

}  // namespace
}  // namespace corescape::worker
