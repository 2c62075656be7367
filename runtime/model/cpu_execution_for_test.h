#ifndef CORESCAPE_RUNTIME_MODEL_CPU_EXECUTION_FOR_TEST_H_
#define CORESCAPE_RUNTIME_MODEL_CPU_EXECUTION_FOR_TEST_H_

#include <cstdint>
#include <memory>

#include "runtime/model/model_ops.h"

namespace corescape::model {

// How a test binary's device-copies backends run their kernels: at once,
// unless its BUILD target defines CORESCAPE_TEST_CPU_EXECUTION as a
// CpuExecution enumerator (a twin target over the same sources then runs
// every test with the kernels queued as a GPU's are).
inline CpuExecution CpuExecutionForTest() {
#ifdef CORESCAPE_TEST_CPU_EXECUTION
  return CpuExecution::CORESCAPE_TEST_CPU_EXECUTION;
#else
  return CpuExecution::kImmediate;
#endif
}

// The device-copies CPU backend, run as CpuExecutionForTest() says.
inline std::unique_ptr<ModelOps> NewDeviceCopiesForTest(int64_t capacity_bytes = 0) {
  return NewCpuModelOps(CpuParameterMode::kDeviceCopies, nullptr, capacity_bytes, CpuExecutionForTest());
}

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_CPU_EXECUTION_FOR_TEST_H_
