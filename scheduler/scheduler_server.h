#ifndef CORESCAPE_SCHEDULER_SCHEDULER_SERVER_H_
#define CORESCAPE_SCHEDULER_SCHEDULER_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "corescape/v1/job.grpc.pb.h"
#include "grpcpp/server.h"
#include "runtime/base/clock.h"
#include "runtime/base/stream_slots.h"
#include "runtime/metrics/metrics_endpoint.h"
#include "runtime/security/transport_security.h"
#include "scheduler/attention_planning.h"
#include "scheduler/authorization.h"
#include "scheduler/event_log.h"
#include "scheduler/identity_quotas.h"
#include "scheduler/job_manager.h"
#include "scheduler/job_service.h"
#include "scheduler/node_registry.h"
#include "scheduler/node_service.h"
#include "scheduler/operator_service.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/state_store.h"
#include "scheduler/status_page.h"

namespace corescape::scheduler {

struct SchedulerConfig {
  std::string listen_address = "0.0.0.0:7070";  // port 0: pick a free one
  std::string state_dir;
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration heartbeat_interval = absl::Seconds(2);
  std::string version;
  // HOST:PORT of the read-only status page (port 0: pick one); empty: none.
  std::string http_listen;
  // HTTPS with client certificates for the status page; plain HTTP without.
  std::optional<HttpTls> http_tls;
  // Concurrent streams past which new ones get RESOURCE_EXHAUSTED: node
  // Sessions, and WatchEvents + WatchJob together.
  int max_sessions = 4096;
  int max_watch_streams = 1024;
  // What one caller identity may hold of those streams, have PENDING and
  // submit per minute.
  IdentityQuotaLimits identity_quotas;
  // Ended jobs' events and keys, and departed nodes, are pruned after this.
  absl::Duration retention = absl::Hours(24 * 7);
  // Mutual TLS (and every RPC authorized by the caller's certificate), or
  // plaintext with everything allowed.
  security::TransportSecurity security = security::TransportSecurity::Insecure();
  bool grpc_reflection = false;
  // A plaintext port for health probes only (AddPlaintextHealthPort), or "".
  std::string health_listen;
};

// The scheduler daemon minus main(): opens the durable store, restores
// state, serves corescape.v1 (plus grpc.health.v1, and reflection if asked) and runs
// the lease reaper; with `metrics`, its Prometheus metrics there, and with
// config.http_listen, the status page.
class SchedulerServer {
 public:
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(
      const SchedulerConfig& config, const Clock* clock = RealClock::Get(),
      std::unique_ptr<metrics::MetricsEndpoint> metrics = nullptr);
  ~SchedulerServer();

  // The address actually bound (with the chosen port).
  const std::string& bound_address() const { return bound_address_; }
  // The status page's bound address; empty without one.
  std::string status_page_address() const {
    return status_page_ == nullptr ? "" : status_page_->bound_address();
  }
  // The status page's URL ("https://HOST:PORT/"); empty without one.
  std::string status_page_url() const {
    return status_page_ == nullptr ? ""
                                   : absl::StrCat(status_page_->scheme(), "://",
                                                  status_page_->bound_address(), "/");
  }

  // Stops accepting RPCs, lets in-flight ones finish for up to `grace`.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  SchedulerServer() = default;
  // Lease expiry and job reconciliation, periodically; retention now and then.
  void ReapAndReconcile();
  void PruneExpiredHistory();

  const Clock* clock_ = nullptr;
  std::unique_ptr<SqliteStateStore> store_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<NodeServiceImpl> node_service_;
  std::unique_ptr<OperatorServiceImpl> operator_service_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<AttentionPlanning> attention_planning_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string bound_address_;
  absl::Duration reap_interval_;
  absl::Duration retention_;
  absl::Time last_prune_ = absl::InfinitePast();
  std::unique_ptr<StreamSlots> session_slots_;
  std::unique_ptr<StreamSlots> watch_slots_;
  std::unique_ptr<IdentityQuotas> identity_quotas_;
  absl::Notification stop_reaper_;
  std::thread reaper_;
  bool shut_down_ = false;
  // Last, so destroyed first: they read everything above.
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<SchedulerMetrics> metrics_;
  std::unique_ptr<StatusPage> status_page_;
};

// Loads the scheduler's identity from the store, creating it on first start.
absl::StatusOr<std::string> LoadOrCreateSchedulerId(StateStore* store);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_SCHEDULER_SERVER_H_
