#include "client/cli/rendering/job_output.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/rendering/output.h"
#include "client/cli/rendering/progress_bar.h"
#include "client/cli/parsing/proto_json.h"
#include "client/cli/rendering/table.h"
#include "runtime/base/printable_text.h"
#include "runtime/job/job_device.h"

namespace corescape::cli {

namespace v1 = ::corescape::v1;

std::string JobStateName(v1::JobState state) { return v1::JobState_Name(state); }

std::string FormatThousands(int64_t value) {
  const bool negative = value < 0;
  std::string digits = absl::StrCat(negative ? -static_cast<uint64_t>(value)
                                             : static_cast<uint64_t>(value));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string FormatTokensPerSecond(double rate) {
  return rate > 0 ? FormatThousands(std::llround(std::min(rate, 1e15))) : "-";
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit + 1 < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatLoss(double loss) {
  if (std::isnan(loss)) return "nan";
  if (std::isinf(loss)) return loss > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.3f", loss);
}

bool HasMfu(const v1::JobProgress& progress) {
  return std::isfinite(progress.mfu()) && progress.mfu() > 0;
}

std::string FormatMfu(double mfu) { return absl::StrFormat("MFU %.1f%%", 100 * mfu); }

std::string RenderComputeRate(const v1::JobProgress& progress) {
  const std::string rate =
      absl::StrFormat("%.4g TFLOP/s per worker", progress.model_tflops_per_second());
  return HasMfu(progress)
             ? absl::StrCat(rate, ", ", FormatMfu(progress.mfu()))
             : absl::StrCat(rate, " (MFU unknown: no peak for this device)");
}

std::string FormatEta(double seconds) {
  if (!(seconds > 0)) return "0s";
  // Rounded up: "ETA 0s" would claim the job is done.
  const int64_t total = static_cast<int64_t>(std::ceil(std::min(seconds, 1e9)));
  if (total < 60) return absl::StrCat(total, "s");
  if (total < 3600) return absl::StrFormat("%dm%02ds", total / 60, total % 60);
  return absl::StrFormat("%dh%02dm", total / 3600, (total % 3600) / 60);
}

namespace {

nlohmann::json FiniteOrNull(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

int64_t TotalSteps(const v1::Job& job) {
  return job.progress().total_steps() > 0 ? job.progress().total_steps()
                                          : job.spec().steps();
}

}  // namespace

double AverageTokensPerSecond(const v1::JobProgress& progress) {
  if (progress.steps_timed() <= 0 || progress.tokens_trained() <= 0 ||
      !(progress.steps_seconds() > 0)) {
    return 0;
  }
  const double average = progress.tokens_trained() / progress.steps_seconds();
  return std::isfinite(average) ? average : 0;
}

nlohmann::json JobProgressToJson(const v1::JobProgress& progress) {
  const double average = AverageTokensPerSecond(progress);
  return {
      {"step", progress.step()},
      {"total_steps", progress.total_steps()},
      {"loss", FiniteOrNull(progress.loss())},
      {"validation_loss", FiniteOrNull(progress.validation_loss())},
      {"tokens_per_second", FiniteOrNull(progress.tokens_per_second())},
      {"model_tflops_per_second", FiniteOrNull(progress.model_tflops_per_second())},
      {"mfu", FiniteOrNull(progress.mfu())},
      {"bytes_sent", progress.bytes_sent()},
      {"bytes_received", progress.bytes_received()},
      {"checkpoint_step", progress.checkpoint_step()},
      {"eta_seconds", FiniteOrNull(progress.eta_seconds())},
      {"tokens_trained", progress.tokens_trained()},
      {"steps_seconds", FiniteOrNull(progress.steps_seconds())},
      {"steps_timed", progress.steps_timed()},
      {"average_tokens_per_second",
       average > 0 ? nlohmann::json(average) : nlohmann::json(nullptr)},
  };
}

nlohmann::json JobToJson(const v1::Job& job) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : job.assigned_nodes()) nodes.push_back(node);
  nlohmann::json json = {
      {"job_id", job.job_id()},
      {"name", job.spec().name()},
      {"state", JobStateName(job.state())},
      {"state_reason", job.state_reason()},
      {"generation", job.generation()},
      {"assigned_nodes", nodes},
      {"progress", JobProgressToJson(job.progress())},
      {"spec", ProtoToJson(job.spec())},
  };
  AddTime(json, "submitted", job.submitted_unix_ms());
  AddTime(json, "started", job.started_unix_ms());
  AddTime(json, "finished", job.finished_unix_ms());
  return json;
}

nlohmann::json JobsToJson(const std::vector<v1::Job>& jobs) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& job : jobs) array.push_back(JobToJson(job));
  return array;
}

