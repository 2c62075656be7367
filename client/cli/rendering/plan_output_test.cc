#include "client/cli/rendering/plan_output.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;

constexpr int64_t kNow = 1700000000000;

v1::AttentionPlan TwoServerPlan() {
  v1::AttentionPlan plan;
  plan.set_job_id("job-4");
  plan.set_generation(2);
  plan.set_attention_epoch(1);
  plan.set_step(17);
  plan.set_step_micro_batches(2);
  plan.set_sent_to_workers(true);
  plan.set_planned_unix_ms(kNow - 1500);
  plan.set_imbalance(1.0123);
  plan.set_tolerance(0.05);
  plan.set_bytes_moved(3 * 1024 * 1024);
  for (const char* name : {"attn-0", "attn-1"}) plan.add_server_names(name);
  plan.add_attention_server_addresses("127.0.0.1:9001");
  plan.add_attention_server_addresses("127.0.0.1:9002");
  plan.add_server_speed_weights(1.25);
  plan.add_server_speed_weights(0.75);
  plan.add_server_measured_speed(2.5e9);
  plan.add_server_measured_speed(0);
  plan.add_server_cost(3e9);
  plan.add_server_cost(1e9);
  plan.add_server_tasks(3);
  plan.add_server_tasks(1);
  plan.add_server_bytes_received(2 * 1024 * 1024);
  plan.add_server_bytes_received(1024 * 1024);
  plan.add_worker_tokens(300);
  plan.add_worker_tokens(212);
  plan.add_excluded_servers("attn-2 (DRAINING)");
  plan.set_pushed_weights_version(7);
  auto task = [&](int worker, int document, int64_t begin, int64_t end, int server) {
    v1::AttentionTask* t = plan.add_tasks();
    t->set_worker_rank(worker);
    t->set_document(document);
    t->set_q_begin(begin);
    t->set_q_end(end);
    t->set_server(server);
  };
  task(0, 0, 0, 200, 0);
  task(0, 1, 0, 100, 0);
  task(1, 0, 0, 150, 0);
  task(1, 1, 0, 62, 1);
  return plan;
}

TEST(PlanOutputTest, FormatFlops) {
  EXPECT_EQ(FormatFlops(950), "950 FLOP");
  EXPECT_EQ(FormatFlops(1.5e9), "1.50 GFLOP");
  EXPECT_EQ(FormatFlops(2.25e12, /*per_second=*/true), "2.25 TFLOP/s");
}

TEST(PlanOutputTest, TableHasEveryServerAndTheTotals) {
  const std::string text = RenderAttentionPlan(TwoServerPlan(), kNow, /*with_tasks=*/false);
  for (const char* expected : {
           "Job:        job-4  generation 2  attention epoch 1\n",
           "Step:       17  planned 1.5s ago\n",
           "Ahead:      step 17: 2 core-attention micro-batches planned ahead, sent to worker 0\n",
           "Workers:    2 (512 tokens, 4 tasks)\n",
           "Imbalance:  1.0123 (max/mean server time; tolerance 0.05)\n",
           "Cost:       4.00 GFLOP\n",
           "Moved:      3.0 MiB of Q/K/V to the servers\n",
           "Left out:   attn-2 (DRAINING)\n",
           "Weights:    version 7 sent to the workers\n",
           "SERVER  SPEED-WEIGHT  MEASURED      COST        SHARE  TASKS  BYTES\n",
           "attn-0  1.250         2.50 GFLOP/s  3.00 GFLOP  75.0%  3      2.0 MiB\n",
           "attn-1  0.750         -             1.00 GFLOP  25.0%  1      1.0 MiB\n",
       }) {
    EXPECT_TRUE(absl::StrContains(text, expected)) << "missing: " << expected << "\nin:\n"
                                                   << text;
  }
  EXPECT_FALSE(absl::StrContains(text, "WORKER  DOCUMENT"));
  const std::string with_tasks = RenderAttentionPlan(TwoServerPlan(), kNow, true);
  EXPECT_TRUE(absl::StrContains(with_tasks, "WORKER  DOCUMENT  QUERIES   SERVER\n"))
      << with_tasks;
  EXPECT_TRUE(absl::StrContains(with_tasks, "1       1         [0, 62)   attn-1\n"))
      << with_tasks;
}

