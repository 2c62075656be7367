#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/core_attention_reference.h"

namespace corescape::kernels {
namespace {

// Buffers of 10 query rows and 12 K/V rows, 4 heads over 2 kv heads, dim 8.
class ValidationTest : public testing::Test {
 protected:
  static constexpr int64_t kQRows = 10;
  static constexpr int64_t kKvRows = 12;

  AttentionShape shape_{4, 2, 8, 0.35f};
  std::vector<float> q_ = std::vector<float>(kQRows * 4 * 8, 0.25f);
  std::vector<float> kv_ = std::vector<float>(kKvRows * 2 * 8, 0.5f);
  std::vector<float> o_ = std::vector<float>(kQRows * 4 * 8, 9.0f);
  std::vector<float> lse_ = std::vector<float>(kQRows * 4, 9.0f);
  std::vector<float> d_q_ = std::vector<float>(kQRows * 4 * 8, 9.0f);
  std::vector<float> d_k_ = std::vector<float>(kKvRows * 2 * 8, 9.0f);
  std::vector<float> d_v_ = std::vector<float>(kKvRows * 2 * 8, 9.0f);

  absl::Status Forward(const AttentionShape& shape,
                       const std::vector<AttentionTask>& tasks) {
    return CoreAttentionForward(shape, tasks, q_.data(), kQRows, kv_.data(),
                                kv_.data(), kKvRows, o_.data(), lse_.data(),
                                nullptr);
  }
  absl::Status Backward(const AttentionShape& shape,
                        const std::vector<AttentionTask>& tasks) {
    return CoreAttentionBackward(shape, tasks, q_.data(), kQRows, kv_.data(),
                                 kv_.data(), kKvRows, o_.data(), lse_.data(),
                                 q_.data(), d_q_.data(), d_k_.data(),
                                 d_v_.data(), nullptr);
  }
  absl::Status ReferenceForward(const AttentionShape& shape,
                                const std::vector<AttentionTask>& tasks) {
    return ReferenceAttentionForward(shape, tasks, q_.data(), kQRows,
                                     kv_.data(), kv_.data(), kKvRows,
                                     o_.data(), lse_.data());
  }

