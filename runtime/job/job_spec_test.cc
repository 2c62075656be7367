#include "runtime/job/job_spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::job {
namespace {

// keep_qkv_for_backward has explicit presence: unset means the default
// (servers keep Q/K/V), an explicit false is the user's choice.
TEST(ApplyJobDefaultsTest, KeepQkvForBackwardDefaultsToTrueUnlessSet) {
  v1::JobSpec unset;
  ApplyJobDefaults(unset);
  EXPECT_TRUE(unset.attention().has_keep_qkv_for_backward());
  EXPECT_TRUE(unset.attention().keep_qkv_for_backward());

  v1::JobSpec off;
  off.mutable_attention()->set_keep_qkv_for_backward(false);
  ApplyJobDefaults(off);
  EXPECT_FALSE(off.attention().keep_qkv_for_backward());

  // Presence survives the wire: a scheduler restart or a resubmission does
  // not turn an explicit false into the default.
  v1::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(off.SerializeAsString()));
  ApplyJobDefaults(parsed);
  EXPECT_FALSE(parsed.attention().keep_qkv_for_backward());
}

// ping_pong defaults to true for DISAGGREGATED and IN_PLACE jobs only; an
// explicit false stays false, also across the wire.
TEST(ApplyJobDefaultsTest, PingPongDefaultsToTrueForDisaggregatedUnlessSet) {
  v1::JobSpec disaggregated;
  disaggregated.mutable_attention()->set_mode(v1::DISAGGREGATED);
  ApplyJobDefaults(disaggregated);
  EXPECT_TRUE(disaggregated.attention().ping_pong());

  v1::JobSpec in_place;
  in_place.mutable_attention()->set_mode(v1::IN_PLACE);
  ApplyJobDefaults(in_place);
  EXPECT_TRUE(in_place.attention().ping_pong());

  v1::JobSpec colocated;
  ApplyJobDefaults(colocated);
  EXPECT_FALSE(colocated.attention().has_ping_pong());

  v1::JobSpec off;
  off.mutable_attention()->set_mode(v1::DISAGGREGATED);
  off.mutable_attention()->set_ping_pong(false);
  v1::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(off.SerializeAsString()));
  ApplyJobDefaults(parsed);
  EXPECT_TRUE(parsed.attention().has_ping_pong());
  EXPECT_FALSE(parsed.attention().ping_pong());
}

TEST(ApplyJobDefaultsTest, AttentionDefaults) {
  v1::JobSpec spec;
  ApplyJobDefaults(spec);
  EXPECT_EQ(spec.attention().mode(), v1::COLOCATED);
  EXPECT_DOUBLE_EQ(spec.attention().tolerance(), 0.05);
}

// A spec that validates: an absolute data path (what is there is the
// worker's business), everything else defaulted.
v1::JobSpec ValidSpec(const std::string& optimizer) {
  v1::JobSpec spec;
  spec.mutable_data()->add_train_shards("/srv/corescape/data/fortunes");
  spec.set_steps(10);
  spec.mutable_optimizer()->set_name(optimizer);
  ApplyJobDefaults(spec);
  return spec;
}

TEST(ValidateJobSpecTest, SparseBaselinesAreSelectableWithADensity) {
  for (const std::string& name : optim::OptimizerNames()) {
    v1::JobSpec spec = ValidSpec(name);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << name << ": " << ValidateJobSpec(spec);
  }
  EXPECT_DOUBLE_EQ(ValidSpec("topk-adamw").optimizer().scape().density(), 0.1);
  v1::JobSpec unknown = ValidSpec("lion");
  EXPECT_NE(ValidateJobSpec(unknown).message().find("spec.optimizer.name"), std::string::npos);
  v1::JobSpec dense_topk = ValidSpec("topk-adamw");
  dense_topk.mutable_optimizer()->mutable_scape()->set_density(1.5);
  EXPECT_NE(ValidateJobSpec(dense_topk).message().find(
                "spec.optimizer.scape.density: must be in (0, 1]"),
            std::string::npos)
      << ValidateJobSpec(dense_topk);
}

