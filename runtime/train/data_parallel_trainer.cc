#include "runtime/train/data_parallel_trainer.h"

#include <cblas.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_set.h"
#include "runtime/model/training_flops.h"
#include "runtime/train/model_batch.h"
#include "runtime/train/optimizer_placement.h"

namespace corescape::train {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

struct OpenedData {
  std::shared_ptr<const data::ShardSet> documents;
  data::DatasetManifest manifest;
};

// A dataset directory (its `split`) or explicit shard files (their
// directory's manifest gives the tokenizer's special ids).
absl::StatusOr<OpenedData> OpenData(const std::vector<std::string>& paths,
                                    absl::string_view split) {
  OpenedData opened;
  for (const std::string& path : paths) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("no dataset directory or shard file ", path));
    }
  }
  const std::string manifest_dir = IsDirectory(paths[0]) ? paths[0] : Parent(paths[0]);
  auto manifest = data::ReadManifest(manifest_dir);
  if (!manifest.ok()) return manifest.status();
  opened.manifest = *manifest;
  if (paths.size() == 1 && IsDirectory(paths[0])) {
    auto documents = data::OpenDatasetSplit(paths[0], split);
    if (!documents.ok()) return documents.status();
    opened.documents = *documents;
  } else {
    auto documents = data::ShardSet::Open(paths);
    if (!documents.ok()) return documents.status();
    opened.documents = *documents;
  }
  return opened;
}

std::string FloatsToBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

absl::Status BytesToFloats(const std::string& bytes, std::vector<float>& values,
                           absl::string_view what) {
  if (bytes.size() != values.size() * sizeof(float)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", what, " holds ", bytes.size() / sizeof(float), " values, the model has ",
        values.size()));
  }
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status TrainingDataEnded() {
  return absl::FailedPreconditionError("the training data ends before that step");
}

// The q_end of every task: the document lengths the executor is handed.
std::vector<int64_t> QueryEnds(const model::ModelBatch& batch) {
  std::vector<int64_t> ends;
  ends.reserve(batch.attention_tasks.size());
  for (const kernels::AttentionTask& task : batch.attention_tasks) ends.push_back(task.q_end);
  return ends;
}

// Where the trainer's own collectives go: `control`, else the group's
// control channel, else the group itself.
DataParallelGroup* ControlGroupFor(DataParallelGroup* group, DataParallelGroup* control) {
  if (control != nullptr) return control;
  if (DataParallelGroup* channel = group->control_channel(); channel != nullptr) return channel;
  return group;
}

}  // namespace

DataParallelTrainer::DataParallelTrainer(const TrainerConfig& config, DataParallelGroup* group,
                                         DataParallelGroup* control)
    : config_(config), group_(group), control_(ControlGroupFor(group, control)) {}

