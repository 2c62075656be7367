#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_PROCESS_GROUP_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_PROCESS_GROUP_H_

// Starts a group of child processes (fork + exec), each with its output in a
// log file and optionally pinned to one CPU, and waits for all of them. The
// first child to fail (or the deadline) ends the group: the others are
// killed, by their process ids, and the error names the child and ends with
// the tail of its log.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace corescape::bench {

struct ChildSpec {
  std::string name;               // for messages: "worker 0"
  std::vector<std::string> argv;  // argv[0] is the binary's path
  std::string log_path;           // stdout and stderr
  int cpu = -1;                   // >= 0: pin to this CPU (sched_setaffinity)
};

absl::Status RunProcessGroup(const std::vector<ChildSpec>& children, absl::Duration timeout);

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus();

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_PROCESS_GROUP_H_