TEST(ValidateJobSpecTest, ScapeMaskStatisticAndOffloadAreChecked) {
  v1::JobSpec spec = ValidSpec("scape");
  spec.mutable_optimizer()->mutable_scape()->set_mask_statistic("momentum-plus-residual");
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.mutable_optimizer()->mutable_scape()->set_mask_statistic("abs_gradient");
  absl::Status bad = ValidateJobSpec(spec);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("spec.optimizer.scape.mask_statistic: unknown mask statistic "
                               "'abs_gradient'"),
            std::string::npos)
      << bad;
  // A research rule that lost the formulation search is refused, saying
  // where it went.
  for (const char* removed : {"reconstructed", "linearized"}) {
    spec = ValidSpec("scape");
    spec.mutable_optimizer()->mutable_scape()->set_rule(removed);
    const absl::Status refused = ValidateJobSpec(spec);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("spec.optimizer.scape.rule: SCAPE rule"), std::string::npos)
        << refused;
    EXPECT_NE(refused.message().find("docs/scape_search.md"), std::string::npos) << refused;
  }
  // Residual offload is for the optimizers whose state a device holds:
  // SCAPE, under either rule.
  spec = ValidSpec("scape");
  spec.mutable_optimizer()->mutable_scape()->set_offload_residuals(true);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_optimizer()->mutable_scape()->set_rule("reference");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  auto scape = ScapeConfigFromSpec(spec.optimizer());
  ASSERT_TRUE(scape.ok()) << scape.status();
  EXPECT_TRUE(scape->offload_residuals);
  EXPECT_TRUE(scape->Validate().ok()) << scape->Validate();
  scape->rule = optim::ScapeRule::kCatchUp;
  EXPECT_TRUE(scape->Validate().ok()) << scape->Validate();
  spec = ValidSpec("topk-adamw");
  spec.mutable_optimizer()->mutable_scape()->set_offload_residuals(true);
  EXPECT_NE(ValidateJobSpec(spec).message().find(
                "offload_residuals: 'topk-adamw' keeps all its state in host memory"),
            std::string::npos)
      << ValidateJobSpec(spec);
}

