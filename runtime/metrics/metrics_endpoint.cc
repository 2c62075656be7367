#include "runtime/metrics/metrics_endpoint.h"

#include <sstream>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "prometheus/text_serializer.h"
#include "runtime/base/atomic_file.h"
#include "runtime/metrics/process_metrics.h"

ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (GET /metrics); port 0 picks a free "
          "port; empty: no metrics endpoint");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set, the metrics endpoint's bound HOST:PORT is written here once serving");

namespace corescape::metrics {

std::string MetricName(absl::string_view name) { return absl::StrCat("corescape_", name); }

FamilyBuilder::FamilyBuilder(absl::string_view name, std::string help,
                             prometheus::MetricType type) {
  family_.name = MetricName(name);
  family_.help = std::move(help);
  family_.type = type;
}

FamilyBuilder& FamilyBuilder::Add(const std::map<std::string, std::string>& labels,
                                  double value) {
  prometheus::ClientMetric metric;
  for (const auto& [name, label_value] : labels) metric.label.push_back({name, label_value});
  if (family_.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family_.metric.push_back(std::move(metric));
  return *this;
}

prometheus::MetricFamily FamilyBuilder::Build() { return std::move(family_); }

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, const std::string& daemon, std::optional<HttpTls> tls) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = std::make_unique<prometheus::Registry>();
  endpoint->AddCollector([daemon]() { return CollectProcessMetrics(daemon); });
  auto http = HttpServer::Start(
      listen, [e = endpoint.get()](const HttpRequest& request) { return e->Handle(request); },
      std::move(tls));
  if (!http.ok()) {
    return absl::Status(http.status().code(),
                        absl::StrCat("cannot serve metrics: ", http.status().message()));
  }
  endpoint->http_ = *std::move(http);
  return endpoint;
}

HttpResponse MetricsEndpoint::Handle(const HttpRequest& request) const {
  HttpResponse response;
  response.content_type = "text/plain; charset=utf-8";
  if (request.path != "/metrics") {
    response.status = 404;
    response.body = "not found: metrics are at /metrics\n";
  } else if (request.method != "GET" && request.method != "HEAD") {
    response.status = 405;
    response.headers.push_back({"Allow", "GET, HEAD"});
    response.body = "GET only\n";
  } else {
    // The version of the text format Prometheus negotiates for.
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = Scrape();
  }
  return response;
}

std::string MetricsEndpoint::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  {
    absl::MutexLock lock(&mu_);
    for (const Collector& collect : collectors_) {
      for (prometheus::MetricFamily& family : collect()) families.push_back(std::move(family));
    }
  }
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  return text.str();
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::StartFromFlags(
    const std::string& daemon, std::optional<HttpTls> tls) {
  const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  if (listen.empty()) return std::unique_ptr<MetricsEndpoint>();
  auto endpoint = Start(listen, daemon, std::move(tls));
  if (!endpoint.ok()) {
    return absl::Status(endpoint.status().code(),
                        absl::StrCat("--metrics_listen: ", endpoint.status().message()));
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_metrics_port_file);
      !port_file.empty()) {
    if (absl::Status s = WriteFileAtomically(port_file, (*endpoint)->bound_address() + "\n");
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--metrics_port_file: ", s.message()));
    }
  }
  LOG(INFO) << "metrics on " << (*endpoint)->scheme() << "://" << (*endpoint)->bound_address()
            << "/metrics";
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  http_.reset();  // its threads call the collectors
}

void MetricsEndpoint::AddCollector(Collector collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

}  // namespace corescape::metrics
