#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_

#include <cstdint>
#include <vector>

#include "runtime/optim/scape_config.h"
#include "runtime/optim/scape_host_ages.h"
#include "runtime/optim/scape_state_store.h"

namespace corescape::optim {

// SCAPE's state in host memory: the optimizer's own vectors (m, this
// rank's residual e, v̄, the ages and the packed values), which its host
// selection reads directly. Both rules' host forms (scape_catch_up.h,
// scape_reference.h) run here, and the ages are written a step late
// (ScapeHostAges).
class HostScapeStore final : public ScapeStateStore {
 public:
  HostScapeStore(ScapeRule rule, std::vector<float>* m, std::vector<float>* residual,
                 std::vector<float>* vbar, std::vector<int64_t>* last_sync,
                 std::vector<float>* values, const std::vector<uint8_t>* decay_mask)
      : rule_(rule),
        m_(*m),
        residual_(*residual),
        vbar_(*vbar),
        values_(*values),
        decay_mask_(*decay_mask),
        ages_(last_sync) {}

  void UseThreadPool(ThreadPool* pool) override { pool_ = pool; }
  absl::Status Payload(const float* grads, const kernels::host_device::ScapeReferenceScalars& s,
                       int64_t begin, int64_t end, std::vector<float>& statistic) override;
  absl::Status MaskReceived(const GlobalMask& mask) override {
    return ages_.Receive(mask, /*windows=*/rule_ == ScapeRule::kCatchUp);
  }
  absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                              MaskSource source) override;
  absl::StatusOr<double> Apply(float* params, int64_t step,
                               const kernels::host_device::ScapeReferenceScalars& s,
                               double grad_clip) override;
  absl::Status Accumulate(const float* grads,
                          const kernels::host_device::ScapeCatchUpScalars& scalars) override;
  absl::Status CatchUpApply(float* params, int64_t step,
                            const kernels::host_device::ScapeCatchUpScalars& scalars,
                            const CatchUpPowerTables& powers) override;
  absl::StatusOr<float*> Residual() override { return residual_.data(); }
  absl::Status ScaleResidual(float scale) override;
  absl::Status SumOverRanks(RankGroup& group, float* data, int64_t count) override {
    return group.AllReduceSum(data, count);
  }
  void SettleAges() override { ages_.Settle(); }
  // The state is the optimizer's own vectors: nothing to copy either way
  // (the owed ages are written; a restore owes none).
  absl::Status Read(std::vector<float>&, std::vector<float>&, std::vector<float>&) override {
    return absl::OkStatus();
  }
  absl::Status ReadAges(std::vector<int64_t>&) override {
    ages_.Settle();
    return absl::OkStatus();
  }
  absl::Status Write(const std::vector<float>&, const std::vector<float>&,
                     const std::vector<float>&, const std::vector<int64_t>&) override {
    ages_.Forget();
    return absl::OkStatus();
  }

 private:
  ScapeRule rule_;
  std::vector<float>& m_;
  std::vector<float>& residual_;
  std::vector<float>& vbar_;
  std::vector<float>& values_;
  const std::vector<uint8_t>& decay_mask_;
  ScapeHostAges ages_;
  // The last Pack's mask (its caller keeps it until the next Pack), and
  // whether it is the received one.
  const std::vector<int64_t>* mask_ = nullptr;
  bool dense_ = true;
  bool received_ = false;
  std::vector<int32_t> windows_;  // the catch-up rule's, of the last mask
  ThreadPool* pool_ = nullptr;  // the loops' chunks (per element: the same bits)
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_HOST_STORE_H_
