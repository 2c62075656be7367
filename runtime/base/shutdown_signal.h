#ifndef CORESCAPE_RUNTIME_BASE_SHUTDOWN_SIGNAL_H_
#define CORESCAPE_RUNTIME_BASE_SHUTDOWN_SIGNAL_H_

#include "absl/time/time.h"

namespace corescape {

// Turns SIGTERM and SIGINT into a flag daemons can wait on. Call once from
// main before starting threads: the signals are blocked in every thread
// started later and received by a dedicated watcher thread, so no work
// happens in a handler. A thread that already existed (a library's, started
// before main) runs a handler that only wakes the watcher, instead of the
// default action ending the process.
void InstallShutdownSignalHandlers();

// True once SIGTERM/SIGINT arrived or RequestShutdown() was called.
bool ShutdownRequested();

void RequestShutdown();

// Blocks until shutdown is requested or `timeout` passes; returns
// ShutdownRequested().
bool WaitForShutdown(absl::Duration timeout = absl::InfiniteDuration());

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_SHUTDOWN_SIGNAL_H_
