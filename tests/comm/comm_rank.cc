// One rank of a multi-process data-plane test (driven by the Python tests in
// this folder). Ranks find each other through files in --rendezvous_dir:
// each writes rank<R>.addr with its transport's address and waits for the
// others'. Every result line on stdout is JSON; the exit status is 0 when
// every check passed, 1 when a check failed, 2 when the communicator could
// not be formed, 3 when an operation failed.
//
// Scenarios:
//   collectives  all-reduce (sum, mean; exact integer data and random data),
//                all-gather-v with uneven sizes, reduce-scatter, broadcast,
//                barrier, async overlap, point-to-point, for every --sizes
//                entry; checks results against a serial reference computed
//                locally and the byte counters against the documented
//                schedules; prints a hash of the random all-reduce result so
//                the driver can check the ranks agree bitwise
//   allreduce_loop  all-reduces --sizes[0] floats until one fails, printing
//                "ready" after the first and the error with its time
//   connect_only forms the communicator (or fails to) and exits
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/base/directory_rendezvous.h"
#include "runtime/comm/communicator.h"
#include "tests/comm/expected_bytes.h"

ABSL_FLAG(int, rank, 0, "this rank");
ABSL_FLAG(int, world_size, 2, "number of ranks");
ABSL_FLAG(std::string, rendezvous_dir, "", "directory where ranks publish their addresses");
ABSL_FLAG(bool, publish, true, "write rank<R>.addr (false: an intruder that only reads)");
ABSL_FLAG(std::string, scenario, "collectives", "collectives | allreduce_loop | connect_only");
ABSL_FLAG(std::string, sizes, "0,1,7,1001", "element counts to test");
ABSL_FLAG(std::string, token, "secret", "secret token");
ABSL_FLAG(std::string, job_id, "test-job", "job id");
ABSL_FLAG(uint64_t, generation, 1, "generation");
ABSL_FLAG(int, timeout_ms, 10000, "communicator timeout");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "listen address");
ABSL_FLAG(int, linger_ms, 0, "sleep this long before destroying the communicator");

