// ConnectDeviceGroup over NCCL (--config=cuda).
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/device/device_runtime.h"
#include "worker/device_group.h"

namespace corescape::worker {
namespace {

// One NCCL communicator with its stream and staging buffers.
struct NcclLane {
  std::unique_ptr<comm::NcclCommunicator> communicator;
  std::unique_ptr<device::Stream> stream;
  device::DeviceBuffer send, recv;
  // Pinned staging both ways: a copy from or to pageable memory may block the
  // host until the stream's earlier work (a collective a dead peer never
  // completes) is done, before the timeout could be checked.
  std::unique_ptr<device::PinnedHostBuffer> host_in, host_out;
};

class NcclGroup final : public train::DataParallelGroup {
 public:
  NcclGroup(std::unique_ptr<train::DataParallelGroup> bootstrap,
            std::unique_ptr<device::DeviceRuntime> runtime)
      : bootstrap_(std::move(bootstrap)),
        runtime_(std::move(runtime)),
        allocator_(std::make_unique<device::CachingAllocator>(runtime_.get())) {}

  ~NcclGroup() override {
    // Communicators first: they may still use the streams.
    for (NcclLane* lane : {&reduce_, &gather_}) {
      lane->communicator.reset();
      if (lane->stream) (void)lane->stream->Synchronize();
      lane->send.Reset();
      lane->recv.Reset();
    }
  }

  absl::Status Connect(const v1::JobAssignment& assignment, const device::Device& device,
                       absl::Duration timeout) {
    // Rank 0 makes both ids; an all-gather over the data plane hands them on.
    const int p = bootstrap_->world_size();
    std::string ids;
    if (bootstrap_->rank() == 0) {
      for (int lane = 0; lane < 2; ++lane) {
        auto id = comm::CreateNcclUniqueId();
        if (!id.ok()) return id.status();
        ids += *id;
      }
    }
    const int64_t both = 2 * NCCL_UNIQUE_ID_BYTES;
    const int64_t id_bytes = static_cast<int64_t>(ids.size());
    if (bootstrap_->rank() == 0 && id_bytes != both) {
      return absl::InternalError(absl::StrCat("NCCL ids of ", id_bytes, " bytes, not ", both));
    }
    std::vector<int64_t> sizes(p, 0);
    sizes[0] = both;
    std::string received(both, '\0');
    CORESCAPE_RETURN_IF_ERROR(
        bootstrap_->AllGatherV(ids.data(), id_bytes, received.data(), sizes));
    int lane_index = 0;
    for (NcclLane* lane : {&reduce_, &gather_}) {
      comm::NcclCommunicatorOptions options;
      options.rank = bootstrap_->rank();
      options.world_size = p;
      options.unique_id = received.substr(lane_index * (both / 2), both / 2);
      options.device = device.index;
      options.timeout = timeout;
      options.generation = assignment.generation();
      options.job_id = assignment.job_id();
      auto communicator = comm::NcclCommunicator::Create(options);
      if (!communicator.ok()) return communicator.status();
      lane->communicator = *std::move(communicator);
      auto stream = runtime_->CreateStream();
      if (!stream.ok()) return stream.status();
      lane->stream = *std::move(stream);
      ++lane_index;
    }
    return absl::OkStatus();
  }

