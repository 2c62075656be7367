// Caps per caller identity on what one caller may take of the scheduler,
// so that one submitter cannot use up what the global caps leave everyone:
// concurrent watch streams (WatchEvents and WatchJob together), jobs of its
// waiting in the queue (PENDING), and job submissions per minute. A refusal
// is RESOURCE_EXHAUSTED naming the identity, the cap and the flag that sets
// it. The identity is Authorizer::QuotaIdentity's.
#ifndef CORESCAPE_SCHEDULER_IDENTITY_QUOTAS_H_
#define CORESCAPE_SCHEDULER_IDENTITY_QUOTAS_H_

#include <deque>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/base/clock.h"

namespace corescape::scheduler {

struct IdentityQuotaLimits {
  int max_watch_streams = 64;  // the defaults of --max_watch_streams_per_identity,
  int max_pending_jobs = 100;  // --max_pending_jobs_per_identity and
  int max_submits_per_minute = 60;  // --max_submits_per_minute_per_identity
};

class IdentityQuotas {
 public:
  // A watch stream's place in its identity's count, given back when
  // destroyed. Move-only.
  class StreamSlot {
   public:
    StreamSlot(StreamSlot&& other) noexcept
        : owner_(other.owner_), identity_(std::move(other.identity_)) {
      other.owner_ = nullptr;
    }
    StreamSlot& operator=(StreamSlot&&) = delete;
    ~StreamSlot();

   private:
    friend class IdentityQuotas;
    StreamSlot(IdentityQuotas* owner, std::string identity)
        : owner_(owner), identity_(std::move(identity)) {}
    IdentityQuotas* owner_;
    std::string identity_;
  };

  IdentityQuotas(IdentityQuotaLimits limits, const Clock* clock)
      : limits_(limits), clock_(clock) {}

  // A watch stream for `identity`, or RESOURCE_EXHAUSTED at its cap.
  absl::StatusOr<StreamSlot> AcquireWatchStream(const std::string& identity);
  // With no quotas (null), a slot that counts nothing.
  static absl::StatusOr<StreamSlot> AcquireWatchStreamFrom(IdentityQuotas* quotas,
                                                           const std::string& identity);

  // Counts a submission of `identity`'s, or refuses it (RESOURCE_EXHAUSTED)
  // when it already made the most a minute allows. Refused ones do not count.
  absl::Status AdmitSubmit(const std::string& identity);

  // RESOURCE_EXHAUSTED when `identity` already has `pending` jobs waiting,
  // the most it may.
  absl::Status CheckPendingJobs(const std::string& identity, int pending) const;

  const IdentityQuotaLimits& limits() const { return limits_; }

 private:
  void ReleaseWatchStream(const std::string& identity);

  const IdentityQuotaLimits limits_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  // Identities with at least one stream open, and their streams.
  std::map<std::string, int> watch_streams_ ABSL_GUARDED_BY(mu_);
  // Identities that submitted in the last minute, and when (oldest first).
  std::map<std::string, std::deque<absl::Time>> submits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_IDENTITY_QUOTAS_H_
