// Who may call what on the scheduler. The identity is the caller's client
// certificate (runtime/security): a node certificate acts only for its own
// name; submitting needs submitter or operator; draining, rebalancing and
// cancelling another's job need operator; reads need any valid certificate.
// Each RPC asks once, at its top.
#ifndef CORESCAPE_SCHEDULER_AUTHORIZATION_H_
#define CORESCAPE_SCHEDULER_AUTHORIZATION_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "runtime/security/certificates.h"

namespace corescape::scheduler {

class Authorizer {
 public:
  // Enforcing checks every call's certificate; not enforcing (a plaintext
  // scheduler, --insecure) allows everything and records no identities.
  explicit Authorizer(bool enforce) : enforce_(enforce) {}

  // The one that allows everything (a scheduler without TLS).
  static const Authorizer& AllowAll();

  bool enforcing() const { return enforce_; }

  // Any valid certificate: what reads need, and the first check of every
  // other RPC. UNAUTHENTICATED without one.
  absl::Status RequireCertificate(const grpc::ServerContext& context) const;

  // A node certificate for exactly `node_name`: PERMISSION_DENIED naming
  // both names otherwise.
  absl::Status AllowNode(const grpc::ServerContext& context, absl::string_view node_name) const;

  // One of `roles`, to do `action` (for the error: "PERMISSION_DENIED: draining
  // a node needs the operator role; the caller 'x' is a submitter").
  // Returns the caller's identity (name empty when not enforcing).
  absl::StatusOr<security::Identity> AllowRoles(const grpc::ServerContext& context,
                                                std::initializer_list<security::Role> roles,
                                                absl::string_view action) const;

  // AllowRoles for the operator role alone.
  absl::Status AllowOperator(const grpc::ServerContext& context, absl::string_view action) const {
    return AllowRoles(context, {security::Role::kOperator}, action).status();
  }

  // Whom the per-identity quotas (identity_quotas.h) count a call against:
  // "submitter 'alice'" from the caller's certificate; without one (a
  // plaintext scheduler) the caller's address, "peer 10.0.0.5".
  std::string QuotaIdentity(const grpc::ServerContext& context) const;

  // Cancelling `job_submitter`'s job: an operator, or the submitter itself.
  absl::Status AllowCancel(const grpc::ServerContext& context,
                           absl::string_view job_submitter) const;

 private:
  // The caller's identity from its certificate.
  absl::StatusOr<security::Identity> Caller(const grpc::ServerContext& context) const;

  const bool enforce_;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_AUTHORIZATION_H_
