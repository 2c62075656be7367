#include "scheduler/status_page.h"

#include <sys/socket.h>

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
#include "httplib.h"
#include "runtime/base/host_port.h"
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

// The response to a service call: the message, or the call's error.
HttpResponse Answer(const grpc::Status& status, const google::protobuf::Message& message) {
  return status.ok() ? Json(message) : FromGrpc(status);
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
    HttpResponse response =
        Error(405, "METHOD_NOT_ALLOWED", "the status page is read-only: GET only");
    return response;
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
  grpc::ServerContext context;
  v1::GetClusterStatusRequest request;
  v1::GetClusterStatusResponse response;
  return Answer(operators_->GetClusterStatus(&context, &request, &response), response);
}

HttpResponse StatusPageHandler::Nodes() const {
  grpc::ServerContext context;
  v1::ListNodesRequest request;
  v1::ListNodesResponse response;
  return Answer(operators_->ListNodes(&context, &request, &response), response);
}

HttpResponse StatusPageHandler::Jobs(const Params& params) const {
  std::optional<int> limit = ParseBounded(params, "limit", 50, 1, kMaxJobs);
  if (!limit) {
    return Error(400, "INVALID_ARGUMENT", absl::StrCat("limit: a number from 1 to ", kMaxJobs));
  }
  grpc::ServerContext context;
  v1::ListJobsRequest request;
  request.set_limit(*limit);
  v1::ListJobsResponse response;
  return Answer(job_service_->ListJobs(&context, &request, &response), response);
}

HttpResponse StatusPageHandler::Job(const Params& params) const {
  grpc::ServerContext context;
  v1::GetJobRequest request;
  request.set_job_id(params.at("id"));
  v1::GetJobResponse response;
  return Answer(job_service_->GetJob(&context, &request, &response), response);
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
  if (!events.ok()) {
    return Error(HttpStatusOf(static_cast<grpc::StatusCode>(events.status().code())),
                 absl::StatusCodeToString(events.status().code()), events.status().message());
  }
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
  grpc::ServerContext context;
  v1::GetAttentionPlanRequest request;
  request.set_job_id(params.at("id"));
  v1::GetAttentionPlanResponse response;
  return Answer(operators_->GetAttentionPlan(&context, &request, &response), response);
}

StatusPage::StatusPage(StatusPageHandler handler)
    : handler_(std::move(handler)), server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<StatusPage>> StatusPage::Start(const std::string& listen,
                                                              StatusPageHandler handler) {
  auto parsed = ParseHostPort(listen, /*min_port=*/0);
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<StatusPage> page(new StatusPage(std::move(handler)));
  httplib::Server& server = *page->server_;
  // No SO_REUSEPORT (httplib's default sets it): two schedulers must not
  // share a port.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_payload_max_length(4096);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_max_count(100);
  const StatusPageHandler* routes = &page->handler_;
  auto serve = [routes](const httplib::Request& request, httplib::Response& response) {
    HttpResponse answer = routes->Handle(request.method, request.path, request.params);
    response.status = answer.status;
    if (answer.status == 405) response.set_header("Allow", "GET, HEAD");
    response.set_header("Cache-Control", "no-store");
    response.set_header("X-Content-Type-Options", "nosniff");
    response.set_content(answer.body, answer.content_type.c_str());
  };
  // Every method reaches the handler, which refuses what is not a read.
  server.Get(".*", serve);
  server.Post(".*", serve);
  server.Put(".*", serve);
  server.Patch(".*", serve);
  server.Delete(".*", serve);
  server.Options(".*", serve);
  int port = 0;
  if (parsed->port == 0) {
    port = server.bind_to_any_port(parsed->host);
  } else if (server.bind_to_port(parsed->host, parsed->port)) {
    port = parsed->port;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve the status page on ", listen, " (address in use?)"));
  }
  HostPort bound = *parsed;
  bound.port = static_cast<uint16_t>(port);
  page->bound_address_ = bound.ToString();
  page->thread_ = std::thread([&server]() { server.listen_after_bind(); });
  return page;
}

StatusPage::~StatusPage() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace corescape::scheduler
