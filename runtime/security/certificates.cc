#include "runtime/security/certificates.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <memory>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/node_name.h"
#include "runtime/base/openssl_errors.h"

namespace corescape::security {
namespace {

constexpr absl::string_view kRoleUriPrefix = "corescape:role/";
constexpr Role kRoles[] = {Role::kNode, Role::kOperator, Role::kSubmitter, Role::kScheduler};

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreContextFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, NamesFree>;

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslErrors()));
}

// Certificates and keys are small; anything larger is not one of ours.
constexpr size_t kMaxPemBytes = 64 * 1024;

BioPtr ReadOnlyBio(absl::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

absl::StatusOr<X509Ptr> ParseCertificate(absl::string_view pem, absl::string_view what) {
  if (pem.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": larger than 64 KiB"));
  }
  BioPtr bio = ReadOnlyBio(pem);
  X509Ptr certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a PEM certificate (", OpenSslErrors(), ")"));
  }
  return certificate;
}

absl::StatusOr<KeyPtr> ParseKey(absl::string_view pem, absl::string_view what) {
  if (pem.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": larger than 64 KiB"));
  }
  BioPtr bio = ReadOnlyBio(pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a PEM private key (", OpenSslErrors(), ")"));
  }
  return key;
}

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<std::string> CertificatePem(X509* certificate) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), certificate) != 1) return OpenSslError("PEM_write_bio_X509");
  return BioContents(bio.get());
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("PEM_write_bio_PrivateKey");
  }
  return BioContents(bio.get());
}

absl::StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslError("EVP_EC_gen(P-256)");
  return key;
}

// A DNS name or IP address usable in a SAN, as the host part of an address.
absl::Status ValidateHost(absl::string_view host) {
  if (host.empty() || host.size() > 253) {
    return absl::InvalidArgumentError(absl::StrCat("--host '", host, "': 1..253 characters"));
  }
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '*';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("--host '", host, "': not a DNS name or IP address"));
    }
  }
  return absl::OkStatus();
}

absl::Status AddName(GENERAL_NAMES* names, int type, absl::string_view value) {
  GENERAL_NAME* name = GENERAL_NAME_new();
  if (type == GEN_IPADD) {
    ASN1_OCTET_STRING* ip = a2i_IPADDRESS(std::string(value).c_str());
    if (ip == nullptr) {
      GENERAL_NAME_free(name);
      return absl::InvalidArgumentError(absl::StrCat("'", value, "': not an IP address"));
    }
    GENERAL_NAME_set0_value(name, GEN_IPADD, ip);
  } else {
    ASN1_IA5STRING* text = ASN1_IA5STRING_new();
    ASN1_STRING_set(text, value.data(), static_cast<int>(value.size()));
    GENERAL_NAME_set0_value(name, type, text);
  }
  sk_GENERAL_NAME_push(names, name);
  return absl::OkStatus();
}

bool LooksLikeIp(absl::string_view host) {
  ASN1_OCTET_STRING* ip = a2i_IPADDRESS(std::string(host).c_str());
  ERR_clear_error();
  if (ip == nullptr) return false;
  ASN1_OCTET_STRING_free(ip);
  return true;
}

absl::Status AddExtension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  if (extension == nullptr) return OpenSslError(absl::StrCat("extension ", value));
  const int added = X509_add_ext(certificate, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) return OpenSslError(absl::StrCat("X509_add_ext ", value));
  return absl::OkStatus();
}

absl::Status SetRandomSerial(X509* certificate) {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(certificate)) == nullptr) {
    return OpenSslError("serial number");
  }
  return absl::OkStatus();
}

// The common part of the CA and leaf certificates: version, serial,
// validity, subject (O=corescape, CN=common_name), public key.
absl::StatusOr<X509Ptr> NewCertificate(absl::string_view common_name, EVP_PKEY* key, int days) {
  X509Ptr certificate(X509_new());
  X509_set_version(certificate.get(), 2);
  if (absl::Status s = SetRandomSerial(certificate.get()); !s.ok()) return s;
  // An hour of slack for clocks a little behind the one that signed.
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), static_cast<long>(days) * 86400);
  X509_NAME* subject = X509_get_subject_name(certificate.get());
  const std::string cn(common_name);
  if (X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>("corescape"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return OpenSslError("subject name");
  }
  if (X509_set_pubkey(certificate.get(), key) != 1) return OpenSslError("X509_set_pubkey");
  return certificate;
}

struct Authority {
  X509Ptr certificate;
  KeyPtr key;
};

absl::StatusOr<Authority> NewAuthority(int days) {
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto certificate = NewCertificate("corescape cluster CA", key->get(), days);
  if (!certificate.ok()) return certificate.status();
  X509* x = certificate->get();
  X509_set_issuer_name(x, X509_get_subject_name(x));
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(x, x, nid, value); !s.ok()) return s;
  }
  if (X509_sign(x, key->get(), EVP_sha256()) == 0) return OpenSslError("signing the CA");
  return Authority{*std::move(certificate), *std::move(key)};
}

