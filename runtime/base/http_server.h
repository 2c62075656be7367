// A small HTTP/1.1 server for a daemon's read-only endpoints: metrics and
// the scheduler's status page. One request per connection, answered with
// `Connection: close`.
//
// A slow client never holds a thread: one event-loop thread accepts,
// reads (and, with TLS, handshakes) every connection without blocking, and
// only a complete request reaches the handler threads. Each connection has
// a deadline for its whole request and another for its response, and the
// number of open connections is capped; past the cap the oldest connection
// still sending its request is dropped, so a crowd of trickling clients
// cannot keep a prompt one out. (Not cpp-httplib: Debian's 0.11 gives
// every connection a thread and times out each read separately, so ten
// clients sending a byte a second stalled it.)
//
// It binds HOST:PORT (port 0 picks a free one) without SO_REUSEPORT, so two
// daemons never share a port, and serves until destroyed. Every method and
// path reaches the handler, which decides. With HttpTls it serves HTTPS and
// accepts only clients presenting a certificate signed by the given CA.
#ifndef CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_
#define CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace corescape {

struct HttpRequest {
  std::string method;  // GET, HEAD, POST, ...
  std::string path;    // decoded, without the query
  std::multimap<std::string, std::string> params;  // the query, decoded
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// HTTPS with client certificates: the server's certificate and key, and the
// CA every client's certificate must verify against (all PEM).
struct HttpTls {
  std::string ca_pem;
  std::string certificate_pem;
  std::string key_pem;
};

struct HttpServerLimits {
  // From accepting a connection to having its whole request (TLS handshake
  // included); a client slower than that is disconnected.
  absl::Duration request_deadline = absl::Seconds(10);
  // From the handler's answer to the client having read all of it.
  absl::Duration response_deadline = absl::Seconds(10);
  // Open connections; a new one past this drops the oldest still sending
  // its request.
  int max_connections = 1024;
  int handler_threads = 4;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Request heads and bodies are refused beyond these.
  static constexpr size_t kMaxHeadBytes = 8192;
  static constexpr size_t kMaxBodyBytes = 4096;

  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& listen, Handler handler, std::optional<HttpTls> tls = std::nullopt,
      HttpServerLimits limits = {});
  ~HttpServer();  // stops serving; handlers already running finish first

  const std::string& bound_address() const;
  // "http" or "https".
  const char* scheme() const;

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What the bytes a client has sent so far make: not yet a request, a
// request, or a refusal. Exposed for its unit test.
struct ParsedHttpRequest {
  enum class Outcome { kIncomplete, kComplete, kRefused };
  Outcome outcome = Outcome::kIncomplete;
  HttpRequest request;  // kComplete
  int status = 0;       // kRefused: the HTTP status to answer
  std::string reason;   // kRefused: why, for the response body
};
ParsedHttpRequest ParseHttpRequest(const std::string& bytes);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_