TEST(ValidateJobSpecTest, ScapeRuleMaskShapeAndDensityScheduleAreChecked) {
  v1::JobSpec spec = ValidSpec("scape");
  v1::ScapeSpec& scape = *spec.mutable_optimizer()->mutable_scape();
  scape.set_rule("reference");
  scape.set_dense_small_tensors(true);
  scape.mutable_density_schedule()->set_warmup_steps(200);
  ApplyJobDefaults(spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  EXPECT_DOUBLE_EQ(spec.optimizer().scape().density_schedule().start(), 1.0);
  EXPECT_EQ(spec.optimizer().scape().density_schedule().shape(), "linear");
  auto refused = [](v1::JobSpec bad, absl::string_view field) {
    const absl::Status status = ValidateJobSpec(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(status.message().find(absl::StrCat("spec.optimizer.scape.", field)), std::string::npos)
        << status;
  };
  v1::JobSpec bad = spec;
  bad.mutable_optimizer()->mutable_scape()->set_rule("squash");
  refused(bad, "rule: unknown SCAPE rule 'squash'");
  bad = spec;
  bad.mutable_optimizer()->mutable_scape()->mutable_density_schedule()->set_shape("cubic");
  refused(bad, "density_schedule.shape");
  bad = spec;
  bad.mutable_optimizer()->mutable_scape()->mutable_density_schedule()->set_start(1.5);
  refused(bad, "density_schedule.start");
  bad = spec;
  bad.mutable_optimizer()->mutable_scape()->mutable_density_schedule()->set_start_step(-1);
  refused(bad, "density_schedule.start_step");
  // Without warm-up steps the schedule is not translated; negative counts
  // are refused all the same.
  bad = ValidSpec("scape");
  bad.mutable_optimizer()->mutable_scape()->mutable_density_schedule()->set_start_step(-1);
  refused(bad, "density_schedule.start_step: must not be negative");
  bad = ValidSpec("scape");
  bad.mutable_optimizer()->mutable_scape()->mutable_density_schedule()->set_warmup_steps(-1);
  refused(bad, "density_schedule.warmup_steps: must not be negative");
  bad = spec;
  bad.mutable_optimizer()->mutable_scape()->set_dense_warmup_steps(-1);
  refused(bad, "dense_warmup_steps");
  bad = spec;
  bad.mutable_optimizer()->mutable_scape()->set_rule("catch-up");
  refused(bad, "dense_small_tensors: needs per-tensor masks");
  bad = ValidSpec("scape-global");
  bad.mutable_optimizer()->mutable_scape()->set_per_tensor_masks(true);
  refused(bad, "per_tensor_masks");
  bad = ValidSpec("topk-adamw");
  bad.mutable_optimizer()->mutable_scape()->set_rule("reference");
  refused(bad, "rule");
}

// A job without grad_clip (from flags, or a file that leaves it out) is
// clipped like one that asks for the default; 0 is the user turning it off.
TEST(ApplyJobDefaultsTest, GradClipDefaultsToOneUnlessSet) {
  v1::JobSpec unset;
  ApplyJobDefaults(unset);
  EXPECT_TRUE(unset.optimizer().has_grad_clip());
  EXPECT_DOUBLE_EQ(unset.optimizer().grad_clip(), 1.0);
  EXPECT_DOUBLE_EQ(unset.optimizer().grad_clip(), optim::kDefaultGradClip);

  v1::JobSpec off;
  off.mutable_optimizer()->set_grad_clip(0);
  v1::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(off.SerializeAsString()));
  ApplyJobDefaults(parsed);
  EXPECT_DOUBLE_EQ(parsed.optimizer().grad_clip(), 0.0);
}

// Every sparse optimizer gets the one default density; dense ones none.
TEST(ApplyJobDefaultsTest, SparseOptimizersGetTheDefaultDensity) {
  for (const optim::OptimizerTraits& traits : optim::Optimizers()) {
    v1::JobSpec spec;
    spec.mutable_optimizer()->set_name(traits.name);
    ApplyJobDefaults(spec);
    EXPECT_DOUBLE_EQ(spec.optimizer().scape().density(), traits.sparse ? 0.1 : 0.0)
        << traits.name;
  }
  EXPECT_DOUBLE_EQ(optim::kDefaultDensity, 0.1);
  EXPECT_DOUBLE_EQ(optim::ScapeConfig{}.density, optim::kDefaultDensity);
}

TEST(ApplyJobDefaultsTest, IsIdempotent) {
  v1::JobSpec once;
  once.mutable_optimizer()->set_name("scape");
  once.mutable_attention()->set_mode(v1::DISAGGREGATED);
  ApplyJobDefaults(once);
  v1::JobSpec twice = once;
  ApplyJobDefaults(twice);
  EXPECT_EQ(once.SerializeAsString(), twice.SerializeAsString());
}

TEST(UsesMaskEpochsTest, ScapeAndItsGlobalBaselineOnly) {
  EXPECT_TRUE(UsesMaskEpochs("scape"));
  EXPECT_TRUE(UsesMaskEpochs("scape-global"));
  EXPECT_FALSE(UsesMaskEpochs("topk-adamw"));
  EXPECT_FALSE(UsesMaskEpochs("adamw"));
  EXPECT_FALSE(UsesMaskEpochs("lion"));
}

// IN_PLACE jobs run attention on their workers: asking for attention
// servers is refused, naming the field, rather than silently ignored.
TEST(ValidateJobSpecTest, InPlaceTakesNoAttentionServers) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_placement()->set_workers(2);
  spec.mutable_placement()->set_min_workers(2);
  spec.mutable_attention()->set_mode(v1::IN_PLACE);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);

  spec.mutable_attention()->set_attention_servers(2);
  const absl::Status refused = ValidateJobSpec(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("spec.attention.attention_servers: must be 0 in IN_PLACE"),
            std::string::npos)
      << refused;

  spec.mutable_attention()->set_mode(v1::COLOCATED);  // colocated ignores them
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

