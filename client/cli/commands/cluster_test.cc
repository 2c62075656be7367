// The local cluster's plumbing: cluster file, binary lookup, process
// start/stop, address checks. Uses /bin/sh and /bin/sleep as stand-in
// daemons.
#include "client/cli/commands/cluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/commands/cluster_file.h"
#include "client/cli/common.h"
#include "client/cli/commands/process.h"
#include "gtest/gtest.h"

namespace corescape::cli {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

ClusterRecord SampleRecord() {
  ClusterRecord record;
  record.scheduler_address = "127.0.0.1:40000";
  record.state_dir = "/state";
  record.log_dir = "/state/logs";
  record.started_unix_ms = 1700000000000;
  record.lease_ttl_seconds = 10;
  record.daemons.push_back({"scheduler", kSchedulerRole, 100, 5000,
                            "/bin/corescape-scheduler",
                            "/state/logs/scheduler.log",
                            "http://127.0.0.1:40001/metrics",
                            "http://127.0.0.1:40002/"});
  record.daemons.push_back({"worker-0", kWorkerRole, 101, 5001,
                            "/bin/corescape-worker",
                            "/state/logs/worker-0.log",
                            "http://127.0.0.1:40003/metrics", ""});
  return record;
}

TEST(ClusterFileTest, JsonHasDocumentedKeys) {
  const nlohmann::json json = ClusterRecordToJson(SampleRecord());
  EXPECT_EQ(json["scheduler"], "127.0.0.1:40000");
  EXPECT_EQ(json["state_dir"], "/state");
  EXPECT_EQ(json["log_dir"], "/state/logs");
  ASSERT_EQ(json["daemons"].size(), 2);
  EXPECT_EQ(json["daemons"][0]["name"], "scheduler");
  EXPECT_EQ(json["daemons"][0]["role"], "scheduler");
  EXPECT_EQ(json["daemons"][0]["pid"].get<int64_t>(), 100);
  EXPECT_EQ(json["daemons"][0]["start_ticks"].get<uint64_t>(), 5000);
  EXPECT_EQ(json["daemons"][1]["log"], "/state/logs/worker-0.log");
  EXPECT_EQ(json["daemons"][0]["metrics_url"], "http://127.0.0.1:40001/metrics");
  EXPECT_EQ(json["daemons"][0]["status_url"], "http://127.0.0.1:40002/");
  EXPECT_EQ(json["daemons"][1]["metrics_url"], "http://127.0.0.1:40003/metrics");
  EXPECT_FALSE(json["daemons"][1].contains("status_url"));  // the scheduler's only
}

TEST(ClusterFileTest, WriteThenReadRoundTrips) {
  const std::string path = ClusterFilePath(TestDir("roundtrip"));
  ASSERT_TRUE(WriteClusterFile(path, SampleRecord()).ok());
  absl::StatusOr<ClusterRecord> read = ReadClusterFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->scheduler_address, "127.0.0.1:40000");
  EXPECT_EQ(read->lease_ttl_seconds, 10);
  ASSERT_EQ(read->daemons.size(), 2);
  EXPECT_EQ(read->daemons[1].name, "worker-0");
  EXPECT_EQ(read->daemons[1].pid, 101);
  EXPECT_EQ(read->daemons[1].start_ticks, 5001);
  ASSERT_NE(read->Scheduler(), nullptr);
  EXPECT_EQ(read->Scheduler()->binary, "/bin/corescape-scheduler");
  EXPECT_EQ(read->Scheduler()->status_url, "http://127.0.0.1:40002/");
  EXPECT_EQ(read->daemons[1].metrics_url, "http://127.0.0.1:40003/metrics");
}

