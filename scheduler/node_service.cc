#include "scheduler/node_service.h"

#include <atomic>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "glog/logging.h"
#include "scheduler/request_validation.h"
#include "scheduler/status_conversion.h"

namespace corescape::scheduler {
namespace {

// A refused report is the node's problem, not the session's: log it (rate
// limited, a node repeats its mistakes every step) and keep the session.
void RouteAttentionReport(AttentionReportSink& sink, const std::string& node,
                          uint64_t incarnation, const v1::NodeMessage& message) {
  absl::Status status;
  if (message.has_attention_demand()) {
    status = sink.OnAttentionDemand(node, incarnation, message.attention_demand());
  } else if (message.has_attention_timing()) {
    status = sink.OnAttentionTiming(node, incarnation, message.attention_timing());
  }
  if (!status.ok()) {
    LOG_EVERY_N(WARNING, 50) << "attention report from " << node << " refused: " << status
                             << " (every 50th shown)";
  }
}

}  // namespace

grpc::Status NodeServiceImpl::Register(grpc::ServerContext* context,
                                       const v1::RegisterRequest* request,
                                       v1::RegisterResponse* response) {
  // Authenticated first, then validated (naming the bad field), then
  // authorized for the name it asks for.
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateRegisterRequest(*request); !s.ok()) {
    LOG(WARNING) << "rejected Register from " << context->peer() << ": " << s;
    return ToGrpcStatus(s);
  }
  if (absl::Status s = authorizer_.AllowNode(*context, request->name()); !s.ok()) {
    LOG(WARNING) << "refused Register from " << context->peer() << ": " << s;
    return ToGrpcStatus(s);
  }
  auto result = registry_->Register(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Session(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::SchedulerCommand, v1::NodeMessage>* stream) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  auto slot = StreamSlots::AcquireFrom(session_slots_);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  v1::NodeMessage first;
  if (!stream->Read(&first)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "open: session closed before SessionOpen");
  }
  if (absl::Status s = ValidateSessionOpen(first); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = authorizer_.AllowNode(*context, first.open().name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const std::string name = first.open().name();
  const uint64_t incarnation = first.open().incarnation();
  auto grant = registry_->OpenSession(name, incarnation);
  if (!grant.ok()) return ToGrpcStatus(grant.status());
  absl::Cleanup close_session = [&]() { registry_->CloseSession(name, incarnation); };
  {
    v1::SchedulerCommand command;
    *command.mutable_lease() = *grant;
    if (!stream->Write(command)) return grpc::Status::OK;
  }
  VLOG(1) << "session open: " << name << " incarnation " << incarnation;

  // One thread reads (renewals, reports), this one writes (grants, commands):
  // gRPC allows one concurrent reader and one concurrent writer.
  std::atomic<bool> reader_done{false};
  absl::Status reader_status;
  std::thread reader([&]() {
    v1::NodeMessage message;
    while (stream->Read(&message)) {
      if (message.has_open()) {
        reader_status = absl::InvalidArgumentError("open: sent twice in one session");
        break;
      }
      // Any message from the node proves it is alive.
      auto renewed = registry_->Renew(name, incarnation);
      if (!renewed.ok()) {
        reader_status = renewed.status();
        break;
      }
      if (reports_ != nullptr && message.has_step_report()) {
        reports_->OnStepReport(name, incarnation, message.step_report());
      } else if (reports_ != nullptr && message.has_job_failure()) {
        reports_->OnJobFailure(name, incarnation, message.job_failure());
      }
      if (attention_reports_ != nullptr) {
        RouteAttentionReport(*attention_reports_, name, incarnation, message);
      }
      if (message.has_heartbeat()) {
        v1::SchedulerCommand command;
        *command.mutable_lease() = *renewed;
        // Fails only if the incarnation was superseded meanwhile; the
        // writer loop notices that itself.
        registry_->Push(name, incarnation, command).IgnoreError();
      }
    }
    reader_done = true;
  });

  absl::Status writer_status;
  while (!reader_done && !context->IsCancelled()) {
    if (shutting_down_) {
      writer_status = absl::UnavailableError("scheduler is shutting down");
      break;
    }
    auto commands =
        registry_->TakeCommands(name, incarnation, absl::Milliseconds(200));
    if (!commands.ok()) {
      writer_status = commands.status();
      break;
    }
    bool write_failed = false;
    for (const auto& command : *commands) {
      if (!stream->Write(command)) {
        write_failed = true;
        break;
      }
    }
    if (write_failed) break;
  }
  // Unblocks the reader if we stopped first (superseded or cancelled).
  context->TryCancel();
  reader.join();
  VLOG(1) << "session closed: " << name << " incarnation " << incarnation;
  if (!reader_status.ok()) return ToGrpcStatus(reader_status);
  return ToGrpcStatus(writer_status);
}

grpc::Status NodeServiceImpl::Deregister(grpc::ServerContext* context,
                                         const v1::DeregisterRequest* request,
                                         v1::DeregisterResponse* response) {
  if (absl::Status s = authorizer_.RequireCertificate(*context); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = ValidateDeregisterRequest(*request); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = authorizer_.AllowNode(*context, request->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return ToGrpcStatus(registry_->Deregister(request->name(),
                                            request->incarnation(),
                                            request->reason()));
}

}  // namespace corescape::scheduler
