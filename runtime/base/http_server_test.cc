// The request parser, and the server's deadline and connection cap over
// real sockets on loopback.
#include "runtime/base/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/base/host_port.h"

namespace corescape {
namespace {

using Outcome = ParsedHttpRequest::Outcome;

TEST(ParseHttpRequestTest, DecodesThePathAndTheQuery) {
  ParsedHttpRequest parsed =
      ParseHttpRequest("GET /api/a%20b?id=job-1&q=x+y%21&flag HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(parsed.outcome, Outcome::kComplete);
  EXPECT_EQ(parsed.request.method, "GET");
  EXPECT_EQ(parsed.request.path, "/api/a b");
  EXPECT_EQ(parsed.request.params.find("id")->second, "job-1");
  EXPECT_EQ(parsed.request.params.find("q")->second, "x y!");
  EXPECT_EQ(parsed.request.params.count("flag"), 1u);
}

TEST(ParseHttpRequestTest, WaitsForTheWholeHeadAndBody) {
  EXPECT_EQ(ParseHttpRequest("").outcome, Outcome::kIncomplete);
  EXPECT_EQ(ParseHttpRequest("GET / HTTP/1.1\r\nHost: h\r\n").outcome, Outcome::kIncomplete);
  const std::string post = "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n";
  EXPECT_EQ(ParseHttpRequest(post + "ab").outcome, Outcome::kIncomplete);
  EXPECT_EQ(ParseHttpRequest(post + "abcd").outcome, Outcome::kComplete);
}

TEST(ParseHttpRequestTest, RefusesWhatItCannotServe) {
  struct Case {
    std::string bytes;
    int status;
  };
  for (const Case& c : std::vector<Case>{
           {"GET /\r\n\r\n", 400},
           {"GET / HTTP/2\r\n\r\n", 400},
           {"get / HTTP/1.1\r\n\r\n", 400},
           {"GET http://x/ HTTP/1.1\r\n\r\n", 400},
           {"GET /%zz HTTP/1.1\r\n\r\n", 400},
           {"GET /?a=%4 HTTP/1.1\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400},
           {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 413},
           {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
           {"GET / HTTP/1.1\r\nX: " + std::string(9000, 'a'), 431},
           {"GET / HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n", 431},
       }) {
    ParsedHttpRequest parsed = ParseHttpRequest(c.bytes);
    EXPECT_EQ(parsed.outcome, Outcome::kRefused) << c.bytes.substr(0, 60);
    EXPECT_EQ(parsed.status, c.status) << c.bytes.substr(0, 60);
  }
}

int Connect(const std::string& address) {
  auto parsed = ParseHostPort(address);
  if (!parsed.ok()) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(parsed->port);
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes, or until `timeout`.
std::string ReadUntilClosed(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string received;
  while (true) {
    pollfd ready{fd, POLLIN, 0};
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0 || poll(&ready, 1, static_cast<int>(left)) <= 0) return received + "<open>";
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return received;
    received.append(buffer, n);
  }
}

HttpServer::Handler Echo() {
  return [](const HttpRequest& request) {
    HttpResponse response;
    response.body = absl::StrCat(request.method, " ", request.path);
    response.headers.push_back({"X-Bad", "a\r\nSet-Cookie: x"});  // never sent
    return response;
  };
}

TEST(HttpServerTest, AnswersOneRequestPerConnection) {
  auto server = HttpServer::Start("127.0.0.1:0", Echo());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_STREQ((*server)->scheme(), "http");
  const int fd = Connect((*server)->bound_address());
  const std::string request = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  const std::string answer = ReadUntilClosed(fd, absl::Seconds(5));
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(answer.find("X-Bad"), std::string::npos);
  EXPECT_EQ(answer.substr(answer.size() - 6), "GET /x");
}

TEST(HttpServerTest, DropsAClientTooSlowToSendItsRequest) {
  HttpServerLimits limits;
  limits.request_deadline = absl::Milliseconds(300);
  auto server = HttpServer::Start("127.0.0.1:0", Echo(), std::nullopt, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Connect((*server)->bound_address());
  send(fd, "GET", 3, 0);
  EXPECT_EQ(ReadUntilClosed(fd, absl::Seconds(5)), "");
  close(fd);
}

TEST(HttpServerTest, PastTheCapTheOldestUnfinishedRequestMakesWay) {
  HttpServerLimits limits;
  limits.max_connections = 4;
  auto server = HttpServer::Start("127.0.0.1:0", Echo(), std::nullopt, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(Connect((*server)->bound_address()));
    send(slow.back(), "G", 1, 0);
  }
  const int fd = Connect((*server)->bound_address());
  const std::string request = "GET /prompt HTTP/1.1\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  EXPECT_NE(ReadUntilClosed(fd, absl::Seconds(5)).find("GET /prompt"), std::string::npos);
  close(fd);
  // The first ones were dropped to make room.
  EXPECT_EQ(ReadUntilClosed(slow.front(), absl::Seconds(5)), "");
  for (int s : slow) close(s);
}

}  // namespace
}  // namespace corescape
