#include "runtime/job/job_communicator.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/transport.h"

namespace corescape::job {
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

// Two workers on loopback: the trainer's collectives go over the control
// channel, so the optimizer's byte counters hold only the optimizer's.
TEST(ConnectDataParallelGroupTest, ControlTrafficStaysOffTheOptimizersCounters) {
  constexpr int kWorkers = 2;
  std::vector<std::unique_ptr<comm::Transport>> transports;
  v1::JobAssignment assignment;
  assignment.set_job_id("job-7");
  assignment.set_world_size(kWorkers);
  assignment.set_generation(1);
  assignment.set_data_plane_token("secret");
  for (int rank = 0; rank < kWorkers; ++rank) {
    comm::TransportOptions options;
    options.listen_address = "127.0.0.1:0";
    auto transport = comm::Transport::Create(options);
    ASSERT_TRUE(transport.ok()) << transport.status();
    assignment.add_peer_data_addresses((*transport)->address());
    transports.push_back(*std::move(transport));
  }
  std::vector<std::unique_ptr<train::CommunicatorGroup>> groups(kWorkers);
  std::vector<absl::Status> statuses(kWorkers);
  std::vector<float> sums(kWorkers);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorkers; ++rank) {
    threads.emplace_back([&, rank] {
      v1::JobAssignment mine = assignment;
      mine.set_rank(rank);
      auto group = ConnectDataParallelGroup(transports[rank].get(), mine, absl::Seconds(20));
      if (!group.ok()) {
        statuses[rank] = group.status();
        return;
      }
      groups[rank] = *std::move(group);
      std::vector<float> control(1000, 1.0f);
      statuses[rank] = groups[rank]->control_channel()->AllReduceSum(control.data(), 1000);
      if (!statuses[rank].ok()) return;
      float optimizer = rank + 1.0f;
      statuses[rank] = groups[rank]->AllReduceSum(&optimizer, 1);
      sums[rank] = optimizer;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << rank << ": " << statuses[rank];
    EXPECT_EQ(groups[rank]->rank(), rank);
    EXPECT_EQ(groups[rank]->world_size(), kWorkers);
    EXPECT_EQ(sums[rank], 3.0f);
    // One float each way, far below the control channel's 1000.
    EXPECT_GT(groups[rank]->bytes_sent(), 0);
    EXPECT_LT(groups[rank]->bytes_sent(), 1000 * int64_t{sizeof(float)});
    EXPECT_GE(groups[rank]->control_channel()->bytes_sent(), 1000 * int64_t{sizeof(float)} / 2);
  }
}

}  // namespace
}  // namespace corescape::job
