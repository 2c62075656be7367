// The stand-in for a `gpu` test in a build without --config=cuda.
#include "gtest/gtest.h"

TEST(CudaDisabled, NeedsConfigCuda) {
  GTEST_SKIP() << "built without --config=cuda: device tests run only in a CUDA build on a GPU";
}
