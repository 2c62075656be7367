// corescape-scape-rank: one rank of a data-parallel training run (the same
// loop as corescape-scape-train's threads) in its own process, over the UCX
// data plane: a worker's data-parallel group (job::ConnectDataParallelGroup)
// carries the optimizer's collectives and its control channel (the job's
// "<job>/control" communicator) the token counts and losses, so the
// optimizer's byte counters hold only its own traffic.
// Ranks find each other through --rendezvous_dir (each writes rank<R>.addr
// with its transport's address; a directory every process can see, also
// across network namespaces). Writes its outcome to --report_out: checksums
// of parameters, first moment and residual, per-step losses, bytes and
// times; with the same flags it must equal rank R of corescape-scape-train
// --report_out bitwise (tests/scape).
//
// Exit status: 0 done, 1 training or a collective failed, 2 bad flags,
// 3 the group could not be formed.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "corescape/v1/node.pb.h"
#include "nlohmann/json.hpp"
#include "runtime/base/directory_rendezvous.h"
#include "runtime/comm/transport.h"
#include "runtime/job/job_communicator.h"
#include "tools/scape/driver_flags.h"
#include "tools/scape/rank_report.h"
#include "tools/scape/training_rank.h"

ABSL_FLAG(int32_t, rank, 0, "this process's rank (0 .. --ranks − 1)");
ABSL_FLAG(std::string, rendezvous_dir, "", "directory where ranks publish their data addresses");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "data-plane listen address (port 0: any)");
ABSL_FLAG(std::string, token, "scape-rank-token", "the job's data-plane secret token");
ABSL_FLAG(std::string, job_id, "scape-rank", "job id (names the communicators)");
ABSL_FLAG(uint64_t, generation, 1, "rendezvous generation");
ABSL_FLAG(int32_t, timeout_ms, 60000, "data-plane timeout (connection and every wait)");
ABSL_FLAG(std::string, report_out, "", "write this rank's outcome here (JSON)");
ABSL_FLAG(int64_t, progress_every, 0, "print a progress line to stderr every N steps (0: never)");

namespace corescape::scape_tool {
namespace {

v1::JobAssignment Assignment(const std::string& job_id, int rank, int world,
                             const std::vector<std::string>& peers) {
  v1::JobAssignment assignment;
  assignment.set_job_id(job_id);
  assignment.set_generation(absl::GetFlag(FLAGS_generation));
  assignment.set_rank(rank);
  assignment.set_world_size(world);
  for (const std::string& peer : peers) assignment.add_peer_data_addresses(peer);
  assignment.set_data_plane_token(absl::GetFlag(FLAGS_token));
  return assignment;
}

int Fail(int code, const absl::Status& status) {
  std::fprintf(stderr, "corescape-scape-rank: %s\n", status.ToString().c_str());
  return code;
}

int Main() {
  auto parsed = DriverConfigFromFlags();
  if (!parsed.ok()) return Fail(2, parsed.status());
  const DriverConfig& config = *parsed;
  const int rank = absl::GetFlag(FLAGS_rank);
  const int world = config.ranks;
  if (rank < 0 || rank >= world) return Fail(2, absl::InvalidArgumentError("--rank out of range"));
  if (absl::GetFlag(FLAGS_rendezvous_dir).empty()) {
    return Fail(2, absl::InvalidArgumentError("--rendezvous_dir is required"));
  }

  const absl::Duration timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  comm::TransportOptions transport_options;
  transport_options.listen_address = absl::GetFlag(FLAGS_listen);
  transport_options.timeout = timeout;
  auto transport = comm::Transport::Create(transport_options);
  if (!transport.ok()) return Fail(3, transport.status());
  auto peers = RendezvousThroughDirectory(absl::GetFlag(FLAGS_rendezvous_dir), rank, world,
                                          (*transport)->address(), timeout);
  if (!peers.ok()) return Fail(3, peers.status());
  const std::string job_id = absl::GetFlag(FLAGS_job_id);
  auto optimizer_group = job::ConnectDataParallelGroup(
      transport->get(), Assignment(job_id, rank, world, *peers), timeout);
  if (!optimizer_group.ok()) return Fail(3, optimizer_group.status());
  train::DataParallelGroup* control_group = (*optimizer_group)->control_channel();

  const int64_t progress_every = absl::GetFlag(FLAGS_progress_every);
  auto outcome = RunTrainingRank(
      config, **optimizer_group, *control_group,
      [&](const StepTrace& t) -> absl::Status {
        if (progress_every > 0 && (t.step % progress_every == 0 || t.step == config.steps)) {
          std::fprintf(stderr,
                       "rank %d step %lld loss %.4f %s step %.3fs comm %.3fs bytes %lld\n",
                       rank, static_cast<long long>(t.step), t.train_loss,
                       t.dense ? "dense " : "sparse", t.step_seconds, t.comm_seconds,
                       static_cast<long long>(t.bytes_sent));
        }
        return absl::OkStatus();
      });
  if (!outcome.ok()) {
    (*optimizer_group)->Abort(outcome.status().ToString());  // and its control channel
    return Fail(1, outcome.status());
  }
  const std::string report_out = absl::GetFlag(FLAGS_report_out);
  if (!report_out.empty()) {
    nlohmann::json report;
    report["mode"] = "data-plane";
    report["config"] = DriverConfigToJson(config);
    report["data_address"] = (*transport)->address();
    report["optimizer_bytes_sent"] = (*optimizer_group)->bytes_sent();
    report["optimizer_bytes_received"] = (*optimizer_group)->bytes_received();
    report["control_bytes_sent"] = control_group->bytes_sent();
    report["rank"] = RankOutcomeToJson(*outcome);
    if (absl::Status s = WriteJsonFile(report_out, report); !s.ok()) return Fail(1, s);
  }
  // Communicators say goodbye (and wait for their peers' acknowledgements)
  // before the transport closes.
  optimizer_group->reset();
  return 0;
}

}  // namespace
}  // namespace corescape::scape_tool

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "corescape-scape-rank --rank=R --ranks=P --rendezvous_dir=DIR --data=DIR --method=scape "
      "[--listen=HOST:0] --report_out=FILE");
  absl::ParseCommandLine(argc, argv);
  return corescape::scape_tool::Main();
}
