// The job commands end to end: the real CLI (run in process) against an
// in-process fake JobService over real gRPC on loopback. Covers submit
// (file + flag overrides, --wait on SUCCEEDED/FAILED/CANCELLED, rejection,
// local errors), watch (resume after a dropped stream without duplicates,
// a scheduler that goes away, one that restarts, one that hangs), jobs,
// job, cancel, plot, and an unreachable scheduler.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cli/app.h"
#include "corescape/v1/job.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;
namespace fs = std::filesystem;

constexpr int64_t kT0 = 1700000000000;

// A scheduler's JobService that "runs" a job instantly: SubmitJob answers
// PENDING and records the job's whole event history at once (PENDING,
// RUNNING, one progress event per step with a validation loss every second
// step, then the end); WatchJob replays it after after_sequence; GetJob
// answers the finished job.
class FakeJobService final : public v1::JobService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    submits_.push_back(*request);
    if (request->spec().steps() <= 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("steps: must be positive, got ",
                                       request->spec().steps()));
    }
    if (auto it = job_by_key_.find(request->idempotency_key());
        it != job_by_key_.end()) {
      *response->mutable_job() = submitted_[it->second];
      return grpc::Status::OK;
    }
    const std::string id = absl::StrCat("j-", next_id_++);
    v1::JobState end = v1::SUCCEEDED;
    std::string reason;
    if (absl::StrContains(request->spec().name(), "fail")) {
      end = v1::FAILED;
      reason = "worker-1 died and no replacement registered";
    } else if (absl::StrContains(request->spec().name(), "cancel")) {
      end = v1::CANCELLED;
      reason = "cancelled by operator";
    }
    AddJobLocked(id, request->spec(), end, reason);
    job_by_key_[request->idempotency_key()] = id;
    *response->mutable_job() = submitted_[id];
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    bool hang = false;
    {
      absl::MutexLock lock(&mu_);
      ++get_calls_;
      hang = hang_get_after_ >= 0 && get_calls_ > hang_get_after_;
      if (!hang) {
        auto it = jobs_.find(request->job_id());
        if (it == jobs_.end()) {
          return grpc::Status(grpc::StatusCode::NOT_FOUND,
                              absl::StrCat("job '", request->job_id(), "' not found"));
        }
        *response->mutable_job() = it->second;
      }
    }
    if (hang) {
      WaitUntilCancelled(context);
      return grpc::Status(grpc::StatusCode::CANCELLED, "hung");
    }
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    absl::MutexLock lock(&mu_);
    list_requests_.push_back(*request);
    // One job per page, so every listing exercises the client's paging: the
    // token is the number of matching jobs already sent.
    size_t skip = request->page_token().empty() ? 0 : std::stoul(request->page_token());
    size_t matching = 0;
    for (const auto& [id, job] : jobs_) {
      bool wanted = request->states().empty();
      for (int state : request->states()) wanted = wanted || state == job.state();
      if (!wanted) continue;
      if (matching++ < skip) continue;
      if (response->jobs_size() == 1) {
        response->set_next_page_token(std::to_string(skip + 1));
        break;
      }
      *response->add_jobs() = job;
    }
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    std::vector<v1::JobEvent> events;
    int call = 0;
    {
      absl::MutexLock lock(&mu_);
      call = static_cast<int>(watch_after_.size());
      watch_after_.push_back(request->after_sequence());
      auto it = events_.find(request->job_id());
      if (it == events_.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            absl::StrCat("job '", request->job_id(), "' not found"));
      }
      events = it->second;
    }
    if (hang_watch_) {
      WaitUntilCancelled(context);
      return grpc::Status(grpc::StatusCode::CANCELLED, "hung");
    }
    // A scheduler that resends a little before after_sequence.
    const uint64_t after = replay_overlap_ && request->after_sequence() > 0
                               ? request->after_sequence() - 1
                               : request->after_sequence();
    int sent = 0;
    for (const v1::JobEvent& event : events) {
      if (event.sequence() <= after) continue;
      if (call == 0 && sent == drop_first_stream_after_) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
      }
      if (call == 0 && sent == hold_first_stream_after_) {
        held_.Notify();
        WaitUntilCancelled(context);
        return grpc::Status(grpc::StatusCode::CANCELLED, "shutting down");
      }
      if (!writer->Write(event)) return grpc::Status::OK;
      ++sent;
    }
    return grpc::Status::OK;
  }

  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    cancels_.push_back(*request);
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job '", request->job_id(), "' not found"));
    }
    it->second.set_state(v1::CANCELLED);
    it->second.set_state_reason(request->reason());
    *response->mutable_job() = it->second;
    return grpc::Status::OK;
  }

  // A job with its history already recorded.
  void AddJob(const std::string& id, const v1::JobSpec& spec, v1::JobState end,
              const std::string& reason, int64_t submitted_unix_ms = kT0) {
    absl::MutexLock lock(&mu_);
    AddJobLocked(id, spec, end, reason, submitted_unix_ms);
  }

  void set_drop_first_stream_after(int events) { drop_first_stream_after_ = events; }
  void set_hold_first_stream_after(int events) { hold_first_stream_after_ = events; }
  void set_replay_overlap(bool overlap) { replay_overlap_ = overlap; }
  void set_hang_watch(bool hang) { hang_watch_ = hang; }
  void set_hang_get_after(int calls) {
    absl::MutexLock lock(&mu_);
    hang_get_after_ = calls;
  }
  absl::Notification& held() { return held_; }

  std::vector<v1::SubmitJobRequest> submits() {
    absl::MutexLock lock(&mu_);
    return submits_;
  }
  std::vector<uint64_t> watch_after() {
    absl::MutexLock lock(&mu_);
    return watch_after_;
  }
  std::vector<v1::CancelJobRequest> cancels() {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }
  std::vector<v1::ListJobsRequest> list_requests() {
    absl::MutexLock lock(&mu_);
    return list_requests_;
  }
  size_t event_count(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return events_[id].size();
  }

 private:
  static void WaitUntilCancelled(grpc::ServerContext* context) {
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
  }

  void AddJobLocked(const std::string& id, const v1::JobSpec& spec,
                    v1::JobState end, const std::string& reason,
                    int64_t submitted_unix_ms = kT0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    v1::Job job;
    job.set_job_id(id);
    *job.mutable_spec() = spec;
    job.set_state(v1::PENDING);
    job.set_state_reason("waiting for 2 workers");
    job.set_submitted_unix_ms(submitted_unix_ms);
    submitted_[id] = job;

    std::vector<v1::JobEvent> events;
    uint64_t sequence = 0;
    auto add = [&](v1::JobEvent event) {
      event.set_sequence(++sequence);
      event.set_job_id(id);
      event.set_unix_ms(submitted_unix_ms + 1000 * static_cast<int64_t>(sequence));
      events.push_back(std::move(event));
    };
    v1::JobEvent pending;
    pending.set_state(v1::PENDING);
    pending.set_message("waiting for 2 workers");
    add(pending);
    v1::JobEvent running;
    running.set_state(v1::RUNNING);
    running.set_message("generation 1 on worker-0, worker-1");
    add(running);
    v1::JobProgress last;
    for (int64_t step = 1; step <= spec.steps(); ++step) {
      v1::JobEvent progress;
      v1::JobProgress* p = progress.mutable_progress();
      p->set_step(step);
      p->set_total_steps(spec.steps());
      p->set_loss(5.0 - 0.25 * step);
      if (step % 2 == 0) p->set_validation_loss(5.1 - 0.25 * step);
      p->set_tokens_per_second(1000 + step);
      p->set_bytes_sent(1024 * step);
      p->set_bytes_received(2048 * step);
      p->set_eta_seconds(spec.steps() - step);
      // The job's own average, 2,048 tokens/s, is not its last step's rate.
      p->set_tokens_trained(2048 * step);
      p->set_steps_seconds(static_cast<double>(step));
      p->set_steps_timed(step);
      last = *p;
      add(progress);
    }
    v1::JobEvent finished;
    finished.set_state(end);
    finished.set_message(reason);
    add(finished);
    events_[id] = events;

    job.set_state(end);
    job.set_state_reason(reason);
    job.set_generation(1);
    job.add_assigned_nodes("worker-0");
    job.add_assigned_nodes("worker-1");
    *job.mutable_progress() = last;
    job.set_started_unix_ms(submitted_unix_ms + 2000);
    job.set_finished_unix_ms(submitted_unix_ms + 1000 * static_cast<int64_t>(sequence));
    jobs_[id] = job;
  }

  absl::Mutex mu_;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Job> submitted_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<v1::JobEvent>> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> job_by_key_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::SubmitJobRequest> submits_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> watch_after_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::CancelJobRequest> cancels_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListJobsRequest> list_requests_ ABSL_GUARDED_BY(mu_);
  int get_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int hang_get_after_ ABSL_GUARDED_BY(mu_) = -1;
  // Set before the CLI runs.
  int drop_first_stream_after_ = -1;
  int hold_first_stream_after_ = -1;
  bool replay_overlap_ = false;
  bool hang_watch_ = false;
  absl::Notification held_;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;

  std::vector<std::string> OutLines() const {
    std::vector<std::string> lines = absl::StrSplit(out, '\n');
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    return lines;
  }
  // Lines of stderr that are errors (gRPC may log other lines).
  std::vector<std::string> ErrorLines() const {
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(err, '\n')) {
      if (absl::StartsWith(line, "corescape: error: ")) lines.emplace_back(line);
    }
    return lines;
  }
};

