// What ConnectCoreAttention refuses before it connects anything.
#include "worker/core_attention.h"

#include "gtest/gtest.h"

namespace corescape::worker {
namespace {

v1::JobAssignment Assignment(v1::AttentionMode mode, int servers) {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-3");
  assignment.set_world_size(2);
  assignment.mutable_spec()->mutable_attention()->set_mode(mode);
  for (const char* address : {"w0:1", "w1:1"}) assignment.add_peer_data_addresses(address);
  for (int s = 0; s < servers; ++s) assignment.add_attention_server_addresses("a:1");
  return assignment;
}

TEST(ConnectCoreAttentionTest, RefusesAssignmentsThatDoNotFitTheMode) {
  const train::TrainerConfig config;
  struct Case {
    v1::AttentionMode mode;
    int servers;
    const char* why;
  };
  for (const Case& c : {Case{v1::DISAGGREGATED, 0, "names no attention servers"},
                        Case{v1::IN_PLACE, 2, "names 2 attention servers"},
                        Case{v1::COLOCATED, 0, "COLOCATED attention: no executor"}}) {
    auto executor = ConnectCoreAttention(/*transport=*/nullptr, Assignment(c.mode, c.servers),
                                         config, absl::Seconds(1));
    ASSERT_FALSE(executor.ok()) << v1::AttentionMode_Name(c.mode);
    EXPECT_EQ(executor.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(executor.status().message().find(c.why), std::string::npos) << executor.status();
    EXPECT_NE(executor.status().message().find("job-3"), std::string::npos) << executor.status();
  }
}

}  // namespace
}  // namespace corescape::worker