// A model too large for any worker is refused before anyone allocates it;
// the paper-scale presets pass.
TEST(ValidateJobSpecTest, ModelSizeIsBounded) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_model()->set_preset("llama-1.8b");
  spec.mutable_data()->set_sequence_length(128);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  // Every size within its own bound, the product far beyond the total's.
  spec.mutable_model()->set_n_layers(1024);
  spec.mutable_model()->set_d_model(65536);
  spec.mutable_model()->set_n_heads(512);
  spec.mutable_model()->set_n_kv_heads(512);
  spec.mutable_model()->set_d_ff(1 << 20);
  const absl::Status refused = ValidateJobSpec(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("spec.model:"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("more than any job may train"), std::string::npos) << refused;
}

TEST(ValidateJobSpecTest, MicroBatchTokensAreBounded) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_model()->set_max_seq_len(1 << 16);
  spec.mutable_data()->set_sequence_length(1 << 16);
  spec.mutable_data()->set_micro_batch_size(64);  // 2^22 tokens: the most
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_data()->set_micro_batch_size(65);
  const absl::Status refused = ValidateJobSpec(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("spec.data.micro_batch_size: 65 sequences of 65536 tokens"),
            std::string::npos)
      << refused;
}

TEST(ValidateJobSpecTest, NodeNamesAreUnique) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_placement()->set_workers(3);
  spec.mutable_placement()->set_min_workers(3);
  for (const char* name : {"worker-0", "worker-1", "worker-2"}) {
    spec.mutable_placement()->add_node_names(name);
  }
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_placement()->set_node_names(2, "worker-0");
  const absl::Status refused = ValidateJobSpec(spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("spec.placement.node_names[2]: 'worker-0' is named twice"),
            std::string::npos)
      << refused;
}

TEST(ValidateJobSpecTest, CheckpointDirectoryIsAbsoluteWithoutDotDot) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_checkpoint()->set_directory("/var/lib/corescape/worker/ckpt");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  for (const char* bad : {"ckpt", "/var/lib/corescape/worker/../../../etc", "/a/..", ".."}) {
    spec.mutable_checkpoint()->set_directory(bad);
    const absl::Status refused = ValidateJobSpec(spec);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.message().find("spec.checkpoint.directory"), std::string::npos) << refused;
  }
  spec.mutable_checkpoint()->set_directory(std::string("/a\0b", 4));
  EXPECT_FALSE(ValidateJobSpec(spec).ok());
}

// An override is applied or refused naming the field and the value, never
// dropped: NaN and negative values used to keep the preset's silently.
TEST(ValidateJobSpecTest, ModelOverridesOutOfRangeAreRefusedNamingTheValue) {
  const struct {
    void (*set)(v1::ModelSpec&);
    const char* expected;
  } cases[] = {
      {[](v1::ModelSpec& m) { m.set_rope_theta(std::nan("")); },
       "spec.model.rope_theta: must be finite and > 1, got nan"},
      {[](v1::ModelSpec& m) { m.set_rope_theta(-10000); },
       "spec.model.rope_theta: must be finite and > 1, got -10000"},
      {[](v1::ModelSpec& m) { m.set_rope_theta(HUGE_VAL); },
       "spec.model.rope_theta: must be finite and > 1, got inf"},
      {[](v1::ModelSpec& m) { m.set_rope_theta(0.5); },
       "spec.model.rope_theta: must be finite and > 1, got 0.5"},
      {[](v1::ModelSpec& m) { m.set_norm_eps(-1); },
       "spec.model.norm_eps: must be in (0, 1), got -1"},
      {[](v1::ModelSpec& m) { m.set_norm_eps(std::nan("")); },
       "spec.model.norm_eps: must be in (0, 1), got nan"},
      {[](v1::ModelSpec& m) { m.set_norm_eps(2); },
       "spec.model.norm_eps: must be in (0, 1), got 2"},
      {[](v1::ModelSpec& m) { m.set_d_ff(-3); },
       "spec.model.d_ff: must not be negative (0 keeps the preset's value), got -3"},
      {[](v1::ModelSpec& m) { m.set_max_seq_len(-1); },
       "spec.model.max_seq_len: must not be negative (0 keeps the preset's value), got -1"},
  };
  for (const auto& c : cases) {
    v1::JobSpec spec = ValidSpec("adamw");
    c.set(*spec.mutable_model());
    const absl::Status refused = ValidateJobSpec(spec);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_EQ(refused.message(), c.expected);
  }
  v1::JobSpec spec = ValidSpec("adamw");
  spec.mutable_model()->set_rope_theta(500000);
  spec.mutable_model()->set_norm_eps(1e-6);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  auto model = ModelConfigFromSpec(spec.model());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->rope_theta, 500000);
  EXPECT_EQ(model->norm_eps, 1e-6);
}

