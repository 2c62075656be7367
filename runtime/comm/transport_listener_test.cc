// A stranger's bytes on a transport's listener: what crashed, spun or leaked
// in UCX's connection manager (24 bytes of 0xff, 8 KiB of zeros, a
// length prefix announcing 2^40 bytes and a close, connect-and-close
// bursts) is answered by the transport's own handshake code: the process
// lives, its CPU goes back to idle, no socket is left in CLOSE-WAIT, and a
// communicator still forms and all-reduces on it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/base/host_port.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {
namespace {

// Connects to 127.0.0.1:`port`, sends `bytes` and closes.
void SendAndClose(uint16_t port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0 && !bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    (void)n;
  }
  close(fd);
}

std::string LengthPrefixed(uint64_t length, size_t body) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(length >> (8 * i));
  return out + std::string(body, '\x42');
}

// Sockets of this process in CLOSE-WAIT (state 08 in /proc/net/tcp), by
// inode, among the socket descriptors it holds.
int CloseWaitSockets() {
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  std::vector<std::string> close_wait_inodes;
  while (std::getline(tcp, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() > 9 && fields[3] == "08") close_wait_inodes.push_back(fields[9]);
  }
  int held = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    char target[128] = {};
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    for (const std::string& inode : close_wait_inodes) {
      held += std::string(target) == "socket:[" + inode + "]";
    }
  }
  return held;
}

absl::Duration CpuTime() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

TEST(TransportListenerTest, StrangersBytesCrashSpinAndLeakNothing) {
  TransportOptions options;
  options.listen_address = "127.0.0.1:0";
  options.timeout = absl::Seconds(10);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < 2; ++r) {
    auto transport = Transport::Create(options);
    ASSERT_TRUE(transport.ok()) << transport.status();
    transports.push_back(*std::move(transport));
  }
  const uint16_t port = ParseHostPort(transports[1]->address())->port;

  SendAndClose(port, std::string(24, '\xff'));
  SendAndClose(port, std::string(8192, '\0'));
  for (uint64_t length : {uint64_t{0}, uint64_t{15}, uint64_t{1} << 32, uint64_t{1} << 40}) {
    SendAndClose(port, LengthPrefixed(length, length == (uint64_t{1} << 40) ? 4096 : 16));
  }
  for (int i = 0; i < 100; ++i) SendAndClose(port, "");

  // Every connection was read to its end and closed.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (CloseWaitSockets() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(CloseWaitSockets(), 0);
  // And nothing spins: the process is idle (the progress threads sleep).
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Duration before = CpuTime();
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(CpuTime() - before, absl::Milliseconds(200));

  // The listener still serves members.
  std::vector<std::unique_ptr<Communicator>> communicators(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommunicatorOptions o;
      o.rank = r;
      o.world_size = 2;
      o.generation = 1;
      o.peer_addresses = {transports[0]->address(), transports[1]->address()};
      o.secret_token = "listener-test-secret";
      o.job_id = "listener-test";
      o.timeout = absl::Seconds(20);
      auto c = Communicator::Create(transports[r].get(), o);
      ASSERT_TRUE(c.ok()) << c.status();
      std::vector<float> values(1000, static_cast<float>(r + 1));
      ASSERT_TRUE((*c)->AllReduce(values.data(), values.size(), ReduceOp::kSum).ok());
      EXPECT_EQ(values[999], 3.0f);
      communicators[r] = *std::move(c);
    });
  }
  for (std::thread& t : threads) t.join();
  communicators.clear();
}

}  // namespace
}  // namespace corescape::comm
