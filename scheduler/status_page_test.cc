// A real scheduler (store, services, gRPC) in this process with its status
// page and metrics endpoint on loopback, asked over HTTP.
#include "scheduler/status_page.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "corescape/v1/job.grpc.pb.h"
#include "corescape/v1/node.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/base/host_port.h"
#include "scheduler/scheduler_server.h"

namespace corescape::scheduler {
namespace {

using ::testing::HasSubstr;

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    SchedulerConfig config;
    config.listen_address = "127.0.0.1:0";
    config.state_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/status-page-",
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    config.http_listen = "127.0.0.1:0";
    config.version = "test";
    auto metrics = metrics::MetricsEndpoint::Start("127.0.0.1:0", "scheduler");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_address_ = (*metrics)->bound_address();
    auto server = SchedulerServer::Start(config, RealClock::Get(), *std::move(metrics));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto page = ParseHostPort(server_->status_page_address());
    ASSERT_TRUE(page.ok()) << server_->status_page_address();
    http_ = std::make_unique<httplib::Client>(page->host, page->port);
  }

  // Status and body of one request.
  std::pair<int, std::string> Call(const std::string& method, const std::string& path) {
    httplib::Result result = method == "GET"      ? http_->Get(path.c_str())
                             : method == "POST"   ? http_->Post(path.c_str(), "{}", "application/json")
                             : method == "PUT"    ? http_->Put(path.c_str(), "{}", "application/json")
                             : method == "DELETE" ? http_->Delete(path.c_str())
                                                  : http_->Head(path.c_str());
    if (!result) return {-1, ""};
    return {result->status, result->body};
  }
  nlohmann::json GetJson(const std::string& path) {
    auto [status, body] = Call("GET", path);
    EXPECT_EQ(status, 200) << path << ": " << body;
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }

  std::unique_ptr<SchedulerServer> server_;
  std::unique_ptr<httplib::Client> http_;
  std::string metrics_address_;
};

TEST_F(StatusPageTest, ServesThePageAndTheServicesAnswersAsJson) {
  auto [status, page] = Call("GET", "/");
  EXPECT_EQ(status, 200);
  EXPECT_THAT(page, HasSubstr("<title>corescape scheduler</title>"));
  EXPECT_THAT(page, HasSubstr("/api/job/events?id="));

  nlohmann::json cluster = GetJson("/api/status");
  EXPECT_THAT(cluster["scheduler_id"].get<std::string>(), HasSubstr("sched-"));
  EXPECT_EQ(cluster["version"], "test");
  EXPECT_EQ(cluster["workers_alive"], 0);
  EXPECT_FALSE(cluster["recent_events"].empty());  // SCHEDULER_STARTED
  EXPECT_TRUE(GetJson("/api/nodes")["nodes"].is_array());
  EXPECT_TRUE(GetJson("/api/jobs?limit=5")["jobs"].is_array());
}

TEST_F(StatusPageTest, RefusesUnknownPathsMethodsAndParameters) {
  for (const char* path : {"/nothing", "/api", "/api/", "/api/status/x", "/../etc/passwd",
                           "/api/jobs/../status", "/metrics", "/index.html"}) {
    EXPECT_EQ(Call("GET", path).first, 404) << path;
  }
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    for (const char* path : {"/", "/api/jobs", "/api/job?id=job-1", "/api/status"}) {
      EXPECT_EQ(Call(method, path).first, 405) << method << " " << path;
    }
  }
  EXPECT_EQ(Call("HEAD", "/api/status").first, 200);
  for (const char* path : {
           "/api/job", "/api/job?id=", "/api/job?id=a&id=b", "/api/job?id=a&x=1",
           "/api/jobs?limit=0", "/api/jobs?limit=-1", "/api/jobs?limit=abc",
           "/api/jobs?limit=100000", "/api/jobs?limit=99999999999999999999",
           "/api/job/events?id=job-1&after=-1", "/api/job/events?id=job-1&limit=0",
           "/api/job/events?id=job-1&after=1e3", "/api/status?verbose=1",
           "/api/job?id=a%20b", "/api/job?id=%00",
       }) {
    auto [status, body] = Call("GET", path);
    EXPECT_EQ(status, 400) << path << ": " << body;
    EXPECT_THAT(body, HasSubstr("INVALID_ARGUMENT")) << path;
  }
  EXPECT_EQ(Call("GET", absl::StrCat("/api/job?id=", std::string(65, 'a'))).first, 400);
  // A well-formed id of no job: NOT_FOUND, as the RPC answers.
  EXPECT_EQ(Call("GET", "/api/job?id=job-999").first, 404);
  EXPECT_EQ(Call("GET", "/api/job/events?id=job-999").first, 404);
  EXPECT_EQ(Call("GET", "/api/attention_plan?id=job-999").first, 404);
}

