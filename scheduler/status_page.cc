#include "scheduler/status_page.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/server_context.h"
#include "scheduler/list_pages.h"
#include "scheduler/status_conversion.h"
#include "scheduler/status_page_html.h"

namespace corescape::scheduler {
namespace {

using Params = std::map<std::string, std::string>;

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (c < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

HttpResponse Error(int status, absl::string_view code, absl::string_view message) {
  HttpResponse response;
  response.status = status;
  response.body = absl::StrCat("{\"code\":", JsonString(code),
                               ",\"message\":", JsonString(message), "}\n");
  return response;
}

int HttpStatusOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::FAILED_PRECONDITION: return 409;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    default: return 500;
  }
}

HttpResponse FromGrpc(const grpc::Status& status) {
  return Error(HttpStatusOf(status.error_code()),
               absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
               status.error_message());
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) {
    return "{}";
  }
  return json;
}

HttpResponse Json(const google::protobuf::Message& message) {
  HttpResponse response;
  response.body = ToJson(message) + "\n";
  return response;
}

// One in-process call of a service method (the code the RPC runs),
// answered with its response as JSON or its error.
template <typename Service, typename Request, typename Response>
HttpResponse Call(Service* service,
                  grpc::Status (Service::*method)(grpc::ServerContext*, const Request*,
                                                  Response*),
                  const Request& request) {
  grpc::ServerContext context;
  Response response;
  const grpc::Status status = (service->*method)(&context, &request, &response);
  return status.ok() ? Json(response) : FromGrpc(status);
}

// What each path accepts; a parameter not listed is refused.
struct Route {
  std::set<std::string> parameters;
  std::set<std::string> required;
};

const std::map<std::string, Route>& Routes() {
  static const auto* routes = new std::map<std::string, Route>{
      {"/", {}},
      {"/api/status", {}},
      {"/api/nodes", {}},
      {"/api/jobs", {{"limit"}, {}}},
      {"/api/job", {{"id"}, {"id"}}},
      {"/api/job/events", {{"id", "after", "limit"}, {"id"}}},
      {"/api/attention_plan", {{"id"}, {"id"}}},
  };
  return *routes;
}

