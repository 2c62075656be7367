#include "runtime/security/security_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/host_port.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, tls_dir, "",
          "directory made by `corescape certs init`: serve and call with mutual TLS using "
          "ca.crt and this daemon's certificate (docs/security.md)");
ABSL_FLAG(bool, insecure, false,
          "serve and call in plaintext, with no authentication (development only)");
ABSL_FLAG(bool, grpc_reflection, false, "serve gRPC server reflection");
ABSL_FLAG(std::string, health_listen, "",
          "HOST:PORT: also serve gRPC in plaintext here, for health probes that cannot present "
          "a certificate (kubelet's grpc probe); every corescape RPC there answers "
          "UNAUTHENTICATED. Empty: no such port");

ABSL_FLAG(bool, http_tls, false,
          "serve the HTTP endpoints (--metrics_listen, the scheduler's --http_listen) over "
          "HTTPS with this daemon's certificate from --tls_dir, and answer only clients "
          "presenting a certificate from the cluster CA (as Prometheus can scrape); without "
          "it they are plain HTTP, for loopback");

namespace corescape::security {

absl::StatusOr<TransportSecurity> TransportSecurityFromFlags(const std::string& stem) {
  const std::string tls_dir = absl::GetFlag(FLAGS_tls_dir);
  const bool insecure = absl::GetFlag(FLAGS_insecure);
  if (!tls_dir.empty() && insecure) {
    return absl::FailedPreconditionError("--tls_dir and --insecure: give one, not both");
  }
  if (insecure) {
    LOG(WARNING) << "--insecure: gRPC in plaintext; anyone who reaches this port can act as "
                    "any node, operator or submitter";
    return TransportSecurity::Insecure();
  }
  if (tls_dir.empty()) {
    return absl::FailedPreconditionError(
        "--tls_dir: required (a directory made by `corescape certs init DIR`); pass --insecure "
        "to run without TLS");
  }
  auto security = TransportSecurity::FromTlsDir(tls_dir, stem);
  if (!security.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("--tls_dir: ", security.status().message()));
  }
  return security;
}

bool GrpcReflectionFromFlags() { return absl::GetFlag(FLAGS_grpc_reflection); }

absl::StatusOr<std::optional<HttpTls>> HttpTlsFromFlags(const TransportSecurity& security) {
  if (!absl::GetFlag(FLAGS_http_tls)) return std::nullopt;
  const TlsMaterial* material = security.material();
  if (material == nullptr) {
    return absl::FailedPreconditionError(
        "--http_tls: needs --tls_dir (the certificates), not --insecure");
  }
  return HttpTls{material->ca_pem, material->certificate_pem, material->key_pem};
}

absl::StatusOr<std::string> HealthListenFromFlags() {
  const std::string address = absl::GetFlag(FLAGS_health_listen);
  if (address.empty()) return address;
  if (auto parsed = ParseHostPort(address, 0); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--health_listen: ", parsed.status().message()));
  }
  return address;
}

}  // namespace corescape::security
