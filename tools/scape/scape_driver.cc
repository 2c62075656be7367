#include "tools/scape/scape_driver.h"

#include <cmath>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/model/model_config.h"
#include "runtime/model/parameter_layout.h"
#include "runtime/optim/in_process_rank_group.h"

namespace corescape::scape_tool {
namespace {

void WriteCsvRow(std::ofstream& csv, const StepRecord& r) {
  csv << r.step << "," << absl::StrFormat("%.6f", r.train_loss) << ","
      << (r.val_loss >= 0 ? absl::StrFormat("%.6f", r.val_loss) : "") << ","
      << absl::StrFormat("%.6g", r.lr) << "," << absl::StrFormat("%.1f", r.bytes_sent) << ","
      << r.synced_values << "," << (r.dense ? 1 : 0) << "," << r.mask_part_bytes << ","
      << r.mask_encoding << "," << absl::StrFormat("%.2f", r.elapsed) << "\n";
  csv.flush();
}

}  // namespace

absl::StatusOr<DriverSummary> RunDataParallelTraining(
    const DriverConfig& config, const std::function<void(const StepRecord&)>& on_step) {
  if (config.ranks < 1) return absl::InvalidArgumentError("ranks must be positive");
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

  // bytes[rank][step]: written by each rank before the step's barrier, read
  // by rank 0 after it.
  std::vector<std::vector<double>> bytes(P, std::vector<double>(config.steps, 0.0));
  std::vector<StepRecord> records(config.steps);
  std::vector<absl::StatusOr<RankOutcome>> outcomes(P, absl::UnknownError("not run"));
  const absl::Time start = absl::Now();

  auto rank_main = [&](int rank) -> absl::StatusOr<RankOutcome> {
    optim::InProcessRankGroup group(&optimizer_hub, rank);
    optim::InProcessRankGroup control(&control_hub, rank);
    return RunTrainingRank(
        config, group, control, [&](const StepTrace& trace) -> absl::Status {
          const int64_t step = trace.step - 1;
          bytes[rank][step] = static_cast<double>(trace.bytes_sent);
          // Every rank has now issued this step's collectives: rank 0 may report.
          float barrier = 0;
          if (absl::Status s = control.AllReduceSum(&barrier, 1); !s.ok()) return s;
          if (rank != 0) return absl::OkStatus();
          StepRecord& r = records[step];
          r.step = trace.step;
          r.train_loss = trace.train_loss;
          r.val_loss = trace.val_loss;
          r.lr = trace.lr;
          r.synced_values = trace.synced_values;
          r.dense = trace.dense;
          r.mask_part_bytes = trace.mask_part_bytes;
          r.mask_encoding = trace.mask_encoding;
          r.elapsed = absl::ToDoubleSeconds(absl::Now() - start);
          for (int q = 0; q < P; ++q) r.bytes_sent += bytes[q][step] / P;
          if (csv) WriteCsvRow(*csv, r);
          if (on_step) on_step(r);
          return absl::OkStatus();
        });
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      outcomes[r] = rank_main(r);
      if (!outcomes[r].ok()) {
        optimizer_hub.Abort(absl::AbortedError("another rank stopped"));
        control_hub.Abort(absl::AbortedError("another rank stopped"));
      }
    });
  }
  for (std::thread& t : threads) t.join();

  DriverSummary summary;
  for (const auto& outcome : outcomes) {
    const absl::Status& s = outcome.status();
    if (!s.ok() && !absl::IsAborted(s)) {
      if (absl::StrContains(s.message(), "diverged")) {
        summary.diverged = true;
        summary.final_val_loss = NAN;
        break;
      }
      return s;
    }
  }
  if (!summary.diverged) {
    for (const auto& outcome : outcomes) {
      if (!outcome.ok()) return outcome.status();
      summary.ranks.push_back(*outcome);
    }
    const RankOutcome& first = summary.ranks[0];
    summary.parameters = first.parameters;
    summary.initial_val_loss = first.initial_val_loss;
    summary.final_val_loss = first.final_val_loss >= 0 ? first.final_val_loss
                                                       : first.initial_val_loss;
    summary.coverage = first.coverage;
    summary.mean_age = first.mean_age;
    summary.residual_to_momentum = first.residual_to_momentum;
  }
  if (summary.parameters == 0) {  // diverged: the layout still says
    auto model_config = model::PresetConfig(config.model);
    if (!model_config.ok()) return model_config.status();
    summary.parameters = model::ParameterLayout(*model_config).total_size();
  }
  summary.dense_bytes_per_step =
      optim::InProcessRankGroup::RingAllReduceBytesSent(summary.parameters, P, 0);
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