std::ostream& operator<<(std::ostream& os, const CliResult& result) {
  return os << "exit " << result.exit_code << "\n--- stdout\n"
            << result.out << "--- stderr\n" << result.err;
}

// Runs the CLI with the given arguments (after the program name) and
// returns its exit code; stdout and stderr go wherever they go now.
int RunCliExitCode(const std::vector<std::string>& args) {
  std::vector<std::string> owned = {"corescape"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& arg : owned) argv.push_back(arg.c_str());
  return RunCorescapeCli(static_cast<int>(argv.size()), argv.data());
}

// Runs the CLI with the given arguments, capturing stdout and stderr.
CliResult RunCli(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CliResult result;
  result.exit_code = RunCliExitCode(args);
  result.out = testing::internal::GetCapturedStdout();
  result.err = testing::internal::GetCapturedStderr();
  return result;
}

std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string ExampleFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "", "/examples/", name);
}

std::string WriteJobFile(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(TestDir(), "/", name);
  std::ofstream(path) << contents;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

v1::JobSpec SmallSpec(const std::string& name, int64_t steps) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_steps(steps);
  spec.set_eval_interval_steps(2);
  spec.mutable_placement()->set_workers(2);
  return spec;
}

class JobCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("CORESCAPE_HOME", (TestDir() + "/home").c_str(), 1);
    unsetenv("CORESCAPE_SCHEDULER");
    StartServer("127.0.0.1:0");
  }

  void TearDown() override { StopServer(); }

  void StartServer(const std::string& listen) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }

  void StopServer() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(200));
    server_->Wait();
    server_.reset();
  }

  std::vector<std::string> With(std::vector<std::string> args) {
    args.push_back("--scheduler");
    args.push_back(address_);
    args.push_back("--insecure");  // the fake service is plaintext
    return args;
  }

  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

