#include "runtime/base/http_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "openssl/err.h"
#include "openssl/pem.h"
#include "openssl/ssl.h"
#include "openssl/x509.h"
#include "runtime/base/host_port.h"
#include "runtime/base/openssl_errors.h"

namespace corescape {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX-decodes `text` (and '+' to a space in a query); false if malformed.
bool PercentDecode(absl::string_view text, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return false;
      const int high = HexValue(text[i + 1]);
      const int low = HexValue(text[i + 2]);
      if (high < 0 || low < 0) return false;
      out->push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

ParsedHttpRequest Refuse(int status, std::string reason) {
  ParsedHttpRequest parsed;
  parsed.outcome = ParsedHttpRequest::Outcome::kRefused;
  parsed.status = status;
  parsed.reason = std::move(reason);
  return parsed;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

// Header names and values that cannot split the response.
bool SafeHeaderText(absl::string_view text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

std::string SerializeResponse(const HttpResponse& response, bool head_only) {
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                 ReasonPhrase(response.status), "\r\n");
  if (SafeHeaderText(response.content_type)) {
    absl::StrAppend(&out, "Content-Type: ", response.content_type, "\r\n");
  }
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n",
                  "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
                  "Connection: close\r\n");
  for (const auto& [name, value] : response.headers) {
    if (!name.empty() && SafeHeaderText(name) && SafeHeaderText(value)) {
      absl::StrAppend(&out, name, ": ", value, "\r\n");
    }
  }
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

HttpResponse PlainTextResponse(int status, absl::string_view text) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = absl::StrCat(text, "\n");
  return response;
}

}  // namespace

ParsedHttpRequest ParseHttpRequest(const std::string& bytes) {
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (bytes.size() > HttpServer::kMaxHeadBytes) {
      return Refuse(431, "request head too large");
    }
    return ParsedHttpRequest();
  }
  if (head_end > HttpServer::kMaxHeadBytes) return Refuse(431, "request head too large");
  const absl::string_view head(bytes.data(), head_end);
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  std::vector<absl::string_view> request_line = absl::StrSplit(lines[0], ' ');
  if (request_line.size() != 3 || request_line[0].empty() ||
      !absl::StartsWith(request_line[2], "HTTP/1.")) {
    return Refuse(400, "malformed request line");
  }
  for (char c : request_line[0]) {
    if (!absl::ascii_isupper(static_cast<unsigned char>(c))) {
      return Refuse(400, "malformed method");
    }
  }
  const absl::string_view target = request_line[1];
  if (target.empty() || target[0] != '/') return Refuse(400, "malformed request target");

  std::optional<size_t> content_length;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return Refuse(400, "malformed header line");
    }
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "transfer-encoding") return Refuse(501, "request bodies must have a length");
    if (name == "content-length") {
      size_t length = 0;
      if (content_length.has_value() || !absl::SimpleAtoi(value, &length)) {
        return Refuse(400, "malformed Content-Length");
      }
      content_length = length;
    }
  }
  if (content_length.value_or(0) > HttpServer::kMaxBodyBytes) {
    return Refuse(413, absl::StrCat("request bodies are limited to ",
                                    HttpServer::kMaxBodyBytes, " bytes"));
  }
  if (bytes.size() < head_end + 4 + content_length.value_or(0)) return ParsedHttpRequest();

  ParsedHttpRequest parsed;
  parsed.outcome = ParsedHttpRequest::Outcome::kComplete;
  parsed.request.method = std::string(request_line[0]);
  const size_t question = target.find('?');
  if (!PercentDecode(target.substr(0, question), /*plus_is_space=*/false,
                     &parsed.request.path)) {
    return Refuse(400, "malformed path");
  }
  if (question != absl::string_view::npos) {
    for (absl::string_view pair :
         absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
      const size_t equals = pair.find('=');
      std::string key;
      std::string value;
      if (!PercentDecode(pair.substr(0, equals), true, &key) ||
          (equals != absl::string_view::npos &&
           !PercentDecode(pair.substr(equals + 1), true, &value))) {
        return Refuse(400, "malformed query");
      }
      parsed.request.params.emplace(std::move(key), std::move(value));
    }
  }
  return parsed;
}

class HttpServer::Impl {
 public:
  Impl(Handler handler, HttpServerLimits limits)
      : handler_(std::move(handler)), limits_(limits) {}
  ~Impl();

