#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cpu/core_attention_reference.h"

namespace corescape::kernels {
namespace {

constexpr double kTolerance = 1e-5;

struct Outputs {
  std::vector<float> o, lse, d_q, d_k, d_v;
};

// Zeroed outputs sized for `b`.
Outputs ZeroOutputs(const AttentionBatch& b) {
  Outputs out;
  out.o.assign(b.q_floats(), 0.0f);
  out.lse.assign(b.lse_floats(), 0.0f);
  out.d_q.assign(b.q_floats(), 0.0f);
  out.d_k.assign(b.kv_floats(), 0.0f);
  out.d_v.assign(b.kv_floats(), 0.0f);
  return out;
}

// Forward then backward with the blocked kernel (d_k/d_v start at zero).
Outputs RunKernel(const AttentionBatch& b, ThreadPool* pool) {
  Outputs out = ZeroOutputs(b);
  absl::Status forward = CoreAttentionForward(
      b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
      out.o.data(), out.lse.data(), pool);
  EXPECT_TRUE(forward.ok()) << forward;
  absl::Status backward = CoreAttentionBackward(
      b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
      out.o.data(), out.lse.data(), b.d_o.data(), out.d_q.data(),
      out.d_k.data(), out.d_v.data(), pool);
  EXPECT_TRUE(backward.ok()) << backward;
  return out;
}

Outputs RunReference(const AttentionBatch& b) {
  Outputs out = ZeroOutputs(b);
  absl::Status forward = ReferenceAttentionForward(
      b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
      out.o.data(), out.lse.data());
  EXPECT_TRUE(forward.ok()) << forward;
  absl::Status backward = ReferenceAttentionBackward(
      b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
      b.d_o.data(), out.d_q.data(), out.d_k.data(), out.d_v.data());
  EXPECT_TRUE(backward.ok()) << backward;
  return out;
}

void ExpectClose(const Outputs& actual, const Outputs& expected,
                 double tolerance) {
  EXPECT_LT(RelativeError(actual.o, expected.o), tolerance) << "O";
  EXPECT_LT(RelativeError(actual.lse, expected.lse), tolerance) << "LSE";
  EXPECT_LT(RelativeError(actual.d_q, expected.d_q), tolerance) << "dQ";
  EXPECT_LT(RelativeError(actual.d_k, expected.d_k), tolerance) << "dK";
  EXPECT_LT(RelativeError(actual.d_v, expected.d_v), tolerance) << "dV";
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// (n_heads, n_kv_heads, head_dim)
class CoreAttentionTest
    : public testing::TestWithParam<std::tuple<int, int, int>> {
 protected:
  AttentionShape Shape() const {
    const auto [heads, kv_heads, head_dim] = GetParam();
    return {heads, kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim))};
  }
};

TEST_P(CoreAttentionTest, MatchesReferenceOnRandomTaskLists) {
  ThreadPool pool(4);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    AttentionBatch batch =
        MakeBatch(Shape(), RandomDocuments(rng, /*documents=*/5, 300), rng);
    SCOPED_TRACE(testing::Message() << "seed " << seed << ", "
                                    << batch.tasks.size() << " tasks");
    ExpectClose(RunKernel(batch, &pool), RunReference(batch), kTolerance);
  }
}

// Adds tasks that read another document's K/V rows from a row offset (as if
// documents shared a prefix), so tasks of one K/V row group disagree on where
// position 0 is and key tiles straddle their documents' tile boundaries.
void AddOffsetTasks(std::mt19937_64& rng, int count, AttentionBatch& batch) {
  std::vector<AttentionTask> extra;
  for (int i = 0; i < count; ++i) {
    const AttentionTask& base =
        batch.tasks[std::uniform_int_distribution<size_t>(
            0, batch.tasks.size() - 1)(rng)];
    if (base.q_end < 2) continue;
    const int64_t offset =
        std::uniform_int_distribution<int64_t>(1, base.q_end - 1)(rng);
    const int64_t length = base.q_end - offset;
    const int64_t q_begin =
        std::uniform_int_distribution<int64_t>(0, length - 1)(rng);
    const int64_t q_end =
        std::uniform_int_distribution<int64_t>(q_begin + 1, length)(rng);
    extra.push_back({q_begin, q_end, batch.q_rows, base.kv_row + offset});
    batch.q_rows += q_end - q_begin;
  }
  batch.tasks.insert(batch.tasks.end(), extra.begin(), extra.end());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  batch.q.resize(batch.q_floats());
  batch.d_o.resize(batch.q_floats());
  for (float& x : batch.q) x = normal(rng);
  for (float& x : batch.d_o) x = normal(rng);
}