// --- submit ------------------------------------------------------------

// Every optimizer `--optimizer` accepts reaches the scheduler as named.
TEST_F(JobCliTest, SubmitTakesTheSparseBaselinesByFlag) {
  for (const char* optimizer : {"topk-adamw", "scape-global"}) {
    const CliResult result = RunCli(
        With({"submit", ExampleFile("tiny-fortunes.json"), "--optimizer", optimizer}));
    ASSERT_EQ(result.exit_code, 0) << optimizer << ": " << result;
    EXPECT_EQ(service_.submits().back().spec().optimizer().name(), optimizer);
  }
}

TEST_F(JobCliTest, SubmitFileWithOverridesAndWaitSucceeds) {
  const CliResult result = RunCli(With(
      {"submit", ExampleFile("tiny-fortunes.json"), "--steps", "4",
       "--train-data", "x,y", "--train-data", "z", "--optimizer", "scape",
       "--density", "0.1", "--wait"}));
  ASSERT_EQ(result.exit_code, 0) << result;

  const std::vector<v1::SubmitJobRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 1);
  const v1::JobSpec& spec = submits[0].spec();
  EXPECT_EQ(spec.name(), "tiny-fortunes");  // from the file
  EXPECT_EQ(spec.steps(), 4);               // flag over file
  EXPECT_EQ(spec.eval_interval_steps(), 50);
  const std::string cwd = fs::current_path().string();
  ASSERT_EQ(spec.data().train_shards_size(), 3);
  EXPECT_EQ(spec.data().train_shards(0), cwd + "/x");
  EXPECT_EQ(spec.data().train_shards(2), cwd + "/z");
  EXPECT_EQ(spec.data().validation_shards(0), cwd + "/.cache/fortunes");
  EXPECT_EQ(spec.checkpoint().directory(), cwd + "/.cache/checkpoints/tiny-fortunes");
  EXPECT_EQ(spec.optimizer().name(), "scape");
  EXPECT_DOUBLE_EQ(spec.optimizer().scape().density(), 0.1);
  EXPECT_TRUE(absl::StartsWith(submits[0].idempotency_key(), "cli-"));

  const std::vector<std::string> lines = result.OutLines();
  ASSERT_GE(lines.size(), 8);
  EXPECT_EQ(lines[0], "submitted job tiny-fortunes: PENDING (waiting for 2 workers)");
  EXPECT_EQ(lines[1], "j-1");
  EXPECT_EQ(lines[2], "job j-1 PENDING: waiting for 2 workers");
  EXPECT_EQ(lines[3], "job j-1 RUNNING: generation 1 on worker-0, worker-1");
  EXPECT_EQ(lines[4], "step 1/4  loss 4.750  1,001 tok/s  ETA 3s");
  EXPECT_EQ(lines[lines.size() - 4], "step 4/4  loss 4.000  val 4.100  1,004 tok/s");
  EXPECT_EQ(lines[lines.size() - 3], "job j-1 SUCCEEDED: 4/4 steps in 5s");
  EXPECT_EQ(lines[lines.size() - 2],
            "final loss 4.000, validation loss 4.100, 2,048 tokens/s (average over 4 steps)");
  EXPECT_EQ(lines[lines.size() - 1], "communication: 4.0 KiB sent, 8.0 KiB received");
  EXPECT_TRUE(result.ErrorLines().empty()) << result;
}

