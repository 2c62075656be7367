#include "client/cli/rendering/table.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli/rendering/output.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  EXPECT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "") << "output must end with a newline";
  lines.pop_back();
  return lines;
}

TEST(TableTest, ColumnsStartAtTheSameOffsetOnEveryLine) {
  Table table({"NAME", "STATE", "ADDRESS"});
  table.AddRow({"worker-0", "ALIVE", "127.0.0.1:4000"});
  table.AddRow({"a-much-longer-name", "DRAINING", "127.0.0.1:4001"});
  const std::vector<std::string> lines = Lines(table.Render());
  ASSERT_EQ(lines.size(), 3);
  EXPECT_EQ(lines[0], "NAME                STATE     ADDRESS");
  EXPECT_EQ(lines[1], "worker-0            ALIVE     127.0.0.1:4000");
  EXPECT_EQ(lines[2], "a-much-longer-name  DRAINING  127.0.0.1:4001");
}

TEST(TableTest, NoTrailingSpacesAndShortRowsArePadded) {
  Table table({"A", "B", "C"});
  table.AddRow({"x"});
  table.AddRow({"y", "", "zzz", "dropped"});
  const std::vector<std::string> lines = Lines(table.Render());
  ASSERT_EQ(lines.size(), 3);
  for (const auto& line : lines) {
    ASSERT_FALSE(line.empty());
    EXPECT_NE(line.back(), ' ') << "'" << line << "'";
  }
  EXPECT_EQ(lines[1], "x");
  EXPECT_EQ(lines[2], "y     zzz");
  EXPECT_EQ(table.row_count(), 2);
}

TEST(TableTest, RowsOnlyOmitsTheHeader) {
  Table table({"KEY", "VALUE"});
  table.AddRow({"Scheduler:", "abc"});
  EXPECT_EQ(table.RenderRowsOnly(), "Scheduler:  abc\n");
}