nlohmann::json JobEventToJson(const v1::JobEvent& event) {
  nlohmann::json json = {
      {"sequence", event.sequence()},
      {"time", FormatIso8601Millis(event.unix_ms())},
      {"unix_ms", event.unix_ms()},
      {"job_id", event.job_id()},
  };
  switch (event.body_case()) {
    case v1::JobEvent::kState:
      json["type"] = "state";
      json["state"] = JobStateName(event.state());
      break;
    case v1::JobEvent::kProgress:
      json["type"] = "progress";
      json["progress"] = JobProgressToJson(event.progress());
      break;
    default:
      json["type"] = "other";
      break;
  }
  json["message"] = event.message();
  return json;
}

void SortJobsNewestFirst(std::vector<v1::Job>& jobs) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const v1::Job& a, const v1::Job& b) {
                     return std::forward_as_tuple(a.submitted_unix_ms(),
                                                  a.job_id()) >
                            std::forward_as_tuple(b.submitted_unix_ms(),
                                                  b.job_id());
                   });
}

int AssignedAttentionServers(const v1::Job& job) {
  if (job.spec().attention().mode() != v1::DISAGGREGATED ||
      job.assigned_nodes_size() == 0) {
    return 0;
  }
  // Fewer than the spec's after the scheduler re-planned around a lost one.
  const int servers = job.assigned_attention_servers() > 0
                          ? job.assigned_attention_servers()
                          : job.spec().attention().attention_servers();
  return std::min(servers, job.assigned_nodes_size());
}

int AssignedWorkers(const v1::Job& job) {
  return job.assigned_nodes_size() - AssignedAttentionServers(job);
}

std::string RenderJobsTable(const std::vector<v1::Job>& jobs,
                            int64_t now_unix_ms) {
  Table table({"JOB", "NAME", "STATE", "DEVICE", "STEP/TOTAL", "LOSS", "VAL-LOSS",
               "TOKENS/S", "WORKERS", "SERVERS", "AGE"});
  std::string waiting;
  for (const auto& job : jobs) {
    const v1::JobProgress& progress = job.progress();
    const bool stepped = progress.step() > 0;
    const int64_t total = TotalSteps(job);
    table.AddRow({
        job.job_id(),
        OrDash(job.spec().name()),
        JobStateName(job.state()),
        job::DeviceKindName(job::JobDevice(job.spec())),
        absl::StrCat(progress.step(), "/", total > 0 ? absl::StrCat(total) : "?"),
        stepped ? FormatLoss(progress.loss()) : "-",
        progress.validation_loss() > 0 || std::isnan(progress.validation_loss())
            ? FormatLoss(progress.validation_loss())
            : "-",
        FormatTokensPerSecond(progress.tokens_per_second()),
        absl::StrCat(AssignedWorkers(job), "/", job.spec().placement().workers()),
        job.spec().attention().mode() == v1::DISAGGREGATED
            ? absl::StrCat(AssignedAttentionServers(job), "/",
                           job.spec().attention().attention_servers())
            : "-",
        job.submitted_unix_ms() == 0
            ? "-"
            : FormatShortDuration(
                  absl::Milliseconds(now_unix_ms - job.submitted_unix_ms())),
    });
    if (job.state() == v1::PENDING && !job.state_reason().empty()) {
      absl::StrAppend(&waiting, EscapeUnsafeCharacters(job.job_id()), ": ",
                      EscapeUnsafeCharacters(job.state_reason()), "\n");
    }
  }
  // Why each pending job waits (a missing GPU, busy workers), under the table.
  return waiting.empty() ? table.Render() : absl::StrCat(table.Render(), "\n", waiting);
}

namespace {

std::string TimeLine(int64_t unix_ms, int64_t now_unix_ms) {
  if (unix_ms == 0) return "-";
  return absl::StrCat(FormatIso8601Millis(unix_ms), " (",
                      FormatAge(unix_ms, now_unix_ms), ")");
}

std::string ModelLine(const v1::ModelSpec& model) {
  std::vector<std::string> overrides;
  auto add = [&overrides](const char* name, double value) {
    if (value != 0) overrides.push_back(absl::StrCat(name, " ", value));
  };
  add("n_layers", model.n_layers());
  add("d_model", model.d_model());
  add("n_heads", model.n_heads());
  add("n_kv_heads", model.n_kv_heads());
  add("d_ff", model.d_ff());
  add("vocab_size", model.vocab_size());
  add("max_seq_len", model.max_seq_len());
  add("rope_theta", model.rope_theta());
  add("norm_eps", model.norm_eps());
  if (model.tie_embeddings()) overrides.push_back("tie_embeddings");
  std::string line = OrDash(model.preset());
  if (!overrides.empty()) {
    absl::StrAppend(&line, " (", absl::StrJoin(overrides, ", "), ")");
  }
  return line;
}

std::string OptimizerLine(const v1::OptimizerSpec& optimizer) {
  std::vector<std::string> parts = {OrDash(optimizer.name())};
  if (optimizer.learning_rate() != 0) {
    parts.push_back(absl::StrCat("lr ", optimizer.learning_rate()));
  }
  if (!optimizer.schedule().empty()) {
    parts.push_back(absl::StrCat(optimizer.schedule(), " schedule"));
  }
  if (optimizer.warmup_steps() != 0) {
    parts.push_back(absl::StrCat("warm-up ", optimizer.warmup_steps()));
  }
  if (optimizer.weight_decay() != 0) {
    parts.push_back(absl::StrCat("weight decay ", optimizer.weight_decay()));
  }
  // The scheduler fills a density for the sparse optimizers only.
  if (optimizer.scape().density() > 0) {
    parts.push_back(absl::StrCat("density ", optimizer.scape().density()));
  }
  return absl::StrJoin(parts, ", ");
}

std::string AttentionModeName(v1::AttentionMode mode) {
  return mode == v1::ATTENTION_MODE_UNSPECIFIED ? "-"
                                                : v1::AttentionMode_Name(mode);
}

}  // namespace

