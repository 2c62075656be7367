// Jobs as a table, as a detail block and as JSON; number formats.
#include "client/cli/rendering/job_output.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/cli/parsing/proto_json.h"
#include "client/cli/rendering/output.h"
#include "client/cli/rendering/watch_printer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;

constexpr int64_t kNow = 1700000000000;

v1::Job RunningJob() {
  v1::Job job;
  job.set_job_id("j-2");
  job.mutable_spec()->set_name("tiny-fortunes");
  job.mutable_spec()->mutable_model()->set_preset("tiny");
  job.mutable_spec()->set_steps(300);
  job.mutable_spec()->set_eval_interval_steps(50);
  job.mutable_spec()->set_seed(18446744073709551615ull);
  job.mutable_spec()->mutable_placement()->set_workers(2);
  job.mutable_spec()->mutable_data()->add_train_shards("/data/fortunes");
  job.mutable_spec()->mutable_data()->set_sequence_length(128);
  job.mutable_spec()->mutable_optimizer()->set_name("adamw");
  job.mutable_spec()->mutable_optimizer()->set_learning_rate(0.003);
  job.mutable_spec()->mutable_attention()->set_mode(v1::COLOCATED);
  job.set_state(v1::RUNNING);
  job.set_generation(2);
  job.add_assigned_nodes("worker-0");
  job.add_assigned_nodes("worker-1");
  job.mutable_progress()->set_step(120);
  job.mutable_progress()->set_total_steps(300);
  job.mutable_progress()->set_loss(2.3104);
  job.mutable_progress()->set_validation_loss(2.45);
  job.mutable_progress()->set_tokens_per_second(12345.4);
  job.mutable_progress()->set_bytes_sent(5 * 1024 * 1024);
  job.mutable_progress()->set_checkpoint_step(100);
  job.set_submitted_unix_ms(kNow - 192000);
  job.set_started_unix_ms(kNow - 190000);
  return job;
}

v1::Job PendingJob() {
  v1::Job job;
  job.set_job_id("j-3");
  job.mutable_spec()->set_steps(10);
  job.mutable_spec()->mutable_placement()->set_workers(4);
  job.set_state(v1::PENDING);
  job.set_state_reason("waiting for 4 workers (2 alive)");
  job.set_submitted_unix_ms(kNow - 5000);
  return job;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  EXPECT_EQ(lines.back(), "");
  lines.pop_back();
  return lines;
}

TEST(FormatTest, Numbers) {
  EXPECT_EQ(FormatThousands(0), "0");
  EXPECT_EQ(FormatThousands(999), "999");
  EXPECT_EQ(FormatThousands(12345), "12,345");
  EXPECT_EQ(FormatThousands(1234567), "1,234,567");
  EXPECT_EQ(FormatThousands(-1234), "-1,234");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(5 * 1024 * 1024), "5.0 MiB");
  EXPECT_EQ(FormatLoss(2.31049), "2.310");
  EXPECT_EQ(FormatLoss(std::nan("")), "nan");
  EXPECT_EQ(FormatEta(45), "45s");
  EXPECT_EQ(FormatEta(0.4), "1s");  // rounded up: never "0s" before the end
  EXPECT_EQ(FormatEta(80), "1m20s");
  EXPECT_EQ(FormatEta(2 * 3600 + 5 * 60 + 7), "2h05m");
}

TEST(JobsTableTest, NewestFirstWithEveryColumn) {
  std::vector<v1::Job> jobs = {RunningJob(), PendingJob()};
  SortJobsNewestFirst(jobs);
  EXPECT_EQ(Lines(RenderJobsTable(jobs, kNow)),
            (std::vector<std::string>{
                "JOB  NAME           STATE    DEVICE  STEP/TOTAL  LOSS   VAL-LOSS  "
                "TOKENS/S  WORKERS  SERVERS  AGE",
                "j-3  -              PENDING  cpu     0/10        -      -         "
                "-         0/4      -        5s",
                "j-2  tiny-fortunes  RUNNING  cpu     120/300     2.310  2.450     "
                "12,345    2/2      -        3m12s",
                "",
                "j-3: waiting for 4 workers (2 alive)",
            }));
}