TEST_F(StatusPageTest, MetricsCountRpcsAndReadTheRegistryAndJobs) {
  auto channel = grpc::CreateChannel(server_->bound_address(), grpc::InsecureChannelCredentials());
  auto jobs = v1::JobService::NewStub(channel);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    ASSERT_TRUE(jobs->ListJobs(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::GetJobRequest request;  // no id: INVALID_ARGUMENT
    v1::GetJobResponse response;
    EXPECT_FALSE(jobs->GetJob(&context, request, &response).ok());
  }
  auto address = ParseHostPort(metrics_address_);
  ASSERT_TRUE(address.ok());
  httplib::Client scrape(address->host, address->port);
  httplib::Result result = scrape.Get("/metrics");
  ASSERT_TRUE(result);
  const std::string& text = result->body;
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_rpcs_total{code=\"OK\",method=\"corescape.v1."
                              "JobService/ListJobs\"} 3"));
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_rpcs_total{code=\"INVALID_ARGUMENT\",method="
                              "\"corescape.v1.JobService/GetJob\"} 1"));
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_rpc_duration_seconds_count{method="
                              "\"corescape.v1.JobService/ListJobs\"} 3"));
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_nodes{role=\"WORKER\",state=\"ALIVE\"} 0"));
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_jobs{state=\"RUNNING\"} 0"));
  EXPECT_THAT(text, HasSubstr("corescape_scheduler_lease_expiries_total 0"));
  EXPECT_THAT(text, HasSubstr("corescape_build_info{daemon=\"scheduler\""));
  // The status page's own reads are not RPCs.
  GetJson("/api/jobs");
  result = scrape.Get("/metrics");
  ASSERT_TRUE(result);
  EXPECT_THAT(result->body, HasSubstr("method=\"corescape.v1.JobService/ListJobs\"} 3"));
}

// The node table's job column: a node of a running job shows the job's id
// (ListNodes' current_job_id, which the page draws), an idle one none.
TEST_F(StatusPageTest, NodesOfARunningJobShowItsId) {
  auto channel = grpc::CreateChannel(server_->bound_address(), grpc::InsecureChannelCredentials());
  auto nodes = v1::NodeService::NewStub(channel);
  for (const char* name : {"worker-0", "worker-1"}) {
    grpc::ClientContext context;
    v1::RegisterRequest request;
    request.set_name(name);
    request.set_role(v1::WORKER);
    request.set_host("127.0.0.1");
    request.set_pid(4242);
    request.set_grpc_address("127.0.0.1:1");
    request.set_data_address("127.0.0.1:2");
    v1::RegisterResponse response;
    ASSERT_TRUE(nodes->Register(&context, request, &response).ok()) << name;
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string shard = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/status-page-shard");
  std::ofstream(shard) << "x";
  auto jobs = v1::JobService::NewStub(channel);
  grpc::ClientContext context;
  v1::SubmitJobRequest request;
  request.mutable_spec()->mutable_data()->add_train_shards(shard);
  request.mutable_spec()->set_steps(10);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(jobs->SubmitJob(&context, request, &submitted).ok());
  const std::string job_id = submitted.job().job_id();

  // Placement runs on the scheduler's reconcile pass, a fraction of a lease.
  std::map<std::string, std::string> job_of;
  for (absl::Time deadline = absl::Now() + absl::Seconds(30);
       job_of["worker-0"].empty() && absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(50))) {
    const nlohmann::json listed = GetJson("/api/nodes");
    for (const nlohmann::json& node : listed["nodes"]) {
      job_of[node["name"].get<std::string>()] = node["current_job_id"].get<std::string>();
    }
  }
  EXPECT_EQ(job_of["worker-0"], job_id);  // one worker, the first by name
  EXPECT_EQ(job_of["worker-1"], "");
}

}  // namespace
}  // namespace corescape::scheduler
