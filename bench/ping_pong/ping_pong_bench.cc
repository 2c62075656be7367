// Forward + backward time of one micro-batch per worker when core attention
// is not the worker's alone: whole micro-batches (every exchange waits for
// its reply) against ping-pong (two halves, one half's exchange in flight
// while the other computes), with the colocated step for reference (in
// place also the slowest worker's colocated step: the workers wait for each
// other every layer, so the job's colocated step is its straggler's).
//   --mode=disaggregated: core attention on --servers attention servers.
//   --mode=in_place: no servers; the --workers workers serve each other's
//     core attention (attention.mode = IN_PLACE), a worker with longer
//     documents shipping part of its attention to the others.
// Workers and servers are threads of this process, each rank with its own
// UCX transport on loopback and ONE compute thread (OpenBLAS and the
// attention kernel single-threaded), so a rank's compute can only overlap
// another rank's if there is a free core for it: on W + S cores ping-pong
// can hide the servers' time behind the workers'; on fewer it cannot. In
// place, every worker computes its own dense layers and its share of
// attention, so ping-pong can hide only the transfers.
// Fails unless, within 1e-5 relative, every worker's ping-pong loss equals
// its whole micro-batch loss and that its colocated one (where timed).

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_main.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/attention/in_process_attention_cluster.h"
#include "runtime/comm/loopback_ranks.h"
#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"
#include "runtime/train/ping_pong_schedule.h"

ABSL_FLAG(std::string, model, "small", "model preset");
ABSL_FLAG(int, workers, 1, "worker ranks");
ABSL_FLAG(std::string, mode, "disaggregated",
          "disaggregated (core attention on --servers servers) or in_place (the workers "
          "serve each other's; --servers ignored)");
ABSL_FLAG(int, servers, 1, "attention-server ranks (disaggregated mode)");
ABSL_FLAG(int, rows, 4, "packed rows per micro-batch (ping-pong: rows/2 per half)");
ABSL_FLAG(int, seq_len, 1024, "tokens per row");
ABSL_FLAG(int, min_document, 256, "shortest document");
ABSL_FLAG(int, steps, 4, "timed steps after one warm-up step");

