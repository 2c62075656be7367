#include "runtime/security/certificates.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/data/test_util.h"

namespace corescape::security {
namespace {

using ::testing::HasSubstr;

using ::corescape::data::testing::MakeTestDir;

std::string Read(const std::string& path) {
  auto contents = ReadFileToString(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.value_or("");
}

int Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(RoleTest, NamesRoundTripAndUnknownRolesAreRefused) {
  for (Role role : {Role::kNode, Role::kOperator, Role::kSubmitter, Role::kScheduler}) {
    auto parsed = ParseRole(RoleName(role));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, role);
  }
  EXPECT_EQ(RoleUri(Role::kOperator), "corescape:role/operator");
  auto unknown = ParseRole("admin");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'admin'"));
  EXPECT_EQ(CertificateStem({"worker-0", Role::kNode}), "node-worker-0");
  EXPECT_EQ(CertificateStem({"operator", Role::kOperator}), "operator");
  EXPECT_EQ(CertificateStem({"alice", Role::kSubmitter}), "submitter-alice");
  EXPECT_EQ(CertificateStem({"scheduler", Role::kScheduler}), "scheduler");
}

TEST(CertificatesTest, InitMakesACaAndCertificatesThatVerifyAndNameTheirHolder) {
  const std::string dir = MakeTestDir("init");
  CertificateDirectoryOptions options;
  options.directory = dir;
  options.nodes = {"worker-0", "attn-0"};
  options.submitters = {"alice"};
  options.hosts = {"scheduler.example", "10.1.2.3"};
  auto result = InitCertificateDirectory(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->created_ca);
  EXPECT_EQ(result->created.size(), 6u);

  const std::string ca = Read(dir + "/ca.crt");
  EXPECT_EQ(Mode(dir + "/ca.key"), 0600);
  struct Expected {
    std::string stem, name;
    Role role;
  };
  for (const Expected& e : {Expected{"scheduler", "scheduler", Role::kScheduler},
                            Expected{"operator", "operator", Role::kOperator},
                            Expected{"submitter", "submitter", Role::kSubmitter},
                            Expected{"node-worker-0", "worker-0", Role::kNode},
                            Expected{"node-attn-0", "attn-0", Role::kNode},
                            Expected{"submitter-alice", "alice", Role::kSubmitter}}) {
    SCOPED_TRACE(e.stem);
    const std::string pem = Read(absl::StrCat(dir, "/", e.stem, ".crt"));
    EXPECT_TRUE(VerifyCertificateChain(ca, pem).ok()) << VerifyCertificateChain(ca, pem);
    auto identity = IdentityFromCertificatePem(pem);
    ASSERT_TRUE(identity.ok()) << identity.status();
    EXPECT_EQ(identity->name, e.name);
    EXPECT_EQ(identity->role, e.role);
    EXPECT_EQ(Mode(absl::StrCat(dir, "/", e.stem, ".key")), 0600);

    // The SANs a client checks the server against: localhost, 127.0.0.1, --host.
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(X509_check_host(x, "localhost", 0, 0, nullptr), 1);
    EXPECT_EQ(X509_check_host(x, "scheduler.example", 0, 0, nullptr), 1);
    EXPECT_EQ(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    EXPECT_EQ(X509_check_ip_asc(x, "10.1.2.3", 0), 1);
    EXPECT_NE(X509_check_host(x, "elsewhere.example", 0, 0, nullptr), 1);
    X509_free(x);
  }
  // The CA itself is no identity.
  EXPECT_THAT(IdentityFromCertificatePem(ca).status().message(), HasSubstr("SAN URI"));
}

TEST(CertificatesTest, RerunKeepsTheCaAndExistingCertificatesAndAddsNodes) {
  const std::string dir = MakeTestDir("rerun");
  CertificateDirectoryOptions options;
  options.directory = dir;
  options.nodes = {"worker-0"};
  ASSERT_TRUE(InitCertificateDirectory(options).ok());
  const std::string ca = Read(dir + "/ca.crt");
  const std::string worker0 = Read(dir + "/node-worker-0.crt");

  options.nodes = {"worker-0", "worker-1"};
  auto again = InitCertificateDirectory(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created_ca);
  EXPECT_EQ(again->created, std::vector<std::string>{dir + "/node-worker-1.crt"});
  EXPECT_EQ(Read(dir + "/ca.crt"), ca);
  EXPECT_EQ(Read(dir + "/node-worker-0.crt"), worker0);
  EXPECT_TRUE(VerifyCertificateChain(ca, Read(dir + "/node-worker-1.crt")).ok());
}

TEST(CertificatesTest, ACertificateFromAnotherCaDoesNotVerify) {
  CertificateDirectoryOptions a, b;
  a.directory = MakeTestDir("ca-a");
  b.directory = MakeTestDir("ca-b");
  ASSERT_TRUE(InitCertificateDirectory(a).ok());
  ASSERT_TRUE(InitCertificateDirectory(b).ok());
  absl::Status status =
      VerifyCertificateChain(Read(a.directory + "/ca.crt"), Read(b.directory + "/operator.crt"));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("does not verify"));
}

TEST(CertificatesTest, BadInputIsRefusedNamingIt) {
  CertificateDirectoryOptions options;
  options.directory = MakeTestDir("bad");
  options.nodes = {"../evil"};
  EXPECT_THAT(InitCertificateDirectory(options).status().message(), HasSubstr("--node"));
  options.nodes = {};
  options.hosts = {"a,DNS:b"};
  EXPECT_THAT(InitCertificateDirectory(options).status().message(), HasSubstr("--host"));
  EXPECT_EQ(IdentityFromCertificatePem("not a certificate").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdentityFromCertificatePem(std::string(100000, 'A')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CertificatesTest, ACaKeyThatDoesNotMatchItsCertificateIsRefused) {
  CertificateDirectoryOptions a, b;
  a.directory = MakeTestDir("mismatch-a");
  b.directory = MakeTestDir("mismatch-b");
  ASSERT_TRUE(InitCertificateDirectory(a).ok());
  ASSERT_TRUE(InitCertificateDirectory(b).ok());
  ASSERT_TRUE(WriteFileAtomically(a.directory + "/ca.key", Read(b.directory + "/ca.key")).ok());
  a.nodes = {"worker-9"};
  auto result = InitCertificateDirectory(a);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("is not the key of"));
}

}  // namespace
}  // namespace corescape::security
