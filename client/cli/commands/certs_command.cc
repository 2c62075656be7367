// `corescape certs init DIR`: the cluster CA and the certificates of the
// scheduler, an operator, a submitter and each node (docs/security.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "runtime/security/certificates.h"

namespace corescape::cli {

namespace {

int RunCertsInit(const security::CertificateDirectoryOptions& options, bool json) {
  auto result = security::InitCertificateDirectory(options);
  if (!result.ok()) {
    return Fail(absl::IsInvalidArgument(result.status()) ? kExitInvalidArgument : kExitFailure,
                result.status().message());
  }
  if (json) {
    PrintJson({{"directory", options.directory},
               {"created_ca", result->created_ca},
               {"created", result->created},
               {"kept", result->kept}});
    return kExitOk;
  }
  std::cout << (result->created_ca ? "made the cluster CA " : "signed with the existing CA ")
            << options.directory << "/" << security::kCaCertificateFile << "\n";
  for (const std::string& path : result->created) std::cout << "made " << path << "\n";
  for (const std::string& path : result->kept) std::cout << "kept " << path << "\n";
  std::cout << "keys are readable by their owner only; " << options.directory << "/"
            << security::kCaKeyFile << " signs new certificates: keep it off the nodes"
            << std::endl;
  return kExitOk;
}

}  // namespace

Subcommand AddCertsCommand(CLI::App& parent) {
  CLI::App* certs = parent.add_subcommand("certs", "Make the cluster's TLS certificates");
  auto options = std::make_shared<security::CertificateDirectoryOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* init = certs->add_subcommand(
      "init",
      "Make a cluster CA in DIR (or reuse the one there) and sign certificates for the "
      "scheduler, an operator, a submitter, each --node and any more --submitter/--operator; "
      "existing certificates are kept, "
      "so rerun it to add nodes");
  init->add_option("dir", options->directory, "Directory to write (created 0700)")
      ->type_name("DIR")
      ->required();
  init->add_option("--node", options->nodes,
                   "A node certificate for NAME (repeatable): a worker or attention server "
                   "started with --name=NAME")
      ->type_name("NAME");
  init->add_option("--submitter", options->submitters,
                   "Another submitter, its own identity (submitter-NAME.crt; it may cancel only "
                   "the jobs it submitted; repeatable)")
      ->type_name("NAME");
  init->add_option("--operator", options->operators,
                   "Another operator (operator-NAME.crt; repeatable)")
      ->type_name("NAME");
  init->add_option("--host", options->hosts,
                   "Another DNS name or IP address the daemons are reached by, added to every "
                   "certificate beside localhost and 127.0.0.1 (repeatable)")
      ->type_name("HOST");
  init->add_option("--days", options->leaf_days, "Validity of the certificates")
      ->type_name("DAYS")
      ->check(Silent(CLI::Range(1, 3650)))
      ->capture_default_str();
  init->add_flag("--json", *json, "Print what was made as JSON");
  return {init, [options, json]() { return RunCertsInit(*options, *json); }};
}

}  // namespace corescape::cli
