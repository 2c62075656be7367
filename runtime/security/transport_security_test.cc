// Real TLS over loopback: a server and clients built from TLS directories
// that `InitCertificateDirectory` made.
#include "runtime/security/transport_security.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/data/test_util.h"
#include "runtime/security/certificates.h"

namespace corescape::security {
namespace {

using ::testing::HasSubstr;

using ::corescape::data::testing::MakeTestDir;

// Answers with who the caller is: "NAME/ROLE", or the PeerIdentity error.
class WhoAmI final : public v1::OperatorService::Service {
  grpc::Status GetClusterStatus(grpc::ServerContext* context,
                                const v1::GetClusterStatusRequest*,
                                v1::GetClusterStatusResponse* response) override {
    auto identity = PeerIdentity(*context);
    if (!identity.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(identity.status().code()),
                          std::string(identity.status().message()));
    }
    response->set_version(absl::StrCat(identity->name, "/", RoleName(identity->role)));
    return grpc::Status::OK;
  }
};

class TransportSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("tls");
    CertificateDirectoryOptions options;
    options.directory = dir_;
    options.nodes = {"worker-0"};
    ASSERT_TRUE(InitCertificateDirectory(options).ok());
    auto server_security = TransportSecurity::FromTlsDir(dir_, "scheduler");
    ASSERT_TRUE(server_security.ok()) << server_security.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", server_security->ServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  grpc::Status Call(std::shared_ptr<grpc::Channel> channel, std::string* who = nullptr) {
    auto stub = v1::OperatorService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetClusterStatusResponse response;
    grpc::Status status = stub->GetClusterStatus(&context, {}, &response);
    if (who != nullptr) *who = response.version();
    return status;
  }

  std::string dir_;
  int port_ = 0;
  std::string address_;
  WhoAmI service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(TransportSecurityTest, TheServerSeesTheClientCertificatesIdentity) {
  for (auto [stem, expected] : {std::pair{"operator", "operator/operator"},
                                std::pair{"submitter", "submitter/submitter"},
                                std::pair{"node-worker-0", "worker-0/node"}}) {
    auto security = TransportSecurity::FromTlsDir(dir_, stem);
    ASSERT_TRUE(security.ok()) << security.status();
    std::string who;
    grpc::Status status = Call(security->CreateChannel(address_), &who);
    ASSERT_TRUE(status.ok()) << stem << ": " << status.error_message();
    EXPECT_EQ(who, expected);
  }
}

TEST_F(TransportSecurityTest, AClientWithoutACertificateIsUnauthenticated) {
  auto ca = ReadFileToString(dir_ + "/ca.crt");
  ASSERT_TRUE(ca.ok());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = *ca;  // trusts the server, presents nothing
  grpc::Status status = Call(grpc::CreateChannel(address_, grpc::SslCredentials(options)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("no client certificate"));
}

TEST_F(TransportSecurityTest, PlaintextAndForeignCertificatesCannotConnect) {
  EXPECT_EQ(Call(TransportSecurity::Insecure().CreateChannel(address_)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  CertificateDirectoryOptions other;
  other.directory = MakeTestDir("other-ca");
  ASSERT_TRUE(InitCertificateDirectory(other).ok());
  auto foreign = TransportSecurity::FromTlsDir(other.directory, "operator");
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(Call(foreign->CreateChannel(address_)).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TransportSecurityTest, AMissingCertificateIsNamedWithTheCommandThatMakesIt) {
  auto missing = TransportSecurity::FromTlsDir(dir_, "node-worker-7");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("node-worker-7.crt"));
  EXPECT_THAT(missing.status().message(), HasSubstr("corescape certs init"));
}

}  // namespace
}  // namespace corescape::security