std::string RenderJobDetails(const v1::Job& job, int64_t now_unix_ms) {
  const v1::JobSpec& spec = job.spec();
  Table lines({"", ""});
  lines.AddRow({"Job:", job.job_id()});
  lines.AddRow({"Name:", OrDash(spec.name())});
  lines.AddRow({"State:", JobStateName(job.state())});
  if (!job.state_reason().empty()) lines.AddRow({"Reason:", job.state_reason()});
  lines.AddRow({"Generation:", absl::StrCat(job.generation())});
  lines.AddRow({"Progress:", job.progress().step() > 0 ||
                                     job.progress().total_steps() > 0
                                 ? RenderProgressText(job.progress())
                                 : "-"});
  if (job.progress().model_tflops_per_second() > 0 &&
      std::isfinite(job.progress().model_tflops_per_second())) {
    lines.AddRow({"Compute:", RenderComputeRate(job.progress())});
  }
  lines.AddRow({"Traffic:", absl::StrCat(
                                FormatBytes(job.progress().bytes_sent()),
                                " sent, ",
                                FormatBytes(job.progress().bytes_received()),
                                " received")});
  lines.AddRow({"Checkpoint:",
                 job.progress().checkpoint_step() > 0
                     ? absl::StrCat("step ", job.progress().checkpoint_step())
                     : "none yet"});
  lines.AddRow({"Model:", ModelLine(spec.model())});
  lines.AddRow(
      {"Train data:", OrDash(absl::StrJoin(spec.data().train_shards(), ", "))});
  lines.AddRow({"Validation:", OrDash(absl::StrJoin(
                                   spec.data().validation_shards(), ", "))});
  lines.AddRow(
      {"Batch:", absl::StrCat("sequence ", spec.data().sequence_length(),
                              " x micro-batch ", spec.data().micro_batch_size(),
                              " x accumulation ",
                              spec.data().gradient_accumulation())});
  lines.AddRow({"Optimizer:", OptimizerLine(spec.optimizer())});
  lines.AddRow({"Steps:", absl::StrCat(spec.steps(), ", validation every ",
                                       spec.eval_interval_steps())});
  lines.AddRow(
      {"Checkpoints:",
       spec.checkpoint().directory().empty()
           ? "-"
           : absl::StrCat(spec.checkpoint().directory(), ", every ",
                          spec.checkpoint().interval_steps(), " steps",
                          spec.checkpoint().keep() > 0
                              ? absl::StrCat(", keep ", spec.checkpoint().keep())
                              : "")});
  lines.AddRow(
      {"Workers:",
       absl::StrCat(spec.placement().workers(),
                    spec.placement().min_workers() > 0
                        ? absl::StrCat(" (elastic minimum ",
                                       spec.placement().min_workers(), ")")
                        : "")});
  lines.AddRow({"Attention:",
                absl::StrCat(AttentionModeName(spec.attention().mode()),
                             spec.attention().attention_servers() > 0
                                 ? absl::StrCat(
                                       ", ", spec.attention().attention_servers(),
                                       spec.attention().attention_servers() == 1
                                           ? " attention server"
                                           : " attention servers")
                                 : "")});
  lines.AddRow({"Device:", job::DeviceKindName(job::JobDevice(spec))});
  lines.AddRow({"Seed:", absl::StrCat(spec.seed())});
  lines.AddRow({"Submitted:", TimeLine(job.submitted_unix_ms(), now_unix_ms)});
  lines.AddRow({"Started:", TimeLine(job.started_unix_ms(), now_unix_ms)});
  lines.AddRow({"Finished:", TimeLine(job.finished_unix_ms(), now_unix_ms)});
  std::string out = lines.RenderRowsOnly();
  if (job.assigned_nodes().empty()) {
    absl::StrAppend(&out, "\nNodes: none assigned\n");
  } else {
    Table nodes({"RANK", "NODE"});
    for (int rank = 0; rank < job.assigned_nodes_size(); ++rank) {
      nodes.AddRow({absl::StrCat(rank), job.assigned_nodes(rank)});
    }
    absl::StrAppend(&out, "\nNodes:\n", nodes.Render());
  }
  return out;
}

}  // namespace corescape::cli
