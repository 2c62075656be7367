#ifndef CORESCAPE_RUNTIME_MODEL_PEAK_FLOPS_H_
#define CORESCAPE_RUNTIME_MODEL_PEAK_FLOPS_H_

#include "absl/strings/string_view.h"
#include "runtime/model/precision.h"

namespace corescape::model {

// The dense peak, in TFLOP/s, of a GPU named as CUDA names it (e.g. "NVIDIA
// H200") at the precision its GEMMs run in: bf16 tensor cores, or fp32
// without TF32 (what the fp32 mode runs). 0 for a device not in the table
// (a CPU, an unknown GPU): its MFU is unknown, and a worker's --peak_tflops
// says it.
double DensePeakTflops(absl::string_view gpu_name, Precision precision);

// `flops` done in `seconds`, in TFLOP/s (0 for no time); and that as a share
// of `peak_tflops`, the MFU (0 while the peak is unknown, i.e. 0).
double ModelTflopsPerSecond(double flops, double seconds);
double Mfu(double tflops, double peak_tflops);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_PEAK_FLOPS_H_
