// Forward + backward time of one micro-batch per worker when core attention
// runs on attention servers: whole micro-batches (every exchange waits for
// its reply) against ping-pong (two halves, one half's exchange in flight
// while the other computes), with the colocated step for reference.
// Workers and servers are threads of this process, each rank with its own
// UCX transport on loopback and ONE compute thread (OpenBLAS and the
// attention kernel single-threaded), so a rank's compute can only overlap
// another rank's if there is a free core for it: on W + S cores ping-pong
// can hide the servers' time behind the workers'; on fewer it cannot.

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "runtime/attention/in_process_attention_cluster.h"
#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"
#include "runtime/train/ping_pong_schedule.h"

ABSL_FLAG(std::string, model, "small", "model preset");
ABSL_FLAG(int, workers, 1, "worker ranks");
ABSL_FLAG(int, servers, 1, "attention-server ranks");
ABSL_FLAG(int, rows, 4, "packed rows per micro-batch (ping-pong: rows/2 per half)");
ABSL_FLAG(int, seq_len, 1024, "tokens per row");
ABSL_FLAG(int, min_document, 256, "shortest document");
ABSL_FLAG(int, steps, 4, "timed steps after one warm-up step");

namespace corescape {
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

// Median seconds of one forward + backward, after a warm-up step.
double TimeSteps(const model::ModelConfig& config, const model::ModelBatch& batch,
                 model::CoreAttentionExecutor& attention, bool ping_pong) {
  auto model = model::Transformer::Create(config);
  CheckOk(model.status());
  model->InitializeWeights(1);
  train::PingPongSchedule schedule(*model);
  model::Activations activations;
  std::vector<double> seconds;
  for (int step = 0; step <= absl::GetFlag(FLAGS_steps); ++step) {
    const auto start = std::chrono::steady_clock::now();
    model->ZeroGradients();
    if (ping_pong) {
      CheckOk(schedule.Forward(batch, attention).status());
      CheckOk(schedule.Backward(attention, 1e-3f));
    } else {
      CheckOk(model->Forward(batch, attention, activations).status());
      CheckOk(model->Backward(attention, activations, 1e-3f));
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step > 0) seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Worker 0's median step with core attention on the servers.
double TimeDisaggregated(const model::ModelConfig& config,
                         const std::vector<model::ModelBatch>& batches, bool ping_pong) {
  attention::InProcessAttentionCluster cluster;
  cluster.workers = absl::GetFlag(FLAGS_workers);
  cluster.servers = absl::GetFlag(FLAGS_servers);
  cluster.options.n_layers = config.n_layers;
  std::vector<double> seconds(cluster.workers);
  auto outcomes = attention::RunInProcessAttentionCluster(
      cluster, [&](int w, attention::DisaggregatedCoreAttention& executor) {
        seconds[w] = TimeSteps(config, batches[w], executor, ping_pong);
      });
  CheckOk(outcomes.status());
  for (const attention::ServerOutcome& outcome : *outcomes) CheckOk(outcome.served);
  return seconds[0];
}

int Main() {
  openblas_set_num_threads(1);
  auto config = model::PresetConfig(absl::GetFlag(FLAGS_model));
  CheckOk(config.status());
  config->max_seq_len = std::max(config->max_seq_len, absl::GetFlag(FLAGS_seq_len));
  std::mt19937 rng(7);
  std::vector<model::ModelBatch> batches;
  for (int w = 0; w < absl::GetFlag(FLAGS_workers); ++w) batches.push_back(MakeBatch(rng, *config));

  model::LocalCoreAttention local(nullptr);
  const double colocated = TimeSteps(*config, batches[0], local, /*ping_pong=*/false);
  const double whole = TimeDisaggregated(*config, batches, /*ping_pong=*/false);
  const double ping_pong = TimeDisaggregated(*config, batches, /*ping_pong=*/true);
  const double tokens =
      static_cast<double>(absl::GetFlag(FLAGS_rows)) * absl::GetFlag(FLAGS_seq_len);
  std::printf("model %s, %d worker(s) x %d server(s), %d x %d tokens per worker, %d documents "
              "on worker 0, one compute thread per rank, %d hardware threads\n",
              absl::GetFlag(FLAGS_model).c_str(), absl::GetFlag(FLAGS_workers),
              absl::GetFlag(FLAGS_servers), absl::GetFlag(FLAGS_rows),
              absl::GetFlag(FLAGS_seq_len), static_cast<int>(batches[0].attention_tasks.size()),
              static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("%-34s %10s %10s %8s\n", "forward+backward of one micro-batch", "median s",
              "tokens/s", "vs whole");
  auto row = [&](const char* name, double s) {
    std::printf("%-34s %10.3f %10.0f %7.2fx\n", name, s, tokens / s, whole / s);
  };
  row("colocated (worker computes all)", colocated);
  row("disaggregated, whole micro-batch", whole);
  row("disaggregated, ping-pong", ping_pong);
  return 0;
}

}  // namespace
}  // namespace corescape

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return corescape::Main();
}