TEST(PlanOutputTest, JsonForScripts) {
  const nlohmann::json json = AttentionPlanToJson(TwoServerPlan(), /*with_tasks=*/false);
  EXPECT_EQ(json["job_id"], "job-4");
  EXPECT_EQ(json["step"], 17);
  EXPECT_EQ(json["generation"], 2);
  EXPECT_DOUBLE_EQ(json["imbalance"].get<double>(), 1.0123);
  EXPECT_EQ(json["bytes_moved"], 3 * 1024 * 1024);
  EXPECT_EQ(json["task_count"], 4);
  EXPECT_EQ(json["pushed_weights_version"], 7);
  EXPECT_EQ(json["attention_epoch"], 1);
  EXPECT_EQ(json["step_micro_batches"], 2);
  EXPECT_EQ(json["sent_to_workers"], true);
  EXPECT_DOUBLE_EQ(json["total_cost"].get<double>(), 4e9);
  EXPECT_EQ(json["worker_tokens"], nlohmann::json({300, 212}));
  EXPECT_EQ(json["excluded_servers"], nlohmann::json({"attn-2 (DRAINING)"}));
  ASSERT_EQ(json["servers"].size(), 2u);
  const nlohmann::json& slow = json["servers"][1];
  EXPECT_EQ(slow["name"], "attn-1");
  EXPECT_EQ(slow["address"], "127.0.0.1:9002");
  EXPECT_DOUBLE_EQ(slow["speed_weight"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(slow["measured_speed"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(slow["cost"].get<double>(), 1e9);
  EXPECT_DOUBLE_EQ(slow["share"].get<double>(), 0.25);
  EXPECT_EQ(slow["tasks"], 1);
  EXPECT_EQ(slow["bytes_received"], 1024 * 1024);
  EXPECT_FALSE(json.contains("tasks"));
  const nlohmann::json full = AttentionPlanToJson(TwoServerPlan(), /*with_tasks=*/true);
  ASSERT_EQ(full["tasks"].size(), 4u);
  EXPECT_EQ(full["tasks"][3], nlohmann::json({{"worker_rank", 1},
                                              {"document", 1},
                                              {"q_begin", 0},
                                              {"q_end", 62},
                                              {"server", 1}}));
}

// A plan from a scheduler without the newer fields still renders.
TEST(PlanOutputTest, OlderPlansWithoutServerDetails) {
  v1::AttentionPlan plan;
  plan.set_job_id("job-1");
  plan.add_server_cost(5);
  const std::string text = RenderAttentionPlan(plan, kNow, true);
  EXPECT_TRUE(absl::StrContains(text, "server 0  1.000")) << text;
  EXPECT_FALSE(absl::StrContains(text, "Weights:")) << "no push, no line";
  EXPECT_FALSE(absl::StrContains(text, "Ahead:")) << "nothing planned ahead, no line";
  const nlohmann::json json = AttentionPlanToJson(plan, false);
  EXPECT_EQ(json["servers"][0]["name"], "");
  EXPECT_DOUBLE_EQ(json["servers"][0]["share"].get<double>(), 1.0);
}

// A step planned ahead that did not reach worker 0 (job not RUNNING, or
// its session gone) says so.
TEST(PlanOutputTest, StepPlannedAheadButNotSent) {
  v1::AttentionPlan plan = TwoServerPlan();
  plan.set_step_micro_batches(1);
  plan.set_sent_to_workers(false);
  const std::string text = RenderAttentionPlan(plan, kNow, false);
  EXPECT_TRUE(absl::StrContains(
      text, "Ahead:      step 17: 1 core-attention micro-batch planned ahead, not sent\n"))
      << text;
}

}  // namespace
}  // namespace corescape::cli
