// The daemons' transport-security flags, defined once: --tls_dir, --insecure
// and --grpc_reflection.
#ifndef CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_
#define CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/security/transport_security.h"

namespace corescape::security {

// Mutual TLS as `stem`'s certificate from --tls_dir, or plaintext with
// --insecure (logged as a warning). FAILED_PRECONDITION naming the flags when
// neither or both are given, or the directory lacks what `stem` needs.
absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(const std::string& stem);

// --grpc_reflection: off unless asked for (it lists every method to anyone
// who can connect).
bool GrpcReflectionFromFlags();

}  // namespace corescape::security

#endif  // CORESCAPE_RUNTIME_SECURITY_SECURITY_FLAGS_H_
