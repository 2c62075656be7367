#ifndef CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_TRAINER_H_
#define CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/base/thread_pool.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/data/batch_loader.h"
#include "runtime/device/device.h"
#include "runtime/model/model_ops.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/train/attention_failure.h"
#include "runtime/train/data_parallel_group.h"
#include "runtime/train/ping_pong_schedule.h"

namespace corescape::train {

struct TrainerConfig {
  model::ModelConfig model;
  // Dataset directories (from `corescape data prepare`) or shard files.
  std::vector<std::string> train_data;
  std::vector<std::string> validation_data;  // empty: the "validation" split of train_data[0]
  int32_t seq_len = 128;
  int32_t micro_batch = 8;   // rows per rank per micro-batch
  int32_t grad_accum = 1;    // micro-batches per step
  int64_t steps = 100;
  uint64_t seed = 1;
  // Which optimizer (optim::Optimizers()), its hyper-parameters, gradient
  // clipping and SCAPE settings; job specs get theirs from runtime/job.
  optim::OptimizerOptions optimizer;
  optim::LrSchedule schedule;
  int threads = 0;           // 0: CORESCAPE_NUM_THREADS or all cores
  // Where the step runs, and what its GEMMs compute in (bf16 only on a GPU;
  // model::DefaultPrecision). The optimizer's state follows the parameters
  // where it can (optimizer_on_device()).
  device::Device device;
  model::Precision precision = model::Precision::kFp32;
  // The step's backend; null: model::OpenModelOps(device, precision). Tests
  // pass the CPU device-copies backend to run a GPU's data flow.
  std::shared_ptr<model::ModelOps> ops;
  // Where core attention runs; null: in this process (colocated).
  std::shared_ptr<model::CoreAttentionExecutor> attention;
  // Run every micro-batch of two or more rows as two overlapping halves
  // (ping_pong_schedule.h); one-row micro-batches run whole.
  bool ping_pong = false;
};

struct StepResult {
  int64_t step = 0;          // 1-based, after this step
  double loss = 0;           // mean over the global batch's counted tokens
  int64_t tokens = 0;        // counted tokens in the global batch
  double learning_rate = 0;
  double grad_norm = 0;
  double tokens_per_second = 0;  // this rank's rows
  // This rank's model FLOPs of the step's forwards and backwards
  // (model::TrainingFlops): over compute + communication seconds, its
  // achieved FLOP/s.
  double model_flops = 0;
  double compute_seconds = 0;
  double communication_seconds = 0;
  int64_t bytes_sent = 0;        // by this rank during the step
  int64_t bytes_received = 0;
  // Fraction of the gradient's entries the optimizer synchronized (1 when
  // dense), and the bytes of this rank's encoded mask part (0 when dense).
  double density = 1.0;
  int64_t mask_bytes = 0;
};

// Synchronous data-parallel training of one rank: every rank builds the
// same model from the seed, takes its slice of each global batch from the
// deterministic loader, sums gradients with one all-reduce (scaled by
// 1/global tokens, so the result is the gradient of the global mean loss
// whatever the split), and applies the identical optimizer step — so all
// ranks hold bitwise identical weights after every step, and W ranks of
// micro-batch b train exactly like 1 rank of W·b.
class DataParallelTrainer {
 public:
  // `control` (optional; else `group`'s control_channel(), where it has one)
  // carries the token counts, losses and validation sums instead of
  // `group`, so `group` holds only the optimizer's traffic: its counters
  // measure it (the SCAPE study), and SCAPE's mask exchange issues its
  // collectives on its own thread between steps (MaskSending::kOnThread).
  static absl::StatusOr<std::unique_ptr<DataParallelTrainer>> Create(
      const TrainerConfig& config, DataParallelGroup* group, DataParallelGroup* control = nullptr);

