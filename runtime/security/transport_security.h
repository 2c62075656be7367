// How a process secures its gRPC connections: the one place that turns a TLS
// directory (made by `corescape certs init`) into server credentials and
// channels. Mutual TLS: a server presents its certificate and asks every
// client for one, which must verify against the cluster CA; a client checks
// the server's certificate against the same CA and presents its own.
// Plaintext only when the caller chose it explicitly (`insecure`).
#ifndef CORESCAPE_RUNTIME_SECURITY_TRANSPORT_SECURITY_H_
#define CORESCAPE_RUNTIME_SECURITY_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/security/certificates.h"

namespace corescape::security {

// A certificate, its key and the CA that vouches for peers, read from a TLS
// directory.
struct TlsMaterial {
  std::string ca_pem;
  std::string certificate_pem;
  std::string key_pem;
  Identity identity;  // what certificate_pem says
};

// Reads DIR/ca.crt, DIR/<stem>.crt and DIR/<stem>.key, and checks that the
// certificate verifies against the CA. Errors name the file.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const std::string& tls_dir, const std::string& stem);

class TransportSecurity {
 public:
  // Plaintext: every connection unauthenticated and unencrypted.
  static TransportSecurity Insecure();
  // Mutual TLS as `stem`'s certificate in `tls_dir` (see CertificateStem).
  static absl::StatusOr<TransportSecurity> FromTlsDir(const std::string& tls_dir,
                                                      const std::string& stem);

  bool insecure() const { return material_ == nullptr; }
  // The loaded certificate; null when insecure.
  const TlsMaterial* material() const { return material_.get(); }
  // "mutual TLS as NAME (ROLE) from DIR" or "plaintext (--insecure)", for logs.
  std::string Describe() const;

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // A channel to HOST:PORT. The server's certificate must name the host
  // (a wildcard listen address such as 0.0.0.0 is checked as localhost).
  std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                               grpc::ChannelArguments args = {}) const;

 private:
  std::shared_ptr<const TlsMaterial> material_;
  std::string tls_dir_;
};

// Reconnect attempts `initial` apart, doubling up to `max`, each allowed
// `connect_timeout` to finish its TCP and TLS handshakes. (gRPC takes the
// attempt's timeout from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS; a small one
// makes a TLS handshake on a loaded machine fail over and over.)
void SetReconnectBackoff(grpc::ChannelArguments& args, absl::Duration initial,
                         absl::Duration max, absl::Duration connect_timeout = absl::Seconds(5));

// Serves gRPC server reflection from `builder`'s server only when `enabled`
// (off, it does not list every method to whoever connects). Linking gRPC's
// reflection library registers it for every server; this takes it out.
void SetServerReflection(grpc::ServerBuilder& builder, bool enabled);

// Also serves `builder`'s services in plaintext on `address` (when not
// empty), for health probes that cannot present a certificate. Safe because
// every corescape RPC demands a verified certificate of its caller
// (scheduler/authorization.h), which a plaintext caller never has: there,
// only grpc.health.v1 answers. `*port` receives the bound port.
void AddPlaintextHealthPort(grpc::ServerBuilder& builder, const std::string& address, int* port);

// The identity of the peer of a call, from its verified client certificate.
// UNAUTHENTICATED when it presented none (or the server is plaintext).
absl::StatusOr<Identity> PeerIdentity(const grpc::ServerContext& context);

}  // namespace corescape::security

#endif  // CORESCAPE_RUNTIME_SECURITY_TRANSPORT_SECURITY_H_
