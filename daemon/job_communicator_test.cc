#include "daemon/job_communicator.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace corescape {
namespace {

// 2 workers, 3 attention servers; the assignment of server 1 (rank 3).
v1::JobAssignment ServerAssignment(uint64_t attention_epoch) {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-7");
  assignment.set_rank(3);
  assignment.set_world_size(5);
  assignment.set_generation(4);
  assignment.set_data_plane_token("secret");
  assignment.set_attention_epoch(attention_epoch);
  for (const char* address : {"w0:1", "w1:1"}) assignment.add_peer_data_addresses(address);
  for (const char* address : {"a0:1", "a1:1", "a2:1"}) {
    assignment.add_attention_server_addresses(address);
  }
  return assignment;
}

TEST(JobCommunicatorOptionsTest, AttentionCommunicatorIsWorkersThenServersOfTheEpoch) {
  const comm::CommunicatorOptions options = JobCommunicatorOptions(
      ServerAssignment(0), JobCommunicator::kAttention, absl::Seconds(3));
  EXPECT_EQ(options.rank, 3);
  EXPECT_EQ(options.world_size, 5);
  EXPECT_EQ(options.generation, 4);
  EXPECT_EQ(options.peer_addresses,
            (std::vector<std::string>{"w0:1", "w1:1", "a0:1", "a1:1", "a2:1"}));
  EXPECT_EQ(options.secret_token, "secret");
  EXPECT_EQ(options.timeout, absl::Seconds(3));
  EXPECT_EQ(options.job_id, "job-7/attn");
  EXPECT_EQ(JobCommunicatorOptions(ServerAssignment(2), JobCommunicator::kAttention,
                                   absl::Seconds(3))
                .job_id,
            "job-7/attn/2");
}

TEST(JobCommunicatorOptionsTest, WorkerCommunicatorsSpanTheWorkersOnly) {
  v1::JobAssignment worker;
  worker.set_job_id("job-7");
  worker.set_rank(1);
  worker.set_world_size(2);
  worker.set_generation(4);
  worker.set_data_plane_token("secret");
  for (const char* address : {"w0:1", "w1:1"}) worker.add_peer_data_addresses(address);
  for (const JobCommunicator which : {JobCommunicator::kDataParallel,
                                      JobCommunicator::kInPlaceAttention,
                                      JobCommunicator::kControl}) {
    const comm::CommunicatorOptions options =
        JobCommunicatorOptions(worker, which, absl::Seconds(1));
    EXPECT_EQ(options.rank, 1);
    EXPECT_EQ(options.world_size, 2);
    EXPECT_EQ(options.generation, 4);
    EXPECT_EQ(options.peer_addresses, (std::vector<std::string>{"w0:1", "w1:1"}));
    EXPECT_EQ(options.secret_token, "secret");
    EXPECT_EQ(options.job_id, which == JobCommunicator::kDataParallel       ? "job-7"
                              : which == JobCommunicator::kInPlaceAttention ? "job-7/attn-inplace"
                                                                            : "job-7/control");
  }
}

}  // namespace
}  // namespace corescape