absl::StatusOr<std::unique_ptr<DataParallelTrainer>> DataParallelTrainer::Create(
    const TrainerConfig& config, DataParallelGroup* group, DataParallelGroup* control) {
  if (config.train_data.empty()) return absl::InvalidArgumentError("train_data: required");
  if (control != nullptr &&
      (control->rank() != group->rank() || control->world_size() != group->world_size())) {
    return absl::InvalidArgumentError("the optimizer and control groups disagree on rank/size");
  }
  std::unique_ptr<DataParallelTrainer> trainer(new DataParallelTrainer(config, group, control));
  auto train = OpenData(config.train_data, "train");
  if (!train.ok()) return train.status();
  if (train->manifest.vocab_size > config.model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model vocabulary ", config.model.vocab_size, " is smaller than the dataset's ",
        train->manifest.vocab_size));
  }
  trainer->unigram_entropy_ = train->manifest.train_unigram_entropy_with_eos_nats;
  data::BatchLoaderOptions loader_options;
  loader_options.seq_len = config.seq_len;
  loader_options.micro_batch_size = config.micro_batch;
  loader_options.rank = group->rank();
  loader_options.world_size = group->world_size();
  loader_options.seed = config.seed;
  loader_options.eos_id = train->manifest.eos_id;
  loader_options.pad_id = train->manifest.pad_id;
  auto train_loader = data::BatchLoader::Create(train->documents, loader_options);
  if (!train_loader.ok()) return train_loader.status();
  trainer->train_loader_ = *std::move(train_loader);

  const bool has_validation =
      !config.validation_data.empty() || train->manifest.validation.documents > 0;
  if (has_validation) {
    auto validation = config.validation_data.empty()
                          ? OpenData(config.train_data, "validation")
                          : OpenData(config.validation_data, "validation");
    if (!validation.ok()) return validation.status();
    auto validation_loader =
        data::BatchLoader::CreateValidation(validation->documents, loader_options);
    if (!validation_loader.ok()) return validation_loader.status();
    trainer->validation_loader_ = *std::move(validation_loader);
  }

  const int threads = config.threads > 0 ? config.threads : DefaultThreadCount();
  openblas_set_num_threads(threads);
  trainer->pool_ = std::make_unique<ThreadPool>(threads);
  std::shared_ptr<model::ModelOps> ops = config.ops;
  if (ops == nullptr) {
    auto opened = model::OpenModelOps(config.device, config.precision, trainer->pool_.get());
    if (!opened.ok()) return opened.status();
    ops = *std::move(opened);
  }
  auto model = model::Transformer::Create(config.model, std::move(ops));
  if (!model.ok()) return model.status();
  trainer->model_ = std::make_unique<model::Transformer>(*std::move(model));
  if (absl::Status s = trainer->SetAttention(config.attention); !s.ok()) return s;
  trainer->model_->InitializeWeights(config.seed);
  if (config.ping_pong) trainer->ping_pong_ = std::make_unique<PingPongSchedule>(*trainer->model_);
  std::vector<uint8_t> decay_mask(trainer->model_->layout().total_size(), 0);
  for (const model::TensorSlot& slot : trainer->model_->layout().tensors()) {
    if (slot.is_matrix) {
      std::fill(decay_mask.begin() + slot.offset, decay_mask.begin() + slot.offset + slot.size, 1);
    }
  }
  // A device backend keeps the optimizer's state beside the parameters
  // where it can, so a step moves no gradient or parameter to the host.
  auto placed = CreatePlacedOptimizer(config.optimizer, group,
                                      trainer->control_ != group ? GroupUse::kOptimizerAlone
                                                                 : GroupUse::kSharedBetweenSteps,
                                      trainer->model_->ops(),
                                      std::move(decay_mask),
                                      trainer->model_->layout().TensorBounds());
  if (!placed.ok()) return placed.status();
  trainer->optimizer_ = std::move(placed->optimizer);
  // Idle while the optimizer steps: its host selection may use it.
  trainer->optimizer_->UseThreadPool(trainer->pool_.get());
  trainer->optimizer_on_device_ = placed->on_device;
  if (!placed->placement.empty()) {
    LOG(INFO) << "optimizer " << config.optimizer.name << ": " << placed->placement;
  }
  return trainer;
}

