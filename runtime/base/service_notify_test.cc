#include "runtime/base/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

// A real datagram socket standing in for systemd's notify socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    EXPECT_LT(name.size(), sizeof(address.sun_path));
    std::memcpy(address.sun_path, name.data(), name.size());
    if (name[0] == '@') address.sun_path[0] = '\0';
    else unlink(name.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address),
                   offsetof(sockaddr_un, sun_path) + name.size()),
              0)
        << std::strerror(errno);
    timeval timeout{.tv_sec = 2, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setenv("NOTIFY_SOCKET", name.c_str(), 1);
  }
  ~NotifySocket() {
    close(fd_);
    unsetenv("NOTIFY_SOCKET");
  }
  // The next datagram, or "" after 2 s without one.
  std::string Receive() {
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, n) : "";
  }

 private:
  int fd_ = -1;
};

// Under /tmp: $TEST_TMPDIR is often longer than a socket path may be.
std::string TempPath(const std::string& name) {
  static const std::string* dir = []() {
    char pattern[] = "/tmp/notify-test-XXXXXX";
    std::atexit([]() { std::filesystem::remove_all(*dir); });
    return new std::string(mkdtemp(pattern));
  }();
  return absl::StrCat(*dir, "/", name);
}

TEST(NotifyServiceManagerTest, NoSocketIsANoOp) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(NotifyServiceManager("READY=1").ok());
}

TEST(NotifyServiceManagerTest, SendsOneDatagramToAPathSocket) {
  NotifySocket socket(TempPath("notify.sock"));
  ASSERT_TRUE(NotifyServiceManager("READY=1\nSTATUS=serving").ok());
  EXPECT_EQ(socket.Receive(), "READY=1\nSTATUS=serving");
}

TEST(NotifyServiceManagerTest, SendsToAnAbstractSocket) {
  NotifySocket socket(absl::StrCat("@corescape-notify-test-", getpid()));
  ASSERT_TRUE(NotifyServiceManager("STOPPING=1").ok());
  EXPECT_EQ(socket.Receive(), "STOPPING=1");
}

TEST(NotifyServiceManagerTest, MissingSocketIsAnError) {
  setenv("NOTIFY_SOCKET", TempPath("nobody-listens.sock").c_str(), 1);
  EXPECT_FALSE(NotifyServiceManager("READY=1").ok());
  setenv("NOTIFY_SOCKET", "relative.sock", 1);
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), absl::StatusCode::kInvalidArgument);
  unsetenv("NOTIFY_SOCKET");
}

TEST(NotifyWatchdogTest, SendsOnePing) {
  NotifySocket socket(TempPath("watchdog.sock"));
  NotifyWatchdog();
  EXPECT_EQ(socket.Receive(), "WATCHDOG=1");
}

TEST(ServiceWatchdogIntervalTest, ReadsUsecAndChecksThePid) {
  unsetenv("WATCHDOG_PID");
  unsetenv("WATCHDOG_USEC");
  EXPECT_FALSE(ServiceWatchdogInterval().has_value());
  setenv("WATCHDOG_USEC", "3000000", 1);
  EXPECT_EQ(ServiceWatchdogInterval(), absl::Seconds(3));
  setenv("WATCHDOG_PID", absl::StrCat(getpid()).c_str(), 1);
  EXPECT_EQ(ServiceWatchdogInterval(), absl::Seconds(3));
  setenv("WATCHDOG_PID", absl::StrCat(getpid() + 1).c_str(), 1);
  EXPECT_FALSE(ServiceWatchdogInterval().has_value());
  unsetenv("WATCHDOG_PID");
  unsetenv("WATCHDOG_USEC");
}

TEST(ServiceWatchdogTest, PingsWhileHealthyAndStopsWhenNot) {
  NotifySocket socket(TempPath("watchdog.sock"));
  setenv("WATCHDOG_USEC", "40000", 1);  // pings every 20 ms
  std::atomic<bool> healthy{true};
  {
    ServiceWatchdog watchdog([&healthy]() { return healthy.load(); });
    EXPECT_EQ(socket.Receive(), "WATCHDOG=1");
    EXPECT_EQ(socket.Receive(), "WATCHDOG=1");
    healthy = false;
    // At most one ping already on its way when the check turned false.
    std::string after = socket.Receive();
    if (!after.empty()) after = socket.Receive();
    EXPECT_EQ(after, "");
  }
  unsetenv("WATCHDOG_USEC");
}

TEST(ServiceWatchdogTest, UnarmedWatchdogSendsNothing) {
  NotifySocket socket(TempPath("unarmed.sock"));
  unsetenv("WATCHDOG_USEC");
  { ServiceWatchdog watchdog([]() { return true; }); }
  ASSERT_TRUE(NotifyServiceManager("marker").ok());
  EXPECT_EQ(socket.Receive(), "marker");
}

}  // namespace
}  // namespace corescape
