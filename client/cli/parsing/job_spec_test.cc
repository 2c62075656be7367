// Job files: JSON with snake_case and lowerCamel names, the YAML subset,
// errors that name the field and the file, flag overrides, path resolution,
// and the shipped examples.
#include "client/cli/parsing/job_spec_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/parsing/yaml_subset.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;
using ::google::protobuf::util::MessageDifferencer;

std::string RunfilesPath(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "", "/", relative);
}

std::string TempFile(const std::string& name, const std::string& contents) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::ofstream(path) << contents;
  return path;
}

constexpr char kSnakeCase[] = R"({
  "name": "tiny-fortunes",
  "model": {"preset": "tiny", "n_kv_heads": 2},
  "data": {"train_shards": ["a", "b"], "sequence_length": 128,
           "micro_batch_size": 4},
  "optimizer": {"name": "adamw", "learning_rate": 0.003,
                "scape": {"offload_residuals": false, "density": 0.1}},
  "steps": 300, "eval_interval_steps": 50,
  "checkpoint": {"directory": "ckpt", "interval_steps": 100},
  "placement": {"workers": 2, "min_workers": 1},
  "attention": {"mode": "DISAGGREGATED", "attention_servers": 1},
  "seed": 7
})";

constexpr char kCamelCase[] = R"({
  // comments are allowed
  "name": "tiny-fortunes",
  "model": {"preset": "tiny", "nKvHeads": 2},
  "data": {"trainShards": ["a", "b"], "sequenceLength": 128,
           "microBatchSize": "4"},
  "optimizer": {"name": "adamw", "learningRate": 0.003,
                "scape": {"offloadResiduals": false, "density": 0.1}},
  "steps": "300", "evalIntervalSteps": 50,
  "checkpoint": {"directory": "ckpt", "intervalSteps": 100},
  "placement": {"workers": 2, "minWorkers": 1},
  "attention": {"mode": "disaggregated", "attentionServers": 1},
  "seed": 7
})";

TEST(JobSpecJsonTest, SnakeAndCamelCaseGiveTheSameSpec) {
  absl::StatusOr<v1::JobSpec> snake = ParseJobSpecJson(kSnakeCase, "snake.json");
  ASSERT_TRUE(snake.ok()) << snake.status();
  absl::StatusOr<v1::JobSpec> camel = ParseJobSpecJson(kCamelCase, "camel.json");
  ASSERT_TRUE(camel.ok()) << camel.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*snake, *camel))
      << snake->DebugString() << "\nvs\n" << camel->DebugString();
  EXPECT_EQ(snake->name(), "tiny-fortunes");
  EXPECT_EQ(snake->model().n_kv_heads(), 2);
  EXPECT_EQ(snake->data().train_shards_size(), 2);
  EXPECT_EQ(snake->steps(), 300);
  EXPECT_EQ(snake->attention().mode(), v1::DISAGGREGATED);
  EXPECT_EQ(snake->placement().min_workers(), 1);
  EXPECT_EQ(snake->seed(), 7u);
}

TEST(JobSpecJsonTest, UnknownFieldIsNamedWithItsPathAndTheFile) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecJson(
      R"({"name": "x", "optimizer": {"scape": {"densty": 0.1}}})", "job.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(spec.status().message(),
                               "job.json: unknown field 'optimizer.scape.densty'"))
      << spec.status();
  spec = ParseJobSpecJson(R"({"stepz": 3})", "top.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StartsWith(spec.status().message(),
                               "top.json: unknown field 'stepz'"))
      << spec.status();
}

TEST(JobSpecJsonTest, WrongTypesSyntaxErrorsAndDuplicatesAreNamed) {
  auto message = [](const char* json) {
    return std::string(ParseJobSpecJson(json, "j.json").status().message());
  };
  EXPECT_EQ(message(R"({"steps": "many"})"),
            "j.json: field 'steps': invalid value \"many\" for type TYPE_INT64");
  EXPECT_EQ(message(R"({"model": "tiny"})").substr(0, 23), "j.json: field 'model': ");
  EXPECT_TRUE(absl::StartsWith(message("{\"name\": \"x\",\n  \"steps\": }"),
                               "j.json: parse error at line 2, column 12"))
      << message("{\"name\": \"x\",\n  \"steps\": }");
  EXPECT_EQ(message(R"([1, 2])"), "j.json: expected an object of JobSpec fields");
  EXPECT_EQ(message(R"({"evalIntervalSteps": 5, "eval_interval_steps": 6})"),
            "j.json: field 'eval_interval_steps' is given twice (as "
            "'evalIntervalSteps' and 'eval_interval_steps')");
}

