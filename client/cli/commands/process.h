// Starting and stopping the local cluster's daemons: detached child
// processes that outlive the CLI, identified later by pid plus start time
// so that a recycled pid is never mistaken for (or signalled as) a daemon.
// (The start time survives exec, so wrapper scripts that exec the real
// daemon are still recognized.)
#ifndef CORESCAPE_CLIENT_CLI_COMMANDS_PROCESS_H_
#define CORESCAPE_CLIENT_CLI_COMMANDS_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace corescape::cli {

// Starts `binary` with `args` in a new session (so terminal signals to the
// CLI do not reach it), stdin from /dev/null and stdout/stderr appended to
// `log_path`. Fails if the exec itself fails (missing binary, permissions).
// The child stays a child of this process until it exits: use
// ChildExitDescription to notice an early exit.
absl::StatusOr<pid_t> SpawnDetached(const std::string& binary,
                                    const std::vector<std::string>& args,
                                    const std::string& log_path);

// For a child started by this process: std::nullopt while it runs, else a
// description such as "exited with status 1" or "killed by signal 9" (and
// the child is reaped).
std::optional<std::string> ChildExitDescription(pid_t pid);

// When the process started, in clock ticks since boot (/proc/PID/stat field
// 22), zombies included; 0 if there is no such process.
uint64_t ProcessStartTicks(pid_t pid);

// True if `pid` is a live (not zombie) process that started at
// `start_ticks`. 0 matches any start time.
bool IsDaemonRunning(pid_t pid, uint64_t start_ticks);

// Sends SIGTERM to every running one of `daemons`, waits up to `grace` for
// all of them to exit, then SIGKILLs the rest. Returns the pids that had to
// be killed.
struct DaemonProcess {
  pid_t pid;
  uint64_t start_ticks;  // 0: any
};
std::vector<pid_t> TerminateDaemons(const std::vector<DaemonProcess>& daemons,
                                    absl::Duration grace);

// Directory holding the running executable (symlinks resolved).
absl::StatusOr<std::string> ExecutableDirectory();

bool IsExecutableFile(const std::string& path);

// The last `max_lines` lines of a text file from byte `offset` on, "" if
// unreadable.
std::string TailOfFile(const std::string& path, int max_lines,
                       int64_t offset = 0);

// Appends `text` to the file, creating it.
absl::Status AppendToFile(const std::string& path, const std::string& text);

// Size in bytes, 0 if the file does not exist.
int64_t FileSize(const std::string& path);

// mkdir -p.
absl::Status MakeDirectories(const std::string& path);

// Writes via a temporary file and rename, so readers never see a partial
// file.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);

absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_COMMANDS_PROCESS_H_
