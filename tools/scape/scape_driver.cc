#include "tools/scape/scape_driver.h"

#include <cblas.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "runtime/base/thread_pool.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_set.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/scape_optimizer.h"
#include "runtime/train/model_batch.h"

namespace corescape::scape_tool {
namespace {

using optim::RankGroup;

absl::StatusOr<std::unique_ptr<optim::DataParallelOptimizer>> MakeOptimizer(
    const DriverConfig& config, RankGroup* group, optim::DecayMask decay_mask) {
  const optim::AdamSConfig& a = config.scape.adams;
  const optim::AdamWConfig adamw{a.beta1, a.beta2, a.epsilon, a.weight_decay};
  if (config.method == "adamw") {
    return std::make_unique<optim::DenseAdamWDataParallel>(group, adamw, std::move(decay_mask));
  }
  if (config.method == "adams") {
    return std::make_unique<optim::DenseAdamSDataParallel>(group, a, std::move(decay_mask));
  }
  if (config.method == "topk-adamw") {
    return std::make_unique<optim::TopKGradientAdamW>(group, adamw, std::move(decay_mask),
                                                      config.scape.density);
  }
  if (config.method == "scape" || config.method == "scape-global") {
    optim::ScapeConfig scape = config.scape;
    scape.scope = config.method == "scape" ? optim::MaskScope::kPartitioned
                                           : optim::MaskScope::kWholeBuffer;
    auto opt = optim::ScapeOptimizer::Create(group, scape, std::move(decay_mask));
    if (!opt.ok()) return opt.status();
    return std::unique_ptr<optim::DataParallelOptimizer>(std::move(*opt));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown method '", config.method, "'"));
}

// Σ over ranks of (loss_sum, tokens) on the validation split: rank r
// evaluates its share of the one deterministic pass.
absl::StatusOr<double> Evaluate(model::Transformer& model, data::BatchLoader& loader,
                                model::CoreAttentionExecutor& attention, RankGroup& control) {
  if (absl::Status s = loader.Seek(0); !s.ok()) return s;
  model::Activations activations;
  double loss_sum = 0.0;
  int64_t tokens = 0;
  while (std::optional<data::PackedBatch> packed = loader.Next()) {
    auto loss = model.Forward(train::ToModelBatch(*packed), attention, activations);
    if (!loss.ok()) return loss.status();
    loss_sum += loss->loss_sum;
    tokens += loss->tokens;
  }
  // Two floats per rank: tokens < 2^24 are exact; the loss sum to ~1e-7.
  float totals[2] = {static_cast<float>(loss_sum), static_cast<float>(tokens)};
  if (absl::Status s = control.AllReduceSum(totals, 2); !s.ok()) return s;
  if (totals[1] <= 0) return absl::FailedPreconditionError("validation split has no tokens");
  return double{totals[0]} / totals[1];
}

}  // namespace

absl::StatusOr<DriverSummary> RunDataParallelTraining(
    const DriverConfig& config, const std::function<void(const StepRecord&)>& on_step) {
  if (config.ranks < 1) return absl::InvalidArgumentError("ranks must be positive");
  auto manifest = data::ReadManifest(config.data);
  if (!manifest.ok()) return manifest.status();
  auto model_config = model::PresetConfig(config.model);
  if (!model_config.ok()) return model_config.status();
  auto train_docs = data::OpenDatasetSplit(config.data, "train");
  if (!train_docs.ok()) return train_docs.status();
  auto val_docs = data::OpenDatasetSplit(config.data, "validation");
  if (!val_docs.ok()) return val_docs.status();
  auto kind = optim::LrSchedule::ParseKind(config.schedule);
  if (!kind.ok()) return kind.status();
  optim::LrSchedule schedule;
  schedule.kind = *kind;
  schedule.peak_lr = config.lr;
  schedule.min_lr = config.min_lr;
  schedule.warmup_steps = config.lr_warmup;
  schedule.total_steps = config.steps;

  // Ranks run on threads: one BLAS thread and one attention thread each.
  openblas_set_num_threads(1);
  const int P = config.ranks;
  optim::InProcessHub optimizer_hub(P);  // what the optimizer sends: the measured bytes
  optim::InProcessHub control_hub(P);    // token counts, losses: same for every method

  std::unique_ptr<std::ofstream> csv;
  if (!config.csv.empty()) {
    csv = std::make_unique<std::ofstream>(config.csv);
    if (!*csv) return absl::InvalidArgumentError(absl::StrCat("cannot write ", config.csv));
    *csv << "step,train_loss,val_loss,lr,bytes_sent_per_worker,synced_values,dense,"
            "mask_part_bytes,mask_encoding,elapsed_s\n";
  }

  DriverSummary summary;
  std::mutex record_mutex;
  std::vector<StepRecord> records(config.steps);
  std::vector<std::vector<double>> bytes(P, std::vector<double>(config.steps, 0.0));
  std::vector<absl::Status> statuses(P);
  const absl::Time start = absl::Now();

  auto rank_main = [&](int rank) -> absl::Status {
    optim::InProcessRankGroup group(&optimizer_hub, rank);
    optim::InProcessRankGroup control(&control_hub, rank);
    data::BatchLoaderOptions options;
    options.seq_len = config.seq_len;
    options.micro_batch_size = config.micro_batch;
    options.rank = rank;
    options.world_size = P;
    options.seed = config.seed;
    options.eos_id = manifest->eos_id;
    options.pad_id = manifest->pad_id;
    auto train_loader = data::BatchLoader::Create(*train_docs, options);
    if (!train_loader.ok()) return train_loader.status();
    auto val_loader = data::BatchLoader::CreateValidation(*val_docs, options);
    if (!val_loader.ok()) return val_loader.status();
    ThreadPool pool(1);
    model::LocalCoreAttention attention(&pool);
    auto created = model::Transformer::Create(*model_config);
    if (!created.ok()) return created.status();
    model::Transformer& model = *created;
    model.InitializeWeights(config.seed);
    const int64_t n = model.layout().total_size();
    optim::DecayMask decay_mask(n, 0);
    for (const model::TensorSlot& slot : model.layout().tensors()) {
      if (slot.is_matrix) {
        std::fill(decay_mask.begin() + slot.offset, decay_mask.begin() + slot.offset + slot.size, 1);
      }
    }
    auto optimizer = MakeOptimizer(config, &group, std::move(decay_mask));
    if (!optimizer.ok()) return optimizer.status();

    auto initial = Evaluate(model, **val_loader, attention, control);
    if (!initial.ok()) return initial.status();
    if (rank == 0) {
      summary.parameters = n;
      summary.initial_val_loss = *initial;
      summary.final_val_loss = *initial;
      summary.dense_bytes_per_step =
          optim::InProcessRankGroup::RingAllReduceBytesSent(n, P, 0);
    }
    model::Activations activations;
    for (int64_t step = 0; step < config.steps; ++step) {
      std::optional<data::PackedBatch> packed = (*train_loader)->Next();
      if (!packed) return absl::InternalError("training loader ran dry");
      const model::ModelBatch batch = train::ToModelBatch(*packed);
      float tokens = 0;
      for (int32_t t : batch.targets) tokens += t >= 0;
      model.ZeroGradients();
      auto loss = model.Forward(batch, attention, activations);
      if (!loss.ok()) return loss.status();
      // grad_scale = 1 / tokens of the GLOBAL batch: ranks' gradients sum to the mean's.
      float totals[2] = {static_cast<float>(loss->loss_sum), tokens};
      if (absl::Status s = control.AllReduceSum(totals, 2); !s.ok()) return s;
      if (absl::Status s = model.Backward(attention, activations, 1.0f / std::max(1.0f, totals[1]));
          !s.ok()) {
        return s;
      }
      const double lr = schedule.At(step);
      if (absl::Status s = (*optimizer)->Step(model.parameters().data(), model.gradients().data(),
                                              n, lr);
          !s.ok()) {
        return s;
      }
      const optim::OptimizerStepStats& stats = (*optimizer)->last_step();
      bytes[rank][step] = static_cast<double>(stats.bytes_sent);
      const double train_loss = double{totals[0]} / std::max(1.0f, totals[1]);
      const bool last = step + 1 == config.steps;
      double val = -1;
      if (last || (config.eval_interval > 0 && (step + 1) % config.eval_interval == 0)) {
        auto v = Evaluate(model, **val_loader, attention, control);
        if (!v.ok()) return v.status();
        val = *v;
      }
      if (rank == 0) {
        std::lock_guard<std::mutex> lock(record_mutex);
        StepRecord& r = records[step];
        r.step = step + 1;
        r.train_loss = train_loss;
        r.val_loss = val;
        r.lr = lr;
        r.synced_values = stats.synced_values;
        r.dense = stats.dense;
        r.mask_part_bytes = stats.mask_part_bytes;
        r.mask_encoding = stats.mask_part_bytes > 0 ? optim::MaskEncodingName(stats.mask_encoding) : "";
        r.elapsed = absl::ToDoubleSeconds(absl::Now() - start);
        if (val >= 0) summary.final_val_loss = val;
      }
      if (!std::isfinite(train_loss)) {
        return absl::InternalError(absl::StrCat("diverged at step ", step + 1));
      }
      // Every rank has now issued this step's collectives: rank 0 may report.
      float barrier = 0;
      if (absl::Status s = control.AllReduceSum(&barrier, 1); !s.ok()) return s;
      if (rank == 0) {
        StepRecord& r = records[step];
        for (int q = 0; q < P; ++q) r.bytes_sent += bytes[q][step] / P;
        if (csv) {
          *csv << r.step << "," << absl::StrFormat("%.6f", r.train_loss) << ","
               << (r.val_loss >= 0 ? absl::StrFormat("%.6f", r.val_loss) : "") << ","
               << absl::StrFormat("%.6g", r.lr) << "," << absl::StrFormat("%.1f", r.bytes_sent)
               << "," << r.synced_values << "," << (r.dense ? 1 : 0) << "," << r.mask_part_bytes
               << "," << r.mask_encoding << "," << absl::StrFormat("%.2f", r.elapsed) << "\n";
          csv->flush();
        }
        if (on_step) on_step(r);
      }
    }
    auto* scape = dynamic_cast<optim::ScapeOptimizer*>(optimizer->get());
    if (rank == 0 && scape != nullptr) {
      const int64_t first_sparse = std::max<int64_t>(1, config.scape.dense_warmup_steps);
      int64_t covered = 0;
      double age = 0, residual = 0, momentum = 0;
      for (int64_t j = 0; j < n; ++j) {
        covered += scape->last_sync()[j] >= first_sparse;
        age += static_cast<double>(config.steps - 1 - scape->last_sync()[j]);
        residual += double{scape->residual()[j]} * scape->residual()[j];
        momentum += double{scape->first_moment()[j]} * scape->first_moment()[j];
      }
      summary.coverage = static_cast<double>(covered) / n;
      summary.mean_age = age / n;
      summary.residual_to_momentum = std::sqrt(residual / std::max(momentum, 1e-30));
    }
    return absl::OkStatus();
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = rank_main(r);
      if (!statuses[r].ok()) {
        optimizer_hub.Abort(absl::AbortedError("another rank stopped"));
        control_hub.Abort(absl::AbortedError("another rank stopped"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) {
    if (!s.ok() && !absl::IsAborted(s)) {
      if (absl::StrContains(s.message(), "diverged")) {
        summary.diverged = true;
        summary.final_val_loss = NAN;
        break;
      }
      return s;
    }
  }
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  double total = 0, sparse_total = 0;
  int64_t sparse_steps = 0, done = 0;
  for (const StepRecord& r : records) {
    if (r.step == 0) continue;
    ++done;
    total += r.bytes_sent;
    if (!r.dense) {
      sparse_total += r.bytes_sent;
      ++sparse_steps;
    }
  }
  summary.bytes_per_step = done > 0 ? total / done : 0;
  summary.sparse_bytes_per_step = sparse_steps > 0 ? sparse_total / sparse_steps : 0;
  double tail = 0;
  int64_t tail_count = 0;
  for (int64_t s = std::max<int64_t>(0, done - 20); s < done; ++s) {
    tail += records[s].train_loss;
    ++tail_count;
  }
  summary.final_train_loss = tail_count ? tail / tail_count : 0;
  return summary;
}

}  // namespace corescape::scape_tool
