#ifndef CORESCAPE_RUNTIME_BASE_SERVICE_NOTIFY_H_
#define CORESCAPE_RUNTIME_BASE_SERVICE_NOTIFY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace corescape {

// Reports to the service manager over systemd's notify protocol: one
// datagram of newline-separated KEY=VALUE lines ("READY=1", "STOPPING=1",
// "WATCHDOG=1", "STATUS=...") sent to the unix socket named by
// $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace).
//
// The protocol is written here directly instead of linking libsystemd's
// sd_notify: it is one sendto(), and the daemons (and the container image,
// which copies exactly the libraries they link) stay free of a library
// needed for nothing else. Without $NOTIFY_SOCKET — not started by systemd
// with Type=notify — every call is a no-op returning OK.
absl::Status NotifyServiceManager(absl::string_view state);

// "READY=1" with a STATUS line, and "STOPPING=1": what every daemon sends
// once it serves and when it begins to shut down. A failure is logged, not
// returned: the daemon works the same without a service manager.
void NotifyReady(absl::string_view status);
void NotifyStopping();

// The watchdog interval systemd expects pings within (WatchdogSec=, passed
// as $WATCHDOG_USEC), if it is meant for this process ($WATCHDOG_PID unset
// or equal to our pid); nullopt when no watchdog is armed.
std::optional<absl::Duration> ServiceWatchdogInterval();

// One "WATCHDOG=1", for a daemon whose own loop is the proof of life: call it
// only when ServiceWatchdogInterval() is set, at least every half interval.
// A failure is logged (rate-limited), not returned.
void NotifyWatchdog();

// Sends WATCHDOG=1 every half interval from its own thread, but only after
// `healthy()` returned true: a daemon passes a check that goes through the
// machinery it wants watched, so a wedged daemon stops pinging and systemd
// restarts it. Does nothing when no watchdog is armed. Stops on destruction.
class ServiceWatchdog {
 public:
  explicit ServiceWatchdog(std::function<bool()> healthy);
  ~ServiceWatchdog();

  ServiceWatchdog(const ServiceWatchdog&) = delete;
  ServiceWatchdog& operator=(const ServiceWatchdog&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_SERVICE_NOTIFY_H_