TEST(JobsTableTest, CudaJobShowsItsDeviceAndWhyItWaits) {
  v1::Job job = PendingJob();
  job.mutable_spec()->set_device(v1::CUDA);
  job.set_state_reason(
      "waiting for 4 healthy free workers with a CUDA GPU (device: cuda; 0 free now); 0 of 3 "
      "registered workers serve one");
  const std::vector<std::string> lines = Lines(RenderJobsTable({job, RunningJob()}, kNow));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(absl::StartsWith(lines[1], "j-3  -              PENDING  cuda    0/10")) << lines[1];
  EXPECT_EQ(lines[4], "j-3: " + job.state_reason());
}

// assigned_nodes of a DISAGGREGATED job lists the workers, then the
// attention servers: WORKERS must not count the servers.
TEST(JobsTableTest, CountsWorkersAndAttentionServersApart) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_attention()->set_mode(v1::DISAGGREGATED);
  job.mutable_spec()->mutable_attention()->set_attention_servers(2);
  job.add_assigned_nodes("attn-0");
  job.add_assigned_nodes("attn-1");
  EXPECT_EQ(AssignedWorkers(job), 2);
  EXPECT_EQ(AssignedAttentionServers(job), 2);
  std::vector<std::string> lines = Lines(RenderJobsTable({job}, kNow));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(absl::StrContains(lines[1], "12,345    2/2      2/2      3m12s")) << lines[1];

  // After a failover left one server (attention_failover.h).
  job.mutable_assigned_nodes()->RemoveLast();
  job.set_assigned_attention_servers(1);
  lines = Lines(RenderJobsTable({job}, kNow));
  EXPECT_TRUE(absl::StrContains(lines[1], "12,345    2/2      1/2      3m12s")) << lines[1];

  v1::Job pending = PendingJob();
  pending.mutable_spec()->mutable_attention()->set_mode(v1::DISAGGREGATED);
  pending.mutable_spec()->mutable_attention()->set_attention_servers(1);
  EXPECT_EQ(AssignedWorkers(pending), 0);
  lines = Lines(RenderJobsTable({pending}, kNow));
  EXPECT_TRUE(absl::StrContains(lines[1], "0/4      0/1      5s")) << lines[1];
}

TEST(JobsTableTest, SortBreaksTiesByJobId) {
  v1::Job a = PendingJob(), b = PendingJob(), c = RunningJob();
  a.set_job_id("j-10");
  b.set_job_id("j-11");
  c.set_submitted_unix_ms(a.submitted_unix_ms());
  c.set_job_id("j-09");
  std::vector<v1::Job> jobs = {c, a, b};
  SortJobsNewestFirst(jobs);
  EXPECT_EQ(jobs[0].job_id(), "j-11");
  EXPECT_EQ(jobs[1].job_id(), "j-10");
  EXPECT_EQ(jobs[2].job_id(), "j-09");
}

TEST(JobDetailsTest, SpecStateNodesAndTimes) {
  const std::string details = RenderJobDetails(RunningJob(), kNow);
  for (const char* expected : {
           "Job:          j-2\n",
           "Name:         tiny-fortunes\n",
           "State:        RUNNING\n",
           "Generation:   2\n",
           "Progress:     step 120/300  loss 2.310  val 2.450  12,345 tok/s\n",
           "Traffic:      5.0 MiB sent, 0 B received\n",
           "Checkpoint:   step 100\n",
           "Model:        tiny\n",
           "Train data:   /data/fortunes\n",
           "Optimizer:    adamw, lr 0.003\n",
           "Workers:      2\n",
           "Attention:    COLOCATED\n",
           "Device:       cpu\n",
           "Started:      2023-11-14T22:10:10.000Z (3m10s ago)\n",
           "Finished:     -\n",
           "Nodes:\nRANK  NODE\n0     worker-0\n1     worker-1\n",
       }) {
    EXPECT_TRUE(absl::StrContains(details, expected))
        << "missing: " << expected << "in:\n" << details;
  }
  const std::string pending = RenderJobDetails(PendingJob(), kNow);
  EXPECT_TRUE(absl::StrContains(pending, "Reason:       waiting for 4 workers (2 alive)\n"));
  EXPECT_TRUE(absl::StrContains(pending, "Nodes: none assigned\n"));
  v1::Job cuda = PendingJob();
  cuda.mutable_spec()->set_device(v1::CUDA);
  EXPECT_TRUE(absl::StrContains(RenderJobDetails(cuda, kNow), "Device:       cuda\n"));
}