  // Every entry point rejects the arguments with InvalidArgument and writes
  // nothing.
  void ExpectRejected(const AttentionShape& shape,
                      const std::vector<AttentionTask>& tasks,
                      const std::string& message_part) {
    for (const absl::Status& status :
         {Forward(shape, tasks), Backward(shape, tasks),
          ReferenceForward(shape, tasks),
          ValidateAttentionArgs(shape, tasks, kQRows, kKvRows)}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_NE(status.message().find(message_part), std::string::npos)
          << status.message() << " lacks \"" << message_part << "\"";
    }
    for (float x : o_) ASSERT_EQ(x, 9.0f);
    for (float x : d_q_) ASSERT_EQ(x, 9.0f);
    for (float x : d_k_) ASSERT_EQ(x, 9.0f);
    for (float x : d_v_) ASSERT_EQ(x, 9.0f);
  }
};

TEST_F(ValidationTest, AcceptsValidTasks) {
  // Two pieces of one document sharing K/V rows, and a second document.
  const std::vector<AttentionTask> tasks = {
      {0, 3, 0, 0}, {5, 8, 3, 0}, {0, 4, 6, 8}};
  EXPECT_TRUE(Forward(shape_, tasks).ok());
  EXPECT_TRUE(Backward(shape_, tasks).ok());
}

TEST_F(ValidationTest, RejectsBadShapes) {
  const std::vector<AttentionTask> tasks = {{0, 3, 0, 0}};
  ExpectRejected({0, 2, 8, 0.35f}, tasks, "positive n_heads");
  ExpectRejected({4, 0, 8, 0.35f}, tasks, "positive n_heads");
  ExpectRejected({4, 2, 0, 0.35f}, tasks, "positive n_heads");
  ExpectRejected({4, -2, 8, 0.35f}, tasks, "positive n_heads");
  ExpectRejected({4, 3, 8, 0.35f}, tasks, "does not divide");
  ExpectRejected({4, 2, 8, 0.0f}, tasks, "softmax_scale");
  ExpectRejected({4, 2, 8, -1.0f}, tasks, "softmax_scale");
  ExpectRejected({4, 2, 8, std::nanf("")}, tasks, "softmax_scale");
  ExpectRejected({4, 2, 8, std::numeric_limits<float>::infinity()}, tasks,
                 "softmax_scale");
  ExpectRejected({1 << 16, 1, 1 << 16, 0.35f}, tasks, "too large");
}

TEST_F(ValidationTest, RejectsTasksOutsideBuffers) {
  ExpectRejected(shape_, {{3, 3, 0, 0}}, "0 <= q_begin < q_end");
  ExpectRejected(shape_, {{4, 2, 0, 0}}, "0 <= q_begin < q_end");
  ExpectRejected(shape_, {{-1, 2, 0, 0}}, "0 <= q_begin < q_end");
  ExpectRejected(shape_, {{0, 11, 0, 0}}, "query rows outside");
  ExpectRejected(shape_, {{0, 3, 8, 0}}, "query rows outside");
  ExpectRejected(shape_, {{0, 3, -1, 0}}, "query rows outside");
  ExpectRejected(shape_, {{0, 3, 0, 10}}, "key rows");
  ExpectRejected(shape_, {{0, 3, 0, -1}}, "key rows");
  // Only 2 query rows, but keys [0, 13) exceed the 12 K/V rows.
  ExpectRejected(shape_, {{11, 13, 0, 0}}, "key rows");
  // Huge values must not overflow into acceptance.
  ExpectRejected(shape_, {{0, std::numeric_limits<int64_t>::max(), 0, 0}},
                 "query rows outside");
  ExpectRejected(shape_, {{0, 1, std::numeric_limits<int64_t>::max(), 0}},
                 "query rows outside");
  ExpectRejected(shape_, {{0, 1, 0, std::numeric_limits<int64_t>::max()}},
                 "key rows");
}

TEST_F(ValidationTest, RejectsOverlappingQueryRows) {
  ExpectRejected(shape_, {{0, 4, 0, 0}, {0, 2, 3, 4}}, "overlap");
  ExpectRejected(shape_, {{0, 2, 5, 0}, {2, 4, 5, 0}}, "overlap");
  // The error names the later task.
  ExpectRejected(shape_, {{0, 1, 9, 0}, {0, 3, 0, 0}, {0, 2, 2, 6}},
                 "task 2");
}

TEST_F(ValidationTest, RejectsNullBuffersAndBadRowCounts) {
  const std::vector<AttentionTask> tasks = {{0, 3, 0, 0}};
  EXPECT_EQ(CoreAttentionForward(shape_, tasks, nullptr, kQRows, kv_.data(),
                                 kv_.data(), kKvRows, o_.data(), lse_.data(),
                                 nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CoreAttentionBackward(shape_, tasks, q_.data(), kQRows, kv_.data(),
                                  kv_.data(), kKvRows, o_.data(), lse_.data(),
                                  q_.data(), d_q_.data(), nullptr,
                                  d_v_.data(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateAttentionArgs(shape_, tasks, -1, kKvRows).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateAttentionArgs(shape_, tasks, kQRows, -5).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CausalPairsTest, CountsQueryKeyPairs) {
  EXPECT_EQ(CausalPairs(AttentionTask{0, 1, 0, 0}), 1);
  EXPECT_EQ(CausalPairs(AttentionTask{0, 4, 0, 0}), 10);
  EXPECT_EQ(CausalPairs(AttentionTask{3, 4, 0, 0}), 4);
  // DistCA: q tokens ending at kv cost q*kv - q(q-1)/2.
  EXPECT_EQ(CausalPairs(AttentionTask{70, 100, 0, 0}), 30 * 100 - 30 * 29 / 2);
  // A mirrored head/tail pair costs a * (L + 1).
  const std::vector<AttentionTask> pair = {{0, 5, 0, 0}, {95, 100, 5, 0}};
  EXPECT_EQ(CausalPairs(pair), 5 * 101);
}

}  // namespace
}  // namespace corescape::kernels