  int rank() const override { return bootstrap_->rank(); }
  int world_size() const override { return bootstrap_->world_size(); }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    if (count < 0) return absl::InvalidArgumentError("AllReduceSum: negative count");
    if (count == 0) return absl::OkStatus();
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    NcclLane& lane = reduce_;
    CORESCAPE_RETURN_IF_ERROR(Reserve(lane.recv, bytes));
    CORESCAPE_RETURN_IF_ERROR(ReserveHost(lane, lane.host_in, bytes));
    CORESCAPE_RETURN_IF_ERROR(ReserveHost(lane, lane.host_out, bytes));
    std::memcpy(lane.host_in->data(), data, bytes);
    CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(lane.recv.data(), lane.host_in->data(), bytes,
                                                  device::CopyKind::kHostToDevice, *lane.stream));
    CORESCAPE_RETURN_IF_ERROR(lane.communicator->AllReduce(
        lane.recv.as<float>(), count, comm::ReduceOp::kSum, device::CudaStreamOf(*lane.stream)));
    CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(lane.host_out->data(), lane.recv.data(), bytes,
                                                  device::CopyKind::kDeviceToHost, *lane.stream));
    CORESCAPE_RETURN_IF_ERROR(lane.communicator->Synchronize(device::CudaStreamOf(*lane.stream)));
    std::memcpy(data, lane.host_out->data(), bytes);
    return absl::OkStatus();
  }

  // The gradient where the model left it: no staging. The caller has
  // synchronized the stream that wrote it.
  absl::Status AllReduceSumOnDevice(float* device_data, int64_t count) override {
    if (count < 0) return absl::InvalidArgumentError("AllReduceSumOnDevice: negative count");
    if (count == 0) return absl::OkStatus();
    NcclLane& lane = reduce_;
    CORESCAPE_RETURN_IF_ERROR(lane.communicator->AllReduce(
        device_data, count, comm::ReduceOp::kSum, device::CudaStreamOf(*lane.stream)));
    return lane.communicator->Synchronize(device::CudaStreamOf(*lane.stream));
  }

  // On the all-reduce lane, in order with the other blocking collectives, so
  // it never waits behind (or races) an asynchronous gather.
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> bytes_per_rank) override {
    auto total = EnqueueGather(reduce_, send, send_bytes, bytes_per_rank);
    if (!total.ok()) return total.status();
    CORESCAPE_RETURN_IF_ERROR(
        reduce_.communicator->Synchronize(device::CudaStreamOf(*reduce_.stream)));
    if (*total > 0) std::memcpy(recv, reduce_.host_out->data(), *total);
    return absl::OkStatus();
  }

  // On the gather lane's own communicator and stream; Wait() synchronizes
  // it and copies the result out of pinned staging. One at a time.
  absl::StatusOr<std::unique_ptr<optim::PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override {
    if (gather_in_flight_) {
      return absl::FailedPreconditionError(
          "StartAllGatherV: the previous all-gather has not been waited for");
    }
    auto total = EnqueueGather(gather_, send, send_bytes, bytes_per_rank);
    if (!total.ok()) return total.status();
    gather_in_flight_ = true;
    return std::unique_ptr<optim::PendingCollective>(
        new PendingGather(&gather_, recv, *total, &gather_in_flight_));
  }

  int64_t bytes_sent() const override {
    return reduce_.communicator->counters().total_sent() +
           gather_.communicator->counters().total_sent();
  }
  int64_t bytes_received() const override {
    return reduce_.communicator->counters().total_received() +
           gather_.communicator->counters().total_received();
  }

  // The data-plane group the NCCL ids came over.
  DataParallelGroup* control_channel() override { return bootstrap_.get(); }

  void Abort(const std::string& reason) override {
    reduce_.communicator->Abort(reason);
    gather_.communicator->Abort(reason);
    bootstrap_->Abort(reason);
  }

 private:
  class PendingGather final : public optim::PendingCollective {
   public:
    PendingGather(NcclLane* lane, void* recv, int64_t bytes, bool* in_flight)
        : lane_(lane), recv_(recv), bytes_(bytes), in_flight_(in_flight) {}
    ~PendingGather() override {
      // Never waited for (the step failed): drain the lane before its staging
      // is reused, without writing into a buffer the caller may have freed.
      if (*in_flight_) {
        *in_flight_ = false;
        (void)lane_->communicator->Synchronize(device::CudaStreamOf(*lane_->stream));
      }
    }
    absl::Status Wait() override {
      *in_flight_ = false;
      CORESCAPE_RETURN_IF_ERROR(
          lane_->communicator->Synchronize(device::CudaStreamOf(*lane_->stream)));
      if (bytes_ > 0) std::memcpy(recv_, lane_->host_out->data(), bytes_);
      return absl::OkStatus();
    }

   private:
    NcclLane* lane_;
    void* recv_;
    int64_t bytes_;
    bool* in_flight_;
  };

  // Stages `send`, enqueues the all-gather on `lane` and the copy of the
  // result into lane.host_out; returns the total bytes gathered.
  absl::StatusOr<int64_t> EnqueueGather(NcclLane& lane, const void* send, int64_t send_bytes,
                                        absl::Span<const int64_t> bytes_per_rank) {
    if (static_cast<int>(bytes_per_rank.size()) != world_size() || send_bytes < 0 ||
        send_bytes != bytes_per_rank[rank()]) {
      return absl::InvalidArgumentError(
          "AllGatherV: bytes_per_rank must have world_size entries and "
          "bytes_per_rank[rank] == send_bytes");
    }
    int64_t total = 0;
    for (int64_t b : bytes_per_rank) {
      if (b < 0) return absl::InvalidArgumentError("AllGatherV: negative size");
      total += b;
    }
    CORESCAPE_RETURN_IF_ERROR(Reserve(lane.send, static_cast<size_t>(send_bytes)));
    CORESCAPE_RETURN_IF_ERROR(Reserve(lane.recv, static_cast<size_t>(total)));
    CORESCAPE_RETURN_IF_ERROR(ReserveHost(lane, lane.host_in, static_cast<size_t>(send_bytes)));
    CORESCAPE_RETURN_IF_ERROR(ReserveHost(lane, lane.host_out, static_cast<size_t>(total)));
    if (send_bytes > 0) {
      std::memcpy(lane.host_in->data(), send, send_bytes);
      CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(lane.send.data(), lane.host_in->data(),
                                                    send_bytes, device::CopyKind::kHostToDevice,
                                                    *lane.stream));
    }
    CORESCAPE_RETURN_IF_ERROR(lane.communicator->AllGatherV(lane.send.data(), send_bytes,
                                                            lane.recv.data(), bytes_per_rank,
                                                            device::CudaStreamOf(*lane.stream)));
    if (total > 0) {
      CORESCAPE_RETURN_IF_ERROR(runtime_->CopyAsync(lane.host_out->data(), lane.recv.data(),
                                                    total, device::CopyKind::kDeviceToHost,
                                                    *lane.stream));
    }
    return total;
  }

  // Grows `buffer` to at least `bytes`. The old block goes back to the
  // cache, where either lane's stream could take it while work still reads
  // it: both streams are drained first.
  absl::Status Reserve(device::DeviceBuffer& buffer, size_t bytes) {
    if (buffer.size() >= bytes && buffer.data() != nullptr) return absl::OkStatus();
    for (NcclLane* lane : {&reduce_, &gather_}) {
      CORESCAPE_RETURN_IF_ERROR(
          lane->communicator->Synchronize(device::CudaStreamOf(*lane->stream)));
    }
    buffer.Reset();
    auto grown = allocator_->Allocate(std::max<size_t>(bytes, 256));
    if (!grown.ok()) return grown.status();
    buffer = *std::move(grown);
    return absl::OkStatus();
  }

  // Grows one of `lane`'s pinned buffers; its stream may still copy from or
  // to the old one, so it is drained first.
  absl::Status ReserveHost(NcclLane& lane, std::unique_ptr<device::PinnedHostBuffer>& buffer,
                           size_t bytes) {
    if (buffer != nullptr && buffer->size() >= bytes) return absl::OkStatus();
    CORESCAPE_RETURN_IF_ERROR(lane.communicator->Synchronize(device::CudaStreamOf(*lane.stream)));
    auto host = device::PinnedHostBuffer::Allocate(runtime_.get(), std::max<size_t>(bytes, 256));
    if (!host.ok()) return host.status();
    buffer = std::make_unique<device::PinnedHostBuffer>(*std::move(host));
    return absl::OkStatus();
  }

  std::unique_ptr<train::DataParallelGroup> bootstrap_;
  std::unique_ptr<device::DeviceRuntime> runtime_;
  std::unique_ptr<device::CachingAllocator> allocator_;
  NcclLane reduce_, gather_;
  // One all-gather at a time: its result waits in gather_.host_out.
  bool gather_in_flight_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<train::DataParallelGroup>> ConnectDeviceGroup(
    std::unique_ptr<train::DataParallelGroup> bootstrap, const v1::JobAssignment& assignment,
    const device::Device& device, absl::Duration timeout) {
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConnectDeviceGroup: ", device.ToString(), " is not a GPU"));
  }
  auto runtime = device::OpenDevice(device);
  if (!runtime.ok()) return runtime.status();
  auto group = std::make_unique<NcclGroup>(std::move(bootstrap), *std::move(runtime));
  if (absl::Status s = group->Connect(assignment, device, timeout); !s.ok()) return s;
  LOG(INFO) << "job " << assignment.job_id() << " rank " << assignment.rank()
            << ": optimizer collectives over NCCL on " << device.ToString();
  return std::unique_ptr<train::DataParallelGroup>(std::move(group));
}

}  // namespace corescape::worker
