#ifndef CORESCAPE_WORKER_DEVICE_GROUP_H_
#define CORESCAPE_WORKER_DEVICE_GROUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/device/device.h"
#include "runtime/train/data_parallel_group.h"

namespace corescape::worker {

// The optimizer's group of a job whose step runs on a GPU: its collectives
// go over NCCL between the ranks' GPUs (NVLink, InfiniBand) instead of the
// UCX data plane. Two NCCL communicators on the job's GPUs: one for the
// all-reduces, one with its own stream for the asynchronous all-gathers
// (SCAPE's next mask overlaps the next forward/backward). Their unique ids
// are made by rank 0 and handed to the others over `bootstrap`, the job's
// authenticated data-plane group (no side channel), which is kept for
// Abort. Host buffers are staged through device memory (the optimizer runs
// on the host). Collectives time out after `timeout` with an error on every
// rank, never a hang. Built with --config=cuda; without it
// FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<train::DataParallelGroup>> ConnectDeviceGroup(
    std::unique_ptr<train::DataParallelGroup> bootstrap, const v1::JobAssignment& assignment,
    const device::Device& device, absl::Duration timeout);

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_DEVICE_GROUP_H_
