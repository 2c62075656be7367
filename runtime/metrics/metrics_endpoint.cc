#include "runtime/metrics/metrics_endpoint.h"

#include <exception>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/host_port.h"
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

class MetricsEndpoint::Collectors final : public prometheus::Collectable {
 public:
  void Add(Collector collect) {
    absl::MutexLock lock(&mu_);
    collectors_.push_back(std::move(collect));
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    absl::MutexLock lock(&mu_);
    std::vector<prometheus::MetricFamily> families;
    for (const Collector& collect : collectors_) {
      for (prometheus::MetricFamily& family : collect()) families.push_back(std::move(family));
    }
    return families;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, const std::string& daemon) {
  auto parsed = ParseHostPort(listen, /*min_port=*/0);
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = std::make_shared<prometheus::Registry>();
  endpoint->collectors_ = std::make_shared<Collectors>();
  endpoint->AddCollector([daemon]() { return CollectProcessMetrics(daemon); });
  try {
    // civetweb wants IPv6 literals bracketed, as ToString writes them.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(parsed->ToString(),
                                                               /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen));
  }
  HostPort bound = *parsed;
  bound.port = static_cast<uint16_t>(ports.front());
  endpoint->bound_address_ = bound.ToString();
  endpoint->exposer_->RegisterCollectable(endpoint->registry_);
  endpoint->exposer_->RegisterCollectable(endpoint->collectors_);
  return endpoint;
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::StartFromFlags(
    const std::string& daemon) {
  const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  if (listen.empty()) return std::unique_ptr<MetricsEndpoint>();
  auto endpoint = Start(listen, daemon);
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
  LOG(INFO) << "metrics on http://" << (*endpoint)->bound_address() << "/metrics";
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  // The exposer's threads call the collectors: stop them first.
  exposer_.reset();
}

void MetricsEndpoint::AddCollector(Collector collect) { collectors_->Add(std::move(collect)); }

}  // namespace corescape::metrics
