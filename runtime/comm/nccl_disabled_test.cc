// Without --config=cuda there is no NCCL communicator to test.
#include "gtest/gtest.h"

TEST(NcclCommunicatorTest, BuiltWithoutCuda) { GTEST_SKIP() << "build with --config=cuda"; }