namespace corescape::bench {
namespace {

void CheckOk(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

// Rows packed with whole documents of min_document..seq_len tokens.
model::ModelBatch MakeBatch(std::mt19937& rng, const model::ModelConfig& config) {
  const int rows = absl::GetFlag(FLAGS_rows), seq_len = absl::GetFlag(FLAGS_seq_len);
  const int shortest = std::min(absl::GetFlag(FLAGS_min_document), seq_len);
  model::ModelBatch b;
  b.batch_size = rows;
  b.seq_len = seq_len;
  for (int r = 0; r < rows; ++r) {
    for (int start = 0; start < seq_len;) {
      int length = shortest + static_cast<int>(rng() % (seq_len - shortest + 1));
      length = std::min(length, seq_len - start);
      b.attention_tasks.push_back(
          {0, length, int64_t{r} * seq_len + start, int64_t{r} * seq_len + start});
      for (int i = 0; i < length; ++i) {
        b.tokens.push_back(static_cast<int32_t>(rng() % config.vocab_size));
        b.positions.push_back(i);
        b.targets.push_back(static_cast<int32_t>(rng() % config.vocab_size));
      }
      start += length;
    }
  }
  return b;
}

struct Timing {
  double median_seconds = 0;
  double loss_sum = 0;  // of the last step (no optimizer step: the same every step)
};

// Median seconds of one forward + backward, after a warm-up step.
Timing TimeSteps(const model::ModelConfig& config, const model::ModelBatch& batch,
                 model::CoreAttentionExecutor& attention, bool ping_pong) {
  auto model = model::Transformer::Create(config);
  CheckOk(model.status());
  model->InitializeWeights(1);
  train::PingPongSchedule schedule(*model);
  model::Activations activations;
  std::vector<double> seconds;
  Timing timing;
  for (int step = 0; step <= absl::GetFlag(FLAGS_steps); ++step) {
    const auto start = std::chrono::steady_clock::now();
    CheckOk(model->ZeroGradients());
    absl::StatusOr<model::LossResult> loss;
    if (ping_pong) {
      loss = schedule.Forward(batch, attention);
      CheckOk(loss.status());
      CheckOk(schedule.Backward(attention, 1e-3f));
    } else {
      loss = model->Forward(batch, attention, activations);
      CheckOk(loss.status());
      CheckOk(model->Backward(attention, activations, 1e-3f));
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step > 0) seconds.push_back(s);
    timing.loss_sum = loss->loss_sum;
  }
  std::sort(seconds.begin(), seconds.end());
  timing.median_seconds = seconds[seconds.size() / 2];
  return timing;
}

// Runs body(worker, its executor) on every worker's thread, with core
// attention per --mode; returns what the attention ranks report ("" if
// nothing).
using WorkerBody = std::function<void(int worker, model::CoreAttentionExecutor& attention)>;

std::string RunDisaggregated(const model::ModelConfig& config, const WorkerBody& body) {
  attention::InProcessAttentionCluster cluster;
  cluster.workers = absl::GetFlag(FLAGS_workers);
  cluster.servers = absl::GetFlag(FLAGS_servers);
  cluster.options.n_layers = config.n_layers;
  auto outcomes = attention::RunInProcessAttentionCluster(
      cluster, [&](int w, attention::DisaggregatedCoreAttention& executor) { body(w, executor); });
  CheckOk(outcomes.status());
  for (const attention::ServerOutcome& outcome : *outcomes) CheckOk(outcome.served);
  return "";
}

// In place: per worker the plans' tasks computed (of them, the peers'),
// tasks shipped to peers and the last plan's speed weights.
std::string RunInPlace(const model::ModelConfig& config, const WorkerBody& body) {
  const int workers = absl::GetFlag(FLAGS_workers);
  attention::InPlaceOptions options;
  options.n_layers = config.n_layers;
  options.threads = 1;  // one compute thread per rank
  std::vector<attention::InPlaceStats> stats(workers);
  CheckOk(comm::RunLoopbackRanks(
      workers, "ping-pong-bench/attn-inplace",
      [&](int w, std::unique_ptr<comm::Communicator> communicator) {
        auto executor = attention::InPlaceCoreAttention::Create(std::move(communicator), options);
        CheckOk(executor.status());
        body(w, **executor);
        stats[w] = (*executor)->stats();
      }));
  std::string report;
  int64_t shipped = 0;
  for (int w = 0; w < workers; ++w) {
    const attention::InPlaceStats& s = stats[w];
    absl::StrAppend(&report, "\n  worker ", w, ": ", s.micro_batches, " micro-batches, ",
                    s.tasks_computed, " tasks computed (", s.peer_tasks_computed,
                    " of peers), ", s.tasks_shipped, " shipped, speed weights [",
                    absl::StrJoin(s.speed_weights, " ",
                                  [](std::string* out, double weight) {
                                    absl::StrAppend(out, absl::SixDigits(weight));
                                  }),
                    "]");
    shipped += s.tasks_shipped;
  }
  if (shipped == 0 && workers > 1) {
    absl::StrAppend(&report, "\n  NOTE: no task was shipped (documents too even?): in place "
                             "computed everything at home");
  }
  return report;
}

// Every worker's timing with core attention per --mode, and what the
// attention ranks reported.
std::vector<Timing> TimeRemote(const model::ModelConfig& config,
                               const std::vector<model::ModelBatch>& batches, bool ping_pong,
                               std::string& report) {
  std::vector<Timing> timings(batches.size());
  const WorkerBody body = [&](int w, model::CoreAttentionExecutor& attention) {
    timings[w] = TimeSteps(config, batches[w], attention, ping_pong);
  };
  report = absl::GetFlag(FLAGS_mode) == "in_place" ? RunInPlace(config, body)
                                                   : RunDisaggregated(config, body);
  return timings;
}

// Exits unless `got` equals `expected` within 1e-5 relative.
void CheckSameLoss(double got, double expected, const std::string& what) {
  if (std::abs(got - expected) > 1e-5 * std::abs(expected)) {
    std::fprintf(stderr, "LOSS MISMATCH: %s: %.9g vs %.9g (relative %.3g)\n", what.c_str(), got,
                 expected, std::abs(got - expected) / std::abs(expected));
    std::exit(1);
  }
}

}  // namespace

int RunBenchmark() {
  openblas_set_num_threads(1);
  auto config = model::PresetConfig(absl::GetFlag(FLAGS_model));
  CheckOk(config.status());
  config->max_seq_len = std::max(config->max_seq_len, absl::GetFlag(FLAGS_seq_len));
  std::mt19937 rng(7);
  std::vector<model::ModelBatch> batches;
  for (int w = 0; w < absl::GetFlag(FLAGS_workers); ++w) batches.push_back(MakeBatch(rng, *config));

  const std::string mode = absl::GetFlag(FLAGS_mode);
  const bool in_place = mode == "in_place";
  if (!in_place && mode != "disaggregated") {
    std::fprintf(stderr, "--mode must be disaggregated or in_place, not %s\n", mode.c_str());
    return 1;
  }
  model::LocalCoreAttention local(nullptr);
  // Colocated: worker 0 alone; in place every worker, one after another.
  std::vector<Timing> colocated;
  for (size_t w = 0; w < (in_place ? batches.size() : 1); ++w) {
    colocated.push_back(TimeSteps(*config, batches[w], local, /*ping_pong=*/false));
  }
  std::string whole_report, ping_pong_report;
  const std::vector<Timing> whole = TimeRemote(*config, batches, false, whole_report);
  const std::vector<Timing> ping_pong = TimeRemote(*config, batches, true, ping_pong_report);
  for (size_t w = 0; w < colocated.size(); ++w) {
    CheckSameLoss(whole[w].loss_sum, colocated[w].loss_sum,
                  absl::StrCat("worker ", w, ", whole vs colocated"));
  }
  for (size_t w = 0; w < batches.size(); ++w) {
    CheckSameLoss(ping_pong[w].loss_sum, whole[w].loss_sum,
                  absl::StrCat("worker ", w, ", ping-pong vs whole"));
  }
  const double tokens =
      static_cast<double>(absl::GetFlag(FLAGS_rows)) * absl::GetFlag(FLAGS_seq_len);
  const std::string ranks =
      in_place ? absl::StrCat(absl::GetFlag(FLAGS_workers), " worker(s) in place (no servers)")
               : absl::StrCat(absl::GetFlag(FLAGS_workers), " worker(s) x ",
                              absl::GetFlag(FLAGS_servers), " server(s)");
  std::string documents;  // per worker, its document lengths
  for (const model::ModelBatch& batch : batches) {
    absl::StrAppend(&documents, " [",
                    absl::StrJoin(batch.attention_tasks, " ",
                                  [](std::string* out, const kernels::AttentionTask& task) {
                                    absl::StrAppend(out, task.q_end - task.q_begin);
                                  }),
                    "]");
  }
  std::printf("model %s, %s, %d x %d tokens per worker, one compute thread per rank, %d "
              "hardware threads; documents per worker:%s\n",
              absl::GetFlag(FLAGS_model).c_str(), ranks.c_str(), absl::GetFlag(FLAGS_rows),
              absl::GetFlag(FLAGS_seq_len), static_cast<int>(std::thread::hardware_concurrency()),
              documents.c_str());
  std::printf("%-34s %10s %10s %8s\n", "forward+backward of one micro-batch", "median s",
              "tokens/s", "vs whole");
  auto row = [&](const std::string& name, double s) {
    std::printf("%-34s %10.3f %10.0f %7.2fx\n", name.c_str(), s, tokens / s,
                whole[0].median_seconds / s);
  };
  const std::string remote = in_place ? "in place" : "disaggregated";
  row("colocated (worker computes all)", colocated[0].median_seconds);
  if (colocated.size() > 1) {
    const auto slowest =
        std::max_element(colocated.begin(), colocated.end(), [](const Timing& a, const Timing& b) {
          return a.median_seconds < b.median_seconds;
        });
    row(absl::StrCat("colocated, slowest worker (", slowest - colocated.begin(), ")"),
        slowest->median_seconds);
  }
  row(remote + ", whole micro-batch", whole[0].median_seconds);
  row(remote + ", ping-pong", ping_pong[0].median_seconds);
  std::printf("loss sum on worker 0: colocated %.6f, whole %.6f, ping-pong %.6f (every "
              "worker's ping-pong = whole within 1e-5)\n",
              colocated[0].loss_sum, whole[0].loss_sum, ping_pong[0].loss_sum);
  if (!whole_report.empty()) std::printf("in-place stats, whole:%s\n", whole_report.c_str());
  if (!ping_pong_report.empty()) {
    std::printf("in-place stats, ping-pong:%s\n", ping_pong_report.c_str());
  }
  return 0;
}

}  // namespace corescape::bench