struct Leaf {
  std::string certificate_pem;
  std::string key_pem;
};

absl::StatusOr<Leaf> NewLeaf(const Authority& ca, const Identity& identity,
                             const std::vector<std::string>& hosts, int days) {
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto certificate = NewCertificate(identity.name, key->get(), days);
  if (!certificate.ok()) return certificate.status();
  X509* x = certificate->get();
  X509_set_issuer_name(x, X509_get_subject_name(ca.certificate.get()));
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            std::pair{NID_key_usage, "critical,digitalSignature"},
                            std::pair{NID_ext_key_usage, "serverAuth,clientAuth"},
                            std::pair{NID_subject_key_identifier, "hash"},
                            std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (absl::Status s = AddExtension(x, ca.certificate.get(), nid, value); !s.ok()) return s;
  }
  NamesPtr names(sk_GENERAL_NAME_new_null());
  absl::Status added = AddName(names.get(), GEN_URI, RoleUri(identity.role));
  std::vector<std::string> dns_names = {"localhost"};
  if (identity.role == Role::kNode) dns_names.push_back(identity.name);
  for (const std::string& name : dns_names) {
    if (added.ok()) added = AddName(names.get(), GEN_DNS, name);
  }
  if (added.ok()) added = AddName(names.get(), GEN_IPADD, "127.0.0.1");
  for (const std::string& host : hosts) {
    if (added.ok()) added = AddName(names.get(), LooksLikeIp(host) ? GEN_IPADD : GEN_DNS, host);
  }
  if (!added.ok()) return added;
  if (X509_add1_ext_i2d(x, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return OpenSslError("subjectAltName");
  }
  if (X509_sign(x, ca.key.get(), EVP_sha256()) == 0) return OpenSslError("signing");
  auto certificate_pem = CertificatePem(x);
  if (!certificate_pem.ok()) return certificate_pem.status();
  auto key_pem = KeyPem(key->get());
  if (!key_pem.ok()) return key_pem.status();
  return Leaf{*std::move(certificate_pem), *std::move(key_pem)};
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::StatusOr<Authority> LoadOrCreateAuthority(const CertificateDirectoryOptions& options,
                                                bool* created) {
  const std::string cert_path = absl::StrCat(options.directory, "/", kCaCertificateFile);
  const std::string key_path = absl::StrCat(options.directory, "/", kCaKeyFile);
  *created = false;
  if (FileExists(cert_path) || FileExists(key_path)) {
    auto cert_pem = ReadFileToString(cert_path);
    if (!cert_pem.ok()) return cert_pem.status();
    auto key_pem = ReadFileToString(key_path);
    if (!key_pem.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          key_path, ": the CA's key is needed to sign new certificates (",
          key_pem.status().message(), ")"));
    }
    auto certificate = ParseCertificate(*cert_pem, cert_path);
    if (!certificate.ok()) return certificate.status();
    auto key = ParseKey(*key_pem, key_path);
    if (!key.ok()) return key.status();
    if (X509_check_private_key(certificate->get(), key->get()) != 1) {
      ERR_clear_error();
      return absl::FailedPreconditionError(
          absl::StrCat(key_path, " is not the key of ", cert_path));
    }
    return Authority{*std::move(certificate), *std::move(key)};
  }
  auto authority = NewAuthority(options.ca_days);
  if (!authority.ok()) return authority.status();
  auto key_pem = KeyPem(authority->key.get());
  if (!key_pem.ok()) return key_pem.status();
  auto cert_pem = CertificatePem(authority->certificate.get());
  if (!cert_pem.ok()) return cert_pem.status();
  // The key first: a certificate without its key would look complete.
  if (absl::Status s = WriteFileAtomically(key_path, *key_pem, 0600); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(cert_path, *cert_pem); !s.ok()) return s;
  *created = true;
  return authority;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kNode:
      return "node";
    case Role::kOperator:
      return "operator";
    case Role::kSubmitter:
      return "submitter";
    case Role::kScheduler:
      return "scheduler";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role role : kRoles) {
    if (RoleName(role) == name) return role;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown role '", name, "' (one of node, operator, submitter, scheduler)"));
}

std::string RoleUri(Role role) { return absl::StrCat(kRoleUriPrefix, RoleName(role)); }

std::string CertificateStem(const Identity& identity) {
  if (identity.role != Role::kNode && identity.name == RoleName(identity.role)) {
    return std::string(identity.name);
  }
  return absl::StrCat(RoleName(identity.role), "-", identity.name);
}

