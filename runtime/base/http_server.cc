#include "runtime/base/http_server.h"

#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "runtime/base/host_port.h"

namespace corescape {

HttpServer::HttpServer() : server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              Handler handler) {
  auto parsed = ParseHostPort(listen, /*min_port=*/0);
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<HttpServer> http(new HttpServer());
  httplib::Server& server = *http->server_;
  // httplib's default also sets SO_REUSEPORT.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_max_count(100);
  auto serve = [handler = std::move(handler)](const httplib::Request& request,
                                              httplib::Response& response) {
    HttpResponse answer = handler(HttpRequest{request.method, request.path, request.params});
    response.status = answer.status;
    for (const auto& [name, value] : answer.headers) response.set_header(name, value);
    response.set_header("Cache-Control", "no-store");
    response.set_header("X-Content-Type-Options", "nosniff");
    response.set_content(answer.body, answer.content_type.c_str());
  };
  server.Get(".*", serve);  // and HEAD
  server.Post(".*", serve);
  server.Put(".*", serve);
  server.Patch(".*", serve);
  server.Delete(".*", serve);
  server.Options(".*", serve);
  int port = 0;
  if (parsed->port == 0) {
    port = server.bind_to_any_port(parsed->host);
  } else if (server.bind_to_port(parsed->host, parsed->port)) {
    port = parsed->port;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, " (address in use or not local?)"));
  }
  HostPort bound = *parsed;
  bound.port = static_cast<uint16_t>(port);
  http->bound_address_ = bound.ToString();
  http->thread_ = std::thread([&server]() { server.listen_after_bind(); });
  // stop() before the accept loop runs would be lost (and the join hang).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server.is_running()) {
    if (absl::Now() > deadline) {
      return absl::InternalError(absl::StrCat("the HTTP server on ", listen, " did not start"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return http;
}

HttpServer::~HttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace corescape
