#include "client/cli/parsing/job_spec_file.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/parsing/yaml_subset.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "runtime/job/attention_mode.h"
#include "runtime/job/job_device.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::cli {

namespace v1 = ::corescape::v1;
using nlohmann::json;

namespace {

// Records nlohmann's description of a syntax error (it is reported to the
// SAX handler rather than thrown).
class SyntaxErrorCollector : public json::json_sax_t {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& error) override {
    message_ = error.what();
    return false;
  }

  // "parse error at line 3, column 14: ..." without the "[json.exception...]".
  std::string message() const {
    const size_t end_of_tag = message_.find("] ");
    return end_of_tag == std::string::npos ? message_
                                           : message_.substr(end_of_tag + 2);
  }

 private:
  std::string message_ = "invalid JSON";
};

std::string SnakeCase(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) {
      out += '_';
      out += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// protobuf keeps the last of "evalIntervalSteps" and "eval_interval_steps"
// without a word; say so instead.
absl::Status CheckNoFieldTwice(const json& value, const std::string& path,
                               absl::string_view source) {
  if (value.is_array()) {
    for (const json& item : value) {
      if (absl::Status status = CheckNoFieldTwice(item, path, source);
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }
  if (!value.is_object()) return absl::OkStatus();
  std::map<std::string, std::string> spelling_by_field;
  for (const auto& [key, item] : value.items()) {
    const std::string field = SnakeCase(key);
    const std::string field_path = path.empty() ? field : path + "." + field;
    auto [it, inserted] = spelling_by_field.emplace(field, key);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": field '", field_path, "' is given twice (as '",
                       it->second, "' and '", key, "')"));
    }
    if (absl::Status status = CheckNoFieldTwice(item, field_path, source);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// protobuf's messages, e.g. "(model) bogus: Cannot find field." or
// "(data.train_shards[0]): invalid value 1 for type TYPE_STRING", as
// "unknown field 'model.bogus'" and "field 'data.train_shards[0]': ...".
std::string DescribeProtoJsonError(absl::string_view message) {
  constexpr absl::string_view kUnknown = ": Cannot find field.";
  if (absl::EndsWith(message, kUnknown)) {
    absl::string_view head = message.substr(0, message.size() - kUnknown.size());
    std::string field(head);
    if (absl::StartsWith(head, "(")) {
      const size_t close = head.find(") ");
      if (close != absl::string_view::npos) {
        absl::string_view parent = head.substr(1, close - 1);
        absl::string_view name = head.substr(close + 2);
        field = parent.empty() ? std::string(name)
                               : absl::StrCat(parent, ".", name);
      }
    }
    return absl::StrCat("unknown field '", field,
                        "' (JobSpec's fields are in proto/corescape/v1/job.proto)");
  }
  if (absl::StartsWith(message, "(")) {
    const size_t close = message.find("): ");
    if (close != absl::string_view::npos) {
      return absl::StrCat("field '", message.substr(1, close - 1),
                          "': ", message.substr(close + 3));
    }
  }
  if (absl::StrContains(message, "Root element must be a message")) {
    return "expected an object of JobSpec fields";
  }
  return std::string(message);
}

absl::StatusOr<v1::JobSpec> JobSpecFromJson(const json& value,
                                            absl::string_view source) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected an object of JobSpec fields"));
  }
  if (absl::Status status = CheckNoFieldTwice(value, "", source); !status.ok()) {
    return status;
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  options.case_insensitive_enum_parsing = true;
  // The YAML reader keeps a scalar's bytes as they are; dump() throws on
  // bytes that are not UTF-8 (the JSON reader refuses those itself).
  std::string text;
  try {
    text = value.dump();
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid UTF-8 text (", error.what(), ")"));
  }
  v1::JobSpec spec;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text, &spec, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", DescribeProtoJsonError(std::string(status.message()))));
  }
  return spec;
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpecJson(absl::string_view text,
                                             absl::string_view source) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false,
                           /*ignore_comments=*/true);
  if (value.is_discarded()) {
    SyntaxErrorCollector collector;
    json::sax_parse(text, &collector, json::input_format_t::json,
                    /*strict=*/true, /*ignore_comments=*/true);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", collector.message()));
  }
  return JobSpecFromJson(value, source);
}

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(absl::string_view text,
                                             absl::string_view source) {
  absl::StatusOr<json> value = ParseYamlSubset(text, source);
  if (!value.ok()) return value.status();
  return JobSpecFromJson(*value, source);
}

absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(path, error)) {
    return absl::NotFoundError(
        absl::StrCat("job file '", path, "' does not exist"));
  }
  if (fs::is_directory(path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job file '", path, "' is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read job file '", path, "'"));
  }
  const std::string text = buffer.str();
  const std::string lower = absl::AsciiStrToLower(path);
  bool yaml = absl::EndsWith(lower, ".yaml") || absl::EndsWith(lower, ".yml");
  if (!yaml && !absl::EndsWith(lower, ".json")) {
    absl::string_view content = absl::StripLeadingAsciiWhitespace(text);
    yaml = content.empty() || content[0] != '{';
  }
  return yaml ? ParseJobSpecYaml(text, path) : ParseJobSpecJson(text, path);
}

