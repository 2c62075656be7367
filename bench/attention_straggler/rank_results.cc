#include "bench/attention_straggler/rank_results.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace corescape::bench {
namespace {

using Fields = std::map<std::string, std::vector<double>>;

std::string Encode(const Fields& fields) {
  std::string text;
  for (const auto& [key, values] : fields) {
    absl::StrAppend(&text, key);
    for (double v : values) absl::StrAppend(&text, " ", absl::StrFormat("%.17g", v));
    absl::StrAppend(&text, "\n");
  }
  return text;
}

absl::StatusOr<Fields> Decode(const std::string& text) {
  Fields fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    std::vector<double>& values = fields[std::string(words[0])];
    for (size_t i = 1; i < words.size(); ++i) {
      double v;
      if (!absl::SimpleAtod(words[i], &v)) {
        return absl::DataLossError(absl::StrCat("bad number in result line: ", line));
      }
      values.push_back(v);
    }
  }
  return fields;
}

absl::StatusOr<double> One(const Fields& fields, const std::string& key) {
  auto it = fields.find(key);
  if (it == fields.end() || it->second.size() != 1) {
    return absl::DataLossError(absl::StrCat("result has no single value for ", key));
  }
  return it->second[0];
}

std::vector<double> Many(const Fields& fields, const std::string& key) {
  auto it = fields.find(key);
  return it == fields.end() ? std::vector<double>{} : it->second;
}

}  // namespace

std::string EncodeWorkerResult(const WorkerResult& r) {
  return Encode({{"worker", {static_cast<double>(r.worker)}},
                 {"forward_seconds", r.forward_seconds},
                 {"backward_seconds", r.backward_seconds},
                 {"cpu_seconds", r.cpu_seconds},
                 {"bytes_moved", r.bytes_moved},
                 {"plan_imbalance", {r.plan_imbalance}},
                 {"plan_server_pairs", r.plan_server_pairs},
                 {"plan_tasks", {r.plan_tasks}},
                 {"plan_split_documents", {r.plan_split_documents}}});
}

std::string EncodeServerResult(const ServerResult& r) {
  return Encode({{"server", {static_cast<double>(r.server)}},
                 {"compute_seconds", r.compute_seconds},
                 {"cpu_seconds", r.cpu_seconds},
                 {"tasks", {r.tasks}},
                 {"query_rows", {r.query_rows}}});
}

absl::StatusOr<WorkerResult> DecodeWorkerResult(const std::string& text) {
  auto fields = Decode(text);
  if (!fields.ok()) return fields.status();
  WorkerResult r;
  auto worker = One(*fields, "worker");
  auto imbalance = One(*fields, "plan_imbalance");
  auto tasks = One(*fields, "plan_tasks");
  auto split = One(*fields, "plan_split_documents");
  for (const auto* s : {&worker, &imbalance, &tasks, &split}) {
    if (!s->ok()) return s->status();
  }
  r.worker = static_cast<int>(*worker);
  r.plan_imbalance = *imbalance;
  r.plan_tasks = *tasks;
  r.plan_split_documents = *split;
  r.forward_seconds = Many(*fields, "forward_seconds");
  r.backward_seconds = Many(*fields, "backward_seconds");
  r.cpu_seconds = Many(*fields, "cpu_seconds");
  r.bytes_moved = Many(*fields, "bytes_moved");
  r.plan_server_pairs = Many(*fields, "plan_server_pairs");
  if (r.forward_seconds.empty() || r.forward_seconds.size() != r.backward_seconds.size() ||
      r.cpu_seconds.size() != r.forward_seconds.size()) {
    return absl::DataLossError(absl::StrCat("worker ", r.worker, " reported no repeats"));
  }
  return r;
}

absl::StatusOr<ServerResult> DecodeServerResult(const std::string& text) {
  auto fields = Decode(text);
  if (!fields.ok()) return fields.status();
  ServerResult r;
  auto server = One(*fields, "server");
  auto tasks = One(*fields, "tasks");
  auto rows = One(*fields, "query_rows");
  for (const auto* s : {&server, &tasks, &rows}) {
    if (!s->ok()) return s->status();
  }
  r.server = static_cast<int>(*server);
  r.tasks = *tasks;
  r.query_rows = *rows;
  r.compute_seconds = Many(*fields, "compute_seconds");
  r.cpu_seconds = Many(*fields, "cpu_seconds");
  return r;
}

std::string WorkerResultPath(const std::string& dir, int worker) {
  return absl::StrCat(dir, "/worker", worker, ".result");
}

std::string ServerResultPath(const std::string& dir, int server) {
  return absl::StrCat(dir, "/server", server, ".result");
}

}  // namespace corescape::bench
