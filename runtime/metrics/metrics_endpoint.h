// A daemon's Prometheus endpoint: GET /metrics in the text exposition
// format on --metrics_listen, serving the daemon's metric objects (a
// prometheus::Registry) and families computed at scrape time from state the
// daemon already keeps (so the numbers are never a second, drifting copy).
// Every metric is named MetricName(...): corescape_<daemon part>_<what>.
//
// Served by runtime/base/http_server, not prometheus-cpp's pull exposer:
// the exposer's civetweb threads have 100 KB stacks, which glibc's printf
// overflows once libquadmath (loaded with OpenBLAS, as in the workers) has
// registered its printf handlers.
#ifndef CORESCAPE_RUNTIME_METRICS_METRICS_ENDPOINT_H_
#define CORESCAPE_RUNTIME_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "runtime/base/http_server.h"

namespace corescape::metrics {

// "scheduler_jobs" → "corescape_scheduler_jobs".
std::string MetricName(absl::string_view name);

// Families built at scrape time: one call per family.
using Collector = std::function<std::vector<prometheus::MetricFamily>()>;

// One family of gauges (or counters) computed at scrape time.
class FamilyBuilder {
 public:
  // `name` without the prefix.
  FamilyBuilder(absl::string_view name, std::string help,
                prometheus::MetricType type = prometheus::MetricType::Gauge);
  FamilyBuilder& Add(const std::map<std::string, std::string>& labels, double value);
  prometheus::MetricFamily Build();

 private:
  prometheus::MetricFamily family_;
};

class MetricsEndpoint {
 public:
  // Serves /metrics on `listen` (HOST:PORT; port 0 picks a free one), over
  // HTTPS with client certificates given `tls`.
  // `daemon` ("scheduler", "worker", ...) labels corescape_build_info.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, const std::string& daemon,
      std::optional<HttpTls> tls = std::nullopt);
  // From --metrics_listen and --metrics_port_file: null (and OK) when
  // --metrics_listen is empty; the bound HOST:PORT is written to the port
  // file once serving. `tls` as security::HttpTlsFromFlags gives it.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartFromFlags(
      const std::string& daemon, std::optional<HttpTls> tls);
  ~MetricsEndpoint();

  const std::string& bound_address() const { return http_->bound_address(); }
  // "http" or "https".
  const char* scheme() const { return http_->scheme(); }
  // For metric objects the daemon updates (counters, histograms).
  prometheus::Registry& registry() { return *registry_; }
  // Adds families computed at every scrape, on the server's threads: the
  // endpoint must be destroyed (it stops serving first) before what
  // `collect` reads.
  void AddCollector(Collector collect);

  // The text exposition of everything, as GET /metrics answers.
  std::string Scrape() const;

 private:
  MetricsEndpoint() = default;
  HttpResponse Handle(const HttpRequest& request) const;

  std::unique_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
  // Last, so destroyed first: its threads call the above.
  std::unique_ptr<HttpServer> http_;
};

}  // namespace corescape::metrics

#endif  // CORESCAPE_RUNTIME_METRICS_METRICS_ENDPOINT_H_
