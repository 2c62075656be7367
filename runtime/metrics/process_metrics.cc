#include "runtime/metrics/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "corescape_version.h"
#include "runtime/metrics/metrics_endpoint.h"

namespace corescape::metrics {
namespace {

std::string ReadWhole(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Seconds since the epoch at which the machine booted (/proc/stat btime).
double BootTime() {
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    double seconds = 0;
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtod(line.substr(6), &seconds)) {
      return seconds;
    }
  }
  return 0;
}

}  // namespace

std::vector<prometheus::MetricFamily> CollectProcessMetrics(const std::string& daemon) {
  std::vector<prometheus::MetricFamily> families;
  families.push_back(FamilyBuilder("build_info", "corescape build of this daemon (always 1)")
                         .Add({{"daemon", daemon}, {"version", CORESCAPE_VERSION}}, 1)
                         .Build());
  // /proc/self/stat: "pid (comm) state ..." — comm may hold spaces, so the
  // fields are counted from after the last ')'; field 3 (state) is index 0.
  const std::string stat = ReadWhole("/proc/self/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return families;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  auto field = [&](int number) {  // 1-based, as in proc(5)
    double value = 0;
    const int index = number - 3;
    if (index >= 0 && index < static_cast<int>(fields.size())) {
      (void)absl::SimpleAtod(fields[index], &value);
    }
    return value;
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  families.push_back(FamilyBuilder("process_cpu_seconds_total",
                                   "user and system CPU time of the process",
                                   prometheus::MetricType::Counter)
                         .Add({}, (field(14) + field(15)) / ticks)
                         .Build());
  families.push_back(FamilyBuilder("process_start_time_seconds",
                                   "when the process started, seconds since the epoch")
                         .Add({}, BootTime() + field(22) / ticks)
                         .Build());
  families.push_back(FamilyBuilder("process_resident_memory_bytes", "resident set size")
                         .Add({}, field(24) * page)
                         .Build());
  families.push_back(
      FamilyBuilder("process_threads", "threads of the process").Add({}, field(20)).Build());
  std::error_code error;
  int fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++fds;
  }
  families.push_back(
      FamilyBuilder("process_open_fds", "open file descriptors").Add({}, fds).Build());
  return families;
}

}  // namespace corescape::metrics
