// The scheduler's HTTP endpoints (the status page and /metrics) over real
// sockets on loopback: a crowd of clients trickling their requests a byte
// at a time does not keep a prompt client waiting, and with HTTPS only a
// client holding a certificate from the cluster CA is answered.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "openssl/err.h"
#include "openssl/pem.h"
#include "openssl/ssl.h"
#include "runtime/base/host_port.h"
#include "runtime/security/certificates.h"
#include "runtime/security/transport_security.h"
#include "scheduler/scheduler_server.h"

namespace corescape::scheduler {
namespace {

using ::testing::HasSubstr;

std::string TestDir(absl::string_view what) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/http-endpoints-", what, "-",
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// A connected TCP socket to HOST:PORT (loopback), or -1.
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

struct Answer {
  int status = -1;  // -1: no HTTP answer (refused, reset, or too late)
  std::string body;
};

Answer ParseAnswer(const std::string& bytes) {
  Answer answer;
  const size_t head_end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return answer;
  answer.status = std::atoi(bytes.substr(9, 3).c_str());
  answer.body = bytes.substr(head_end + 4);
  return answer;
}

std::string RequestFor(const std::string& path) {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
}

// GET `path` in plain HTTP, giving up after `timeout`.
Answer Get(const std::string& address, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = Connect(address);
  if (fd < 0) return {};
  const std::string request = RequestFor(path);
  std::string received;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    while (true) {
      pollfd ready{fd, POLLIN, 0};
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0 || poll(&ready, 1, static_cast<int>(left)) <= 0) {
        received.clear();  // too late
        break;
      }
      char buffer[4096];
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, n);
    }
  }
  close(fd);
  return ParseAnswer(received);
}

// GET `path` over TLS, checking the server against `ca_pem`, presenting
// `certificate_pem`/`key_pem` when given.
Answer GetOverTls(const std::string& address, const std::string& path, const std::string& ca_pem,
                  const std::string& certificate_pem = "", const std::string& key_pem = "") {
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  {
    BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(context), ca);
    X509_free(ca);
    BIO_free(bio);
  }
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  if (!certificate_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(certificate_pem.data(), static_cast<int>(certificate_pem.size()));
    X509* certificate = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    SSL_CTX_use_certificate(context, certificate);
    X509_free(certificate);
    BIO_free(bio);
    bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    SSL_CTX_use_PrivateKey(context, key);
    EVP_PKEY_free(key);
    BIO_free(bio);
  }
  Answer answer;
  const int fd = Connect(address);
  if (fd >= 0) {
    timeval timeout{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    SSL* ssl = SSL_new(context);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    if (SSL_connect(ssl) == 1) {
      const std::string request = RequestFor(path);
      std::string received;
      if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
        char buffer[4096];
        int n;
        while ((n = SSL_read(ssl, buffer, sizeof(buffer))) > 0) received.append(buffer, n);
      }
      answer = ParseAnswer(received);
    }
    SSL_free(ssl);
    close(fd);
  }
  ERR_clear_error();
  SSL_CTX_free(context);
  return answer;
}

// A scheduler with its status page and metrics endpoint on loopback.
struct Endpoints {
  std::unique_ptr<SchedulerServer> server;
  std::string page;
  std::string metrics;
};

Endpoints StartScheduler(const std::string& state_dir, std::optional<HttpTls> tls) {
  SchedulerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.state_dir = state_dir;
  config.http_listen = "127.0.0.1:0";
  config.http_tls = tls;
  config.version = "test";
  Endpoints endpoints;
  auto metrics = metrics::MetricsEndpoint::Start("127.0.0.1:0", "scheduler", tls);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  if (!metrics.ok()) return endpoints;
  endpoints.metrics = (*metrics)->bound_address();
  auto server = SchedulerServer::Start(config, RealClock::Get(), *std::move(metrics));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return endpoints;
  endpoints.server = *std::move(server);
  endpoints.page = endpoints.server->status_page_address();
  return endpoints;
}