  absl::Status Listen(const std::string& listen);
  absl::Status SetUpTls(const HttpTls& tls);
  void StartThreads();

  std::string bound_address;
  bool tls() const { return ssl_context_ != nullptr; }

 private:
  enum class Phase {
    kHandshake,  // TLS: before the request
    kReading,    // the request head and body
    kHandling,   // a handler thread has it
    kWriting,    // the response
    kDraining,   // response sent: reading what the client still sends until it closes
  };
  struct Connection {
    int fd = -1;
    SSL* ssl = nullptr;
    Phase phase = Phase::kReading;
    absl::Time deadline;
    std::string received;
    std::string response;
    size_t sent = 0;
    short events = POLLIN;  // what the connection waits for
  };
  struct Answer {
    uint64_t connection;
    std::string bytes;
  };

  void Loop();
  void HandlerThread();
  void Accept();
  void Close(uint64_t id);
  // Progress on `id` after poll said it is ready (it may close it).
  void Advance(uint64_t id, Connection& connection);
  void Read(uint64_t id, Connection& connection);
  void Write(uint64_t id, Connection& connection);
  // After a read or write that moved no bytes (`n` <= 0): whether it only
  // has to wait (`connection.events` then says for what; `plain_wait` on a
  // plain socket) rather than the connection being over.
  static bool OnlyBlocked(Connection& connection, ssize_t n, short plain_wait);
  void StartWriting(Connection& connection, std::string bytes);
  void Wake();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !requests_.empty();
  }

  const Handler handler_;
  const HttpServerLimits limits_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  SSL_CTX* ssl_context_ = nullptr;
  std::thread loop_;
  std::vector<std::thread> handler_threads_;
  absl::Time accept_paused_until_ = absl::InfinitePast();

  // The loop thread's alone; ids grow, so the first is the oldest.
  std::map<uint64_t, Connection> connections_;
  uint64_t next_id_ = 1;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::pair<uint64_t, HttpRequest>> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
};

absl::Status HttpServer::Impl::Listen(const std::string& listen) {
  auto parsed = ParseHostPort(listen, /*min_port=*/0);
  if (!parsed.ok()) return parsed.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(parsed->port);
  if (getaddrinfo(parsed->host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", parsed->host));
  }
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    const int fd = socket(address->ai_family,
                          address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int yes = 1;
    // SO_REUSEADDR for restarts over TIME_WAIT; never SO_REUSEPORT.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, address->ai_addr, address->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
      break;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, " (address in use or not local?)"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  HostPort address = *parsed;
  address.port = ntohs(bound.ss_family == AF_INET6
                           ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  bound_address = address.ToString();
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError("eventfd failed");
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::SetUpTls(const HttpTls& tls) {
  ERR_clear_error();
  ssl_context_ = SSL_CTX_new(TLS_server_method());
  if (ssl_context_ == nullptr) return absl::InternalError(OpenSslErrors());
  SSL_CTX_set_min_proto_version(ssl_context_, TLS1_2_VERSION);
  SSL_CTX_set_mode(ssl_context_,
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  auto bio_of = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(
        BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  };
  {
    auto bio = bio_of(tls.certificate_pem);
    X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    const bool used = certificate != nullptr &&
                      SSL_CTX_use_certificate(ssl_context_, certificate) == 1;
    X509_free(certificate);
    if (!used) {
      return absl::InvalidArgumentError(
          absl::StrCat("the HTTPS certificate: ", OpenSslErrors()));
    }
  }
  {
    auto bio = bio_of(tls.key_pem);
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    const bool used = key != nullptr && SSL_CTX_use_PrivateKey(ssl_context_, key) == 1 &&
                      SSL_CTX_check_private_key(ssl_context_) == 1;
    EVP_PKEY_free(key);
    if (!used) {
      return absl::InvalidArgumentError(absl::StrCat("the HTTPS key: ", OpenSslErrors()));
    }
  }
  {
    auto bio = bio_of(tls.ca_pem);
    X509_STORE* store = SSL_CTX_get_cert_store(ssl_context_);
    int authorities = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, ca);
      SSL_CTX_add_client_CA(ssl_context_, ca);
      X509_free(ca);
      ++authorities;
    }
    ERR_clear_error();  // the end of the PEM text
    if (authorities == 0) {
      return absl::InvalidArgumentError("the HTTPS client CA: no certificate in it");
    }
  }
  SSL_CTX_set_verify(ssl_context_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return absl::OkStatus();
}

void HttpServer::Impl::StartThreads() {
  loop_ = std::thread([this] { Loop(); });
  for (int i = 0; i < std::max(1, limits_.handler_threads); ++i) {
    handler_threads_.emplace_back([this] { HandlerThread(); });
  }
}

HttpServer::Impl::~Impl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) Wake();
  if (loop_.joinable()) loop_.join();
  for (std::thread& thread : handler_threads_) thread.join();
  while (!connections_.empty()) Close(connections_.begin()->first);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  SSL_CTX_free(ssl_context_);
}

void HttpServer::Impl::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void HttpServer::Impl::HandlerThread() {
  while (true) {
    std::pair<uint64_t, HttpRequest> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Impl::HasWorkOrStopping));
      if (stopping_) return;
      job = std::move(requests_.front());
      requests_.pop_front();
    }
    const bool head_only = job.second.method == "HEAD";
    std::string bytes = SerializeResponse(handler_(job.second), head_only);
    {
      absl::MutexLock lock(&mu_);
      answers_.push_back(Answer{job.first, std::move(bytes)});
    }
    Wake();
  }
}

