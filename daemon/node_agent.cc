#include "daemon/node_agent.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "grpcpp/support/channel_arguments.h"

namespace corescape {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

}  // namespace

NodeAgent::NodeAgent(NodeAgentOptions options, CommandHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {
  grpc::ChannelArguments args;
  // Notice a vanished scheduler on an idle connection, not only on write.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect promptly after a scheduler restart.
  security::SetReconnectBackoff(args, absl::Milliseconds(100), options_.max_backoff);
  channel_ = options_.security.CreateChannel(options_.scheduler_address, args);
  stub_ = v1::NodeService::NewStub(channel_);
}

NodeAgent::~NodeAgent() { Stop(/*deregister=*/false); }

void NodeAgent::Start() {
  thread_ = std::thread([this]() { Run(); });
}

bool NodeAgent::registered() const {
  absl::MutexLock lock(&mu_);
  return registered_;
}

uint64_t NodeAgent::incarnation() const {
  absl::MutexLock lock(&mu_);
  return incarnation_;
}

bool NodeAgent::WaitUntilRegistered(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&registered_), timeout);
}

bool NodeAgent::session_open() const {
  absl::MutexLock lock(&mu_);
  return session_context_ != nullptr;
}

void NodeAgent::Send(v1::NodeMessage message) {
  if (options_.on_send) options_.on_send(message);
  absl::MutexLock lock(&mu_);
  // Bounded: a long outage must not grow memory without limit.
  if (outbox_.size() >= 10000) {
    LOG_EVERY_N(WARNING, 1000) << "session outbox full; dropping oldest report";
    outbox_.pop_front();
  }
  outbox_.push_back(std::move(message));
}

void NodeAgent::Backoff(absl::Duration& delay) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), delay);
  delay = std::min(delay * 2, options_.max_backoff);
}

absl::Status NodeAgent::RegisterOnce() {
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(options_.rpc_timeout));
  v1::RegisterResponse response;
  absl::Status status =
      FromGrpc(stub_->Register(&context, options_.registration, &response));
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  registered_ = true;
  incarnation_ = response.incarnation();
  heartbeat_interval_ =
      std::max(absl::Milliseconds(response.heartbeat_interval_ms()), absl::Milliseconds(10));
  LOG(INFO) << "registered as '" << options_.registration.name() << "' ("
            << response.node_id() << ") incarnation " << response.incarnation()
            << " with scheduler " << options_.scheduler_address << " ("
            << response.scheduler_id() << "), lease " << response.lease_ttl_ms()
            << " ms";
  return absl::OkStatus();
}

