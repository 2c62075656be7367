// The daemons' transport-security flags, defined once: --tls_dir, --insecure,
// --grpc_reflection, --health_listen and --http_tls.
#ifndef CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_
#define CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/base/http_server.h"
#include "runtime/security/transport_security.h"

namespace corescape::security {

// Mutual TLS as `stem`'s certificate from --tls_dir, or plaintext with
// --insecure (logged as a warning). FAILED_PRECONDITION naming the flags when
// neither or both are given, or the directory lacks what `stem` needs.
absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(const std::string& stem);

// --grpc_reflection: off unless asked for (it lists every method to anyone
// who can connect).
bool GrpcReflectionFromFlags();

// --http_tls: the HTTP endpoints (every daemon's metrics, the scheduler's
// status page) over HTTPS with this process's certificate, accepting only
// clients with a certificate from the cluster CA; nullopt (plain HTTP)
// without the flag. FAILED_PRECONDITION naming the flags when --http_tls is
// given without mutual TLS (--insecure).
absl::StatusOr<std::optional<HttpTls>> HttpTlsFromFlags(const TransportSecurity& security);

// --health_listen: HOST:PORT of a plaintext port for probes that cannot
// present a certificate (kubelet's `grpc:` probe), or "" for none.
// INVALID_ARGUMENT naming the flag when it is not HOST:PORT.
absl::StatusOr<std::string> HealthListenFromFlags();

}  // namespace corescape::security

#endif  // CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_
