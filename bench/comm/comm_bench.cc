// One rank of the data-plane bandwidth benchmark (bench/comm/run.sh starts P
// of them). For each size it times all_reduce (fp32 sum) or all_gather
// (equal blocks, all-gather-v with every size equal) and prints one JSON line
// per size and configuration with algorithm and bus bandwidth as nccl-tests
// defines them:
//   algbw = bytes / time;  busbw = algbw * 2(P-1)/P (all-reduce),
//                                  algbw * (P-1)/P  (all-gather),
// where `bytes` is the whole buffer (all-gather: the gathered result).
//
// --algorithms=both (the default) measures two communicators over the same
// transport, in alternating blocks of iterations at each size: "main", the schedule the data
// plane ran before recursive-doubling gathers and bounded ring receives
// (doubling_bytes = 0, ring_receive_depth = 0, 1 MiB segments), and "tuned",
// the current defaults. Both share the same reduction kernels, so new/old
// ratios show the schedules' difference only. Each line also carries the
// CPU this process used per second of the timed loop, user and system
// (where the time goes: our code and UCX vs the kernel's TCP copies).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_main.h"
#include "runtime/base/directory_rendezvous.h"
#include "runtime/comm/communicator.h"

ABSL_FLAG(int, rank, 0, "this rank");
ABSL_FLAG(int, world_size, 2, "ranks");
ABSL_FLAG(std::string, rendezvous_dir, "", "where ranks publish their addresses");
ABSL_FLAG(std::string, op, "all_reduce", "all_reduce | all_gather | send_recv");
ABSL_FLAG(std::string, sizes, "1024,1048576", "buffer sizes in bytes");
ABSL_FLAG(double, seconds_per_size, 0.5, "target time measured per size and configuration");
ABSL_FLAG(int, max_iters, 200, "at most this many timed iterations per size");
ABSL_FLAG(std::string, algorithms, "both",
          "tuned (the defaults) | main (the earlier schedule) | both, alternating per size");
ABSL_FLAG(int64_t, segment_bytes, 0, "tuned: pipeline segment; 0 keeps the default");
ABSL_FLAG(int64_t, doubling_bytes, -1, "tuned: recursive-doubling gathers up to this; -1 default");
ABSL_FLAG(int, ring_receive_depth, -1, "tuned: receives a ring step keeps posted; -1 default");

namespace corescape::bench {
namespace {

// CPU seconds this process has used (all threads), split as the kernel sees
// it: user (reduction, copies in our code and UCX) and system (TCP and
// shared-memory copies, futex wake-ups).
struct CpuSeconds {
  double user = 0;
  double system = 0;
};
CpuSeconds ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return {seconds(u.ru_utime), seconds(u.ru_stime)};
}

// The schedule main ran: ring gathers at every size, every receive of a
// ring step posted at once, 1 MiB segments.
comm::AlgorithmSettings MainSettings() {
  comm::AlgorithmSettings s;
  s.small_bytes = 64 << 10;
  s.segment_bytes = 1 << 20;
  s.doubling_bytes = 0;
  s.ring_receive_depth = 0;
  return s;
}

comm::AlgorithmSettings TunedSettings() {
  comm::AlgorithmSettings s;
  if (absl::GetFlag(FLAGS_segment_bytes) > 0) s.segment_bytes = absl::GetFlag(FLAGS_segment_bytes);
  if (absl::GetFlag(FLAGS_doubling_bytes) >= 0) {
    s.doubling_bytes = absl::GetFlag(FLAGS_doubling_bytes);
  }
  if (absl::GetFlag(FLAGS_ring_receive_depth) >= 0) {
    s.ring_receive_depth = absl::GetFlag(FLAGS_ring_receive_depth);
  }
  return s;
}

struct Config {
  std::string name;
  std::unique_ptr<comm::Communicator> communicator;
};

}  // namespace