TEST(ClusterFileTest, MissingAndCorruptFilesAreTold) {
  const std::string dir = TestDir("corrupt");
  EXPECT_TRUE(
      absl::IsNotFound(ReadClusterFile(dir + "/nothing.json").status()));
  std::ofstream(dir + "/bad.json") << "{not json";
  EXPECT_TRUE(
      absl::IsInvalidArgument(ReadClusterFile(dir + "/bad.json").status()));
  // Wrong types are tolerated field by field, never thrown.
  std::ofstream(dir + "/odd.json")
      << R"({"scheduler": 5, "daemons": [1, {"pid": "x"}]})";
  absl::StatusOr<ClusterRecord> odd = ReadClusterFile(dir + "/odd.json");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->scheduler_address, "");
  ASSERT_EQ(odd->daemons.size(), 1);
  EXPECT_EQ(odd->daemons[0].pid, 0);
}

TEST(ClusterFileTest, HomeComesFromCorescapeHome) {
  setenv("CORESCAPE_HOME", "/some/where", 1);
  EXPECT_EQ(*CorescapeHome(), "/some/where");
  unsetenv("CORESCAPE_HOME");
  setenv("HOME", "/home/op", 1);
  EXPECT_EQ(*CorescapeHome(), "/home/op/.corescape");
  EXPECT_EQ(ClusterFilePath("/home/op/.corescape"),
            "/home/op/.corescape/cluster.json");
}

TEST(AddressTest, HostPort) {
  EXPECT_TRUE(IsHostPort("127.0.0.1:5"));
  EXPECT_TRUE(IsHostPort("localhost:65535"));
  EXPECT_TRUE(IsHostPort("[::1]:80"));
  EXPECT_FALSE(IsHostPort("127.0.0.1"));
  EXPECT_FALSE(IsHostPort(":80"));
  EXPECT_FALSE(IsHostPort("host:0"));
  EXPECT_FALSE(IsHostPort("host:65536"));
  EXPECT_FALSE(IsHostPort("host:8x"));
}

TEST(ResolveSchedulerTest, FlagThenEnvironmentThenClusterFile) {
  const std::string home = TestDir("resolve");
  setenv("CORESCAPE_HOME", home.c_str(), 1);
  unsetenv("CORESCAPE_SCHEDULER");
  GlobalOptions options;
  absl::StatusOr<SchedulerTarget> none = ResolveScheduler(options);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::StrContains(none.status().message(), "--scheduler"));
  EXPECT_TRUE(absl::StrContains(none.status().message(), "cluster up"));

  // A cluster file whose scheduler process is gone: say so.
  ASSERT_TRUE(WriteClusterFile(ClusterFilePath(home), SampleRecord()).ok());
  absl::StatusOr<SchedulerTarget> gone = ResolveScheduler(options);
  EXPECT_TRUE(absl::IsUnavailable(gone.status())) << gone.status();
  EXPECT_TRUE(absl::StrContains(gone.status().message(), "not running"));

  // A live one (this test process stands in for the scheduler).
  ClusterRecord live = SampleRecord();
  live.daemons[0].pid = getpid();
  live.daemons[0].start_ticks = ProcessStartTicks(getpid());
  live.tls_dir = "/clusters/local/tls";
  ASSERT_TRUE(WriteClusterFile(ClusterFilePath(home), live).ok());
  EXPECT_EQ(ResolveScheduler(options)->address, "127.0.0.1:40000");
  // The local cluster's scheduler comes with the local cluster's certificates.
  EXPECT_EQ(ResolveScheduler(options)->tls_dir, "/clusters/local/tls");
  setenv("CORESCAPE_SCHEDULER", "10.0.0.1:7", 1);
  // Another scheduler: no certificates known, and plaintext is never assumed.
  absl::StatusOr<SchedulerTarget> no_tls = ResolveScheduler(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(no_tls.status())) << no_tls.status();
  EXPECT_TRUE(absl::StrContains(no_tls.status().message(), "--tls-dir"));
  options.insecure = true;
  EXPECT_EQ(ResolveScheduler(options)->address, "10.0.0.1:7");
  EXPECT_EQ(ResolveScheduler(options)->tls_dir, "");
  options.tls_dir = "/elsewhere";
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveScheduler(options).status()));
  options.insecure = false;
  EXPECT_EQ(ResolveScheduler(options)->tls_dir, "/elsewhere");
  options.tls_dir = "";
  setenv("CORESCAPE_TLS_DIR", "/from/env", 1);
  EXPECT_EQ(ResolveScheduler(options)->tls_dir, "/from/env");
  unsetenv("CORESCAPE_TLS_DIR");
  // The local cluster's address given explicitly still finds its certificates.
  options.scheduler = "127.0.0.1:40000";
  EXPECT_EQ(ResolveScheduler(options)->tls_dir, "/clusters/local/tls");
  options.insecure = true;
  options.scheduler = "host:9";
  EXPECT_EQ(ResolveScheduler(options)->address, "host:9");
  EXPECT_EQ(ResolveScheduler(options)->source, "--scheduler");
  options.scheduler = "no-port";
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveScheduler(options).status()));
  unsetenv("CORESCAPE_TLS_DIR");
  unsetenv("CORESCAPE_SCHEDULER");
  unsetenv("CORESCAPE_HOME");
}