absl::StatusOr<StepResult> DataParallelTrainer::Step() {
  const absl::Time start = absl::Now();
  const int64_t sent_before = group_->bytes_sent();
  const int64_t received_before = group_->bytes_received();
  absl::Duration communication;

  // Where the step's batches start, should the step have to be dropped.
  const data::LoaderState loader_before = train_loader_->state();
  auto next = NextModelBatches(config_.grad_accum);
  if (!next.ok()) return next.status();
  const std::vector<model::ModelBatch>& batches = *next;
  float counts[1] = {0.0f};
  for (const model::ModelBatch& batch : batches) {
    for (int32_t t : batch.targets) counts[0] += t >= 0 ? 1.0f : 0.0f;
  }
  // The loss is the mean over the GLOBAL batch: every rank needs its size
  // before backward to scale its share of the gradient.
  absl::Time comm_start = absl::Now();
  if (absl::Status s = control_->AllReduceSum(counts, 1); !s.ok()) return s;
  communication += absl::Now() - comm_start;
  const int64_t global_tokens = static_cast<int64_t>(counts[0]);
  const float grad_scale = 1.0f / std::max<int64_t>(1, global_tokens);

  if (absl::Status s = model_->ZeroGradients(); !s.ok()) return s;
  FailureRecordingAttention attention(attention_.get());
  double local_loss_sum = 0.0;
  for (const model::ModelBatch& batch : batches) {
    auto loss = MicroBatchForward(batch, attention, activations_);
    if (!loss.ok()) {
      if (attention.failed()) break;  // voted on below
      return loss.status();
    }
    local_loss_sum += loss->loss_sum;
    if (absl::Status s = MicroBatchBackward(batch, attention, grad_scale); !s.ok()) {
      if (attention.failed()) break;
      return s;
    }
  }
  // The loss all-reduce doubles as a vote: a rank whose core attention
  // failed says so, and every rank drops the step together, including those
  // whose own attention finished.
  float loss_sum[2] = {static_cast<float>(local_loss_sum), attention.failed() ? 1.0f : 0.0f};
  std::vector<float>& gradients = model_->gradients();
  StepResult result;
  result.learning_rate = config_.schedule.At(step_);
  comm_start = absl::Now();
  if (absl::Status s = control_->AllReduceSum(loss_sum, 2); !s.ok()) return s;
  if (loss_sum[1] > 0) {
    if (absl::Status s = model_->ZeroGradients(); !s.ok()) return s;
    if (absl::Status s = train_loader_->Restore(loader_before); !s.ok()) return s;
    return AttentionDiscardedError(absl::StrCat(
        "step ", step_ + 1, " dropped on every rank: core attention failed ",
        attention.failed() ? absl::StrCat("here: ", attention.error().message())
                           : absl::StrCat("on ", loss_sum[1], " other rank(s)")));
  }
  // The optimizer synchronizes (all or part of) the gradient itself and
  // clips it where its traits say so.
  if (optimizer_on_device_) {
    auto params = model_->BackendParameters();
    if (!params.ok()) return params.status();
    auto grads = model_->BackendGradients();
    if (!grads.ok()) return grads.status();
    if (absl::Status s = optimizer_->Step(*params, *grads, static_cast<int64_t>(gradients.size()),
                                          result.learning_rate);
        !s.ok()) {
      return s;
    }
    model_->MarkBackendParametersUpdated();
  } else {
    if (absl::Status s = model_->DownloadGradients(); !s.ok()) return s;
    if (absl::Status s = optimizer_->Step(model_->parameters().data(), gradients.data(),
                                          gradients.size(), result.learning_rate);
        !s.ok()) {
      return s;
    }
  }
  communication += absl::Now() - comm_start;
  const optim::OptimizerStepStats& optimizer_step = optimizer_->last_step();
  result.grad_norm = optimizer_step.grad_norm;
  if (!optimizer_step.dense && !gradients.empty()) {
    result.density = static_cast<double>(optimizer_step.mask_entries) / gradients.size();
    result.mask_bytes = optimizer_step.mask_part_bytes;
  }
  ++step_;
  const absl::Duration total = absl::Now() - start;
  result.step = step_;
  result.tokens = global_tokens;
  result.loss = global_tokens > 0 ? loss_sum[0] / global_tokens : 0.0;
  result.communication_seconds = absl::ToDoubleSeconds(communication);
  result.compute_seconds = absl::ToDoubleSeconds(total - communication);
  for (const model::ModelBatch& batch : batches) {
    result.model_flops += model::TrainingFlops(model_->config(), batch);
  }
  result.tokens_per_second = static_cast<double>(config_.grad_accum) * config_.micro_batch * config_.seq_len /
                             std::max(1e-9, absl::ToDoubleSeconds(total));
  if (control_ != group_) {
    // The group carries the optimizer's traffic alone, which it accounts
    // itself (a mask exchange its thread sent between steps included).
    result.bytes_sent = optimizer_step.bytes_sent;
    result.bytes_received = optimizer_step.bytes_received;
  } else {
    result.bytes_sent = group_->bytes_sent() - sent_before;
    result.bytes_received = group_->bytes_received() - received_before;
  }
  return result;
}