// A step's model FLOP rate and, where the device's peak is known, its MFU:
// in the progress line and on a line of their own; neither while unknown.
TEST(JobDetailsTest, ComputeRateAndMfu) {
  const std::string cpu = RenderJobDetails(RunningJob(), kNow);
  EXPECT_FALSE(absl::StrContains(cpu, "Compute:")) << cpu;
  EXPECT_FALSE(absl::StrContains(cpu, "MFU")) << cpu;

  v1::Job unknown_peak = RunningJob();
  unknown_peak.mutable_progress()->set_model_tflops_per_second(0.00123);
  EXPECT_TRUE(absl::StrContains(
      RenderJobDetails(unknown_peak, kNow),
      "Compute:      0.00123 TFLOP/s per worker (MFU unknown: no peak for this device)\n"));

  v1::Job gpu = RunningJob();
  gpu.mutable_progress()->set_model_tflops_per_second(412.5);
  gpu.mutable_progress()->set_mfu(0.4171);
  const std::string details = RenderJobDetails(gpu, kNow);
  EXPECT_TRUE(absl::StrContains(
      details, "Progress:     step 120/300  loss 2.310  val 2.450  12,345 tok/s  MFU 41.7%\n"))
      << details;
  EXPECT_TRUE(absl::StrContains(details, "Compute:      412.5 TFLOP/s per worker, MFU 41.7%\n"))
      << details;
  const nlohmann::json json = JobToJson(gpu);
  EXPECT_EQ(json["progress"]["model_tflops_per_second"], 412.5);
  EXPECT_EQ(json["progress"]["mfu"], 0.4171);

  gpu.mutable_progress()->set_mfu(std::nan(""));
  EXPECT_FALSE(absl::StrContains(RenderJobDetails(gpu, kNow), "MFU 41.7%"));
  EXPECT_TRUE(JobToJson(gpu)["progress"]["mfu"].is_null());
}

TEST(JobJsonTest, NamesTimesProgressAndTheSpecAsAJobFile) {
  const nlohmann::json json = JobToJson(RunningJob());
  EXPECT_EQ(json["job_id"], "j-2");
  EXPECT_EQ(json["name"], "tiny-fortunes");
  EXPECT_EQ(json["state"], "RUNNING");
  EXPECT_EQ(json["generation"], 2);
  EXPECT_EQ(json["assigned_nodes"], nlohmann::json({"worker-0", "worker-1"}));
  EXPECT_EQ(json["progress"]["step"], 120);
  EXPECT_EQ(json["progress"]["eta_seconds"], 0.0);  // every field present
  EXPECT_EQ(json["submitted"], "2023-11-14T22:10:08.000Z");
  EXPECT_EQ(json["finished"], "");
  EXPECT_EQ(json["finished_unix_ms"], 0);
  // The spec: proto field names, numbers as numbers, enum names, set
  // fields only.
  const nlohmann::json& spec = json["spec"];
  EXPECT_EQ(spec["steps"], 300);
  EXPECT_TRUE(spec["steps"].is_number_integer());
  EXPECT_EQ(spec["seed"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(spec["attention"]["mode"], "COLOCATED");
  EXPECT_EQ(spec["data"]["train_shards"], nlohmann::json({"/data/fortunes"}));
  EXPECT_FALSE(spec.contains("checkpoint"));
  EXPECT_FALSE(spec["model"].contains("n_layers"));
}

TEST(JobJsonTest, NonFiniteNumbersBecomeNull) {
  v1::Job job = RunningJob();
  job.mutable_progress()->set_loss(std::nan(""));
  EXPECT_TRUE(JobToJson(job)["progress"]["loss"].is_null());
  EXPECT_EQ(JobsToJson({job, PendingJob()}).size(), 2);
}

TEST(JobEventJsonTest, StateAndProgressEvents) {
  v1::JobEvent state;
  state.set_sequence(7);
  state.set_job_id("j-2");
  state.set_unix_ms(kNow);
  state.set_state(v1::FAILED);
  state.set_message("worker-1 died");
  const nlohmann::json json = JobEventToJson(state);
  EXPECT_EQ(json["type"], "state");
  EXPECT_EQ(json["state"], "FAILED");
  EXPECT_EQ(json["sequence"], 7);
  EXPECT_EQ(json["message"], "worker-1 died");
  EXPECT_EQ(json["time"], "2023-11-14T22:13:20.000Z");

  v1::JobEvent progress;
  progress.mutable_progress()->set_step(3);
  const nlohmann::json progress_json = JobEventToJson(progress);
  EXPECT_EQ(progress_json["type"], "progress");
  EXPECT_EQ(progress_json["progress"]["step"], 3);
  EXPECT_FALSE(progress_json.contains("state"));
}

}  // namespace
}  // namespace corescape::cli