TEST_P(CoreAttentionTest, TasksReadingKvRowsAtDifferentOffsets) {
  ThreadPool pool(3);
  for (uint64_t seed = 11; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    AttentionBatch batch =
        MakeBatch(Shape(), RandomDocuments(rng, /*documents=*/3, 300), rng);
    AddOffsetTasks(rng, 4, batch);
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    const Outputs parallel = RunKernel(batch, &pool);
    ExpectClose(parallel, RunReference(batch), kTolerance);
    const Outputs serial = RunKernel(batch, nullptr);
    EXPECT_TRUE(BitwiseEqual(serial.d_k, parallel.d_k));
    EXPECT_TRUE(BitwiseEqual(serial.d_v, parallel.d_v));
    EXPECT_TRUE(BitwiseEqual(serial.o, parallel.o));
  }
}

TEST_P(CoreAttentionTest, BitwiseIdenticalAcrossThreadCounts) {
  std::mt19937_64 rng(42);
  AttentionBatch batch =
      MakeBatch(Shape(), RandomDocuments(rng, /*documents=*/6, 300), rng);
  ThreadPool one(1);
  ThreadPool four(4);
  const Outputs serial = RunKernel(batch, &one);
  const Outputs parallel = RunKernel(batch, &four);
  const Outputs no_pool = RunKernel(batch, nullptr);
  for (const Outputs* other : {&parallel, &no_pool}) {
    EXPECT_TRUE(BitwiseEqual(serial.o, other->o));
    EXPECT_TRUE(BitwiseEqual(serial.lse, other->lse));
    EXPECT_TRUE(BitwiseEqual(serial.d_q, other->d_q));
    EXPECT_TRUE(BitwiseEqual(serial.d_k, other->d_k));
    EXPECT_TRUE(BitwiseEqual(serial.d_v, other->d_v));
  }
  // And again on the same pool: scheduling differs run to run.
  EXPECT_TRUE(BitwiseEqual(parallel.d_k, RunKernel(batch, &four).d_k));
}

TEST_P(CoreAttentionTest, SplitDocumentMatchesWholeDocument) {
  ThreadPool pool(2);
  constexpr int64_t kLength = 257;
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> splits = {
      {{0, 40}, {40, 41}, {41, 200}, {200, 256}, {256, 257}},
      {{0, 1}, {1, 128}, {128, 257}},
      {{0, 60}, {197, 257}, {60, 197}},  // mirrored head/tail, then middle
  };
  for (const auto& pieces : splits) {
    std::mt19937_64 rng(7);
    AttentionBatch whole = MakeBatch(Shape(), {{kLength, {{0, kLength}}}}, rng);
    // Same inputs; query rows of the pieces laid out in document order.
    AttentionBatch split = whole;
    split.tasks.clear();
    for (const auto& [begin, end] : pieces) {
      split.tasks.push_back({begin, end, whole.tasks[0].q_row + begin,
                             whole.tasks[0].kv_row});
    }
    ExpectClose(RunKernel(split, &pool), RunKernel(whole, &pool), kTolerance);
  }
}

TEST_P(CoreAttentionTest, AccumulatesIntoKeyValueGradients) {
  std::mt19937_64 rng(3);
  AttentionBatch batch =
      MakeBatch(Shape(), RandomDocuments(rng, /*documents=*/3, 100), rng);
  const Outputs fresh = RunKernel(batch, nullptr);
  std::vector<float> d_q(batch.q_floats());
  std::vector<float> d_k(batch.kv_floats(), 1.5f);
  std::vector<float> d_v(batch.kv_floats(), -2.0f);
  ASSERT_TRUE(CoreAttentionBackward(batch.shape, batch.tasks, batch.q.data(),
                                    batch.q_rows, batch.k.data(),
                                    batch.v.data(), batch.kv_rows,
                                    fresh.o.data(), fresh.lse.data(),
                                    batch.d_o.data(), d_q.data(), d_k.data(),
                                    d_v.data(), nullptr)
                  .ok());
  for (int64_t i = 0; i < batch.kv_floats(); ++i) {
    ASSERT_FLOAT_EQ(d_k[i], fresh.d_k[i] + 1.5f) << i;
    ASSERT_FLOAT_EQ(d_v[i], fresh.d_v[i] - 2.0f) << i;
  }
}

