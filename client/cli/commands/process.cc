#include "client/cli/commands/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace corescape::cli {

namespace {

absl::Status ErrnoStatus(absl::string_view what, int error_number) {
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrCat(what, ": ", std::strerror(error_number)));
}

// The daemons may log through glog, which by default writes to files under
// /tmp; send it to stderr (and so to the daemon's log file) unless the user
// chose otherwise.
std::vector<std::string> DaemonEnvironment() {
  std::vector<std::string> environment;
  bool has_glog_setting = false;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    environment.emplace_back(*entry);
    if (absl::StartsWith(*entry, "GLOG_logtostderr=") ||
        absl::StartsWith(*entry, "GLOG_log_dir=")) {
      has_glog_setting = true;
    }
  }
  if (!has_glog_setting) environment.emplace_back("GLOG_logtostderr=1");
  return environment;
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

void ReapIfChild(pid_t pid) {
  int status = 0;
  (void)waitpid(pid, &status, WNOHANG);  // ECHILD for non-children: ignored.
}

}  // namespace

absl::StatusOr<pid_t> SpawnDetached(const std::string& binary,
                                    const std::vector<std::string>& args,
                                    const std::string& log_path) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls are allowed.
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv = NullTerminated(argv_strings);
  std::vector<std::string> env_strings = DaemonEnvironment();
  std::vector<char*> envp = NullTerminated(env_strings);

  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus(absl::StrCat("open ", log_path), errno);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int error = errno;
    close(log_fd);
    return ErrnoStatus("open /dev/null", error);
  }
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) and the parent reads end-of-file.
  int exec_error_pipe[2];
  if (pipe2(exec_error_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    close(log_fd);
    close(null_fd);
    return ErrnoStatus("pipe2", error);
  }

  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    close(null_fd);
    close(exec_error_pipe[0]);
    close(exec_error_pipe[1]);
    return ErrnoStatus("fork", error);
  }
  if (pid == 0) {
    setsid();
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    sigset_t empty_mask;
    sigemptyset(&empty_mask);
    sigprocmask(SIG_SETMASK, &empty_mask, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execve(binary.c_str(), argv.data(), envp.data());
    const int error = errno;
    (void)!write(exec_error_pipe[1], &error, sizeof(error));
    _exit(127);
  }

  close(log_fd);
  close(null_fd);
  close(exec_error_pipe[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(exec_error_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_error_pipe[0]);
  if (n > 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    return ErrnoStatus(absl::StrCat("exec ", binary), exec_errno);
  }
  return pid;
}

std::optional<std::string> ChildExitDescription(pid_t pid) {
  int status = 0;
  const pid_t result = waitpid(pid, &status, WNOHANG);
  if (result == 0) return std::nullopt;
  if (result < 0) {
    // Not our child (or already reaped): fall back to /proc.
    if (IsDaemonRunning(pid, 0)) return std::nullopt;
    return "exited";
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "stopped";
}

namespace {

struct ProcStat {
  char state = '?';
  uint64_t start_ticks = 0;
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  absl::StatusOr<std::string> stat =
      ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return std::nullopt;
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so split
  // what follows the last ')'. Field 3 (state) is then token 0 and field 22
  // (starttime) token 19.
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(*stat).substr(paren + 1), ' ', absl::SkipEmpty());
  ProcStat result;
  if (fields.size() < 20 || fields[0].empty() ||
      !absl::SimpleAtoi(fields[19], &result.start_ticks)) {
    return std::nullopt;
  }
  result.state = fields[0][0];
  return result;
}

}  // namespace

uint64_t ProcessStartTicks(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  return stat.has_value() ? stat->start_ticks : 0;
}

bool IsDaemonRunning(pid_t pid, uint64_t start_ticks) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat.has_value()) return false;
  const bool exited =
      stat->state == 'Z' || stat->state == 'X' || stat->state == 'x';
  return !exited && (start_ticks == 0 || stat->start_ticks == start_ticks);
}

std::vector<pid_t> TerminateDaemons(const std::vector<DaemonProcess>& daemons,
                                    absl::Duration grace) {
  std::vector<DaemonProcess> running;
  for (const auto& daemon : daemons) {
    ReapIfChild(daemon.pid);
    if (IsDaemonRunning(daemon.pid, daemon.start_ticks))
      running.push_back(daemon);
  }
  for (const auto& daemon : running) kill(daemon.pid, SIGTERM);

  auto still_running = [&running]() {
    std::vector<DaemonProcess> left;
    for (const auto& daemon : running) {
      ReapIfChild(daemon.pid);
      if (IsDaemonRunning(daemon.pid, daemon.start_ticks))
        left.push_back(daemon);
    }
    return left;
  };
  const absl::Time deadline = absl::Now() + grace;
  std::vector<DaemonProcess> left = still_running();
  while (!left.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    left = still_running();
  }

  std::vector<pid_t> killed;
  for (const auto& daemon : left) {
    kill(daemon.pid, SIGKILL);
    killed.push_back(daemon.pid);
  }
  // SIGKILL cannot be ignored; just give the kernel a moment to finish.
  running = left;
  const absl::Time kill_deadline = absl::Now() + absl::Seconds(2);
  while (!still_running().empty() && absl::Now() < kill_deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  return killed;
}

absl::StatusOr<std::string> ExecutableDirectory() {
  std::error_code error;
  const std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot resolve /proc/self/exe: ", error.message()));
  }
  return exe.parent_path().string();
}

bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string TailOfFile(const std::string& path, int max_lines, int64_t offset) {
  std::ifstream in(path);
  if (!in) return "";
  in.seekg(offset);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) absl::StrAppend(&out, l, "\n");
  return out;
}

absl::Status AppendToFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

int64_t FileSize(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

absl::Status MakeDirectories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << contents;
    out.flush();
    if (!out) {
      unlink(temporary.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", path));
    }
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return ErrnoStatus(absl::StrCat("rename to ", path), error);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace corescape::cli
