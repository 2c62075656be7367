// The in-process P-rank mode (runtime/optim InProcessHub) must sum exactly
// like the data plane's all-reduce (runtime/comm RunAllReduce), or SCAPE in
// one process and SCAPE over UCX would drift apart bit by bit. This runs the
// real algorithm on the in-process fabric (P threads) and compares every
// bit with SumInDataPlaneOrder, for every P the algorithms distinguish
// (powers of two and the ranks that fold in), on both sides of the
// recursive-doubling/ring switch, with order-sensitive random data.
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/in_process_fabric.h"
#include "runtime/optim/in_process_rank_group.h"

namespace corescape {
namespace {

std::vector<float> OrderSensitiveInput(int rank, int64_t count) {
  std::mt19937 gen(77 + rank);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(count);
  // Mixed magnitudes (1e-3 .. 1e3) so that rounding depends on the order.
  for (float& x : v) x = unit(gen) * std::pow(10.0f, static_cast<float>(gen() % 7) - 3.0f);
  return v;
}

// What rank 0 holds after the data plane's all-reduce (every rank holds the
// same bits; runtime/comm tests that).
std::vector<float> DataPlaneSum(const std::vector<std::vector<float>>& inputs,
                                const comm::AlgorithmSettings& settings) {
  const int world = static_cast<int>(inputs.size());
  comm::InProcessFabric fabric(world, comm::InProcessFabric::Mode::kEager, absl::Seconds(20));
  std::vector<std::vector<float>> data = inputs;
  std::vector<comm::ByteCounters> counters(world);
  std::vector<absl::Status> statuses(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto channel = fabric.OpenChannel(r, 0, comm::CollectiveKind::kAllReduce, &counters[r]);
      statuses[r] = comm::RunAllReduce(*channel, settings, data[r].data(),
                                       static_cast<int64_t>(data[r].size()), comm::ReduceOp::kSum);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r];
  return data[0];
}

std::vector<float> HubSum(const std::vector<std::vector<float>>& inputs, int64_t small_bytes) {
  std::vector<const float*> pointers;
  for (const auto& v : inputs) pointers.push_back(v.data());
  std::vector<float> out(inputs[0].size());
  optim::SumInDataPlaneOrder(pointers, static_cast<int64_t>(out.size()), out.data(), small_bytes);
  return out;
}

// Σ in rank order 0..P−1: what the in-process hub used to compute.
std::vector<float> RankOrderSum(const std::vector<std::vector<float>>& inputs) {
  std::vector<float> out = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < out.size(); ++i) out[i] += inputs[r][i];
  }
  return out;
}

bool Bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ReductionOrderTest, DefaultThresholdMatchesTheDataPlane) {
  EXPECT_EQ(optim::kDataPlaneSmallAllReduceBytes, comm::AlgorithmSettings().small_bytes);
}

TEST(ReductionOrderTest, InProcessSumIsBitwiseTheDataPlaneAllReduce) {
  const comm::AlgorithmSettings defaults;
  comm::AlgorithmSettings small_segments;  // the ring cut into many pipeline segments
  small_segments.segment_bytes = 4096;
  const int64_t threshold_floats = defaults.small_bytes / 4;
  int cases_where_rank_order_differs = 0;
  for (int world : {2, 3, 4, 5, 6, 7, 8}) {
    for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1001}, threshold_floats,
                          threshold_floats + 1, int64_t{100003}}) {
      for (const comm::AlgorithmSettings& settings : {defaults, small_segments}) {
        std::vector<std::vector<float>> inputs;
        for (int r = 0; r < world; ++r) inputs.push_back(OrderSensitiveInput(r, count));
        const std::vector<float> want = DataPlaneSum(inputs, settings);
        const std::vector<float> got = HubSum(inputs, settings.small_bytes);
        ASSERT_TRUE(Bitwise(got, want)) << "P=" << world << " count=" << count
                                        << " segment_bytes=" << settings.segment_bytes;
        cases_where_rank_order_differs += !Bitwise(RankOrderSum(inputs), want);
      }
    }
  }
  // The data is order-sensitive: summing in rank order would have failed.
  EXPECT_GT(cases_where_rank_order_differs, 20);
}

}  // namespace
}  // namespace corescape
