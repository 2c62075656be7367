#ifndef CORESCAPE_RUNTIME_BASE_CLOCK_H_
#define CORESCAPE_RUNTIME_BASE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace corescape {

// Time source. Lease and timeout logic takes a Clock so tests can move time
// by hand instead of sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static RealClock* Get() {
    static RealClock* clock = new RealClock();
    return clock;
  }
};

// Manually advanced clock for tests.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_CLOCK_H_