// device: cpu | cuda, in either case and either format; anything else is
// an error naming the field.
TEST(JobSpecJsonTest, DeviceIsCpuOrCuda) {
  auto json = ParseJobSpecJson(R"({"device": "cuda"})", "j.json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->device(), v1::CUDA);
  auto upper = ParseJobSpecJson(R"({"device": "CPU"})", "j.json");
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(upper->device(), v1::CPU);
  auto yaml = ParseJobSpecYaml("name: gpu-job\ndevice: cuda\n", "j.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(yaml->device(), v1::CUDA);
  EXPECT_EQ(ParseJobSpecJson("{}", "j.json")->device(), v1::DEVICE_UNSPECIFIED);
  for (const char* text : {R"({"device": "tpu"})", R"({"device": "cuda:0"})"}) {
    auto bad = ParseJobSpecJson(text, "j.json");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_TRUE(absl::StartsWith(bad.status().message(), "j.json: field 'device': invalid value"))
        << bad.status();
  }
  auto bad_yaml = ParseJobSpecYaml("device: gpu\n", "j.yaml");
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_TRUE(absl::StartsWith(bad_yaml.status().message(), "j.yaml: field 'device'"))
      << bad_yaml.status();
}

TEST(JobSpecYamlTest, SameSpecAsJson) {
  constexpr char kYaml[] = R"(---
# a job file
name: tiny-fortunes
model:
  preset: tiny
  nKvHeads: 2
data:
  train_shards: [a, "b"]
  sequence_length: 128    # tokens
  micro_batch_size: 4
optimizer:
  name: 'adamw'
  learning_rate: 3e-3
  scape:
    offload_residuals: false
    density: 0.1
steps: 300
eval_interval_steps: 50
checkpoint:
  directory: ckpt
  interval_steps: 100
placement:
  workers: 2
  min_workers: 1
attention:
  mode: disaggregated
  attention_servers: 1
seed: 7
)";
  absl::StatusOr<v1::JobSpec> yaml = ParseJobSpecYaml(kYaml, "job.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  absl::StatusOr<v1::JobSpec> json = ParseJobSpecJson(kSnakeCase, "job.json");
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*yaml, *json)) << yaml->DebugString();
}

// Bytes that are not UTF-8 are an error naming the file, not a crash.
TEST(JobSpecYamlTest, InvalidUtf8IsAnError) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml("name: \xff\xfe\n", "bad.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), "bad.yaml: not valid UTF-8"))
      << spec.status();
  EXPECT_FALSE(ParseJobSpecJson("{\"name\": \"\xff\"}", "bad.json").ok());
}

TEST(JobSpecYamlTest, ListsScalarsAndComments) {
  absl::StatusOr<nlohmann::json> doc = ParseYamlSubset(R"(
a:
- x
- 'it''s # not a comment'
b:
    - "tab\there \u00e9"
c: [1, 'two, three', "]"]
d: ~
e:
f: plain text with spaces   # comment
g: {}
h: []
url: http://example.com/a#frag
)", "t.yaml");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)["a"], nlohmann::json({"x", "it's # not a comment"}));
  EXPECT_EQ((*doc)["b"], nlohmann::json({"tab\there \u00e9"}));
  EXPECT_EQ((*doc)["c"], nlohmann::json({"1", "two, three", "]"}));
  EXPECT_TRUE((*doc)["d"].is_null());
  EXPECT_TRUE((*doc)["e"].is_null());
  EXPECT_EQ((*doc)["f"], "plain text with spaces");
  EXPECT_EQ((*doc)["g"], nlohmann::json::object());
  EXPECT_EQ((*doc)["h"], nlohmann::json::array());
  EXPECT_EQ((*doc)["url"], "http://example.com/a#frag");
}

TEST(JobSpecYamlTest, UnsupportedYamlIsAnErrorWithTheLine) {
  auto message = [](const char* yaml) {
    return std::string(ParseYamlSubset(yaml, "j.yaml").status().message());
  };
  EXPECT_EQ(message("a: 1\n\tb: 2\n"), "j.yaml:2: tabs are not allowed in indentation");
  EXPECT_EQ(message("a: 1\n  b: 2\n"), "j.yaml:2: unexpected indentation");
  EXPECT_EQ(message("a: 1\na: 2\n"), "j.yaml:2: duplicate key 'a'");
  EXPECT_EQ(message("a: {b: 1}\n"),
            "j.yaml:1: flow mappings ({...}) are not supported; use indented "
            "'key: value' lines");
  EXPECT_EQ(message("a:\n  - b: 1\n"), "j.yaml:2: mappings inside lists are not supported");
  EXPECT_EQ(message("a: |\n  text\n"), "j.yaml:1: block scalars (| and >) are not supported");
  EXPECT_EQ(message("a: &x 1\n"), "j.yaml:1: anchors, aliases and tags are not supported");
  EXPECT_EQ(message("- a\n"), "j.yaml:1: the top level must be 'key: value' lines, not a list");
  EXPECT_EQ(message("a: \"open\n"), "j.yaml:1: unterminated quoted string");
  EXPECT_EQ(message("just text\n"), "j.yaml:1: expected 'key: value', got 'just text'");
  EXPECT_EQ(message("a: 1\n---\nb: 2\n"), "j.yaml:2: only one YAML document is supported");
  // Field errors come from the same checks as JSON.
  EXPECT_TRUE(absl::StartsWith(
      ParseJobSpecYaml("model:\n  presett: tiny\n", "j.yaml").status().message(),
      "j.yaml: unknown field 'model.presett'"));
}

