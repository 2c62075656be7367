#ifndef CORESCAPE_RUNTIME_TRAIN_COMMUNICATOR_GROUP_H_
#define CORESCAPE_RUNTIME_TRAIN_COMMUNICATOR_GROUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport.h"
#include "runtime/train/data_parallel_group.h"

namespace corescape::train {

// A data-parallel group over the data plane: the optimizer's collectives on
// one communicator and, beside it, a control communicator
// (control_channel(): the trainer's token counts and losses), so the
// optimizer's byte counters hold only its own traffic. A job's pair is
// connected from its assignment by job::ConnectDataParallelGroup.
class CommunicatorGroup final : public DataParallelGroup {
 public:
  static absl::StatusOr<std::unique_ptr<CommunicatorGroup>> Connect(
      comm::Transport* transport, const comm::CommunicatorOptions& optimizer,
      const comm::CommunicatorOptions& control);

  int rank() const override { return communicator_->rank(); }
  int world_size() const override { return communicator_->world_size(); }
  absl::Status AllReduceSum(float* data, int64_t count) override {
    return communicator_->AllReduce(data, count, comm::ReduceOp::kSum);
  }
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> bytes_per_rank) override {
    return communicator_->AllGatherV(send, send_bytes, recv, bytes_per_rank);
  }
  absl::StatusOr<std::unique_ptr<optim::PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override;
  int64_t bytes_sent() const override { return communicator_->counters().total_sent(); }
  int64_t bytes_received() const override { return communicator_->counters().total_received(); }
  void Abort(const std::string& reason) override {
    communicator_->Abort(reason);
    if (control_ != nullptr) control_->Abort(reason);
  }
  DataParallelGroup* control_channel() override { return control_.get(); }

 private:
  explicit CommunicatorGroup(std::unique_ptr<comm::Communicator> communicator)
      : communicator_(std::move(communicator)) {}
  std::unique_ptr<comm::Communicator> communicator_;
  std::unique_ptr<CommunicatorGroup> control_;  // null for the control group itself
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_COMMUNICATOR_GROUP_H_
