// The keepalive policy on a real gRPC server, seen from a raw HTTP/2 peer
// that connects and then goes silent (as a vanished host does): the server
// pings it, and closes the connection when the ping goes unanswered.
#include "runtime/base/server_keepalive.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"

namespace corescape {
namespace {

constexpr uint8_t kSettings = 0x4;
constexpr uint8_t kPing = 0x6;
constexpr uint8_t kGoaway = 0x7;
constexpr uint8_t kAck = 0x1;

bool ReadFully(int fd, uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = read(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

TEST(ServerKeepaliveTest, IdleSilentPeerIsPingedThenDropped) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ServerKeepalive keepalive;
  keepalive.time = absl::Milliseconds(300);
  keepalive.timeout = absl::Milliseconds(300);
  ApplyServerKeepalive(builder, keepalive);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  timeval receive_timeout{10, 0};  // a hung server fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof(receive_timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // The client preface and an empty SETTINGS frame: a valid HTTP/2 client.
  const std::string preface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                              std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  ASSERT_EQ(write(fd, preface.data(), preface.size()), static_cast<ssize_t>(preface.size()));

  const absl::Time start = absl::Now();
  bool pinged = false;
  uint8_t header[9];
  while (ReadFully(fd, header, sizeof(header))) {
    const size_t length = (size_t{header[0]} << 16) | (size_t{header[1]} << 8) | header[2];
    const uint8_t type = header[3];
    const uint8_t flags = header[4];
    std::string payload(length, '\0');
    ASSERT_TRUE(ReadFully(fd, reinterpret_cast<uint8_t*>(payload.data()), length));
    if (type == kSettings && (flags & kAck) == 0) {
      // Acknowledged, so only the unanswered pings can end the connection.
      const std::string ack("\x00\x00\x00\x04\x01\x00\x00\x00\x00", 9);
      ASSERT_EQ(write(fd, ack.data(), ack.size()), 9);
    }
    if (type == kPing && (flags & kAck) == 0) pinged = true;  // never answered
    if (type == kGoaway) break;
  }
  // Out of the loop: the server closed the connection or said GOAWAY.
  const absl::Duration elapsed = absl::Now() - start;
  close(fd);
  EXPECT_TRUE(pinged) << "the server never pinged the idle connection";
  EXPECT_LT(elapsed, absl::Seconds(9)) << "dropped only by the test's own timeout";
  server->Shutdown();
}

TEST(ServerKeepaliveTest, DefaultsPingIdleConnectionsWithinAMinute) {
  const ServerKeepalive defaults;
  EXPECT_LE(defaults.time, absl::Minutes(1));
  EXPECT_LE(defaults.timeout, defaults.time);
  EXPECT_LE(defaults.min_client_ping_interval, defaults.time);
}

}  // namespace
}  // namespace corescape
