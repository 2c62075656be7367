// Following a job to its end, shared by `corescape watch` and
// `corescape submit --wait`.
#ifndef CORESCAPE_CLIENT_CLI_COMMANDS_WATCH_H_
#define CORESCAPE_CLIENT_CLI_COMMANDS_WATCH_H_

#include <cstdint>

#include "CLI/CLI.hpp"
#include "client/cli/common.h"
#include "client/job_watch.h"
#include "client/scheduler_client.h"
#include "corescape/v1/job.pb.h"

namespace corescape::cli {

struct WatchFlags {
  bool json = false;
  double reconnect_timeout_seconds = 30;
  double probe_interval_seconds = 10;
};

// --reconnect-timeout, and --probe-interval (hidden; for tests).
void AddWatchFlags(CLI::App& command, WatchFlags& flags);

client::WatchJobOptions MakeWatchJobOptions(const std::string& job_id,
                                            const WatchFlags& flags);

// Streams the job's events from `after_sequence` and prints them (progress
// bar, state lines, summary; or JSON lines) until the job ends. Returns the
// exit code: 0 SUCCEEDED, 1 FAILED or CANCELLED (one error line with the
// reason), 3 scheduler unreachable (stream lost beyond the reconnect
// timeout), 4 unknown job, 1 other errors.
int WatchUntilEnd(client::SchedulerClient& client, const SchedulerTarget& target,
                  const corescape::v1::Job& job, uint64_t after_sequence,
                  const WatchFlags& flags);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_COMMANDS_WATCH_H_
