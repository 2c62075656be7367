#ifndef CORESCAPE_RUNTIME_BASE_HOST_PORT_H_
#define CORESCAPE_RUNTIME_BASE_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape {

struct HostPort {
  std::string host;  // hostname, IPv4 literal, or IPv6 literal without []
  uint16_t port = 0;
  std::string ToString() const;  // brackets IPv6 literals
};

// Parses "host:port" or "[v6]:port". Rejects empty hosts, characters that
// cannot appear in a hostname, and ports outside [min_port, 65535].
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       int min_port = 1);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_HOST_PORT_H_