// A whole decimal number in [min, max], else nullopt.
template <typename T>
std::optional<T> ParseBounded(const Params& params, const std::string& name, T fallback,
                              T min, T max) {
  auto it = params.find(name);
  if (it == params.end()) return fallback;
  T value{};
  if (!absl::SimpleAtoi(it->second, &value) || value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace

HttpResponse StatusPageHandler::Handle(
    absl::string_view method, absl::string_view path,
    const std::multimap<std::string, std::string>& query) const {
  auto route = Routes().find(std::string(path));
  if (route == Routes().end()) {
    return Error(404, "NOT_FOUND", absl::StrCat("no such page: ", path.substr(0, 64)));
  }
  if (method != "GET" && method != "HEAD") {
    return Error(405, "METHOD_NOT_ALLOWED", "the status page is read-only: GET only");
  }
  Params params;
  for (const auto& [name, value] : query) {
    if (!route->second.parameters.contains(name)) {
      return Error(400, "INVALID_ARGUMENT",
                   absl::StrCat("unknown parameter '", name.substr(0, 32), "'"));
    }
    if (params.contains(name)) {
      return Error(400, "INVALID_ARGUMENT", absl::StrCat(name, ": given twice"));
    }
    if (value.empty() || value.size() > kMaxParameterBytes) {
      return Error(400, "INVALID_ARGUMENT",
                   absl::StrCat(name, ": must be 1 to ", kMaxParameterBytes, " bytes"));
    }
    for (unsigned char c : value) {
      if (!absl::ascii_isgraph(c)) {
        return Error(400, "INVALID_ARGUMENT",
                     absl::StrCat(name, ": printable ASCII without spaces only"));
      }
    }
    params[name] = value;
  }
  for (const std::string& name : route->second.required) {
    if (!params.contains(name)) {
      return Error(400, "INVALID_ARGUMENT", absl::StrCat(name, ": required"));
    }
  }
  if (path == "/") {
    HttpResponse page;
    page.content_type = "text/html; charset=utf-8";
    page.body = kStatusPageHtml;
    return page;
  }
  if (path == "/api/status") return Status();
  if (path == "/api/nodes") return Nodes();
  if (path == "/api/jobs") return Jobs(params);
  if (path == "/api/job") return Job(params);
  if (path == "/api/job/events") return JobEvents(params);
  return AttentionPlan(params);
}

HttpResponse StatusPageHandler::Status() const {
  return Call(operators_, &OperatorServiceImpl::GetClusterStatus, v1::GetClusterStatusRequest());
}

HttpResponse StatusPageHandler::Nodes() const {
  v1::ListNodesRequest request;
  request.set_page_size(kMaxPageSize);  // the page shows one page of nodes, the largest
  return Call(operators_, &OperatorServiceImpl::ListNodes, request);
}

HttpResponse StatusPageHandler::Jobs(const Params& params) const {
  std::optional<int> limit = ParseBounded(params, "limit", 50, 1, kMaxJobs);
  if (!limit) {
    return Error(400, "INVALID_ARGUMENT", absl::StrCat("limit: a number from 1 to ", kMaxJobs));
  }
  v1::ListJobsRequest request;
  request.set_limit(*limit);
  return Call(job_service_, &JobServiceImpl::ListJobs, request);
}

HttpResponse StatusPageHandler::Job(const Params& params) const {
  v1::GetJobRequest request;
  request.set_job_id(params.at("id"));
  return Call(job_service_, &JobServiceImpl::GetJob, request);
}

HttpResponse StatusPageHandler::JobEvents(const Params& params) const {
  std::optional<uint64_t> after =
      ParseBounded<uint64_t>(params, "after", 0, 0, std::numeric_limits<uint64_t>::max());
  if (!after) return Error(400, "INVALID_ARGUMENT", "after: a sequence number");
  std::optional<int> limit = ParseBounded(params, "limit", 1000, 1, kMaxEvents);
  if (!limit) {
    return Error(400, "INVALID_ARGUMENT",
                 absl::StrCat("limit: a number from 1 to ", kMaxEvents));
  }
  // GetJob first: it validates the id and answers NOT_FOUND as the RPC would.
  HttpResponse job = Job(params);
  if (job.status != 200) return job;
  // The replay WatchJob sends, a page at a time.
  absl::StatusOr<std::vector<v1::JobEvent>> events = jobs_->EventsAfter(params.at("id"), *after);
  if (!events.ok()) return FromGrpc(ToGrpcStatus(events.status()));
  const bool more = static_cast<int>(events->size()) > *limit;
  if (more) events->resize(*limit);
  const uint64_t next_after = events->empty() ? *after : events->back().sequence();
  HttpResponse response;
  response.body = absl::StrCat(
      "{\"events\":[",
      absl::StrJoin(*events, ",",
                    [](std::string* out, const v1::JobEvent& e) { out->append(ToJson(e)); }),
      "],\"next_after\":\"", next_after, "\",\"more\":", more ? "true" : "false", "}\n");
  return response;
}

HttpResponse StatusPageHandler::AttentionPlan(const Params& params) const {
  v1::GetAttentionPlanRequest request;
  request.set_job_id(params.at("id"));
  return Call(operators_, &OperatorServiceImpl::GetAttentionPlan, request);
}

absl::StatusOr<std::unique_ptr<StatusPage>> StatusPage::Start(const std::string& listen,
                                                              StatusPageHandler handler,
                                                              std::optional<HttpTls> tls) {
  std::unique_ptr<StatusPage> page(new StatusPage(std::move(handler)));
  auto http = HttpServer::Start(listen, [routes = &page->handler_](const HttpRequest& request) {
    HttpResponse answer = routes->Handle(request.method, request.path, request.params);
    if (answer.status == 405) answer.headers.push_back({"Allow", "GET, HEAD"});
    return answer;
  }, std::move(tls));
  if (!http.ok()) {
    return absl::Status(http.status().code(),
                        absl::StrCat("status page: ", http.status().message()));
  }
  page->http_ = *std::move(http);
  return page;
}

}  // namespace corescape::scheduler