  // One optimizer step. When core attention fails on any rank, every rank
  // drops the step instead (IsDiscardedForAttention: no update, loader
  // rewound); calling Step() again redoes it.
  absl::StatusOr<StepResult> Step();
  // Mean loss over the validation split (the first max_batches micro-batches
  // of every rank; 0: all), reduced across ranks. Dropped on every rank like
  // a step when core attention fails on one.
  absl::StatusOr<double> Validate(int64_t max_batches = 0);
  // The document lengths of every core-attention micro-batch of step
  // step() + steps_ahead (1: the next Step()), so the scheduler can plan
  // that step's core attention while an earlier one runs. In the order the
  // attention executor sees their layer-0 forwards: each gradient-
  // accumulation micro-batch, or with ping-pong (config.ping_pong and >= 2
  // rows) its halves A then B. Each inner vector is the q_end of every task
  // (the trainer's tasks are whole documents) in task order: exactly what
  // the executor's Forward/StartForward(layer 0) gets. The loader is left
  // where it was. InvalidArgument unless steps_ahead >= 1;
  // FailedPrecondition past the end of the data.
  absl::StatusOr<std::vector<std::vector<int64_t>>> UpcomingAttentionDocuments(
      int64_t steps_ahead);
  // Replaces the core-attention executor (null: in this process, on the
  // model's device), e.g. once the job's attention servers changed. One that
  // is not colocated needs a host-addressable backend (FAILED_PRECONDITION
  // on a GPU).
  absl::Status SetAttention(std::shared_ptr<model::CoreAttentionExecutor> attention);

  // Everything needed to continue exactly: parameters, optimizer state
  // (moments, step count; SCAPE's residuals and masks), loader position.
  absl::StatusOr<checkpoint::Checkpoint> Snapshot();
  absl::Status Restore(const checkpoint::Checkpoint& checkpoint);

  int64_t step() const { return step_; }
  // The model. When the optimizer runs on the model's device, its host
  // parameters are current only after DownloadParameters().
  const model::Transformer& model() const { return *model_; }
  absl::Status DownloadParameters() { return model_->DownloadParameters(); }
  // Whether the optimizer's state lives on the model's device (a device
  // backend with a dense optimizer or SCAPE's reference rule) rather than
  // on the host.
  bool optimizer_on_device() const { return optimizer_on_device_; }
  // The optimizer the trainer built (CreateOptimizer, like every job).
  optim::DataParallelOptimizer& optimizer() { return *optimizer_; }
  double unigram_entropy() const { return unigram_entropy_; }
  const TrainerConfig& config() const { return config_; }

 private:
  DataParallelTrainer(const TrainerConfig& config, DataParallelGroup* group,
                      DataParallelGroup* control);
  // Whether `batch` runs as ping-pong halves (PingPongSchedule::Split)
  // rather than whole: the one decision the forward, the backward and
  // UpcomingAttentionDocuments share, so what is announced is what runs.
  bool RunsAsHalves(const model::ModelBatch& batch) const;
  // The q_end lists of the executor micro-batches `batch` becomes.
  absl::Status AppendAttentionDocuments(const model::ModelBatch& batch,
                                        std::vector<std::vector<int64_t>>& documents) const;
  // The model batches of the next `count` micro-batches; advances the loader.
  absl::StatusOr<std::vector<model::ModelBatch>> NextModelBatches(int64_t count);
  // One micro-batch's forward, and backward (of Step's forward, whole ones
  // in activations_): through the ping-pong schedule when config_.ping_pong
  // and the batch has two or more rows, else whole.
  absl::StatusOr<model::LossResult> MicroBatchForward(const model::ModelBatch& batch,
                                                      model::CoreAttentionExecutor& attention,
                                                      model::Activations& activations);
  absl::Status MicroBatchBackward(const model::ModelBatch& batch,
                                  model::CoreAttentionExecutor& attention, float grad_scale);

  TrainerConfig config_;
  DataParallelGroup* group_;
  DataParallelGroup* control_;  // group_ unless there is another (Create)
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<model::CoreAttentionExecutor> attention_;
  std::unique_ptr<model::Transformer> model_;
  // Synchronizes what it needs itself (all of the gradient, or part of it).
  std::unique_ptr<optim::DataParallelOptimizer> optimizer_;
  bool optimizer_on_device_ = false;
  std::unique_ptr<data::BatchLoader> train_loader_;
  std::unique_ptr<data::BatchLoader> validation_loader_;
  model::Activations activations_;
  std::unique_ptr<PingPongSchedule> ping_pong_;  // config_.ping_pong only
  double unigram_entropy_ = 0;
  int64_t step_ = 0;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_TRAINER_H_