TEST_F(JobCliTest, SubmitWaitExitsOneWhenTheJobFailsOrIsCancelled) {
  CliResult failed = RunCli(With({"submit", "--name", "will-fail", "--steps", "2",
                                  "--workers", "2", "--wait"}));
  EXPECT_EQ(failed.exit_code, 1) << failed;
  EXPECT_EQ(failed.ErrorLines(),
            std::vector<std::string>{
                "corescape: error: job j-1 FAILED: worker-1 died and no "
                "replacement registered"})
      << failed;
  EXPECT_TRUE(absl::StrContains(failed.out, "job j-1 FAILED: 2/2 steps in 3s: worker-1 died"))
      << failed;

  CliResult cancelled = RunCli(With({"submit", "--name", "to-cancel", "--steps", "1", "--wait"}));
  EXPECT_EQ(cancelled.exit_code, 1) << cancelled;
  EXPECT_EQ(cancelled.ErrorLines(),
            std::vector<std::string>{
                "corescape: error: job j-2 was CANCELLED: cancelled by operator"})
      << cancelled;
}

TEST_F(JobCliTest, SubmitPrintsTheIdLastOrTheJobAsJson) {
  const CliResult plain =
      RunCli(With({"submit", "--name", "n", "--model", "tiny", "--steps", "3"}));
  ASSERT_EQ(plain.exit_code, 0) << plain;
  ASSERT_EQ(plain.OutLines().size(), 2);
  EXPECT_EQ(plain.OutLines().back(), "j-1");

  const CliResult json = RunCli(With({"submit", "--name", "n", "--steps", "3", "--json"}));
  ASSERT_EQ(json.exit_code, 0) << json;
  const nlohmann::json job = nlohmann::json::parse(json.out);
  EXPECT_EQ(job["job_id"], "j-2");
  EXPECT_EQ(job["state"], "PENDING");
  EXPECT_EQ(job["spec"]["steps"], 3);

  const CliResult wait_json =
      RunCli(With({"submit", "--name", "n", "--steps", "2", "--json", "--wait"}));
  ASSERT_EQ(wait_json.exit_code, 0) << wait_json;
  const std::vector<std::string> lines = wait_json.OutLines();
  ASSERT_EQ(lines.size(), 1 + 5 + 1);  // submitted, 5 events, finished
  EXPECT_EQ(nlohmann::json::parse(lines.front())["type"], "submitted");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["type"], "state");
  EXPECT_EQ(nlohmann::json::parse(lines[3])["progress"]["step"], 1);
  EXPECT_EQ(nlohmann::json::parse(lines.back())["type"], "finished");
  EXPECT_EQ(nlohmann::json::parse(lines.back())["job"]["state"], "SUCCEEDED");

  // A given idempotency key finds the job created the first time.
  RunCli(With({"submit", "--name", "k", "--steps", "1", "--idempotency-key", "key-1"}));
  const CliResult again = RunCli(
      With({"submit", "--name", "k", "--steps", "1", "--idempotency-key", "key-1"}));
  EXPECT_EQ(again.OutLines().back(), "j-4") << again;
}