namespace corescape::comm {
namespace {

void Emit(const std::string& json) {
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      out += " ";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

// Prints {"error": "<status>"} and returns exit_code.
int EmitError(const absl::Status& status, int exit_code) {
  Emit(absl::StrCat("{\"error\": ", JsonString(status.ToString()), "}"));
  return exit_code;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

uint64_t Hash(const void* data, int64_t bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// Small integers: every summation order is exact, so the serial reference
// can be compared bitwise.
float IntegerValue(int rank, int64_t i) {
  return static_cast<float>((i * 7 + rank * 13) % 41 - 20);
}
float RandomValue(int rank, int64_t i) {
  static constexpr double kScale[5] = {0.01, 0.1, 1.0, 10.0, 100.0};
  uint64_t x = (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(i) ^ 0x9E3779B97F4A7C15ULL;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  double unit = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
  return static_cast<float>((unit * 2 - 1) * kScale[x % 5]);
}

std::vector<int64_t> UnevenSizes(int world, int64_t scale) {
  std::vector<int64_t> sizes(world);
  for (int r = 0; r < world; ++r) sizes[r] = (r % 3 == 1) ? 0 : scale * (r + 1) / world + r;
  return sizes;
}

class Checker {
 public:
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures_;
    Emit(absl::StrCat("{\"check_failed\": ", JsonString(what), "}"));
  }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

// Compares this rank's counter change for one operation with the schedule.
void ExpectBytes(Checker& check, const ByteCounters& before, const ByteCounters& after,
                 CollectiveKind kind, ExpectedBytes expected, const std::string& what) {
  const KindCounters& a = after[kind];
  const KindCounters& b = before[kind];
  check.Expect(a.bytes_sent - b.bytes_sent == expected.sent,
               absl::StrCat(what, ": sent ", a.bytes_sent - b.bytes_sent, " bytes, expected ",
                            expected.sent));
  check.Expect(a.bytes_received - b.bytes_received == expected.received,
               absl::StrCat(what, ": received ", a.bytes_received - b.bytes_received,
                            " bytes, expected ", expected.received));
  check.Expect(a.operations - b.operations == 1, absl::StrCat(what, ": operations not counted"));
}

int RunCollectives(Communicator& c, const std::vector<int64_t>& sizes) {
  Checker check;
  const int rank = c.rank();
  const int world = c.world_size();
  const AlgorithmSettings settings;  // the defaults the communicator uses
  for (int64_t count : sizes) {
    const std::string at = absl::StrCat(" count=", count);
    // All-reduce, exact data: equals the serial sum bitwise; then the mean.
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = IntegerValue(rank, i);
      ByteCounters before = c.counters();
      absl::Status s = c.AllReduce(data.data(), count, op);
      if (!s.ok()) return EmitError(s, 3);
      ExpectBytes(check, before, c.counters(), CollectiveKind::kAllReduce,
                  AllReduceBytes(count, world, rank, settings), "all_reduce" + at);
      int64_t bad = 0;
      for (int64_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int r = 0; r < world; ++r) expected += IntegerValue(r, i);
        if (op == ReduceOp::kMean) expected /= static_cast<float>(world);
        if (std::memcmp(&expected, &data[i], sizeof(float)) != 0) ++bad;
      }
      check.Expect(bad == 0, absl::StrCat("all_reduce ", ReduceOpName(op), at, ": ", bad,
                                          " elements differ from the serial reference"));
    }
    // All-reduce, random data: bitwise equal across ranks (hash), close to
    // the float64 sum.
    {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = RandomValue(rank, i);
      absl::Status s = c.AllReduce(data.data(), count, ReduceOp::kSum);
      if (!s.ok()) return EmitError(s, 3);
      int64_t far = 0;
      for (int64_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < world; ++r) exact += RandomValue(r, i);
        if (std::fabs(data[i] - exact) > 1e-4 * (1 + std::fabs(exact))) ++far;
      }
      check.Expect(far == 0, absl::StrCat("random all_reduce", at, ": ", far,
                                          " elements far from the float64 sum"));
      Emit(absl::StrFormat("{\"op\": \"all_reduce_random\", \"count\": %d, \"hash\": \"%016x\"}",
                           count, Hash(data.data(), count * 4)));
    }
    // All-gather-v, uneven (some ranks send nothing), started async while
    // an all-reduce is queued behind it.
    {
      std::vector<int64_t> bytes = UnevenSizes(world, count * 4);
      int64_t total = 0;
      for (int64_t b : bytes) total += b;
      std::vector<char> send(bytes[rank]);
      for (int64_t i = 0; i < bytes[rank]; ++i) send[i] = static_cast<char>(rank * 31 + i);
      std::vector<char> recv(total, 0);
      ByteCounters before = c.counters();
      auto handle = c.AllGatherVAsync(send.data(), bytes[rank], recv.data(), bytes);
      if (!handle.ok()) return EmitError(handle.status(), 3);
      std::fill(send.begin(), send.end(), 0);  // consumed at the call
      float one = 1.0f;
      absl::Status ar = c.AllReduce(&one, 1, ReduceOp::kSum);
      absl::Status s = (*handle)->Wait();
      if (!s.ok() || !ar.ok()) return EmitError(s.ok() ? ar : s, 3);
      check.Expect(one == static_cast<float>(world), "all_reduce queued behind all_gather");
      ByteCounters after = c.counters();
      after[CollectiveKind::kAllReduce] = before[CollectiveKind::kAllReduce];
      ExpectBytes(check, before, after, CollectiveKind::kAllGather,
                  AllGatherVBytes(bytes, rank, settings), "all_gather_v" + at);
      int64_t bad = 0, at_byte = 0;
      for (int r = 0; r < world; ++r) {
        for (int64_t i = 0; i < bytes[r]; ++i, ++at_byte) {
          if (recv[at_byte] != static_cast<char>(r * 31 + i)) ++bad;
        }
      }
      check.Expect(bad == 0, absl::StrCat("all_gather_v", at, ": ", bad, " bytes wrong"));
    }
    // Reduce-scatter with uneven blocks.
    {
      std::vector<int64_t> counts = UnevenSizes(world, count);
      int64_t total = 0, offset = 0;
      for (int r = 0; r < world; ++r) {
        if (r < rank) offset += counts[r];
        total += counts[r];
      }
      std::vector<float> send(total);
      for (int64_t i = 0; i < total; ++i) send[i] = IntegerValue(rank, i);
      std::vector<float> recv(counts[rank]);
      ByteCounters before = c.counters();
      absl::Status s = c.ReduceScatter(send.data(), recv.data(), counts, ReduceOp::kSum);
      if (!s.ok()) return EmitError(s, 3);
      ExpectBytes(check, before, c.counters(), CollectiveKind::kReduceScatter,
                  ReduceScatterBytes(counts, rank, settings), "reduce_scatter" + at);
      int64_t bad = 0;
      for (int64_t i = 0; i < counts[rank]; ++i) {
        float expected = 0;
        for (int r = 0; r < world; ++r) expected += IntegerValue(r, offset + i);
        if (expected != recv[i]) ++bad;
      }
      check.Expect(bad == 0, absl::StrCat("reduce_scatter", at, ": ", bad, " elements wrong"));
    }
    // Broadcast from a root that depends on the size.
    {
      const int root = static_cast<int>(count % world);
      const int64_t bytes = count * 4 + 3;
      std::vector<char> buf(bytes, 0);
      if (rank == root) {
        for (int64_t i = 0; i < bytes; ++i) buf[i] = static_cast<char>(i * 13 + 5);
      }
      ByteCounters before = c.counters();
      absl::Status s = c.Broadcast(buf.data(), bytes, root);
      if (!s.ok()) return EmitError(s, 3);
      ExpectBytes(check, before, c.counters(), CollectiveKind::kBroadcast,
                  BroadcastBytes(bytes, world, rank, root, settings), "broadcast" + at);
      int64_t bad = 0;
      for (int64_t i = 0; i < bytes; ++i) bad += buf[i] != static_cast<char>(i * 13 + 5);
      check.Expect(bad == 0, absl::StrCat("broadcast", at, ": ", bad, " bytes wrong"));
    }
    // Point to point around the ring.
    if (world > 1) {
      const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
      const int64_t bytes = count * 4;
      std::vector<char> out(bytes, static_cast<char>(rank + 1)), in(bytes, 0);
      ByteCounters before = c.counters();
      auto r = c.RecvAsync(prev, 1000 + count % 1000, in.data(), bytes);
      auto s = c.SendAsync(next, 1000 + count % 1000, out.data(), bytes);
      absl::Status st = r.ok() ? (*r)->Wait() : r.status();
      absl::Status ss = s.ok() ? (*s)->Wait() : s.status();
      if (!st.ok() || !ss.ok()) return EmitError(st.ok() ? ss : st, 3);
      ByteCounters after = c.counters();
      const KindCounters& k = after[CollectiveKind::kPointToPoint];
      const KindCounters& k0 = before[CollectiveKind::kPointToPoint];
      check.Expect(k.bytes_sent - k0.bytes_sent == bytes && k.bytes_received - k0.bytes_received == bytes &&
                       k.operations - k0.operations == 2,
                   "point_to_point" + at + ": counters");
      int64_t bad = 0;
      for (int64_t i = 0; i < bytes; ++i) bad += in[i] != static_cast<char>(prev + 1);
      check.Expect(bad == 0, absl::StrCat("point_to_point", at, ": ", bad, " bytes wrong"));
    }
  }
  absl::Status s = c.Barrier();
  check.Expect(s.ok(), "barrier: " + s.ToString());
  const ByteCounters totals = c.counters();
  Emit(absl::StrFormat("{\"done\": true, \"failures\": %d, \"sent\": %d, \"received\": %d}",
                       check.failures(), totals.total_sent(), totals.total_received()));
  return check.failures() == 0 ? 0 : 1;
}

int RunAllReduceLoop(Communicator& c, int64_t count) {
  std::vector<float> data(count, 1.0f);
  for (int64_t iteration = 0;; ++iteration) {
    absl::Status s = c.AllReduce(data.data(), count, ReduceOp::kMean);
    if (!s.ok()) {
      Emit(absl::StrFormat("{\"error\": %s, \"error_unix_ms\": %d, \"iterations\": %d}",
                           JsonString(s.ToString()), NowMs(), iteration));
      return 3;
    }
    if (iteration == 0) Emit("{\"ready\": true}");
  }
}

int Main() {
  const int rank = absl::GetFlag(FLAGS_rank);
  const int world = absl::GetFlag(FLAGS_world_size);
  const absl::Duration timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  TransportOptions transport_options;
  transport_options.listen_address = absl::GetFlag(FLAGS_listen);
  transport_options.timeout = timeout;
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Create(transport_options);
  if (!transport.ok()) return EmitError(transport.status(), 2);
  absl::StatusOr<std::vector<std::string>> addresses =
      RendezvousThroughDirectory(absl::GetFlag(FLAGS_rendezvous_dir), rank, world,
                                 (*transport)->address(), absl::Seconds(20),
                                 absl::GetFlag(FLAGS_publish));
  if (!addresses.ok()) return EmitError(addresses.status(), 2);
  CommunicatorOptions options;
  options.rank = rank;
  options.world_size = world;
  options.generation = absl::GetFlag(FLAGS_generation);
  options.peer_addresses = *addresses;
  options.secret_token = absl::GetFlag(FLAGS_token);
  options.job_id = absl::GetFlag(FLAGS_job_id);
  options.timeout = timeout;
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Communicator::Create(transport->get(), options);
  if (!comm.ok()) {
    Emit(absl::StrCat("{\"error\": ", JsonString(comm.status().ToString()), ", \"code\": ",
                      JsonString(absl::StatusCodeToString(comm.status().code())), "}"));
    return 2;
  }
  Emit(absl::StrFormat("{\"connected\": true, \"unix_ms\": %d, \"pid\": %d}", NowMs(), getpid()));
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',', absl::SkipEmpty())) {
    int64_t n = 0;
    if (absl::SimpleAtoi(s, &n)) sizes.push_back(n);
  }
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  struct Linger {
    ~Linger() { absl::SleepFor(absl::Milliseconds(absl::GetFlag(FLAGS_linger_ms))); }
  } linger;  // runs before the communicator is destroyed
  if (scenario == "collectives") return RunCollectives(**comm, sizes);
  if (scenario == "allreduce_loop") return RunAllReduceLoop(**comm, sizes.empty() ? 1 : sizes[0]);
  if (scenario == "connect_only") {
    absl::Status s = (*comm)->Barrier();
    Emit(absl::StrCat("{\"barrier\": ", JsonString(s.ToString()), "}"));
    return s.ok() ? 0 : 3;
  }
  Emit(absl::StrCat("{\"error\": \"unknown scenario ", scenario, "\"}"));
  return 1;
}

}  // namespace
}  // namespace corescape::comm

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return corescape::comm::Main();
}