TEST(FormatTest, Iso8601HasMillisecondsAndZ) {
  EXPECT_EQ(FormatIso8601Millis(1700000000123), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatIso8601Millis(1700000000000), "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(FormatIso8601Millis(0), "");
}

TEST(FormatTest, AgeIsShortAndHuman) {
  const int64_t now = 1700000000000;
  EXPECT_EQ(FormatAge(now - 1200, now), "1.2s ago");
  EXPECT_EQ(FormatAge(now - 250, now), "250ms ago");
  EXPECT_EQ(FormatAge(now - 192000, now), "3m12s ago");
  EXPECT_EQ(FormatAge(now - (2 * 3600 + 5 * 60) * 1000LL, now), "2h05m ago");
  EXPECT_EQ(FormatAge(now + 1500, now), "in 1.5s");
  EXPECT_EQ(FormatAge(0, now), "never");
  EXPECT_EQ(FormatShortDuration(absl::Seconds(10)), "10s");
  EXPECT_EQ(FormatShortDuration(absl::Milliseconds(59999)), "59.9s");
}

v1::NodeInfo SampleWorker() {
  v1::NodeInfo node;
  node.set_name("worker-0");
  node.set_node_id("n-1234");
  node.set_role(v1::WORKER);
  node.set_state(v1::ALIVE);
  node.set_incarnation(3);
  node.set_host("127.0.0.1");
  node.set_pid(4242);
  node.set_grpc_address("127.0.0.1:40001");
  node.set_data_address("127.0.0.1:40002");
  node.set_last_heartbeat_unix_ms(1700000000123);
  node.set_lease_expires_unix_ms(1700000010123);
  node.mutable_resources()->set_cpu_cores(2);
  node.mutable_resources()->set_memory_bytes(int64_t{24} << 30);
  node.mutable_resources()->set_gpus(0);
  node.mutable_resources()->set_checkpoint_root("/var/lib/corescape/worker-0");
  node.mutable_resources()->set_data_root("/srv/corescape/data");
  return node;
}

TEST(NodeJsonTest, HasRequiredKeysWithEnumNamesAndNumbers) {
  const nlohmann::json json = NodeToJson(SampleWorker());
  for (const char* key :
       {"name", "node_id", "role", "state", "incarnation", "host", "pid",
        "grpc_address", "data_address", "last_heartbeat",
        "last_heartbeat_unix_ms", "lease_expires_unix_ms", "resources",
        "current_job_id"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["name"], "worker-0");
  EXPECT_EQ(json["node_id"], "n-1234");
  EXPECT_EQ(json["role"], "WORKER");
  EXPECT_EQ(json["state"], "ALIVE");
  ASSERT_TRUE(json["incarnation"].is_number_integer());
  EXPECT_EQ(json["incarnation"].get<int64_t>(), 3);
  ASSERT_TRUE(json["pid"].is_number_integer());
  EXPECT_EQ(json["pid"].get<int64_t>(), 4242);
  EXPECT_EQ(json["last_heartbeat"], "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(json["last_heartbeat_unix_ms"].get<int64_t>(), 1700000000123);
  EXPECT_EQ(json["lease_expires_unix_ms"].get<int64_t>(), 1700000010123);
  EXPECT_EQ(json["resources"]["cpu_cores"].get<int>(), 2);
  EXPECT_EQ(json["resources"]["memory_bytes"].get<int64_t>(),
            int64_t{24} << 30);
  EXPECT_EQ(json["resources"]["gpus"].get<int>(), 0);
  EXPECT_EQ(json["resources"]["checkpoint_root"], "/var/lib/corescape/worker-0");
  EXPECT_EQ(json["resources"]["data_root"], "/srv/corescape/data");
  EXPECT_EQ(json["current_job_id"], "");
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_EQ(json["resources"]["device"], nlohmann::json({{"kind", "cpu"}}));
}

TEST(NodeJsonTest, GpuWorkerNamesItsDevice) {
  v1::NodeInfo node = SampleWorker();
  node.mutable_resources()->set_gpus(2);
  v1::ServedDevice& device = *node.mutable_resources()->mutable_device();
  device.set_kind(v1::CUDA);
  device.set_cuda_index(1);
  device.set_gpu_model("NVIDIA H200");
  device.set_gpu_memory_bytes(int64_t{150} * 1000 * 1000 * 1000);
  const nlohmann::json json = NodeToJson(node);
  EXPECT_EQ(json["device"], "cuda:1 (NVIDIA H200, 139.7 GiB)");
  EXPECT_EQ(json["resources"]["device"]["kind"], "cuda");
  EXPECT_EQ(json["resources"]["device"]["cuda_index"], 1);
  EXPECT_EQ(json["resources"]["device"]["gpu_model"], "NVIDIA H200");
  EXPECT_EQ(json["resources"]["device"]["gpu_memory_bytes"].get<int64_t>(), 150000000000);
  const std::vector<std::string> lines = Lines(RenderNodesTable({node}, 1700000001323));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(absl::EndsWith(lines[1], "1.2s ago        cuda:1 (NVIDIA H200, 139.7 GiB)"))
      << lines[1];
}

TEST(NodeJsonTest, AttentionServerAndOtherStatesUseProtoNames) {
  v1::NodeInfo node = SampleWorker();
  node.set_role(v1::ATTENTION_SERVER);
  node.set_state(v1::DRAINING);
  EXPECT_EQ(NodeToJson(node)["role"], "ATTENTION_SERVER");
  EXPECT_EQ(NodeToJson(node)["state"], "DRAINING");
  node.set_state(v1::DEREGISTERED);
  EXPECT_EQ(NodeToJson(node)["state"], "DEREGISTERED");
  node.set_state(v1::DEAD);
  EXPECT_EQ(NodeToJson(node)["state"], "DEAD");
}

TEST(NodeJsonTest, ArrayHasOneObjectPerNode) {
  v1::NodeInfo second = SampleWorker();
  second.set_name("attn-0");
  const nlohmann::json json = NodesToJson({SampleWorker(), second});
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2);
  EXPECT_EQ(json[1]["name"], "attn-0");
  EXPECT_TRUE(NodesToJson({}).is_array());
}

TEST(NodesTableTest, HeaderAndAlignedRows) {
  v1::NodeInfo attention = SampleWorker();
  attention.set_name("attn-0");
  attention.set_role(v1::ATTENTION_SERVER);
  attention.set_pid(0);
  const std::vector<std::string> lines = Lines(RenderNodesTable(
      {SampleWorker(), attention}, /*now_unix_ms=*/1700000001323));
  ASSERT_EQ(lines.size(), 3);
  const std::vector<std::string> headers = {
      "NAME", "ROLE", "STATE",   "INCARNATION",
      "HOST", "PID",  "ADDRESS", "LAST-HEARTBEAT", "DEVICE"};
  std::vector<size_t> offsets;
  size_t from = 0;
  for (const auto& header : headers) {
    const size_t at = lines[0].find(header, from);
    ASSERT_NE(at, std::string::npos) << header;
    offsets.push_back(at);
    from = at + header.size();
  }
  // Every row has a non-space character at each column start, preceded by a
  // space (so cells do not run into each other).
  for (size_t row = 1; row < lines.size(); ++row) {
    for (size_t i = 1; i < offsets.size(); ++i) {
      ASSERT_LT(offsets[i], lines[row].size());
      EXPECT_NE(lines[row][offsets[i]], ' ') << lines[row];
      EXPECT_EQ(lines[row][offsets[i] - 1], ' ') << lines[row];
    }
  }
  EXPECT_NE(lines[1].find("WORKER"), std::string::npos);
  EXPECT_NE(lines[1].find("1.2s ago"), std::string::npos);
  EXPECT_EQ(lines[2].substr(offsets[5], 2), "- ") << "pid 0 shows as '-'";
  EXPECT_NE(lines[2].find("ATTENTION_SERVER"), std::string::npos);
  EXPECT_EQ(lines[1].substr(offsets[8]), "cpu");
  EXPECT_EQ(lines[2].substr(offsets[8]), "-") << "attention servers train nothing";
}

TEST(SortTest, WorkersBeforeAttentionServersThenByName) {
  std::vector<v1::NodeInfo> nodes(3, SampleWorker());
  nodes[0].set_name("attn-0");
  nodes[0].set_role(v1::ATTENTION_SERVER);
  nodes[1].set_name("worker-1");
  nodes[2].set_name("worker-0");
  SortNodesForDisplay(nodes);
  EXPECT_EQ(nodes[0].name(), "worker-0");
  EXPECT_EQ(nodes[1].name(), "worker-1");
  EXPECT_EQ(nodes[2].name(), "attn-0");
}

v1::GetClusterStatusResponse SampleStatus() {
  v1::GetClusterStatusResponse status;
  status.set_scheduler_id("sched-abc");
  status.set_version("0.1.0");
  status.set_started_unix_ms(1700000000000);
  status.set_lease_ttl_ms(10000);
  status.set_workers_alive(2);
  status.set_attention_servers_alive(1);
  status.set_nodes_dead(1);
  v1::ClusterEvent* event = status.add_recent_events();
  event->set_sequence(7);
  event->set_unix_ms(1700000000500);
  event->set_kind(v1::ClusterEvent::NODE_REGISTERED);
  event->set_node_name("worker-0");
  event->set_message("registered (incarnation 1)");
  return status;
}

TEST(ClusterStatusTest, JsonHasCountsAndEventKindNames) {
  const nlohmann::json json =
      ClusterStatusToJson(SampleStatus(), /*now_unix_ms=*/1700000065000);
  EXPECT_EQ(json["scheduler_id"], "sched-abc");
  EXPECT_EQ(json["uptime_ms"].get<int64_t>(), 65000);
  EXPECT_EQ(json["lease_ttl_ms"].get<int64_t>(), 10000);
  EXPECT_EQ(json["workers_alive"].get<int>(), 2);
  EXPECT_EQ(json["attention_servers_alive"].get<int>(), 1);
  EXPECT_EQ(json["nodes_dead"].get<int>(), 1);
  ASSERT_EQ(json["recent_events"].size(), 1);
  EXPECT_EQ(json["recent_events"][0]["kind"], "NODE_REGISTERED");
  EXPECT_EQ(json["recent_events"][0]["time"], "2023-11-14T22:13:20.500Z");
  EXPECT_EQ(json["recent_events"][0]["node_name"], "worker-0");
}

TEST(ClusterStatusTest, TextShowsSummaryAndEventsTable) {
  const std::string text =
      RenderClusterStatus(SampleStatus(), /*now_unix_ms=*/1700000065000);
  EXPECT_NE(text.find("sched-abc"), std::string::npos) << text;
  EXPECT_NE(text.find("1m05s"), std::string::npos) << text;
  EXPECT_NE(text.find("2 workers alive, 1 attention server alive, 1 dead, 0 "
                      "draining"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("TIME"), std::string::npos) << text;
  EXPECT_NE(text.find("NODE_REGISTERED"), std::string::npos) << text;

  v1::GetClusterStatusResponse quiet = SampleStatus();
  quiet.clear_recent_events();
  EXPECT_NE(
      RenderClusterStatus(quiet, 1700000065000).find("Recent events: none"),
      std::string::npos);
}

}  // namespace
}  // namespace corescape::cli