TEST(ValidateJobSpecTest, NamesHoldNoControlEscapeOrBidiCharacters) {
  v1::JobSpec spec = ValidSpec("adamw");
  spec.set_name("tiny fortunes – Zürich");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("job\nFAKE-ROW"), std::string("\x1b[31mred"),
        std::string("tab\there"), std::string("evil\xe2\x80\xaegnp.exe"),
        std::string("iso\xe2\x81\xa6late"), std::string("\xc2\x9b" "31m"),
        std::string("bad\xff")}) {
    spec.set_name(bad);
    const absl::Status refused = ValidateJobSpec(spec);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.message().rfind("spec.name: holds a ", 0), 0) << refused;
  }
  spec.set_name("job\nFAKE");
  EXPECT_NE(ValidateJobSpec(spec).message().find("control character U+000A at byte 3"),
            std::string::npos);
  spec.set_name("x\xe2\x80\xae");
  EXPECT_NE(ValidateJobSpec(spec).message().find("bidirectional control U+202E"),
            std::string::npos);
}

TEST(ValidateJobSpecTest, DataPathsAreAbsolutePrintableAndBounded) {
  v1::JobSpec spec = ValidSpec("adamw");
  for (const std::string& bad : {std::string("../../etc/passwd"), std::string("fortunes"),
                                 std::string("/data/../../etc/passwd"), std::string(""),
                                 std::string("/data/a\nb"), std::string("/a\0b", 4)}) {
    spec.mutable_data()->set_train_shards(0, bad);
    const absl::Status refused = ValidateJobSpec(spec);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(refused.message().rfind("spec.data.train_shards[0]: ", 0), 0) << refused;
  }
  spec = ValidSpec("adamw");
  spec.mutable_data()->add_validation_shards("relative");
  EXPECT_EQ(ValidateJobSpec(spec).message().rfind("spec.data.validation_shards[0]: ", 0), 0);
  // Paths outside any root are the workers' to refuse (CheckDatasetsUnder):
  // validation reads no filesystem, so it says nothing about what exists.
  spec = ValidSpec("adamw");
  for (const char* elsewhere : {"/etc/shadow", "/dev/zero", "/proc/self/mem"}) {
    spec.mutable_data()->set_train_shards(0, elsewhere);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  }
  spec = ValidSpec("adamw");
  spec.mutable_data()->clear_train_shards();
  for (int i = 0; i < 100000; ++i) spec.mutable_data()->add_train_shards("/data/x");
  EXPECT_EQ(ValidateJobSpec(spec).message(),
            absl::StrCat("spec.data.train_shards: 100000 datasets, more than a job may name (",
                         kMaxDatasets, ")"));
  spec.mutable_data()->mutable_train_shards()->DeleteSubrange(
      kMaxDatasets, spec.data().train_shards_size() - kMaxDatasets);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

// The worker's side of data: datasets with their manifest, inside its root
// once resolved, refused in the same words whether a path outside exists.
TEST(CheckDatasetsUnderTest, DatasetsInsideTheRootOnly) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::path(::testing::TempDir()) / "data-root-test";
  fs::remove_all(tmp);
  const fs::path root = tmp / "root";
  fs::create_directories(root / "fortunes");
  std::ofstream((root / "fortunes" / data::kManifestFileName).string()) << "{}";
  fs::create_directories(root / "no-manifest");
  fs::create_directories(tmp / "elsewhere");
  std::ofstream((tmp / "elsewhere" / data::kManifestFileName).string()) << "{}";
  fs::create_directory_symlink(tmp / "elsewhere", root / "link-out");
  fs::create_directory_symlink("/etc", root / "etc");

  v1::DataSpec data;
  data.add_train_shards((root / "fortunes").string());
  data.add_validation_shards((root / "fortunes").string());
  EXPECT_TRUE(CheckDatasetsUnder(data, root.string()).ok()) << CheckDatasetsUnder(data, root.string());

  const std::string outside = absl::StrCat(" is outside this worker's data root ", root.string(),
                                           " (--data_root)");
  for (const std::string& path :
       {std::string("/etc/shadow"), std::string("/etc/no-such-file-here"),
        std::string("/dev/zero"), std::string("/proc/self/mem"),
        (tmp / "elsewhere").string(), (root / "link-out").string(),
        (root / "etc" / "shadow").string(), (root / ".." / "elsewhere").string()}) {
    data.set_train_shards(0, path);
    const absl::Status refused = CheckDatasetsUnder(data, root.string());
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << path;
    // Nothing but the path as given and the root: the same for a path that
    // exists and one that does not.
    EXPECT_EQ(refused.message(), absl::StrCat("spec.data.train_shards[0]: ", path, outside));
  }
  data.set_train_shards(0, (root / "fortunes").string());
  data.set_validation_shards(0, (root / "no-manifest").string());
  const absl::Status no_dataset = CheckDatasetsUnder(data, root.string());
  EXPECT_EQ(no_dataset.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_dataset.message().find("spec.data.validation_shards[0]: no dataset at"),
            std::string::npos)
      << no_dataset;
  EXPECT_EQ(CheckDatasetsUnder(data, "relative").code(), absl::StatusCode::kFailedPrecondition);
}

