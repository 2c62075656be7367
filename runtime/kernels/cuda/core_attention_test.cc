// Core-attention bodies on the CPU, walked over the launches' tile lists in
// the launches' order, vs the double-precision reference
// (runtime/kernels/cpu/core_attention_reference).
//
// Tolerance 2e-5 on ||got − want|| / ||want|| per tensor: the bodies round
// every product and sum to fp32 (unit roundoff 6e-8) over at most a few
// hundred keys or queries here, and expf/logf are within an ulp, which puts
// the error near 1e-6; one key left out of a softmax or a missed rescale
// moves these tensors by 1e-3 or more.
#include "runtime/kernels/cuda/core_attention.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/device_runtime.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cuda/core_attention_test_util.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"

namespace corescape::kernels::cuda {
namespace {

constexpr double kTolerance = 2e-5;

// What the launches do, thread by thread, on the host, over the plan as
// uploaded to the CPU device runtime.
AttentionOutputs RunBodies(const AttentionBatch& b, const std::vector<float>& initial_kv_grad) {
  AttentionOutputs out = InitialOutputs(b, initial_kv_grad);
  absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(b.shape, b.tasks, b.q_rows, b.kv_rows);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return out;
  absl::StatusOr<std::unique_ptr<device::DeviceRuntime>> runtime = device::OpenDevice(device::Device::Cpu());
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  if (!runtime.ok()) return out;
  device::CachingAllocator allocator(runtime->get());
  absl::StatusOr<std::unique_ptr<device::Stream>> stream = (*runtime)->CreateStream();
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return out;
  absl::StatusOr<UploadedCoreAttentionTiles> uploaded = UploadCoreAttentionTiles(*plan, allocator, **stream);
  EXPECT_TRUE(uploaded.ok()) << uploaded.status();
  if (!uploaded.ok()) return out;
  const CoreAttentionTilesView view = uploaded->view();
  const AttentionDims& dims = view.dims;
  const int d = dims.head_dim, group = dims.n_heads / dims.n_kv_heads;
  const int64_t q_stride = int64_t{dims.n_heads} * d, kv_stride = int64_t{dims.n_kv_heads} * d;
  auto each_query = [&](auto fn) {
    for (int64_t t = 0; t < view.n_query_tiles; ++t) {
      const QueryTile& tile = view.query_tiles[t];
      for (int head = 0; head < dims.n_heads; ++head) {
        for (int i = 0; i < tile.n_queries; ++i) {
          const int64_t row = tile.q_row + i;
          fn(row * q_stride + head * d, row * dims.n_heads + head,
             tile.kv_row * kv_stride + (head / group) * d, tile.q_pos + i + 1);
        }
      }
    }
  };
  each_query([&](int64_t q_off, int64_t lse_at, int64_t kv_off, int64_t n_keys) {
    AttentionForwardRow(b.q.data() + q_off, b.k.data() + kv_off, b.v.data() + kv_off, kv_stride, n_keys, d,
                        dims.softmax_scale, out.o.data() + q_off, out.lse.data() + lse_at);
  });
  std::vector<float> delta(b.lse_floats());
  each_query([&](int64_t q_off, int64_t lse_at, int64_t kv_off, int64_t n_keys) {
    delta[lse_at] = AttentionOutputGradDot(b.d_o.data() + q_off, out.o.data() + q_off, d);
    AttentionDqRow(b.q.data() + q_off, b.d_o.data() + q_off, out.lse[lse_at], delta[lse_at], b.k.data() + kv_off,
                   b.v.data() + kv_off, kv_stride, n_keys, d, dims.softmax_scale, out.d_q.data() + q_off);
  });
  const int64_t n_key_tiles = view.n_waves == 0 ? 0 : view.wave_ends[view.n_waves - 1];
  for (int64_t t = 0; t < n_key_tiles; ++t) {
    const KeyTile& tile = view.key_tiles[t];
    for (int kv_head = 0; kv_head < dims.n_kv_heads; ++kv_head) {
      for (int j = 0; j < tile.n_keys; ++j) {
        AttentionDkDvKeyRow(dims, tile, view.segments, kv_head, tile.k_pos + j, b.q.data(), b.k.data(),
                            b.v.data(), out.lse.data(), delta.data(), b.d_o.data(), out.d_k.data(), out.d_v.data());
      }
    }
  }
  return out;
}

void ExpectMatchesReference(const AttentionBatch& b, const std::string& what) {
  const std::vector<float> initial_kv_grad = RandomKvGrad(b);
  ExpectNear(RunBodies(b, initial_kv_grad), RunReference(b, initial_kv_grad), kTolerance, what);
}

TEST(CoreAttentionBodies, MatchTheReferenceAcrossGqaGroupsAndHeadDims) {
  for (int head_dim : {16, 64}) {
    for (int group : {1, 2, 4}) {
      std::mt19937_64 rng(head_dim * 10 + group);
      const AttentionBatch batch = MakeBatch(ScaledShape(4, 4 / group, head_dim), TileCrossingDocuments(rng), rng);
      ExpectMatchesReference(batch, "head_dim " + std::to_string(head_dim) + ", group " + std::to_string(group));
    }
  }
}

TEST(CoreAttentionBodies, MatchTheReferenceAtTheLargestHeadDim) {
  std::mt19937_64 rng(5);
  const AttentionBatch batch = MakeBatch(ScaledShape(2, 1, kAttentionMaxHeadDim), {{150, {{0, 40}, {110, 150}}}}, rng);
  ExpectMatchesReference(batch, "head_dim 128");
}

// Two documents given different kv_row values whose K/V rows overlap: the
// plan puts them in different waves, and both contribute to the shared rows.
TEST(CoreAttentionBodies, OverlappingDocumentsAccumulateInSeparateWaves) {
  std::mt19937_64 rng(11);
  AttentionBatch batch = MakeBatch(ScaledShape(2, 2, 16), {{120, {{0, 120}}}}, rng);
  const int64_t first_q_rows = batch.q_rows;
  batch.tasks.push_back({10, 90, first_q_rows, 20});  // keys rows 20..109, inside the first document's
  batch.q_rows += 80;
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < 80 * 2 * 16; ++i) {
    batch.q.push_back(normal(rng));
    batch.d_o.push_back(normal(rng));
  }
  absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(batch.shape, batch.tasks, batch.q_rows,
                                                                   batch.kv_rows);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->wave_ends.size(), 2u);
  ExpectMatchesReference(batch, "overlapping documents");
}

