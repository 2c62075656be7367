#include "scheduler/authorization.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/security/transport_security.h"

namespace corescape::scheduler {
namespace {

using security::Identity;
using security::Role;

std::string Describe(const Identity& identity) {
  return absl::StrCat("'", identity.name, "' (", security::RoleName(identity.role), ")");
}

}  // namespace

const Authorizer& Authorizer::AllowAll() {
  static const Authorizer* const allow_all = new Authorizer(/*enforce=*/false);
  return *allow_all;
}

absl::StatusOr<Identity> Authorizer::Caller(const grpc::ServerContext& context) const {
  return security::PeerIdentity(context);
}

absl::Status Authorizer::RequireCertificate(const grpc::ServerContext& context) const {
  if (!enforce_) return absl::OkStatus();
  // A context without a call is the scheduler's own status page reading
  // in-process (it serves only reads); every RPC has one.
  if (context.auth_context() == nullptr) return absl::OkStatus();
  return Caller(context).status();
}

absl::Status Authorizer::AllowNode(const grpc::ServerContext& context,
                                   absl::string_view node_name) const {
  if (!enforce_) return absl::OkStatus();
  auto caller = Caller(context);
  if (!caller.ok()) return caller.status();
  if (caller->role != Role::kNode) {
    return absl::PermissionDeniedError(absl::StrCat(
        "acting as node '", node_name, "' needs that node's certificate (role node); the caller ",
        Describe(*caller), " is not a node"));
  }
  if (caller->name != node_name) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the certificate is for node '", caller->name, "', not '", node_name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Identity> Authorizer::AllowRoles(const grpc::ServerContext& context,
                                                std::initializer_list<Role> roles,
                                                absl::string_view action) const {
  if (!enforce_) return Identity{};
  auto caller = Caller(context);
  if (!caller.ok()) return caller.status();
  std::vector<std::string> names;
  for (Role role : roles) {
    if (caller->role == role) return caller;
    names.push_back(std::string(security::RoleName(role)));
  }
  return absl::PermissionDeniedError(absl::StrCat(action, " needs the ",
                                                  absl::StrJoin(names, " or "),
                                                  " role; the caller is ", Describe(*caller)));
}

std::string Authorizer::QuotaIdentity(const grpc::ServerContext& context) const {
  if (enforce_) {
    if (auto caller = Caller(context); caller.ok()) {
      return absl::StrCat(security::RoleName(caller->role), " '", caller->name, "'");
    }
  }
  // No call: the scheduler's own status page reading in-process. (c_call()
  // only reads, but gRPC declares it non-const.)
  if (const_cast<grpc::ServerContext&>(context).c_call() == nullptr) {
    return "the scheduler itself";
  }
  // "ipv4:10.0.0.5:41234" or "ipv6:[::1]:41234": the address without the port.
  std::string peer = context.peer();
  if (const size_t colon = peer.rfind(':'); colon != std::string::npos) peer.resize(colon);
  if (const size_t scheme = peer.find(':'); scheme != std::string::npos) peer.erase(0, scheme + 1);
  return absl::StrCat("peer ", peer);
}

absl::Status Authorizer::AllowCancel(const grpc::ServerContext& context,
                                     absl::string_view job_submitter) const {
  if (!enforce_) return absl::OkStatus();
  auto caller = Caller(context);
  if (!caller.ok()) return caller.status();
  if (caller->role == Role::kOperator) return absl::OkStatus();
  if (caller->role == Role::kSubmitter && !job_submitter.empty() &&
      caller->name == job_submitter) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "cancelling a job submitted by '", job_submitter,
      "' needs the operator role (or to be its submitter); the caller ", Describe(*caller),
      " is neither"));
}

}  // namespace corescape::scheduler
