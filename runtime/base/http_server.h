// A small HTTP/1.1 server (cpp-httplib) for a daemon's read-only endpoints:
// metrics and the scheduler's status page. It binds HOST:PORT (port 0 picks
// a free one) without SO_REUSEPORT, so two daemons never share a port,
// bounds what a request may carry, and serves on its own threads until
// destroyed. Every method and path reaches the handler, which decides.
#ifndef CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_
#define CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

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

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Request bodies are refused beyond this; reads and writes time out.
  static constexpr size_t kMaxBodyBytes = 4096;

  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           Handler handler);
  ~HttpServer();  // stops serving; in-flight requests finish first

  const std::string& bound_address() const { return bound_address_; }

 private:
  HttpServer();

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string bound_address_;
};

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_HTTP_SERVER_H_
