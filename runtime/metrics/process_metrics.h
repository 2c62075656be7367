#ifndef CORESCAPE_RUNTIME_METRICS_PROCESS_METRICS_H_
#define CORESCAPE_RUNTIME_METRICS_PROCESS_METRICS_H_

#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace corescape::metrics {

// The process as /proc/self shows it now: corescape_process_start_time_seconds,
// _cpu_seconds_total, _resident_memory_bytes, _threads, _open_fds, and
// corescape_build_info{daemon, version} = 1.
std::vector<prometheus::MetricFamily> CollectProcessMetrics(const std::string& daemon);

}  // namespace corescape::metrics

#endif  // CORESCAPE_RUNTIME_METRICS_PROCESS_METRICS_H_
