#include "runtime/train/communicator_group.h"

namespace corescape::train {

absl::StatusOr<std::unique_ptr<CommunicatorGroup>> CommunicatorGroup::Connect(
    comm::Transport* transport, const comm::CommunicatorOptions& optimizer,
    const comm::CommunicatorOptions& control) {
  auto communicator = comm::Communicator::Create(transport, optimizer);
  if (!communicator.ok()) return communicator.status();
  std::unique_ptr<CommunicatorGroup> group(new CommunicatorGroup(*std::move(communicator)));
  auto control_communicator = comm::Communicator::Create(transport, control);
  if (!control_communicator.ok()) return control_communicator.status();
  group->control_.reset(new CommunicatorGroup(*std::move(control_communicator)));
  return group;
}

namespace {

// The optimizer's view of a data-plane collective in flight.
class PendingHandle final : public optim::PendingCollective {
 public:
  explicit PendingHandle(std::unique_ptr<comm::CollectiveHandle> handle)
      : handle_(std::move(handle)) {}
  absl::Status Wait() override { return handle_->Wait(); }

 private:
  std::unique_ptr<comm::CollectiveHandle> handle_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<optim::PendingCollective>> CommunicatorGroup::StartAllGatherV(
    const void* send, int64_t send_bytes, void* recv, absl::Span<const int64_t> bytes_per_rank) {
  auto handle = communicator_->AllGatherVAsync(send, send_bytes, recv, bytes_per_rank);
  if (!handle.ok()) return handle.status();
  return std::unique_ptr<optim::PendingCollective>(new PendingHandle(*std::move(handle)));
}

}  // namespace corescape::train
