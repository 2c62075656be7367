#include "bench/attention_straggler/process_group.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/atomic_file.h"

namespace corescape::bench {
namespace {

std::string LogTail(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "(no log)";
  constexpr size_t kTail = 2000;
  return text->size() <= kTail ? *text : text->substr(text->size() - kTail);
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(const ChildSpec& spec, char* const* argv) {
  const int fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  if (spec.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(spec.cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  execv(argv[0], argv);
  _exit(127);
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::StrCat("ended with wait status ", status);
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

absl::Status RunProcessGroup(const std::vector<ChildSpec>& children, absl::Duration timeout) {
  std::vector<pid_t> pids(children.size(), -1);
  absl::Status failure;
  for (size_t i = 0; i < children.size() && failure.ok(); ++i) {
    std::vector<char*> argv;
    for (const std::string& arg : children[i].argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) ExecChild(children[i], argv.data());
    if (pid < 0) {
      failure = absl::InternalError(absl::StrCat("fork for ", children[i].name, ": ",
                                                 std::strerror(errno)));
    }
    pids[i] = pid;
  }
  const absl::Time deadline = absl::Now() + timeout;
  size_t running = 0;
  for (pid_t pid : pids) running += pid > 0;
  while (running > 0) {
    if (failure.ok() && absl::Now() > deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "the processes did not finish within ", absl::FormatDuration(timeout)));
    }
    if (!failure.ok()) {
      for (pid_t& pid : pids) {
        if (pid > 0) kill(pid, SIGKILL);
      }
    }
    bool reaped = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      pids[i] = -1;
      --running;
      reaped = true;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failure.ok()) {
        failure = absl::AbortedError(absl::StrCat(children[i].name, " ", DescribeExit(status),
                                                  "; end of ", children[i].log_path, ":\n",
                                                  LogTail(children[i].log_path)));
      }
    }
    if (!reaped) absl::SleepFor(absl::Milliseconds(10));
  }
  return failure;
}

}  // namespace corescape::bench