TEST(JobSpecFileTest, FormatByExtensionOrContent) {
  const std::string json = TempFile("job.json", R"({"name": "from-json"})");
  const std::string yaml = TempFile("job.yml", "name: from-yaml\n");
  const std::string sniffed_json = TempFile("job.spec", R"( {"name": "sniffed"})");
  const std::string sniffed_yaml = TempFile("job.txt", "name: sniffed-yaml\n");
  EXPECT_EQ(ReadJobSpecFile(json)->name(), "from-json");
  EXPECT_EQ(ReadJobSpecFile(yaml)->name(), "from-yaml");
  EXPECT_EQ(ReadJobSpecFile(sniffed_json)->name(), "sniffed");
  EXPECT_EQ(ReadJobSpecFile(sniffed_yaml)->name(), "sniffed-yaml");

  absl::StatusOr<v1::JobSpec> missing = ReadJobSpecFile("/nonexistent/job.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "job file '/nonexistent/job.json' does not exist");
  const std::string bad = TempFile("bad.json", R"({"bogus": 1})");
  EXPECT_EQ(ReadJobSpecFile(bad).status().message(),
            absl::StrCat(bad, ": unknown field 'bogus' (JobSpec's fields are "
                              "in proto/corescape/v1/job.proto)"));
}

TEST(JobSpecOverridesTest, FlagsReplaceWhatTheFileSays) {
  v1::JobSpec spec = *ParseJobSpecJson(kSnakeCase, "job.json");
  JobSpecOverrides overrides;
  EXPECT_TRUE(overrides.empty());
  overrides.name = "renamed";
  overrides.model = "small";
  overrides.train_data = {"x,y", "z", ""};
  overrides.steps = 10;
  overrides.optimizer = "scape";
  overrides.density = 0.01;
  overrides.lr = 1e-4;
  overrides.workers = 3;
  overrides.attention_mode = "in-place";
  overrides.seed = 99;
  overrides.checkpoint_interval = 5;
  EXPECT_FALSE(overrides.empty());
  ASSERT_TRUE(ApplyJobSpecOverrides(overrides, &spec).ok());
  EXPECT_EQ(spec.name(), "renamed");
  EXPECT_EQ(spec.model().preset(), "small");
  EXPECT_EQ(spec.model().n_kv_heads(), 2);  // untouched
  ASSERT_EQ(spec.data().train_shards_size(), 3);
  EXPECT_EQ(spec.data().train_shards(0), "x");
  EXPECT_EQ(spec.data().train_shards(2), "z");
  EXPECT_EQ(spec.data().sequence_length(), 128);  // untouched
  EXPECT_EQ(spec.steps(), 10);
  EXPECT_EQ(spec.optimizer().name(), "scape");
  EXPECT_DOUBLE_EQ(spec.optimizer().scape().density(), 0.01);
  EXPECT_DOUBLE_EQ(spec.optimizer().learning_rate(), 1e-4);
  EXPECT_EQ(spec.placement().workers(), 3);
  EXPECT_EQ(spec.placement().min_workers(), 1);  // untouched
  EXPECT_EQ(spec.attention().mode(), v1::IN_PLACE);
  EXPECT_EQ(spec.seed(), 99u);
  EXPECT_EQ(spec.checkpoint().interval_steps(), 5);
  EXPECT_EQ(spec.checkpoint().directory(), "ckpt");

  JobSpecOverrides adamw;
  adamw.optimizer = "adamw";
  ASSERT_TRUE(ApplyJobSpecOverrides(adamw, &spec).ok());
  EXPECT_EQ(spec.optimizer().name(), "adamw");

  // Every optimizer the registry knows (and `submit --optimizer` accepts)
  // is accepted here too; an unknown one is refused, naming the flag.
  for (const std::string& name : optim::OptimizerNames()) {
    JobSpecOverrides named;
    named.optimizer = name;
    ASSERT_TRUE(ApplyJobSpecOverrides(named, &spec).ok()) << name;
    EXPECT_EQ(spec.optimizer().name(), name);
  }
  JobSpecOverrides unknown;
  unknown.optimizer = "lion";
  const absl::Status refused = ApplyJobSpecOverrides(unknown, &spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--optimizer: unknown optimizer 'lion'"), std::string::npos)
      << refused;

  JobSpecOverrides bad;
  bad.attention_mode = "sideways";
  EXPECT_EQ(ApplyJobSpecOverrides(bad, &spec).code(),
            absl::StatusCode::kInvalidArgument);

  JobSpecOverrides on_gpus;
  on_gpus.device = "cuda";
  EXPECT_FALSE(on_gpus.empty());
  ASSERT_TRUE(ApplyJobSpecOverrides(on_gpus, &spec).ok());
  EXPECT_EQ(spec.device(), v1::CUDA);
  on_gpus.device = "CPU";
  ASSERT_TRUE(ApplyJobSpecOverrides(on_gpus, &spec).ok());
  EXPECT_EQ(spec.device(), v1::CPU);
  JobSpecOverrides bad_device;
  bad_device.device = "gpu";
  const absl::Status no_such_device = ApplyJobSpecOverrides(bad_device, &spec);
  EXPECT_EQ(no_such_device.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_such_device.message(), "--device: unknown device 'gpu' (cpu, cuda)");
  EXPECT_EQ(spec.device(), v1::CPU);
}

TEST(JobSpecOverridesTest, FlagsAloneMakeASpecWithOnlyWhatWasGiven) {
  v1::JobSpec spec;
  JobSpecOverrides overrides;
  overrides.name = "n";
  overrides.steps = 3;
  ASSERT_TRUE(ApplyJobSpecOverrides(overrides, &spec).ok());
  EXPECT_FALSE(spec.has_data());
  EXPECT_FALSE(spec.has_optimizer());
  EXPECT_EQ(spec.ShortDebugString(), "name: \"n\" steps: 3");
}

TEST(ResolvePathsTest, RelativePathsBecomeAbsolute) {
  v1::JobSpec spec;
  spec.mutable_data()->add_train_shards(".cache/fortunes/");
  spec.mutable_data()->add_train_shards("/abs/shard");
  spec.mutable_data()->add_validation_shards("./val/../val2");
  spec.mutable_data()->add_validation_shards("s3://bucket/x");
  spec.mutable_checkpoint()->set_directory("ckpt");
  ResolveJobSpecPaths("/repo", &spec);
  EXPECT_EQ(spec.data().train_shards(0), "/repo/.cache/fortunes");
  EXPECT_EQ(spec.data().train_shards(1), "/abs/shard");
  EXPECT_EQ(spec.data().validation_shards(0), "/repo/val2");
  EXPECT_EQ(spec.data().validation_shards(1), "s3://bucket/x");
  EXPECT_EQ(spec.checkpoint().directory(), "/repo/ckpt");

  v1::JobSpec empty;
  ResolveJobSpecPaths("/repo", &empty);
  EXPECT_EQ(empty.ByteSizeLong(), 0);
}

TEST(ExamplesTest, EveryShippedJobFileParses) {
  for (const char* name : {"tiny-fortunes.json", "tiny-fortunes-scape.json",
                           "tiny-fortunes-disaggregated.json"}) {
    absl::StatusOr<v1::JobSpec> spec =
        ReadJobSpecFile(RunfilesPath(absl::StrCat("examples/", name)));
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status();
    EXPECT_EQ(spec->model().preset(), "tiny") << name;
    EXPECT_EQ(spec->placement().workers(), 2) << name;
    EXPECT_EQ(spec->steps(), 300) << name;
    EXPECT_EQ(spec->eval_interval_steps(), 50) << name;
    EXPECT_EQ(spec->checkpoint().interval_steps(), 100) << name;
    EXPECT_EQ(spec->data().train_shards(0), ".cache/fortunes") << name;
  }
  const v1::JobSpec scape =
      *ReadJobSpecFile(RunfilesPath("examples/tiny-fortunes-scape.json"));
  EXPECT_EQ(scape.optimizer().name(), "scape");
  EXPECT_DOUBLE_EQ(scape.optimizer().scape().density(), 0.1);
  const v1::JobSpec disaggregated =
      *ReadJobSpecFile(RunfilesPath("examples/tiny-fortunes-disaggregated.json"));
  EXPECT_EQ(disaggregated.attention().mode(), v1::DISAGGREGATED);
  EXPECT_EQ(disaggregated.attention().attention_servers(), 1);

  // The YAML example is the same job as the JSON one.
  absl::StatusOr<v1::JobSpec> yaml =
      ReadJobSpecFile(RunfilesPath("examples/tiny-fortunes.yaml"));
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_TRUE(MessageDifferencer::Equals(
      *yaml, *ReadJobSpecFile(RunfilesPath("examples/tiny-fortunes.json"))))
      << yaml->DebugString();
}

}  // namespace
}  // namespace corescape::cli