absl::Status NodeAgent::RunSession() {
  grpc::ClientContext context;
  absl::Duration heartbeat_interval;
  v1::NodeMessage open;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    session_context_ = &context;
    heartbeat_interval = heartbeat_interval_;
    open.mutable_open()->set_name(options_.registration.name());
    open.mutable_open()->set_incarnation(incarnation_);
  }
  // Without a lease grant for this long, the session is presumed dead.
  const absl::Duration silence_limit = heartbeat_interval * 4;
  auto stream = stub_->Session(&context);
  bool session_over = false;  // guarded by mu_ (set by the reader)
  absl::Time last_grant = absl::Now();
  bool got_grant = false;

  std::thread reader([&]() {
    v1::SchedulerCommand command;
    while (stream->Read(&command)) {
      if (command.has_lease()) {
        {
          absl::MutexLock lock(&mu_);
          last_grant = absl::Now();
          got_grant = true;
        }
        if (options_.on_lease_renewed) options_.on_lease_renewed();
        continue;
      }
      handler_(command);
    }
    absl::MutexLock lock(&mu_);
    session_over = true;
  });

  bool ok = stream->Write(open);
  absl::Time next_heartbeat = absl::Now() + heartbeat_interval;
  // Cancel only sessions we end ourselves; one the scheduler ended carries
  // its status (e.g. FAILED_PRECONDITION: re-register) to Finish().
  bool cancel = true;
  while (ok) {
    std::deque<v1::NodeMessage> to_send;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || session_over || !outbox_.empty();
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next_heartbeat);
      if (stopping_) break;
      if (session_over) {
        cancel = false;
        break;
      }
      if (absl::Now() - last_grant > silence_limit) {
        LOG(WARNING) << "no lease grant for " << absl::Now() - last_grant
                     << "; reconnecting";
        break;
      }
      to_send.swap(outbox_);
    }
    for (auto& message : to_send) {
      if (!(ok = stream->Write(message))) break;
    }
    if (ok && absl::Now() >= next_heartbeat) {
      v1::NodeMessage heartbeat;
      heartbeat.mutable_heartbeat()->set_unix_ms(absl::ToUnixMillis(absl::Now()));
      ok = stream->Write(heartbeat);
      next_heartbeat = absl::Now() + heartbeat_interval;
    }
  }
  if (!ok) {
    // A failed write means the stream is broken; the reader sees it too.
    absl::MutexLock lock(&mu_);
    auto over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return session_over; };
    cancel = !mu_.AwaitWithTimeout(absl::Condition(&over), absl::Seconds(1));
  }
  if (cancel) context.TryCancel();
  reader.join();
  absl::Status status = FromGrpc(stream->Finish());
  absl::MutexLock lock(&mu_);
  session_context_ = nullptr;
  if (got_grant && status.ok()) return absl::UnavailableError("session ended");
  if (got_grant && status.code() == absl::StatusCode::kCancelled) {
    // We cancelled it ourselves (silence) or the scheduler ended it.
    return absl::UnavailableError(absl::StrCat("session ended: ", status.message()));
  }
  return status;
}

void NodeAgent::Run() {
  absl::Duration delay = options_.initial_backoff;
  int failures = 0;
  while (true) {
    bool need_register;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      need_register = !registered_;
    }
    if (need_register) {
      absl::Status status = RegisterOnce();
      if (!status.ok()) {
        // Invalid requests and name conflicts will not fix themselves, but
        // the operator may fix the scheduler side; keep trying, loudly.
        if (failures++ % 10 == 0) {
          LOG(WARNING) << "cannot register with " << options_.scheduler_address
                       << ": " << status << " (retrying)";
        }
        Backoff(delay);
        continue;
      }
      failures = 0;
      delay = options_.initial_backoff;
    }
    absl::Status status = RunSession();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (status.code() == absl::StatusCode::kFailedPrecondition ||
        status.code() == absl::StatusCode::kNotFound ||
        status.code() == absl::StatusCode::kInvalidArgument) {
      LOG(WARNING) << "scheduler refused the session (" << status.message()
                   << "); registering again";
      absl::MutexLock lock(&mu_);
      registered_ = false;
      continue;
    }
    if (status.code() == absl::StatusCode::kUnavailable &&
        absl::StrContains(status.message(), "session ended")) {
      // The session was up; reconnect quickly.
      delay = options_.initial_backoff;
    }
    if (failures++ % 10 == 0) {
      LOG(WARNING) << "session with " << options_.scheduler_address
                   << " ended: " << status << " (reconnecting)";
    }
    Backoff(delay);
  }
}

void NodeAgent::Stop(bool deregister) {
  uint64_t incarnation;
  bool was_registered;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    if (session_context_ != nullptr) session_context_->TryCancel();
    incarnation = incarnation_;
    was_registered = registered_;
  }
  if (thread_.joinable()) thread_.join();
  if (!deregister || !was_registered) return;
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(absl::Seconds(2)));
  v1::DeregisterRequest request;
  request.set_name(options_.registration.name());
  request.set_incarnation(incarnation);
  request.set_reason("clean shutdown");
  v1::DeregisterResponse response;
  absl::Status status = FromGrpc(stub_->Deregister(&context, request, &response));
  if (status.ok()) {
    LOG(INFO) << "deregistered '" << request.name() << "'";
  } else {
    LOG(WARNING) << "deregister failed (the lease will expire instead): " << status;
  }
}

}  // namespace corescape
