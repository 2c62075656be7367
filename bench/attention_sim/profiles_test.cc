#include "bench/attention_sim/profiles.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace corescape::bench {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(AttentionTimeModelTest, ReproducesMeasuredDocumentsAndSaturates) {
  // launch 0.02 ms; per-pair time falls then flattens.
  const std::string path = WriteTemp("attn.csv",
                                     "L,cp,tp,duration_per_doc\n"
                                     "64,1,8,0.02\n"
                                     "512,1,8,0.03\n"
                                     "4096,1,8,0.2\n"
                                     "65536,1,8,30.0\n"
                                     "4096,1,1,9.0\n");
  absl::StatusOr<AttentionTimeModel> model = AttentionTimeModel::FromCsv(path, 8);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_DOUBLE_EQ(model->launch_ms(), 0.02);
  EXPECT_NEAR(model->DocumentMs(4096), 0.2, 1e-9);
  EXPECT_NEAR(model->DocumentMs(65536), 30.0, 1e-9);
  // Beyond the table: per-pair time held, so time grows with pairs.
  EXPECT_NEAR(model->DocumentMs(131072) - 0.02, (30.0 - 0.02) * 4, 0.01);
  EXPECT_FALSE(AttentionTimeModel::FromCsv(path, 4).ok());
}

TEST(NcclBandwidthTest, InterpolatesInLogSize) {
  const std::string path = WriteTemp(
      "nccl.csv",
      "op,ngpu,dtype,size_bytes,count_elems,t_us_out,algbw_out_gbs,busbw_out_gbs,t_us_in,"
      "algbw_in_gbs,busbw_in_gbs\n"
      "all_gather,8,half,1000,1,1,1,100,1,1,1\n"
      "all_gather,8,half,100000,1,1,1,300,1,1,1\n");
  absl::StatusOr<NcclBandwidth> bw = NcclBandwidth::FromCsv(path, "all_gather", 8);
  ASSERT_TRUE(bw.ok()) << bw.status();
  EXPECT_DOUBLE_EQ(bw->BusGBps(10), 100);
  EXPECT_NEAR(bw->BusGBps(10000), 200, 1e-9);
  EXPECT_DOUBLE_EQ(bw->BusGBps(1e9), 300);
  EXPECT_FALSE(NcclBandwidth::FromCsv(path, "all_reduce", 8).ok());
}

}  // namespace
}  // namespace corescape::bench
