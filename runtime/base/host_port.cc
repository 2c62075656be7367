#include "runtime/base/host_port.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace corescape {
namespace {

bool IsHostChar(char c, bool ipv6) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  if (c == '.' || c == '-' || c == '_') return true;
  return ipv6 && (c == ':' || c == '%');
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, int min_port) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not HOST:PORT: ", why));
  };
  if (text.empty()) return invalid("empty");
  if (text.size() > 255) return invalid("longer than 255 characters");
  HostPort result;
  absl::string_view port_text;
  bool ipv6 = false;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return invalid("unclosed '['");
    result.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      return invalid("missing ':' after ']'");
    }
    port_text = text.substr(close + 2);
    ipv6 = true;
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return invalid("missing ':PORT'");
    result.host = std::string(text.substr(0, colon));
    if (result.host.find(':') != std::string::npos) {
      return invalid("IPv6 hosts must be written [addr]:port");
    }
    port_text = text.substr(colon + 1);
  }
  if (result.host.empty()) return invalid("empty host");
  for (char c : result.host) {
    if (!IsHostChar(c, ipv6)) {
      return invalid(absl::StrCat("bad character in host: '", std::string(1, c), "'"));
    }
  }
  int port = -1;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) ||
      port < min_port || port > 65535) {
    return invalid(absl::StrCat("port must be an integer in [", min_port, ", 65535]"));
  }
  result.port = static_cast<uint16_t>(port);
  return result;
}

}  // namespace corescape