bool JobSpecOverrides::empty() const {
  return !name && !model && train_data.empty() && validation_data.empty() &&
         !seq_len && !micro_batch && !grad_accum && !steps && !optimizer &&
         !lr && !density && !workers && !min_workers && !eval_interval &&
         !checkpoint_dir && !checkpoint_interval && !attention_mode &&
         !attention_servers && !seed && !device;
}

namespace {

void ReplacePaths(const std::vector<std::string>& values,
                  google::protobuf::RepeatedPtrField<std::string>* paths) {
  paths->Clear();
  for (const std::string& value : values) {
    for (absl::string_view part : absl::StrSplit(value, ',')) {
      part = absl::StripAsciiWhitespace(part);
      if (!part.empty()) paths->Add(std::string(part));
    }
  }
}

}  // namespace

absl::Status ApplyJobSpecOverrides(const JobSpecOverrides& overrides,
                                   v1::JobSpec* spec) {
  if (overrides.name) spec->set_name(*overrides.name);
  if (overrides.model) spec->mutable_model()->set_preset(*overrides.model);
  v1::DataSpec* data = spec->mutable_data();
  if (!overrides.train_data.empty()) {
    ReplacePaths(overrides.train_data, data->mutable_train_shards());
  }
  if (!overrides.validation_data.empty()) {
    ReplacePaths(overrides.validation_data, data->mutable_validation_shards());
  }
  if (overrides.seq_len) data->set_sequence_length(*overrides.seq_len);
  if (overrides.micro_batch) data->set_micro_batch_size(*overrides.micro_batch);
  if (overrides.grad_accum) data->set_gradient_accumulation(*overrides.grad_accum);
  if (overrides.steps) spec->set_steps(*overrides.steps);
  v1::OptimizerSpec* optimizer = spec->mutable_optimizer();
  if (overrides.optimizer) {
    if (auto traits = optim::FindOptimizer(*overrides.optimizer); !traits.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--optimizer: ", traits.status().message()));
    }
    optimizer->set_name(*overrides.optimizer);
  }
  if (overrides.lr) optimizer->set_learning_rate(*overrides.lr);
  if (overrides.density) optimizer->mutable_scape()->set_density(*overrides.density);
  if (overrides.workers) spec->mutable_placement()->set_workers(*overrides.workers);
  if (overrides.min_workers) {
    spec->mutable_placement()->set_min_workers(*overrides.min_workers);
  }
  if (overrides.eval_interval) spec->set_eval_interval_steps(*overrides.eval_interval);
  if (overrides.checkpoint_dir) {
    spec->mutable_checkpoint()->set_directory(*overrides.checkpoint_dir);
  }
  if (overrides.checkpoint_interval) {
    spec->mutable_checkpoint()->set_interval_steps(*overrides.checkpoint_interval);
  }
  if (overrides.attention_mode) {
    absl::StatusOr<v1::AttentionMode> mode = job::ParseAttentionMode(*overrides.attention_mode);
    if (!mode.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attention-mode: ", mode.status().message()));
    }
    spec->mutable_attention()->set_mode(*mode);
  }
  if (overrides.attention_servers) {
    spec->mutable_attention()->set_attention_servers(*overrides.attention_servers);
  }
  if (overrides.seed) spec->set_seed(*overrides.seed);
  if (overrides.device) {
    absl::StatusOr<v1::Device> device = job::ParseJobDevice(*overrides.device);
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
    }
    spec->set_device(*device);
  }
  // Touching a sub-message through mutable_ makes it present; drop the ones
  // that stayed empty so the spec says no more than was given.
  if (spec->data().ByteSizeLong() == 0) spec->clear_data();
  if (spec->optimizer().ByteSizeLong() == 0) spec->clear_optimizer();
  return absl::OkStatus();
}

void ResolveJobSpecPaths(const std::string& base_dir, v1::JobSpec* spec) {
  namespace fs = std::filesystem;
  auto resolve = [&base_dir](std::string* path) {
    if (path->empty() || (*path)[0] == '/' || absl::StrContains(*path, "://")) {
      return;
    }
    std::string absolute = (fs::path(base_dir) / *path).lexically_normal().string();
    while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
    *path = absolute;
  };
  for (std::string& path : *spec->mutable_data()->mutable_train_shards()) {
    resolve(&path);
  }
  for (std::string& path : *spec->mutable_data()->mutable_validation_shards()) {
    resolve(&path);
  }
  if (spec->has_checkpoint()) {
    resolve(spec->mutable_checkpoint()->mutable_directory());
  }
  if (spec->data().ByteSizeLong() == 0) spec->clear_data();
}

}  // namespace corescape::cli