int RunBenchmark() {
  const int rank = absl::GetFlag(FLAGS_rank);
  const int world = absl::GetFlag(FLAGS_world_size);
  const std::string which = absl::GetFlag(FLAGS_algorithms);
  if (which != "both" && which != "main" && which != "tuned") {
    std::fprintf(stderr, "--algorithms must be tuned, main or both, not '%s'\n", which.c_str());
    return 2;
  }
  comm::TransportOptions to;
  to.listen_address = "127.0.0.1:0";
  auto transport = comm::Transport::Create(to);
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.status().ToString().c_str());
    return 2;
  }
  auto addresses =
      RendezvousThroughDirectory(absl::GetFlag(FLAGS_rendezvous_dir), rank, world,
                                 (*transport)->address(), absl::Seconds(30));
  if (!addresses.ok()) {
    std::fprintf(stderr, "%s\n", addresses.status().ToString().c_str());
    return 2;
  }
  // Two communicators side by side (generations 0 and 1) on one transport.
  std::vector<Config> configs;
  for (const std::string& name : {std::string("main"), std::string("tuned")}) {
    if (which != "both" && which != name) continue;
    comm::CommunicatorOptions o;
    o.rank = rank;
    o.world_size = world;
    o.peer_addresses = *addresses;
    o.secret_token = "bench";
    o.job_id = "bench";
    o.generation = configs.size();
    o.timeout = absl::Seconds(60);
    o.algorithms = name == "main" ? MainSettings() : TunedSettings();
    auto communicator = comm::Communicator::Create(transport->get(), o);
    if (!communicator.ok()) {
      std::fprintf(stderr, "%s\n", communicator.status().ToString().c_str());
      return 2;
    }
    configs.push_back({name, *std::move(communicator)});
  }
  const std::string op = absl::GetFlag(FLAGS_op);
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',', absl::SkipEmpty())) {
    int64_t n;
    if (!absl::SimpleAtoi(s, &n) || n < 4) {
      std::fprintf(stderr, "--sizes: '%s' is not a byte count >= 4\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) {
    std::fprintf(stderr, "--sizes is empty\n");
    return 2;
  }
  const int64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  std::vector<float> data(max_bytes / 4 + 1, 1.0f);
  std::vector<char> gathered(max_bytes + world);
  std::vector<char> block(max_bytes / world + 1, static_cast<char>(rank));

  auto run_once = [&](comm::Communicator& c, int64_t bytes) -> absl::Status {
    if (op == "all_reduce") return c.AllReduce(data.data(), bytes / 4, comm::ReduceOp::kSum);
    if (op == "send_recv") {  // rank 0 -> rank 1, like ucx_perftest tag_bw
      if (rank > 1) return absl::OkStatus();
      auto h = rank == 0 ? c.SendAsync(1, 1, data.data(), bytes)
                         : c.RecvAsync(0, 1, data.data(), bytes);
      if (!h.ok()) return h.status();
      return (*h)->Wait();
    }
    const int64_t per_rank = bytes / world;
    std::vector<int64_t> per(world, per_rank);
    return c.AllGatherV(block.data(), per_rank, gathered.data(), per);
  };
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 3;
  };
  // Per size: warm-up and an iteration count per configuration (rank 0's
  // estimate, broadcast), then kRounds rounds that each time a block of
  // iterations of every configuration in turn, so a change in the machine's
  // load reaches both configurations alike.
  constexpr int kRounds = 4;
  for (int64_t bytes : sizes) {
    std::vector<int32_t> iters(configs.size());
    std::vector<double> wall(configs.size(), 0.0);
    std::vector<CpuSeconds> cpu(configs.size());
    for (size_t k = 0; k < configs.size(); ++k) {
      comm::Communicator& c = *configs[k].communicator;
      // Warm-up (also lets UCX register memory / set up rendezvous lanes).
      for (int i = 0; i < 2; ++i) {
        if (auto s = run_once(c, bytes); !s.ok()) return fail(s);
      }
      const absl::Time t0 = absl::Now();
      if (auto s = run_once(c, bytes); !s.ok()) return fail(s);
      const double one = absl::ToDoubleSeconds(absl::Now() - t0);
      int n = static_cast<int>(absl::GetFlag(FLAGS_seconds_per_size) / kRounds /
                               std::max(one, 1e-6));
      iters[k] = std::clamp(n, 1, std::max(1, absl::GetFlag(FLAGS_max_iters) / kRounds));
      if (auto s = c.Broadcast(&iters[k], sizeof(iters[k]), 0); !s.ok()) return fail(s);
    }
    for (int round = 0; round < kRounds; ++round) {
      for (size_t k = 0; k < configs.size(); ++k) {
        comm::Communicator& c = *configs[k].communicator;
        if (auto s = c.Barrier(); !s.ok()) return fail(s);
        const CpuSeconds cpu0 = ProcessCpu();
        const absl::Time t0 = absl::Now();
        for (int i = 0; i < iters[k]; ++i) {
          if (auto s = run_once(c, bytes); !s.ok()) return fail(s);
        }
        wall[k] += absl::ToDoubleSeconds(absl::Now() - t0);
        const CpuSeconds cpu1 = ProcessCpu();
        cpu[k].user += cpu1.user - cpu0.user;
        cpu[k].system += cpu1.system - cpu0.system;
      }
    }
    for (size_t k = 0; k < configs.size(); ++k) {
      const int total_iters = iters[k] * kRounds;
      const double seconds = wall[k] / total_iters;
      const int64_t effective = op == "all_reduce" ? bytes / 4 * 4 : bytes / world * world;
      const double algbw = effective / seconds;
      const double factor = op == "all_reduce" ? 2.0 * (world - 1) / world
                                               : static_cast<double>(world - 1) / world;
      if (rank == 0) {
        std::printf("{\"config\": \"%s\", \"op\": \"%s\", \"world\": %d, \"bytes\": %lld, "
                    "\"iters\": %d, \"time_us\": %.1f, \"algbw_gbs\": %.4f, "
                    "\"busbw_gbs\": %.4f, \"cpu_user\": %.3f, \"cpu_sys\": %.3f}\n",
                    configs[k].name.c_str(), op.c_str(), world, static_cast<long long>(bytes),
                    total_iters, seconds * 1e6, algbw / 1e9, algbw * factor / 1e9,
                    cpu[k].user / wall[k], cpu[k].system / wall[k]);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace corescape::bench