TEST_P(CoreAttentionTest, LeavesRowsOutsideTasksUntouched) {
  std::mt19937_64 rng(5);
  AttentionBatch batch =
      MakeBatch(Shape(), RandomDocuments(rng, /*documents=*/8, 40), rng);
  const int64_t head_floats = batch.shape.n_heads * batch.shape.head_dim;
  const int64_t kv_head_floats = batch.shape.n_kv_heads * batch.shape.head_dim;
  std::vector<bool> q_used(batch.q_rows), kv_used(batch.kv_rows);
  for (const AttentionTask& task : batch.tasks) {
    for (int64_t r = 0; r < task.q_end - task.q_begin; ++r) {
      q_used[task.q_row + r] = true;
    }
    for (int64_t r = 0; r < task.q_end; ++r) kv_used[task.kv_row + r] = true;
  }
  constexpr float kSentinel = 123.0f;
  std::vector<float> o(batch.q_floats(), kSentinel), d_q(o);
  std::vector<float> lse(batch.lse_floats(), kSentinel);
  std::vector<float> d_k(batch.kv_floats(), kSentinel), d_v(d_k);
  ThreadPool pool(2);
  ASSERT_TRUE(CoreAttentionForward(batch.shape, batch.tasks, batch.q.data(),
                                   batch.q_rows, batch.k.data(), batch.v.data(),
                                   batch.kv_rows, o.data(), lse.data(), &pool)
                  .ok());
  ASSERT_TRUE(CoreAttentionBackward(batch.shape, batch.tasks, batch.q.data(),
                                    batch.q_rows, batch.k.data(),
                                    batch.v.data(), batch.kv_rows, o.data(),
                                    lse.data(), batch.d_o.data(), d_q.data(),
                                    d_k.data(), d_v.data(), &pool)
                  .ok());
  int64_t unused_rows = 0;
  for (int64_t r = 0; r < batch.q_rows; ++r) {
    if (q_used[r]) continue;
    ++unused_rows;
    for (int64_t i = r * head_floats; i < (r + 1) * head_floats; ++i) {
      ASSERT_EQ(o[i], kSentinel);
      ASSERT_EQ(d_q[i], kSentinel);
    }
    ASSERT_EQ(lse[r * batch.shape.n_heads], kSentinel);
  }
  for (int64_t r = 0; r < batch.kv_rows; ++r) {
    if (kv_used[r]) continue;
    ++unused_rows;
    for (int64_t i = r * kv_head_floats; i < (r + 1) * kv_head_floats; ++i) {
      ASSERT_EQ(d_k[i], kSentinel);
      ASSERT_EQ(d_v[i], kSentinel);
    }
  }
  EXPECT_GT(unused_rows, 0) << "the batch should leave some rows unused";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CoreAttentionTest,
                         testing::Values(std::tuple(8, 2, 64),
                                         std::tuple(8, 2, 16),
                                         std::tuple(4, 4, 64),
                                         std::tuple(4, 4, 16),
                                         std::tuple(2, 1, 128),
                                         std::tuple(3, 1, 5)));

TEST(CoreAttentionEdgeTest, SingleTokenDocumentsAndEmptyTaskList) {
  // A one-token document attends only itself: O = V, LSE = score.
  const AttentionShape shape{2, 1, 4, 0.5f};
  const std::vector<float> q = {1, 2, 3, 4, 0, 1, 0, 1};
  const std::vector<float> k = {1, 1, 1, 1};
  const std::vector<float> v = {0.5f, -1, 2, 3};
  std::vector<float> o(8), lse(2);
  const AttentionTask task{0, 1, 0, 0};
  ASSERT_TRUE(CoreAttentionForward(shape, {&task, 1}, q.data(), 1, k.data(),
                                   v.data(), 1, o.data(), lse.data(), nullptr)
                  .ok());
  EXPECT_EQ(std::vector<float>(o.begin(), o.begin() + 4), v);
  EXPECT_EQ(std::vector<float>(o.begin() + 4, o.end()), v);
  EXPECT_FLOAT_EQ(lse[0], 5.0f);
  EXPECT_FLOAT_EQ(lse[1], 1.0f);
  EXPECT_TRUE(CoreAttentionForward(shape, {}, nullptr, 0, nullptr, nullptr, 0,
                                   nullptr, nullptr, nullptr)
                  .ok());
  EXPECT_TRUE(CoreAttentionBackward(shape, {}, nullptr, 0, nullptr, nullptr, 0,
                                    nullptr, nullptr, nullptr, nullptr,
                                    nullptr, nullptr, nullptr)
                  .ok());
}

}  // namespace
}  // namespace corescape::kernels