TEST_F(JobCliTest, SubmitRejectedByTheSchedulerExitsFive) {
  const CliResult result = RunCli(With({"submit", "--name", "n", "--steps", "0"}));
  EXPECT_EQ(result.exit_code, 5) << result;
  EXPECT_EQ(result.ErrorLines(),
            std::vector<std::string>{"corescape: error: steps: must be positive, got 0"});
}

TEST_F(JobCliTest, SubmitLocalProblemsAreUsageErrors) {
  CliResult none = RunCli(With({"submit"}));
  EXPECT_EQ(none.exit_code, 2) << none;
  EXPECT_TRUE(absl::StrContains(none.err, "give a job file")) << none;

  CliResult missing = RunCli(With({"submit", "/nonexistent/job.json"}));
  EXPECT_EQ(missing.exit_code, 2) << missing;
  EXPECT_EQ(missing.ErrorLines(),
            std::vector<std::string>{
                "corescape: error: job file '/nonexistent/job.json' does not exist"});

  const std::string bad = WriteJobFile("bad.json", R"({"name": "x", "modle": {}})");
  CliResult unknown = RunCli(With({"submit", bad}));
  EXPECT_EQ(unknown.exit_code, 2) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.err, bad + ": unknown field 'modle'")) << unknown;

  CliResult bad_flag = RunCli(With({"submit", "--optimizer", "sgd"}));
  EXPECT_EQ(bad_flag.exit_code, 2) << bad_flag;
  EXPECT_TRUE(service_.submits().empty());
}

TEST_F(JobCliTest, RepeatedListFlagsTakeOneValueEach) {
  // --train-data must not swallow the job file that follows it.
  const CliResult result = RunCli(With({"submit", "--train-data", "/a",
                                        ExampleFile("tiny-fortunes.yaml"),
                                        "--validation-data", "/v"}));
  ASSERT_EQ(result.exit_code, 0) << result;
  const std::vector<v1::SubmitJobRequest> submits = service_.submits();
  ASSERT_EQ(submits.size(), 1);
  const v1::JobSpec& spec = submits[0].spec();
  EXPECT_EQ(spec.name(), "tiny-fortunes");
  ASSERT_EQ(spec.data().train_shards_size(), 1);
  EXPECT_EQ(spec.data().train_shards(0), "/a");
  ASSERT_EQ(spec.data().validation_shards_size(), 1);
  EXPECT_EQ(spec.data().validation_shards(0), "/v");
}

TEST_F(JobCliTest, SubmitYamlFile) {
  const std::string path = WriteJobFile(
      "job.yaml", "name: from-yaml\nsteps: 2\nplacement:\n  workers: 1\n");
  const CliResult result = RunCli(With({"submit", path, "--wait"}));
  ASSERT_EQ(result.exit_code, 0) << result;
  ASSERT_EQ(service_.submits().size(), 1);
  EXPECT_EQ(service_.submits()[0].spec().name(), "from-yaml");
  EXPECT_EQ(service_.submits()[0].spec().placement().workers(), 1);
}

// --- watch ---------------------------------------------------------------

// Sequence numbers of the event lines of `watch --json`, checked to be
// 1..count without gaps or repeats.
void ExpectEveryEventOnce(const CliResult& result, size_t count) {
  std::vector<uint64_t> sequences;
  for (const std::string& line : result.OutLines()) {
    const nlohmann::json json = nlohmann::json::parse(line);
    if (json["type"] == "finished") continue;
    sequences.push_back(json["sequence"].get<uint64_t>());
  }
  ASSERT_EQ(sequences.size(), count) << result;
  for (size_t i = 0; i < sequences.size(); ++i) {
    EXPECT_EQ(sequences[i], i + 1) << result;
  }
}