TEST(CoreAttentionTiles, CoverEveryQueryOnceAndEveryKeyOfEveryDocument) {
  std::mt19937_64 rng(3);
  const AttentionBatch batch = MakeBatch(ScaledShape(4, 2, 16), TileCrossingDocuments(rng), rng);
  absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(batch.shape, batch.tasks, batch.q_rows,
                                                                   batch.kv_rows);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int> query_seen(batch.q_rows, 0), key_seen(batch.kv_rows, 0);
  for (const QueryTile& tile : plan->query_tiles) {
    ASSERT_GT(tile.n_queries, 0);
    ASSERT_LE(tile.n_queries, kAttentionQueryTile);
    for (int i = 0; i < tile.n_queries; ++i) ++query_seen[tile.q_row + i];
  }
  for (const KeyTile& tile : plan->key_tiles) {
    ASSERT_LE(tile.n_keys, kAttentionKeyTile);
    for (int j = 0; j < tile.n_keys; ++j) ++key_seen[tile.kv_row + tile.k_pos + j];
  }
  std::vector<int> query_want(batch.q_rows, 0), key_want(batch.kv_rows, 0);
  for (const AttentionTask& task : batch.tasks) {
    for (int64_t p = task.q_begin; p < task.q_end; ++p) ++query_want[task.q_row + p - task.q_begin];
    for (int64_t j = 0; j < task.q_end; ++j) key_want[task.kv_row + j] = 1;
  }
  EXPECT_EQ(query_seen, query_want);
  EXPECT_EQ(key_seen, key_want);
  EXPECT_EQ(plan->wave_ends, std::vector<int64_t>{static_cast<int64_t>(plan->key_tiles.size())});
}

TEST(CoreAttentionTiles, NoTasksPlanNoWork) {
  absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(ScaledShape(2, 1, 16), {}, 0, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->query_tiles.empty());
  EXPECT_TRUE(plan->key_tiles.empty());
  EXPECT_TRUE(plan->wave_ends.empty());
}

TEST(CoreAttentionTiles, RejectBadShapesAndTasksNamingTheProblem) {
  const std::vector<AttentionTask> tasks = {{0, 8, 0, 0}};
  absl::StatusOr<CoreAttentionTiles> too_wide = PlanCoreAttentionTiles(ScaledShape(2, 2, 256), tasks, 8, 8);
  ASSERT_EQ(too_wide.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_wide.status().message().find("head_dim 256"), std::string::npos) << too_wide.status();
  EXPECT_EQ(PlanCoreAttentionTiles(ScaledShape(2, 2, 16), tasks, 8, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanCoreAttentionTiles(ScaledShape(3, 2, 16), tasks, 8, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanCoreAttentionTiles(ScaledShape(2, 2, 16), {{{5, 3, 0, 0}}}, 8, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::kernels::cuda
