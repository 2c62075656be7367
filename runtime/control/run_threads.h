#ifndef CORESCAPE_RUNTIME_CONTROL_RUN_THREADS_H_
#define CORESCAPE_RUNTIME_CONTROL_RUN_THREADS_H_

#include <memory>
#include <vector>

namespace corescape {

// Joins the threads of job runs that were told to stop (a daemon's runner
// keeps them until the next run starts or the daemon shuts down, so the
// session thread never blocks on a join) and forgets the runs. `Run` has a
// std::thread `thread`.
template <typename Run>
void JoinRuns(std::vector<std::unique_ptr<Run>>& runs) {
  for (auto& run : runs) {
    if (run->thread.joinable()) run->thread.join();
  }
  runs.clear();
}

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_CONTROL_RUN_THREADS_H_