TEST_F(JobCliTest, WatchResumesAfterADroppedStreamWithoutLossOrRepeats) {
  service_.AddJob("j-7", SmallSpec("watched", 6), v1::SUCCEEDED, "");
  service_.set_drop_first_stream_after(3);
  service_.set_replay_overlap(true);
  const CliResult result = RunCli(With({"watch", "j-7", "--json"}));
  ASSERT_EQ(result.exit_code, 0) << result;
  ExpectEveryEventOnce(result, service_.event_count("j-7"));
  EXPECT_EQ(service_.watch_after(), (std::vector<uint64_t>{0, 3}));
  EXPECT_TRUE(absl::StrContains(result.err, "lost the event stream of job j-7"))
      << result;
  const nlohmann::json last = nlohmann::json::parse(result.OutLines().back());
  EXPECT_EQ(last["type"], "finished");
  EXPECT_EQ(last["job"]["progress"]["step"], 6);
}

TEST_F(JobCliTest, WatchHumanOutputAndAfterSequence) {
  service_.AddJob("j-7", SmallSpec("watched", 2), v1::SUCCEEDED, "");
  const CliResult result = RunCli(With({"watch", "j-7", "--after-sequence", "2"}));
  ASSERT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.OutLines(),
            (std::vector<std::string>{
                "step 1/2  loss 4.750  1,001 tok/s  ETA 1s",
                "step 2/2  loss 4.500  val 4.600  1,002 tok/s",
                "job j-7 SUCCEEDED: 2/2 steps in 3s",
                "final loss 4.500, validation loss 4.600, 2,048 tokens/s (average over 2 steps)",
                "communication: 2.0 KiB sent, 4.0 KiB received",
            }));
  EXPECT_EQ(service_.watch_after(), std::vector<uint64_t>{2});
}

TEST_F(JobCliTest, WatchUnknownJobExitsFour) {
  const CliResult result = RunCli(With({"watch", "nope"}));
  EXPECT_EQ(result.exit_code, 4) << result;
  EXPECT_EQ(result.ErrorLines(),
            std::vector<std::string>{"corescape: error: no job with id 'nope'"});
}

TEST_F(JobCliTest, WatchGivesUpWithExitThreeWhenTheSchedulerIsGone) {
  service_.AddJob("j-7", SmallSpec("watched", 6), v1::SUCCEEDED, "");
  service_.set_hold_first_stream_after(3);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const absl::Time start = absl::Now();
  std::vector<std::string> args = With({"watch", "j-7", "--json", "--reconnect-timeout", "1"});
  std::future<int> exit_code = std::async(std::launch::async, [&args] { return RunCliExitCode(args); });
  ASSERT_TRUE(service_.held().WaitForNotificationWithTimeout(absl::Seconds(10)));
  StopServer();  // the scheduler dies mid-stream and does not come back
  CliResult result;
  result.exit_code = exit_code.get();
  result.out = testing::internal::GetCapturedStdout();
  result.err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(result.exit_code, 3) << result;
  ASSERT_EQ(result.ErrorLines().size(), 1) << result;
  EXPECT_TRUE(absl::StartsWith(
      result.ErrorLines()[0],
      absl::StrCat("corescape: error: scheduler at ", address_,
                   " is unreachable (lost the WatchJob stream of job j-7 and "
                   "could not resume it within 1s")))
      << result;
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_EQ(result.OutLines().size(), 3);  // the events before the loss
}

TEST_F(JobCliTest, WatchSurvivesASchedulerRestart) {
  service_.AddJob("j-7", SmallSpec("watched", 6), v1::SUCCEEDED, "");
  service_.set_hold_first_stream_after(3);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  std::vector<std::string> args = With({"watch", "j-7", "--json", "--reconnect-timeout", "20"});
  std::future<int> exit_code = std::async(std::launch::async, [&args] { return RunCliExitCode(args); });
  ASSERT_TRUE(service_.held().WaitForNotificationWithTimeout(absl::Seconds(10)));
  const int port = port_;
  StopServer();
  absl::SleepFor(absl::Milliseconds(500));
  StartServer(absl::StrCat("127.0.0.1:", port));  // same address, same state
  CliResult result;
  result.exit_code = exit_code.get();
  result.out = testing::internal::GetCapturedStdout();
  result.err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(result.exit_code, 0) << result;
  ExpectEveryEventOnce(result, service_.event_count("j-7"));
  const std::vector<uint64_t> after = service_.watch_after();
  ASSERT_GE(after.size(), 2);
  EXPECT_EQ(after.front(), 0);
  EXPECT_EQ(after.back(), 3);
}

