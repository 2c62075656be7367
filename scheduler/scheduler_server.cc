#include "scheduler/scheduler_server.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "runtime/base/host_port.h"
#include "runtime/base/server_keepalive.h"

namespace corescape::scheduler {

absl::StatusOr<std::string> LoadOrCreateSchedulerId(StateStore* store) {
  auto meta = store->LoadAll("meta");
  if (!meta.ok()) return meta.status();
  for (const auto& [key, value] : *meta) {
    if (key == "scheduler_id") return value;
  }
  absl::BitGen gen;
  std::string id = absl::StrFormat("sched-%016x", absl::Uniform<uint64_t>(gen));
  if (absl::Status s = store->Put("meta", "scheduler_id", id); !s.ok()) return s;
  return id;
}

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const SchedulerConfig& config, const Clock* clock,
    std::unique_ptr<metrics::MetricsEndpoint> metrics) {
  auto listen = ParseHostPort(config.listen_address, /*min_port=*/0);
  if (!listen.ok()) return listen.status();
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  server->clock_ = clock;

  auto store = SqliteStateStore::Open(config.state_dir);
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  auto scheduler_id = LoadOrCreateSchedulerId(server->store_.get());
  if (!scheduler_id.ok()) return scheduler_id.status();

  server->events_ = std::make_unique<EventLog>(clock, server->store_.get());
  if (absl::Status s = server->events_->Load(); !s.ok()) return s;
  NodeRegistryOptions options;
  options.lease_ttl = config.lease_ttl;
  options.heartbeat_interval = config.heartbeat_interval;
  options.scheduler_id = *scheduler_id;
  server->registry_ = std::make_unique<NodeRegistry>(
      clock, server->store_.get(), server->events_.get(), options);
  if (absl::Status s = server->registry_->Load(); !s.ok()) return s;

  server->jobs_ = std::make_unique<JobManager>(clock, server->store_.get(),
                                               server->events_.get(), server->registry_.get());
  if (absl::Status s = server->jobs_->Load(); !s.ok()) return s;
  server->attention_planning_ = std::make_unique<AttentionPlanning>(
      [jobs = server->jobs_.get()](const std::string& id) { return jobs->Get(id); },
      [registry = server->registry_.get()](const std::string& name) {
        return registry->Get(name);
      },
      clock, AttentionPlanningOptions{},
      [registry = server->registry_.get()](const std::string& node, uint64_t incarnation,
                                           const v1::SchedulerCommand& command) {
        return registry->Push(node, incarnation, command);
      });
  server->authorizer_ = std::make_unique<Authorizer>(/*enforce=*/!config.security.insecure());
  server->node_service_ = std::make_unique<NodeServiceImpl>(
      server->registry_.get(), server->jobs_.get(), server->attention_planning_.get(),
      *server->authorizer_);
  server->operator_service_ = std::make_unique<OperatorServiceImpl>(
      server->registry_.get(), server->events_.get(), server->jobs_.get(), config.version,
      clock->Now(), server->attention_planning_.get(), *server->authorizer_);
  server->job_service_ =
      std::make_unique<JobServiceImpl>(server->jobs_.get(), *server->authorizer_);
  server->session_slots_ = std::make_unique<StreamSlots>("Session streams", "--max_sessions",
                                                         config.max_sessions);
  server->watch_slots_ = std::make_unique<StreamSlots>(
      "watch streams (WatchEvents and WatchJob)", "--max_watch_streams",
      config.max_watch_streams);
  server->node_service_->LimitSessions(server->session_slots_.get());
  server->operator_service_->LimitWatches(server->watch_slots_.get());
  server->job_service_->LimitWatches(server->watch_slots_.get());
  server->identity_quotas_ = std::make_unique<IdentityQuotas>(config.identity_quotas, clock);
  server->operator_service_->LimitPerIdentity(server->identity_quotas_.get());
  server->job_service_->LimitPerIdentity(server->identity_quotas_.get());
  server->retention_ = config.retention;
  if (metrics != nullptr) {
    server->metrics_endpoint_ = std::move(metrics);
    server->metrics_ = std::make_unique<SchedulerMetrics>(
        server->metrics_endpoint_.get(), server->registry_.get(), server->jobs_.get(),
        server->attention_planning_.get());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  security::SetServerReflection(builder, config.grpc_reflection);
  // gRPC sets SO_REUSEPORT by default: two schedulers could share a port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyServerKeepalive(builder);
  int selected_port = 0;
  builder.AddListeningPort(config.listen_address, config.security.ServerCredentials(),
                           &selected_port);
  int health_port = 0;
  security::AddPlaintextHealthPort(builder, config.health_listen, &health_port);
  builder.RegisterService(server->node_service_.get());
  builder.RegisterService(server->operator_service_.get());
  builder.RegisterService(server->job_service_.get());
  if (server->metrics_ != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(server->metrics_->RpcInterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || selected_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.listen_address,
                     " (address in use or not local?)"));
  }
  if (!config.health_listen.empty() && health_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health_listen: cannot listen on ", config.health_listen));
  }
  HostPort bound = *listen;
  bound.port = static_cast<uint16_t>(selected_port);
  server->bound_address_ = bound.ToString();
  for (const char* service : {"corescape.v1.NodeService", "corescape.v1.OperatorService",
                              "corescape.v1.JobService"}) {
    server->server_->GetHealthCheckService()->SetServingStatus(service, true);
  }

  if (!config.http_listen.empty()) {
    auto page = StatusPage::Start(
        config.http_listen,
        StatusPageHandler(server->operator_service_.get(), server->job_service_.get(),
                          server->jobs_.get()),
        config.http_tls);
    if (!page.ok()) return page.status();
    server->status_page_ = *std::move(page);
  }

  server->reap_interval_ =
      std::clamp(config.lease_ttl / 20, absl::Milliseconds(20), absl::Seconds(1));
  server->reaper_ = std::thread([s = server.get()]() { s->ReapAndReconcile(); });
  server->events_->Append(v1::ClusterEvent::SCHEDULER_STARTED, "", "",
                          absl::StrCat("serving on ", server->bound_address_,
                                       ", state in ", config.state_dir));
  return server;
}

void SchedulerServer::ReapAndReconcile() {
  while (!stop_reaper_.WaitForNotificationWithTimeout(reap_interval_)) {
    const std::vector<std::string> expired = registry_->ExpireLeases();
    if (metrics_ != nullptr) metrics_->CountLeaseExpiries(static_cast<int>(expired.size()));
    jobs_->Reconcile();
    PruneExpiredHistory();
  }
}

void SchedulerServer::PruneExpiredHistory() {
  // Retention is days; a pass a minute (or a tenth of a short test
  // retention) keeps the store's deletes small.
  const absl::Time now = clock_->Now();
  if (now - last_prune_ < std::min(absl::Minutes(1), retention_ / 10)) return;
  last_prune_ = now;
  jobs_->PruneFinished(retention_);
  registry_->PruneDeparted(retention_);
}

void SchedulerServer::Shutdown(absl::Duration grace) {
  // Also reached from a Start() that failed half-way.
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // The page calls the services; metrics stay until destruction, since
  // in-flight RPCs still count themselves.
  status_page_.reset();
  server_->GetHealthCheckService()->SetServingStatus(false);
  node_service_->BeginShutdown();
  job_service_->BeginShutdown();
  // Sessions are long-lived streams: after the grace period they are
  // cancelled, and the nodes reconnect to our successor.
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoSeconds(grace));
  stop_reaper_.Notify();
  reaper_.join();
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

}  // namespace corescape::scheduler