absl::StatusOr<double> DataParallelTrainer::Validate(int64_t max_batches) {
  if (validation_loader_ == nullptr) {
    return absl::FailedPreconditionError("no validation data");
  }
  if (absl::Status s = validation_loader_->Seek(0); !s.ok()) return s;
  model::Activations activations;
  FailureRecordingAttention attention(attention_.get());
  double loss_sum = 0.0;
  int64_t tokens = 0;
  for (int64_t batches = 0; max_batches <= 0 || batches < max_batches; ++batches) {
    std::optional<data::PackedBatch> packed = validation_loader_->Next();
    if (!packed) break;
    auto loss = MicroBatchForward(ToModelBatch(*packed), attention, activations);
    if (!loss.ok()) {
      if (attention.failed()) break;  // voted on below, as in Step()
      return loss.status();
    }
    loss_sum += loss->loss_sum;
    tokens += loss->tokens;
  }
  float totals[3] = {static_cast<float>(loss_sum), static_cast<float>(tokens),
                     attention.failed() ? 1.0f : 0.0f};
  if (absl::Status s = control_->AllReduceSum(totals, 3); !s.ok()) return s;
  if (totals[2] > 0) {
    return AttentionDiscardedError(absl::StrCat(
        "validation dropped on every rank: core attention failed ",
        attention.failed() ? absl::StrCat("here: ", attention.error().message())
                           : absl::StrCat("on ", totals[2], " other rank(s)")));
  }
  if (totals[1] <= 0) return absl::FailedPreconditionError("validation split has no tokens");
  return totals[0] / totals[1];
}

absl::StatusOr<std::vector<std::vector<int64_t>>>
DataParallelTrainer::UpcomingAttentionDocuments(int64_t steps_ahead) {
  if (steps_ahead < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_ahead must be at least 1 (the next step), got ", steps_ahead));
  }
  const data::LoaderState saved = train_loader_->state();
  auto documents = [&]() -> absl::StatusOr<std::vector<std::vector<int64_t>>> {
    for (int64_t skip = 0; skip < (steps_ahead - 1) * config_.grad_accum; ++skip) {
      if (!train_loader_->Next()) return TrainingDataEnded();
    }
    auto batches = NextModelBatches(config_.grad_accum);
    if (!batches.ok()) return batches.status();
    std::vector<std::vector<int64_t>> documents;
    for (const model::ModelBatch& batch : *batches) {
      if (absl::Status s = AppendAttentionDocuments(batch, documents); !s.ok()) return s;
    }
    return documents;
  }();
  // Rewound also on error: the next Step() must still get its own batches.
  if (absl::Status s = train_loader_->Restore(saved); !s.ok()) return s;
  return documents;
}

absl::StatusOr<std::vector<model::ModelBatch>> DataParallelTrainer::NextModelBatches(
    int64_t count) {
  std::vector<model::ModelBatch> batches;
  for (int64_t i = 0; i < count; ++i) {
    std::optional<data::PackedBatch> packed = train_loader_->Next();
    if (!packed) return TrainingDataEnded();
    batches.push_back(ToModelBatch(*packed));
  }
  return batches;
}

bool DataParallelTrainer::RunsAsHalves(const model::ModelBatch& batch) const {
  return ping_pong_ != nullptr && PingPongSchedule::Splits(batch);
}

absl::Status DataParallelTrainer::AppendAttentionDocuments(
    const model::ModelBatch& batch, std::vector<std::vector<int64_t>>& documents) const {
  if (!RunsAsHalves(batch)) {
    documents.push_back(QueryEnds(batch));
    return absl::OkStatus();
  }
  auto halves = ping_pong_->Split(batch);
  if (!halves.ok()) return halves.status();
  for (const model::ModelBatch& half : *halves) documents.push_back(QueryEnds(half));
  return absl::OkStatus();
}

