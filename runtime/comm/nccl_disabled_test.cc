// Without --config=cuda the data plane has no NCCL: nccl_communicator
// compiles to nothing and links neither NCCL nor the CUDA runtime. This
// checks that, so a default build that pulled them in would fail here.
#include <dlfcn.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

TEST(NcclCommunicatorTest, DefaultBuildLinksNoNcclOrCuda) {
#ifdef CORESCAPE_WITH_CUDA
  FAIL() << "CORESCAPE_WITH_CUDA is defined in a build without --config=cuda";
#endif
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "ncclCommInitRank"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cudaMalloc"), nullptr);
  std::ifstream maps("/proc/self/maps");
  ASSERT_TRUE(maps.good());
  std::stringstream contents;
  contents << maps.rdbuf();
  const std::string mapped = contents.str();
  ASSERT_FALSE(mapped.empty());
  EXPECT_EQ(mapped.find("libnccl"), std::string::npos);
  EXPECT_EQ(mapped.find("libcudart"), std::string::npos);
}

}  // namespace
