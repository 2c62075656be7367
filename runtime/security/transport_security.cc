#include "runtime/security/transport_security.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/host_port.h"

namespace corescape::security {
namespace {

absl::StatusOr<std::string> ReadTlsFile(const std::string& tls_dir, const std::string& name) {
  const std::string path = absl::StrCat(tls_dir, "/", name);
  auto contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "TLS directory ", tls_dir, ": cannot read ", name, " (", contents.status().message(),
        "; make the certificates with `corescape certs init ", tls_dir, "`)"));
  }
  return contents;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const std::string& tls_dir, const std::string& stem) {
  TlsMaterial material;
  auto ca = ReadTlsFile(tls_dir, kCaCertificateFile);
  if (!ca.ok()) return ca.status();
  auto certificate = ReadTlsFile(tls_dir, stem + ".crt");
  if (!certificate.ok()) return certificate.status();
  auto key = ReadTlsFile(tls_dir, stem + ".key");
  if (!key.ok()) return key.status();
  if (absl::Status s = VerifyCertificateChain(*ca, *certificate); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(tls_dir, "/", stem, ".crt: ", s.message()));
  }
  auto identity = IdentityFromCertificatePem(*certificate);
  if (!identity.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(tls_dir, "/", stem, ".crt: ", identity.status().message()));
  }
  material.ca_pem = *std::move(ca);
  material.certificate_pem = *std::move(certificate);
  material.key_pem = *std::move(key);
  material.identity = *std::move(identity);
  return material;
}

TransportSecurity TransportSecurity::Insecure() { return TransportSecurity(); }

absl::StatusOr<TransportSecurity> TransportSecurity::FromTlsDir(const std::string& tls_dir,
                                                                const std::string& stem) {
  auto material = LoadTlsMaterial(tls_dir, stem);
  if (!material.ok()) return material.status();
  TransportSecurity security;
  security.material_ = std::make_shared<const TlsMaterial>(*std::move(material));
  security.tls_dir_ = tls_dir;
  return security;
}

std::string TransportSecurity::Describe() const {
  if (insecure()) return "plaintext (--insecure): no authentication, no encryption";
  return absl::StrCat("mutual TLS as ", material_->identity.name, " (",
                      RoleName(material_->identity.role), ") from ", tls_dir_);
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials() const {
  if (insecure()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      // A client without a certificate still completes the handshake, so
      // every RPC can answer it UNAUTHENTICATED (the services check each
      // call's peer); one with a certificate the CA did not sign cannot.
      GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = material_->ca_pem;
  options.pem_key_cert_pairs.push_back({material_->key_pem, material_->certificate_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> TransportSecurity::CreateChannel(
    const std::string& address, grpc::ChannelArguments args) const {
  if (insecure()) {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  if (auto parsed = ParseHostPort(address, 0);
      parsed.ok() && (parsed->host == "0.0.0.0" || parsed->host == "::")) {
    args.SetSslTargetNameOverride("localhost");
  }
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = material_->ca_pem;
  options.pem_private_key = material_->key_pem;
  options.pem_cert_chain = material_->certificate_pem;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), args);
}

namespace {

class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
      return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(plugin.get()) !=
             nullptr;
    });
  }
};

}  // namespace

void SetReconnectBackoff(grpc::ChannelArguments& args, absl::Duration initial,
                         absl::Duration max, absl::Duration connect_timeout) {
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(initial)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(absl::ToInt64Milliseconds(max)));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(connect_timeout)));
}

void SetServerReflection(grpc::ServerBuilder& builder, bool enabled) {
  if (enabled) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  } else {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
}

void AddPlaintextHealthPort(grpc::ServerBuilder& builder, const std::string& address, int* port) {
  if (address.empty()) return;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
}

absl::StatusOr<Identity> PeerIdentity(const grpc::ServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return absl::UnauthenticatedError(
        "no client certificate: connect with mutual TLS (a certificate from `corescape certs "
        "init`, e.g. --tls-dir DIR)");
  }
  const std::vector<grpc::string_ref> pems = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pems.size() != 1) {
    return absl::UnauthenticatedError("client certificate: not available to the server");
  }
  auto identity = IdentityFromCertificatePem(absl::string_view(pems[0].data(), pems[0].size()));
  if (!identity.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("client certificate: ", identity.status().message()));
  }
  return identity;
}

}  // namespace corescape::security