absl::StatusOr<model::LossResult> DataParallelTrainer::MicroBatchForward(
    const model::ModelBatch& batch, model::CoreAttentionExecutor& attention,
    model::Activations& activations) {
  if (RunsAsHalves(batch)) {
    return ping_pong_->Forward(batch, attention);
  }
  return model_->Forward(batch, attention, activations);
}

absl::Status DataParallelTrainer::MicroBatchBackward(const model::ModelBatch& batch,
                                                     model::CoreAttentionExecutor& attention,
                                                     float grad_scale) {
  if (RunsAsHalves(batch)) {
    return ping_pong_->Backward(attention, grad_scale);
  }
  return model_->Backward(attention, activations_, grad_scale);
}

absl::Status DataParallelTrainer::SetAttention(
    std::shared_ptr<model::CoreAttentionExecutor> attention) {
  if (attention == nullptr) {
    // The backend's own executor, owned by the model: a non-owning handle.
    attention_ = std::shared_ptr<model::CoreAttentionExecutor>(
        std::shared_ptr<model::CoreAttentionExecutor>(), &model_->ops().local_attention());
    return absl::OkStatus();
  }
  if (!model_->ops().host_addressable()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "core attention elsewhere (disaggregated or in place) reads the activations from host "
        "memory, but this model trains on ",
        model_->ops().device().ToString(), ": run its core attention colocated"));
  }
  attention_ = std::move(attention);
  return absl::OkStatus();
}

absl::StatusOr<checkpoint::Checkpoint> DataParallelTrainer::Snapshot() {
  checkpoint::Checkpoint checkpoint;
  checkpoint.step = step_;
  // Downloaded if the optimizer updated them on the device, then read
  // through the const accessor: a checkpoint changes no parameter, so the
  // device copy stays current.
  if (absl::Status s = model_->DownloadParameters(); !s.ok()) return s;
  checkpoint.blobs["params"] = FloatsToBytes(std::as_const(*model_).parameters());
  auto state = optimizer_->SaveState();
  if (!state.ok()) return state.status();
  checkpoint.blobs["optimizer_state"] = *std::move(state);
  const int64_t optimizer_steps = optimizer_->step_count();
  checkpoint.blobs["trainer.json"] =
      nlohmann::json{{"step", step_}, {"optimizer", config_.optimizer.name},
                     {"optimizer_steps", optimizer_steps},
                     {"parameters", model_->layout().total_size()}}
          .dump();
  checkpoint.blobs["loader.json"] = train_loader_->state().ToJson();
  return checkpoint;
}

absl::Status DataParallelTrainer::Restore(const checkpoint::Checkpoint& checkpoint) {
  for (const char* name : {"params", "trainer.json", "loader.json", "optimizer_state"}) {
    if (!checkpoint.blobs.count(name)) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint lacks '", name, "'"));
    }
  }
  nlohmann::json trainer =
      nlohmann::json::parse(checkpoint.blobs.at("trainer.json"), nullptr, false);
  if (trainer.is_discarded() || !trainer["step"].is_number_integer() ||
      !trainer["optimizer_steps"].is_number_integer()) {
    return absl::DataLossError("checkpoint trainer.json is malformed");
  }
  auto loader_state = data::LoaderState::FromJson(checkpoint.blobs.at("loader.json"));
  if (!loader_state.ok()) return loader_state.status();
  std::vector<float> params(model_->layout().total_size());
  if (absl::Status s = BytesToFloats(checkpoint.blobs.at("params"), params, "params"); !s.ok()) return s;
  if (absl::Status s = optimizer_->RestoreState(checkpoint.blobs.at("optimizer_state"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = train_loader_->Restore(*loader_state); !s.ok()) return s;
  if (absl::Status s = model_->SetParameters(std::move(params)); !s.ok()) return s;
  step_ = trainer["step"].get<int64_t>();
  return absl::OkStatus();
}

}  // namespace corescape::train