TEST(FindDaemonBinaryTest, BinDirFlagComesFirst) {
  const std::string dir = TestDir("bins");
  const std::string binary = dir + "/corescape-scheduler";
  std::ofstream(binary) << "#!/bin/sh\n";
  chmod(binary.c_str(), 0755);
  absl::StatusOr<std::string> found =
      FindDaemonBinary("corescape-scheduler", "scheduler", dir);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, binary);

  absl::StatusOr<std::string> missing =
      FindDaemonBinary("corescape-nothing", "nothing", dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "--bin-dir"));
  const std::vector<std::string> candidates =
      DaemonBinaryCandidates("corescape-worker", "worker", "/flag");
  ASSERT_GE(candidates.size(), 3);
  EXPECT_EQ(candidates[0], "/flag/corescape-worker");
  EXPECT_TRUE(absl::EndsWith(candidates.back(), "/worker/corescape-worker"));
}

TEST(WorkerDevicesTest, OnePerWorkerAndOneWorkerPerGpu) {
  auto all_cpu = WorkerDevices({}, 3);
  ASSERT_TRUE(all_cpu.ok()) << all_cpu.status();
  EXPECT_EQ(*all_cpu, std::vector<device::Device>(3, device::Device::Cpu()));
  auto mixed = WorkerDevices({"cuda:1", "cpu", "cuda"}, 3);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(*mixed, (std::vector<device::Device>{device::Device::Cuda(1), device::Device::Cpu(),
                                                 device::Device::Cuda(0)}));

  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"cuda:0"}, "--worker-devices: 1 devices for 2 workers (give one per worker, in worker "
                   "order)"},
      {{"cuda:0", "tpu"}, "--worker-devices: worker-1: "},
      {{"cuda:3", "cuda:3"},
       "--worker-devices: cuda:3 is given to worker-0 and worker-1 (one worker daemon per GPU)"},
      {{"cuda", "cuda:0"},
       "--worker-devices: cuda:0 is given to worker-0 and worker-1 (one worker daemon per GPU)"},
  };
  for (const auto& [devices, message] : refused) {
    auto parsed = WorkerDevices(devices, 2);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_TRUE(absl::StartsWith(parsed.status().message(), message)) << parsed.status();
  }
  EXPECT_EQ(WorkerDevices({"cpu"}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProcessTest, SpawnedDaemonLogsAndStopsOnSigterm) {
  const std::string dir = TestDir("spawn");
  const std::string log = dir + "/daemon.log";
  absl::StatusOr<pid_t> pid = SpawnDetached(
      "/bin/sh", {"-c", "echo started; echo oops >&2; exec sleep 30"}, log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  // It runs in its own session, so terminal signals to us miss it.
  EXPECT_EQ(getsid(*pid), *pid);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (TailOfFile(log, 10) != "started\noops\n" && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(TailOfFile(log, 10), "started\noops\n");
  EXPECT_EQ(TailOfFile(log, 1), "oops\n");
  EXPECT_TRUE(IsDaemonRunning(*pid, 0));
  EXPECT_FALSE(ChildExitDescription(*pid).has_value());

  const std::vector<pid_t> killed =
      TerminateDaemons({{*pid, 0}}, absl::Seconds(5));
  EXPECT_TRUE(killed.empty()) << "sleep obeys SIGTERM";
  EXPECT_FALSE(IsDaemonRunning(*pid, 0));
}

TEST(ProcessTest, IdentityIsPidPlusStartTimeAndSurvivesExec) {
  // A wrapper script that execs the real program, as deployments often do.
  absl::StatusOr<pid_t> pid = SpawnDetached("/bin/sh", {"-c", "exec sleep 30"},
                                            TestDir("identity") + "/log");
  ASSERT_TRUE(pid.ok());
  const uint64_t start_ticks = ProcessStartTicks(*pid);
  ASSERT_NE(start_ticks, 0);
  absl::SleepFor(absl::Milliseconds(100));  // let the exec happen
  EXPECT_EQ(ProcessStartTicks(*pid), start_ticks);
  EXPECT_TRUE(IsDaemonRunning(*pid, start_ticks));
  // Same pid, other start time: a recycled pid, not our daemon.
  EXPECT_FALSE(IsDaemonRunning(*pid, start_ticks + 1));
  EXPECT_TRUE(
      TerminateDaemons({{*pid, start_ticks + 1}}, absl::Seconds(1)).empty());
  EXPECT_TRUE(IsDaemonRunning(*pid, start_ticks)) << "must not be signalled";

  TerminateDaemons({{*pid, start_ticks}}, absl::Seconds(5));
  EXPECT_FALSE(IsDaemonRunning(*pid, start_ticks));
  EXPECT_FALSE(IsDaemonRunning(999999999, 0));
}

TEST(ProcessTest, SigtermIgnoredMeansSigkill) {
  // SIG_IGN survives exec, so this sleep ignores SIGTERM.
  absl::StatusOr<pid_t> pid =
      SpawnDetached("/bin/sh", {"-c", "trap '' TERM; exec sleep 30"},
                    TestDir("stubborn") + "/log");
  ASSERT_TRUE(pid.ok());
  absl::SleepFor(absl::Milliseconds(200));  // let the trap take effect
  const std::vector<pid_t> killed =
      TerminateDaemons({{*pid, 0}}, absl::Milliseconds(300));
  ASSERT_EQ(killed.size(), 1);
  EXPECT_EQ(killed[0], *pid);
  EXPECT_FALSE(IsDaemonRunning(*pid, 0));
}

TEST(ProcessTest, EarlyExitIsDescribed) {
  absl::StatusOr<pid_t> pid =
      SpawnDetached("/bin/sh", {"-c", "exit 3"}, TestDir("early") + "/log");
  ASSERT_TRUE(pid.ok());
  std::optional<std::string> exit;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(exit = ChildExitDescription(*pid)).has_value() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(*exit, "exited with status 3");
}

TEST(ProcessTest, MissingBinaryFailsToSpawn) {
  absl::StatusOr<pid_t> pid = SpawnDetached("/nonexistent/corescape-worker", {},
                                            TestDir("missing") + "/log");
  ASSERT_FALSE(pid.ok());
  EXPECT_TRUE(absl::StrContains(pid.status().message(), "No such file"))
      << pid.status();
}

TEST(LockTest, SecondLockOnTheSameHomeFails) {
  const std::string home = TestDir("lock");
  ASSERT_TRUE(LockClusterHome(home).ok());
  absl::Status second = LockClusterHome(home);
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(absl::StrContains(second.message(), "another"));
}

}  // namespace
}  // namespace corescape::cli