TEST_F(JobCliTest, WatchDetectsAHungSchedulerWithProbes) {
  service_.AddJob("j-7", SmallSpec("watched", 2), v1::SUCCEEDED, "");
  service_.set_hang_watch(true);
  service_.set_hang_get_after(1);  // the first GetJob answers, probes do not
  const absl::Time start = absl::Now();
  const CliResult result =
      RunCli(With({"watch", "j-7", "--rpc-timeout", "0.3", "--probe-interval",
                   "0.3", "--reconnect-timeout", "1"}));
  EXPECT_EQ(result.exit_code, 3) << result;
  ASSERT_EQ(result.ErrorLines().size(), 1) << result;
  EXPECT_TRUE(absl::StrContains(result.ErrorLines()[0],
                                "did not answer a GetJob probe"))
      << result;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// --- jobs, job, cancel, plot --------------------------------------------------

TEST_F(JobCliTest, JobsListsNewestFirstAndFiltersByState) {
  service_.AddJob("j-1", SmallSpec("old", 2), v1::SUCCEEDED, "", kT0);
  service_.AddJob("j-2", SmallSpec("new", 4), v1::FAILED, "boom", kT0 + 60000);
  const CliResult table = RunCli(With({"jobs"}));
  // Both jobs, though each page held one: the CLI followed the token.
  EXPECT_EQ(service_.list_requests().back().page_token(), "1");
  ASSERT_EQ(table.exit_code, 0) << table;
  const std::vector<std::string> lines = table.OutLines();
  ASSERT_EQ(lines.size(), 3) << table;
  EXPECT_TRUE(absl::StartsWith(lines[0], "JOB  NAME  STATE      DEVICE  STEP/TOTAL  LOSS   "
                                         "VAL-LOSS  TOKENS/S  WORKERS  SERVERS  AGE"))
      << table;
  EXPECT_TRUE(absl::StartsWith(lines[1], "j-2  new   FAILED     cpu     4/4         4.000  "
                                         "4.100     1,004     2/2      "))
      << table;
  EXPECT_TRUE(absl::StartsWith(lines[2], "j-1  old   SUCCEEDED  cpu     2/2")) << table;

  const CliResult filtered =
      RunCli(With({"jobs", "--state", "failed", "--state", "running", "--json"}));
  ASSERT_EQ(filtered.exit_code, 0) << filtered;
  const nlohmann::json jobs = nlohmann::json::parse(filtered.out);
  ASSERT_EQ(jobs.size(), 1);
  EXPECT_EQ(jobs[0]["job_id"], "j-2");
  const v1::ListJobsRequest request = service_.list_requests().back();
  ASSERT_EQ(request.states_size(), 2);
  EXPECT_EQ(request.states(0), v1::FAILED);
  EXPECT_EQ(request.states(1), v1::RUNNING);

  const CliResult none = RunCli(With({"jobs", "--state", "pending"}));
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(none.out, "no jobs in that state")) << none;
  EXPECT_EQ(RunCli(With({"jobs", "--state", "bogus"})).exit_code, 2);
}

TEST_F(JobCliTest, JobShowsDetailsOrJson) {
  service_.AddJob("j-1", SmallSpec("detailed", 2), v1::FAILED, "worker-1 died");
  const CliResult details = RunCli(With({"job", "j-1"}));
  ASSERT_EQ(details.exit_code, 0) << details;
  EXPECT_TRUE(absl::StrContains(details.out, "State:        FAILED\n")) << details;
  EXPECT_TRUE(absl::StrContains(details.out, "Reason:       worker-1 died\n")) << details;
  EXPECT_TRUE(absl::StrContains(details.out, "0     worker-0\n1     worker-1\n")) << details;

  const CliResult json = RunCli(With({"job", "j-1", "--json"}));
  ASSERT_EQ(json.exit_code, 0) << json;
  EXPECT_EQ(nlohmann::json::parse(json.out)["spec"]["name"], "detailed");

  const CliResult missing = RunCli(With({"job", "j-404"}));
  EXPECT_EQ(missing.exit_code, 4) << missing;
  EXPECT_EQ(missing.ErrorLines(),
            std::vector<std::string>{"corescape: error: no job with id 'j-404'"});
}

