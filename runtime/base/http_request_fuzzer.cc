// Fuzzes the HTTP request parser (the first bytes anyone who reaches a
// status-page or metrics port sends), and checks what it accepts: a method
// of capital letters and a path that began with '/'.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/base/http_server.h"

bool corescape::fuzz::ParseFuzzInput(absl::string_view input) {
  const ParsedHttpRequest parsed = ParseHttpRequest(std::string(input));
  if (parsed.outcome == ParsedHttpRequest::Outcome::kRefused) {
    if (parsed.status < 400 || parsed.status > 599 || parsed.reason.empty()) std::abort();
    return false;
  }
  if (parsed.outcome != ParsedHttpRequest::Outcome::kComplete) return false;
  if (parsed.request.method.empty() || parsed.request.path.empty()) std::abort();
  for (char c : parsed.request.method) {
    if (!absl::ascii_isupper(static_cast<unsigned char>(c))) std::abort();
  }
  return true;
}

std::vector<std::string> corescape::fuzz::FuzzSeeds() {
  return {
      "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
      "GET /api/job/events?id=job-1&after=12&limit=100 HTTP/1.1\r\nHost: h\r\n"
      "Connection: close\r\n\r\n",
      "HEAD /metrics HTTP/1.0\r\n\r\n",
      "GET /api/job?id=a%20b+c HTTP/1.1\r\nAccept: */*\r\n\r\n",
      "POST /api/status HTTP/1.1\r\nContent-Length: 2\r\nContent-Type: application/json\r\n"
      "\r\n{}",
  };
}