namespace corescape::cli {
namespace {

// What another user stored, made to mislead a terminal: colour, a cleared
// screen, a fake row, a right-to-left override, a C1 CSI.
const std::string kHostile =
    "evil\x1b[31m\x1b[2J\nj-9  FAKE  SUCCEEDED\r\xe2\x80\xae" "cba\xc2\x9b" "0m";

// No byte a terminal obeys, and no line break of its own.
void ExpectInert(const std::string& out, int lines) {
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find("\xe2\x80\xae"), std::string::npos) << out;
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), lines) << out;
  EXPECT_NE(out.find("evil\\x1b[31m\\x1b[2J\\nj-9  FAKE  SUCCEEDED\\r\\u202ecba\\x9b0m"),
            std::string::npos)
      << out;
}

TEST(HostileTextTest, JobsTableAndDetailsEscapeWhatUsersStored) {
  v1::Job job = RunningJob();
  job.mutable_spec()->set_name(kHostile);
  ExpectInert(RenderJobsTable({job}, kNow), 2);
  job.set_state(v1::PENDING);
  job.set_state_reason(kHostile);
  // The table, a blank line and the job's waiting reason.
  const std::string pending = RenderJobsTable({job}, kNow);
  EXPECT_EQ(pending.find('\x1b'), std::string::npos) << pending;
  EXPECT_EQ(std::count(pending.begin(), pending.end(), '\n'), 4) << pending;
  const std::string details = RenderJobDetails(job, kNow);
  EXPECT_EQ(details.find('\x1b'), std::string::npos) << details;
  EXPECT_EQ(details.find("\xe2\x80\xae"), std::string::npos) << details;
  EXPECT_EQ(details.find("\nj-9  FAKE"), std::string::npos) << details;
}

TEST(HostileTextTest, NodesEventsAndWatchLinesEscapeWhatUsersStored) {
  v1::NodeInfo node;
  node.set_name(kHostile);
  node.set_role(v1::WORKER);
  node.set_state(v1::ALIVE);
  ExpectInert(RenderNodesTable({node}, kNow), 2);
  v1::ClusterEvent event;
  event.set_kind(v1::ClusterEvent::JOB_STATE_CHANGED);
  event.set_node_name("w0");
  event.set_message(kHostile);
  ExpectInert(RenderEventsTable({event}), 2);
  ExpectInert(RenderStateLine("j-1", v1::RECOVERING, kHostile) + "\n", 1);
  v1::Job failed = RunningJob();
  failed.set_state(v1::FAILED);
  failed.set_state_reason(kHostile);
  const std::string summary = RenderJobSummary(failed);
  EXPECT_EQ(summary.find('\x1b'), std::string::npos) << summary;
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 3) << summary;

  std::ostringstream out;
  WatchPrinter printer(out, WatchDisplay{}, "j-1");
  v1::JobEvent restored;
  restored.set_message(kHostile);
  printer.OnEvent(restored, absl::FromUnixMillis(kNow));
  ExpectInert(out.str(), 1);
  EXPECT_EQ(out.str().rfind("job j-1: evil", 0), 0u) << out.str();
}

}  // namespace
}  // namespace corescape::cli