// The worker's side: the directory must resolve inside its root, whatever
// `..` or symbolic links it goes through.
TEST(CheckCheckpointDirectoryUnderTest, InsideTheRootOnly) {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::path(::testing::TempDir()) / "checkpoint-root-test";
  fs::remove_all(tmp);
  const fs::path root = tmp / "root";
  fs::create_directories(root / "jobs");
  fs::create_directories(tmp / "elsewhere");
  fs::create_directory_symlink(tmp / "elsewhere", root / "escape");

  EXPECT_TRUE(CheckCheckpointDirectoryUnder((root / "jobs").string(), root.string()).ok());
  EXPECT_TRUE(CheckCheckpointDirectoryUnder(root.string(), root.string() + "/").ok());
  EXPECT_TRUE(
      CheckCheckpointDirectoryUnder((root / "not-yet" / "made").string(), root.string()).ok());
  for (const fs::path& outside :
       {tmp / "elsewhere", root / "escape" / "ckpt", root / ".." / "elsewhere",
        fs::path(root.string() + "-sibling"), fs::path("/etc")}) {
    const absl::Status refused = CheckCheckpointDirectoryUnder(outside.string(), root.string());
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << outside;
    EXPECT_NE(refused.message().find("outside this worker's checkpoint root"), std::string::npos)
        << refused;
    EXPECT_NE(refused.message().find("--checkpoint_root"), std::string::npos) << refused;
  }
  EXPECT_EQ(CheckCheckpointDirectoryUnder("/x", "relative/root").code(),
            absl::StatusCode::kFailedPrecondition);
  fs::remove_all(tmp);
}

// The rule itself, as the scheduler applies it to reported roots: by whole
// components, after `.` and `..`, never for relative paths.
TEST(ResolvedPathWithinTest, ComparesWholeComponents) {
  struct Case {
    const char* directory;
    const char* root;
    bool within;
  };
  for (const Case& c : {Case{"/data/root", "/data/root", true},
                        Case{"/data/root/jobs/a", "/data/root/", true},
                        Case{"/data/root/./jobs", "/data/x/../root", true},
                        Case{"/anything", "/", true},
                        Case{"/data/root-sibling", "/data/root", false},
                        Case{"/data", "/data/root", false},
                        Case{"/data/root/../elsewhere", "/data/root", false},
                        Case{"/data/root", "", false},
                        Case{"data/root", "data", false}}) {
    EXPECT_EQ(ResolvedPathWithin(c.directory, c.root), c.within) << c.directory << " in " << c.root;
  }
}

}  // namespace
}  // namespace corescape::job