TEST(HttpEndpointsTest, TricklingClientsDoNotStallThePageOrTheMetrics) {
  Endpoints endpoints = StartScheduler(TestDir("state"), std::nullopt);
  ASSERT_NE(endpoints.server, nullptr);
  ASSERT_EQ(Get(endpoints.page, "/api/status", absl::Seconds(5)).status, 200);

  // 200 connections to each endpoint, each sending its request a byte every
  // 1.5 s: more than any reader's per-read timeout allows to notice.
  constexpr int kSlowClients = 200;
  std::vector<int> slow;
  for (const std::string& address : {endpoints.page, endpoints.metrics}) {
    for (int i = 0; i < kSlowClients; ++i) {
      const int fd = Connect(address);
      ASSERT_GE(fd, 0) << "connection " << i << " to " << address;
      slow.push_back(fd);
    }
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string request = RequestFor("/api/status");
    for (size_t byte = 0; !stop.load() && byte < request.size() - 1; ++byte) {
      for (int fd : slow) send(fd, &request[byte], 1, MSG_NOSIGNAL);
      for (int i = 0; i < 15 && !stop.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
    }
  });

  // Over several trickle periods, with every slow connection accepted and
  // mid-request, prompt clients are answered within a second.
  absl::SleepFor(absl::Milliseconds(500));
  for (int round = 0; round < 4; ++round) {
    const absl::Time start = absl::Now();
    Answer page = Get(endpoints.page, "/api/status", absl::Seconds(1));
    EXPECT_EQ(page.status, 200) << "round " << round;
    EXPECT_THAT(page.body, HasSubstr("scheduler_id"));
    Answer html = Get(endpoints.page, "/", absl::Seconds(1));
    EXPECT_EQ(html.status, 200) << "round " << round;
    Answer metrics = Get(endpoints.metrics, "/metrics", absl::Seconds(1));
    EXPECT_EQ(metrics.status, 200) << "round " << round;
    EXPECT_THAT(metrics.body, HasSubstr("corescape_build_info"));
    absl::SleepFor(absl::Milliseconds(1500) - (absl::Now() - start));
  }
  stop.store(true);
  trickle.join();
  for (int fd : slow) close(fd);
}

class HttpsEndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    security::CertificateDirectoryOptions cluster;
    cluster.directory = TestDir("tls");
    ASSERT_TRUE(security::InitCertificateDirectory(cluster).ok());
    security::CertificateDirectoryOptions other;
    other.directory = TestDir("other-tls");
    ASSERT_TRUE(security::InitCertificateDirectory(other).ok());
    auto scheduler = security::LoadTlsMaterial(cluster.directory, "scheduler");
    auto operator_ = security::LoadTlsMaterial(cluster.directory, "operator");
    auto stranger = security::LoadTlsMaterial(other.directory, "operator");
    ASSERT_TRUE(scheduler.ok() && operator_.ok() && stranger.ok());
    ca_pem_ = scheduler->ca_pem;
    operator_material_ = *operator_;
    stranger_material_ = *stranger;
    endpoints_ = StartScheduler(
        TestDir("state"),
        HttpTls{scheduler->ca_pem, scheduler->certificate_pem, scheduler->key_pem});
    ASSERT_NE(endpoints_.server, nullptr);
  }

  std::string ca_pem_;
  security::TlsMaterial operator_material_;
  security::TlsMaterial stranger_material_;
  Endpoints endpoints_;
};

TEST_F(HttpsEndpointsTest, AClientWithAClusterCertificateIsAnswered) {
  EXPECT_EQ(endpoints_.server->status_page_url(),
            absl::StrCat("https://", endpoints_.page, "/"));
  Answer page = GetOverTls(endpoints_.page, "/api/status", ca_pem_,
                           operator_material_.certificate_pem, operator_material_.key_pem);
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.body, HasSubstr("scheduler_id"));
  Answer metrics = GetOverTls(endpoints_.metrics, "/metrics", ca_pem_,
                              operator_material_.certificate_pem, operator_material_.key_pem);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("corescape_build_info"));
}

TEST_F(HttpsEndpointsTest, ClientsWithoutAClusterCertificateAreRefused) {
  for (const std::string& address : {endpoints_.page, endpoints_.metrics}) {
    const std::string path = address == endpoints_.page ? "/api/status" : "/metrics";
    EXPECT_EQ(GetOverTls(address, path, ca_pem_).status, -1) << address << ": no certificate";
    EXPECT_EQ(GetOverTls(address, path, ca_pem_, stranger_material_.certificate_pem,
                         stranger_material_.key_pem)
                  .status,
              -1)
        << address << ": another CA's certificate";
    EXPECT_EQ(Get(address, path, absl::Seconds(5)).status, -1) << address << ": plain HTTP";
  }
  // And the endpoint still answers the cluster's clients afterwards.
  EXPECT_EQ(GetOverTls(endpoints_.page, "/api/status", ca_pem_,
                       operator_material_.certificate_pem, operator_material_.key_pem)
                .status,
            200);
}

}  // namespace
}  // namespace corescape::scheduler