void HttpServer::Impl::Close(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second.ssl != nullptr) SSL_free(it->second.ssl);
  close(it->second.fd);
  connections_.erase(it);
}

void HttpServer::Impl::Accept() {
  for (int i = 0; i < 64; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: stop polling the listener for a moment rather
      // than spin on it.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until_ = absl::Now() + absl::Milliseconds(100);
      }
      return;
    }
    if (static_cast<int>(connections_.size()) >= limits_.max_connections) {
      auto oldest = std::find_if(connections_.begin(), connections_.end(), [](const auto& c) {
        return c.second.phase == Phase::kHandshake || c.second.phase == Phase::kReading ||
               c.second.phase == Phase::kDraining;
      });
      if (oldest == connections_.end()) {
        close(fd);
        continue;
      }
      Close(oldest->first);
    }
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    Connection connection;
    connection.fd = fd;
    connection.deadline = absl::Now() + limits_.request_deadline;
    if (ssl_context_ != nullptr) {
      connection.ssl = SSL_new(ssl_context_);
      if (connection.ssl == nullptr || SSL_set_fd(connection.ssl, fd) != 1) {
        ERR_clear_error();
        if (connection.ssl != nullptr) SSL_free(connection.ssl);
        close(fd);
        continue;
      }
      connection.phase = Phase::kHandshake;
    }
    connections_.emplace(next_id_++, std::move(connection));
  }
}

void HttpServer::Impl::StartWriting(Connection& connection, std::string bytes) {
  connection.phase = Phase::kWriting;
  connection.response = std::move(bytes);
  connection.sent = 0;
  connection.received.clear();
  connection.events = POLLOUT;
  connection.deadline = absl::Now() + limits_.response_deadline;
}

void HttpServer::Impl::Read(uint64_t id, Connection& connection) {
  char buffer[4096];
  while (true) {
    ssize_t n;
    if (connection.ssl != nullptr) {
      ERR_clear_error();
      n = SSL_read(connection.ssl, buffer, sizeof(buffer));
    } else {
      n = recv(connection.fd, buffer, sizeof(buffer), 0);
    }
    if (n <= 0) {
      if (OnlyBlocked(connection, n, POLLIN)) return;
      return Close(id);
    }
    connection.received.append(buffer, static_cast<size_t>(n));
    ParsedHttpRequest parsed = ParseHttpRequest(connection.received);
    switch (parsed.outcome) {
      case ParsedHttpRequest::Outcome::kIncomplete:
        continue;
      case ParsedHttpRequest::Outcome::kRefused:
        return StartWriting(
            connection,
            SerializeResponse(PlainTextResponse(parsed.status, parsed.reason), false));
      case ParsedHttpRequest::Outcome::kComplete: {
        connection.phase = Phase::kHandling;
        connection.received.clear();
        connection.events = 0;
        absl::MutexLock lock(&mu_);
        requests_.emplace_back(id, std::move(parsed.request));
        return;
      }
    }
  }
}

bool HttpServer::Impl::OnlyBlocked(Connection& connection, ssize_t n, short plain_wait) {
  if (connection.ssl != nullptr) {
    const int error = SSL_get_error(connection.ssl, static_cast<int>(n));
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      connection.events = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
      return true;
    }
    ERR_clear_error();
    return false;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    connection.events = plain_wait;
    return true;
  }
  return false;
}

