// The cluster's X.509 certificates: who a certificate says its holder is.
//
// A corescape certificate names its holder in the subject's common name
// (CN = the node name, or "operator", "submitter", "scheduler") and its role
// in exactly one subject-alternative-name URI, `corescape:role/ROLE`. Every
// leaf is signed by the cluster CA that `corescape certs init` makes, carries
// both serverAuth and clientAuth and SANs for localhost, 127.0.0.1 and any
// extra hosts, so one certificate serves a daemon's port and its calls out.
#ifndef CORESCAPE_RUNTIME_SECURITY_CERTIFICATES_H_
#define CORESCAPE_RUNTIME_SECURITY_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::security {

enum class Role {
  kNode,       // a worker or attention server: Register/Session/Deregister as itself
  kOperator,   // drain, rebalance, cancel any job, submit
  kSubmitter,  // submit jobs, cancel its own
  kScheduler,  // the scheduler's own certificate (serves; calls itself for reads)
};

// "node", "operator", "submitter", "scheduler".
absl::string_view RoleName(Role role);
// INVALID_ARGUMENT naming the text for anything else.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// "corescape:role/" + RoleName(role): the SAN URI that carries the role.
std::string RoleUri(Role role);

struct Identity {
  std::string name;  // the subject's CN
  Role role = Role::kNode;
};

// The identity a PEM certificate states (its signature is not checked here:
// the TLS handshake did that against the CA). INVALID_ARGUMENT when it has
// no CN, no role URI, or more than one.
absl::StatusOr<Identity> IdentityFromCertificatePem(absl::string_view pem);

// File names inside a TLS directory.
inline constexpr char kCaCertificateFile[] = "ca.crt";
inline constexpr char kCaKeyFile[] = "ca.key";
// "<stem>.crt" / "<stem>.key": "node-NAME" for nodes; the role's name for
// the one operator, submitter and scheduler named after their role;
// "ROLE-NAME" for other named operators and submitters.
std::string CertificateStem(const Identity& identity);

struct CertificateDirectoryOptions {
  std::string directory;
  std::vector<std::string> nodes;       // node certificates to make (names)
  std::vector<std::string> submitters;  // more submitters, each its own identity
  std::vector<std::string> operators;   // more operators
  std::vector<std::string> hosts;  // extra DNS names / IP addresses in every SAN
  int ca_days = 3650;
  int leaf_days = 365;
};

// What InitCertificateDirectory wrote (paths of new certificates; existing
// ones are kept as they are).
struct CertificateDirectoryResult {
  bool created_ca = false;
  std::vector<std::string> created;
  std::vector<std::string> kept;
};

// Makes (or completes) a TLS directory: the cluster CA (ca.crt, ca.key) if
// missing, then scheduler, operator and submitter certificates and one per
// node, each signed by the CA; an existing certificate is left alone, so the
// command can be rerun to add nodes. Keys are P-256, written 0600.
absl::StatusOr<CertificateDirectoryResult> InitCertificateDirectory(
    const CertificateDirectoryOptions& options);

// OK when `certificate_pem` is signed by `ca_pem`, within its validity, and
// usable for TLS clients and servers (OpenSSL's chain verification).
absl::Status VerifyCertificateChain(absl::string_view ca_pem,
                                    absl::string_view certificate_pem);

}  // namespace corescape::security

#endif  // CORESCAPE_RUNTIME_SECURITY_CERTIFICATES_H_
