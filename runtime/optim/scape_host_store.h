#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_

#include <cstdint>
#include <vector>

#include "runtime/optim/scape_state_store.h"

namespace corescape::optim {

// SCAPE's state in host memory: the optimizer's own vectors (m, this
// rank's residual e, v̄ and the packed values), which its host selection
// reads directly. Both rules' host forms (scape_catch_up.h,
// scape_reference.h) run here; the ages stay with the optimizer.
class HostScapeStore final : public ScapeStateStore {
 public:
  HostScapeStore(std::vector<float>* m, std::vector<float>* residual, std::vector<float>* vbar,
                 std::vector<float>* values, const std::vector<uint8_t>* decay_mask)
      : m_(*m), residual_(*residual), vbar_(*vbar), values_(*values), decay_mask_(*decay_mask) {}

  void UseThreadPool(ThreadPool* pool) override { pool_ = pool; }
  absl::Status Payload(const float* grads, const kernels::host_device::ScapeReferenceScalars& s,
                       int64_t begin, int64_t end, std::vector<float>& statistic) override;
  absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                              MaskSource source) override;
  absl::StatusOr<double> Apply(float* params, int64_t step,
                               const kernels::host_device::ScapeReferenceScalars& s,
                               double grad_clip) override;
  absl::Status Accumulate(const float* grads,
                          const kernels::host_device::ScapeCatchUpScalars& scalars) override;
  absl::Status CatchUpApply(float* params, int64_t step, absl::Span<const int32_t> windows,
                            const kernels::host_device::ScapeCatchUpScalars& scalars,
                            const CatchUpPowerTables& powers) override;
  absl::StatusOr<float*> Residual() override { return residual_.data(); }
  absl::Status ScaleResidual(float scale) override;
  absl::Status SumOverRanks(RankGroup& group, float* data, int64_t count) override {
    return group.AllReduceSum(data, count);
  }
  // The state is the optimizer's own vectors: nothing to copy either way.
  absl::Status Read(std::vector<float>&, std::vector<float>&, std::vector<float>&,
                    std::vector<int64_t>&) override {
    return absl::OkStatus();
  }
  absl::Status Write(const std::vector<float>&, const std::vector<float>&,
                     const std::vector<float>&, const std::vector<int64_t>&) override {
    return absl::OkStatus();
  }

 private:
  std::vector<float>& m_;
  std::vector<float>& residual_;
  std::vector<float>& vbar_;
  std::vector<float>& values_;
  const std::vector<uint8_t>& decay_mask_;
  // The last Pack's mask (its caller keeps it until the update).
  const std::vector<int64_t>* mask_ = nullptr;
  bool dense_ = true;
  ThreadPool* pool_ = nullptr;  // the loops' chunks (per element: the same bits)
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_
