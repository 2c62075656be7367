// Runs only where a GPU is present (--config=cuda on a GPU machine): one
// rank, so every collective is a device-side copy, checked end to end.
#include "runtime/comm/nccl_communicator.h"

#include <vector>

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

TEST(NcclCommunicatorTest, SingleRankCollectives) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no GPU";
  }
  absl::StatusOr<std::string> id = CreateNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  NcclCommunicatorOptions o;
  o.unique_id = *id;
  o.device = 0;
  auto comm = NcclCommunicator::Create(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int64_t n = 1 << 20;
  std::vector<float> host(n, 2.0f);
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, n * sizeof(float)), cudaSuccess);
  cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ASSERT_TRUE((*comm)->AllReduce(dev, n, ReduceOp::kMean, stream).ok());
  ASSERT_TRUE((*comm)->Broadcast(dev, n * sizeof(float), 0, stream).ok());
  float* gathered = nullptr;
  ASSERT_EQ(cudaMalloc(&gathered, n * sizeof(float)), cudaSuccess);
  ASSERT_TRUE((*comm)->AllGatherV(dev, n * 4, gathered, std::vector<int64_t>{n * 4}, stream).ok());
  ASSERT_TRUE((*comm)->Synchronize(stream).ok());
  cudaMemcpy(host.data(), gathered, n * sizeof(float), cudaMemcpyDeviceToHost);
  EXPECT_EQ(host[n - 1], 2.0f);
  EXPECT_EQ((*comm)->counters()[CollectiveKind::kAllReduce].operations, 1);
  cudaFree(dev);
  cudaFree(gathered);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace corescape::comm