absl::StatusOr<Identity> IdentityFromCertificatePem(absl::string_view pem) {
  auto certificate = ParseCertificate(pem, "certificate");
  if (!certificate.ok()) return certificate.status();
  Identity identity;
  X509_NAME* subject = X509_get_subject_name(certificate->get());
  const int cn_index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (cn_index < 0 || X509_NAME_get_index_by_NID(subject, NID_commonName, cn_index) >= 0) {
    return absl::InvalidArgumentError("certificate: needs exactly one subject CN");
  }
  const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn_index));
  identity.name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)),
                       static_cast<size_t>(ASN1_STRING_length(cn)));
  if (identity.name.empty()) return absl::InvalidArgumentError("certificate: empty CN");

  NamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate->get(), NID_subject_alt_name, nullptr, nullptr)));
  int roles_found = 0;
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_URI) continue;
    absl::string_view uri(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.uniformResourceIdentifier)),
                          static_cast<size_t>(ASN1_STRING_length(name->d.uniformResourceIdentifier)));
    if (!absl::StartsWith(uri, kRoleUriPrefix)) continue;
    auto role = ParseRole(uri.substr(kRoleUriPrefix.size()));
    if (!role.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("certificate: ", role.status().message()));
    }
    identity.role = *role;
    ++roles_found;
  }
  if (roles_found != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate for '", identity.name, "': needs exactly one SAN URI ", kRoleUriPrefix,
        "ROLE, has ", roles_found));
  }
  return identity;
}

absl::StatusOr<CertificateDirectoryResult> InitCertificateDirectory(
    const CertificateDirectoryOptions& options) {
  if (options.directory.empty()) return absl::InvalidArgumentError("directory: required");
  if (options.ca_days < 1 || options.leaf_days < 1 || options.ca_days > 36500 ||
      options.leaf_days > options.ca_days) {
    return absl::InvalidArgumentError(
        "validity: days must be positive, at most 100 years, and a leaf's within the CA's");
  }
  std::vector<Identity> identities = {{"scheduler", Role::kScheduler},
                                      {"operator", Role::kOperator},
                                      {"submitter", Role::kSubmitter}};
  for (auto [flag, names, role] : {std::tuple{"--node", &options.nodes, Role::kNode},
                                   std::tuple{"--submitter", &options.submitters, Role::kSubmitter},
                                   std::tuple{"--operator", &options.operators, Role::kOperator}}) {
    for (const std::string& name : *names) {
      // Names become file names and CNs: the node-name rules for all.
      if (absl::Status s = ValidateNodeName(flag, name); !s.ok()) return s;
      identities.push_back({name, role});
    }
  }
  for (const std::string& host : options.hosts) {
    if (absl::Status s = ValidateHost(host); !s.ok()) return s;
  }
  if (absl::Status s = MakeDirectories(options.directory); !s.ok()) return s;
  chmod(options.directory.c_str(), 0700);

  CertificateDirectoryResult result;
  auto authority = LoadOrCreateAuthority(options, &result.created_ca);
  if (!authority.ok()) return authority.status();
  for (const Identity& identity : identities) {
    const std::string stem = absl::StrCat(options.directory, "/", CertificateStem(identity));
    const std::string cert_path = stem + ".crt";
    if (FileExists(cert_path)) {
      result.kept.push_back(cert_path);
      continue;
    }
    auto leaf = NewLeaf(*authority, identity, options.hosts, options.leaf_days);
    if (!leaf.ok()) return leaf.status();
    if (absl::Status s = WriteFileAtomically(stem + ".key", leaf->key_pem, 0600); !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteFileAtomically(cert_path, leaf->certificate_pem); !s.ok()) return s;
    result.created.push_back(cert_path);
  }
  return result;
}

absl::Status VerifyCertificateChain(absl::string_view ca_pem,
                                    absl::string_view certificate_pem) {
  auto ca = ParseCertificate(ca_pem, "CA certificate");
  if (!ca.ok()) return ca.status();
  auto certificate = ParseCertificate(certificate_pem, "certificate");
  if (!certificate.ok()) return certificate.status();
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca->get());
  std::unique_ptr<X509_STORE_CTX, StoreContextFree> context(X509_STORE_CTX_new());
  X509_STORE_CTX_init(context.get(), store.get(), certificate->get(), nullptr);
  X509_STORE_CTX_set_purpose(context.get(), X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(context.get()) != 1) {
    return absl::PermissionDeniedError(absl::StrCat(
        "certificate does not verify against the CA: ",
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(context.get()))));
  }
  // And as a server: the same certificate serves a daemon's port.
  std::unique_ptr<X509_STORE_CTX, StoreContextFree> server_context(X509_STORE_CTX_new());
  X509_STORE_CTX_init(server_context.get(), store.get(), certificate->get(), nullptr);
  X509_STORE_CTX_set_purpose(server_context.get(), X509_PURPOSE_SSL_SERVER);
  if (X509_verify_cert(server_context.get()) != 1) {
    return absl::PermissionDeniedError(absl::StrCat(
        "certificate does not verify as a TLS server: ",
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(server_context.get()))));
  }
  return absl::OkStatus();
}

}  // namespace corescape::security