void HttpServer::Impl::Write(uint64_t id, Connection& connection) {
  while (connection.sent < connection.response.size()) {
    const char* data = connection.response.data() + connection.sent;
    const size_t size = connection.response.size() - connection.sent;
    ssize_t n;
    if (connection.ssl != nullptr) {
      ERR_clear_error();
      n = SSL_write(connection.ssl, data, static_cast<int>(size));
    } else {
      n = send(connection.fd, data, size, MSG_NOSIGNAL);
    }
    if (n <= 0) {
      if (OnlyBlocked(connection, n, POLLOUT)) return;
      return Close(id);
    }
    connection.sent += static_cast<size_t>(n);
  }
  // All sent. Closing with unread bytes from the client would reset the
  // connection and could discard the response before the client reads it,
  // so half-close and read until the client closes (or briefly).
  if (connection.ssl != nullptr) {
    ERR_clear_error();
    SSL_shutdown(connection.ssl);
    ERR_clear_error();
  }
  shutdown(connection.fd, SHUT_WR);
  connection.phase = Phase::kDraining;
  connection.events = POLLIN;
  connection.deadline = absl::Now() + absl::Seconds(1);
}

void HttpServer::Impl::Advance(uint64_t id, Connection& connection) {
  switch (connection.phase) {
    case Phase::kHandshake: {
      ERR_clear_error();
      const int result = SSL_accept(connection.ssl);
      if (result == 1) {
        connection.phase = Phase::kReading;
        return Read(id, connection);
      }
      const int error = SSL_get_error(connection.ssl, result);
      ERR_clear_error();
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
        connection.events = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return;
      }
      return Close(id);  // no certificate, or not the cluster CA's
    }
    case Phase::kReading:
      return Read(id, connection);
    case Phase::kHandling:
      return;
    case Phase::kWriting:
      return Write(id, connection);
    case Phase::kDraining: {
      char buffer[4096];
      while (true) {
        const ssize_t n = recv(connection.fd, buffer, sizeof(buffer), 0);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        return Close(id);
      }
    }
  }
}

void HttpServer::Impl::Loop() {
  // A write to a connection the client reset fails with EPIPE instead of
  // raising SIGPIPE (OpenSSL's writes cannot pass MSG_NOSIGNAL).
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<pollfd> polled;
  std::vector<uint64_t> ids;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    const absl::Time now = absl::Now();
    // Deadlines: a connection still sending its request, or not reading
    // its response, is dropped.
    for (auto it = connections_.begin(); it != connections_.end();) {
      const uint64_t id = it->first;
      const bool expired = it->second.phase != Phase::kHandling && it->second.deadline <= now;
      ++it;
      if (expired) Close(id);
    }
    absl::Time next_deadline = absl::InfiniteFuture();
    polled.clear();
    ids.clear();
    polled.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until_;
    polled.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
    if (!accepting) next_deadline = accept_paused_until_;
    for (const auto& [id, connection] : connections_) {
      if (connection.phase == Phase::kHandling) continue;
      polled.push_back({connection.fd, connection.events, 0});
      ids.push_back(id);
      next_deadline = std::min(next_deadline, connection.deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(next_deadline - now) + 1, 0, 60000));
    }
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if (polled[0].revents != 0) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
      std::vector<Answer> answers;
      {
        absl::MutexLock lock(&mu_);
        answers.swap(answers_);
      }
      for (Answer& answer : answers) {
        auto it = connections_.find(answer.connection);
        if (it == connections_.end()) continue;
        StartWriting(it->second, std::move(answer.bytes));
        Write(answer.connection, it->second);
      }
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (polled[i + 2].revents == 0) continue;
      auto it = connections_.find(ids[i]);
      if (it == connections_.end()) continue;
      Advance(ids[i], it->second);
    }
    if (polled[1].revents != 0) Accept();
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() = default;

const std::string& HttpServer::bound_address() const { return impl_->bound_address; }

const char* HttpServer::scheme() const { return impl_->tls() ? "https" : "http"; }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              Handler handler,
                                                              std::optional<HttpTls> tls,
                                                              HttpServerLimits limits) {
  auto impl = std::make_unique<Impl>(std::move(handler), limits);
  if (absl::Status s = impl->Listen(listen); !s.ok()) return s;
  if (tls.has_value()) {
    if (absl::Status s = impl->SetUpTls(*tls); !s.ok()) return s;
  }
  impl->StartThreads();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace corescape
