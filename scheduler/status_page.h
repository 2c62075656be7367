// The scheduler's read-only status page on --http_listen: one HTML page (no
// framework, no build step) that refreshes itself from JSON endpoints, and
// those endpoints (docs/status_page.md). Every endpoint answers from the
// same in-process calls the OperatorService and JobService answer RPCs
// from, as the proto messages in JSON; none of them writes anything.
#ifndef CORESCAPE_SCHEDULER_STATUS_PAGE_H_
#define CORESCAPE_SCHEDULER_STATUS_PAGE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/base/http_server.h"
#include "scheduler/job_manager.h"
#include "scheduler/job_service.h"
#include "scheduler/operator_service.h"

namespace corescape::scheduler {

// Request → response, without sockets.
class StatusPageHandler {
 public:
  // Bounds on what a request may ask for.
  static constexpr int kMaxJobs = 200;
  static constexpr int kMaxEvents = 5000;
  static constexpr size_t kMaxParameterBytes = 64;

  StatusPageHandler(OperatorServiceImpl* operators, JobServiceImpl* job_service,
                    const JobManager* jobs)
      : operators_(operators), job_service_(job_service), jobs_(jobs) {}

  // GET (and HEAD) only; 404 for unknown paths, 405 for other methods on
  // known ones, 400 for unknown, repeated or malformed parameters.
  HttpResponse Handle(absl::string_view method, absl::string_view path,
                      const std::multimap<std::string, std::string>& params) const;

 private:
  HttpResponse Status() const;
  HttpResponse Nodes() const;
  HttpResponse Jobs(const std::map<std::string, std::string>& params) const;
  HttpResponse Job(const std::map<std::string, std::string>& params) const;
  HttpResponse JobEvents(const std::map<std::string, std::string>& params) const;
  HttpResponse AttentionPlan(const std::map<std::string, std::string>& params) const;

  OperatorServiceImpl* operators_;
  JobServiceImpl* job_service_;
  const JobManager* jobs_;
};

// The handler served over HTTP (runtime/base/http_server) on its own threads.
class StatusPage {
 public:
  // `listen` is HOST:PORT; port 0 picks a free one. HTTPS with client
  // certificates given `tls`.
  static absl::StatusOr<std::unique_ptr<StatusPage>> Start(
      const std::string& listen, StatusPageHandler handler,
      std::optional<HttpTls> tls = std::nullopt);

  const std::string& bound_address() const { return http_->bound_address(); }
  // "http" or "https".
  const char* scheme() const { return http_->scheme(); }

 private:
  explicit StatusPage(StatusPageHandler handler) : handler_(std::move(handler)) {}

  const StatusPageHandler handler_;
  std::unique_ptr<HttpServer> http_;  // destroyed (stopped) before handler_
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_STATUS_PAGE_H_