TEST_F(JobCliTest, CancelSendsTheReason) {
  service_.AddJob("j-1", SmallSpec("long", 2), v1::SUCCEEDED, "");
  const CliResult result = RunCli(With({"cancel", "j-1", "--reason", "enough"}));
  ASSERT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, "job j-1 is CANCELLED\n");
  ASSERT_EQ(service_.cancels().size(), 1);
  EXPECT_EQ(service_.cancels()[0].reason(), "enough");

  const CliResult json = RunCli(With({"cancel", "j-1", "--json"}));
  EXPECT_EQ(nlohmann::json::parse(json.out)["state_reason"], "cancelled by operator");

  const CliResult missing = RunCli(With({"cancel", "j-404"}));
  EXPECT_EQ(missing.exit_code, 4) << missing;
}

TEST_F(JobCliTest, PlotWritesCsvAndSvgFromTheReplay) {
  service_.AddJob("j-1", SmallSpec("plotted", 6), v1::SUCCEEDED, "");
  const std::string csv = TestDir() + "/loss.csv";
  const std::string svg = TestDir() + "/loss.svg";
  const CliResult result = RunCli(With({"plot", "j-1", "--csv", csv, "--svg", svg}));
  ASSERT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, absl::StrCat("wrote 6 steps (3 with validation loss) of job j-1 to ",
                                     csv, " and ", svg, "\n"));
  EXPECT_EQ(ReadFile(csv),
            "step,train_loss,val_loss,tokens_per_s\n"
            "1,4.75,,1001\n"
            "2,4.5,4.6,1002\n"
            "3,4.25,,1003\n"
            "4,4,4.1,1004\n"
            "5,3.75,,1005\n"
            "6,3.5,3.6,1006\n");
  const std::string plot = ReadFile(svg);
  EXPECT_TRUE(absl::StrContains(plot, "data-name=\"train loss\"")) << plot;
  EXPECT_TRUE(absl::StrContains(plot, "data-name=\"validation loss\"")) << plot;
  EXPECT_TRUE(absl::StrContains(plot, "loss of job j-1 (plotted)")) << plot;
  EXPECT_TRUE(absl::EndsWith(plot, "</svg>\n"));

  EXPECT_EQ(RunCli(With({"plot", "j-1"})).exit_code, 2);
  EXPECT_EQ(RunCli(With({"plot", "j-404", "--csv", csv})).exit_code, 4);
}

// --- no scheduler -----------------------------------------------------------

TEST(JobCliUnreachableTest, EveryJobCommandExitsThree) {
  setenv("CORESCAPE_HOME", (TestDir() + "/home-unreachable").c_str(), 1);
  const std::string dead = "127.0.0.1:1";  // nothing listens: refused at once
  const std::vector<std::vector<std::string>> commands = {
      {"submit", "--name", "n", "--steps", "1"},
      {"submit", "--name", "n", "--steps", "1", "--wait"},
      {"jobs"},
      {"job", "j-1"},
      {"watch", "j-1"},
      {"cancel", "j-1"},
      {"plot", "j-1", "--csv", TestDir() + "/x.csv"},
  };
  for (std::vector<std::string> command : commands) {
    command.push_back("--scheduler");
    command.push_back(dead);
    command.push_back("--insecure");
    const absl::Time start = absl::Now();
    const CliResult result = RunCli(command);
    EXPECT_EQ(result.exit_code, 3) << command[0] << "\n" << result;
    ASSERT_EQ(result.ErrorLines().size(), 1) << result;
    EXPECT_TRUE(absl::StartsWith(result.ErrorLines()[0],
                                 "corescape: error: scheduler at 127.0.0.1:1 is unreachable"))
        << result;
    EXPECT_LT(absl::Now() - start, absl::Seconds(8)) << command[0];
  }
}

}  // namespace
}  // namespace corescape::cli
