// Training-step throughput of corescape's CPU transformer: forward,
// backward and AdamW on packed random documents, tokens/s and peak memory.
// Prints one JSON line; run.sh puts it beside PyTorch eager on the same
// model, batch and thread count.
#include <cblas.h>
#include <sys/resource.h>

#include <cstdio>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "bench/bench_main.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/adamw.h"

ABSL_FLAG(std::string, model, "tiny", "preset");
ABSL_FLAG(int32_t, batch, 8, "rows per step");
ABSL_FLAG(int32_t, seq, 256, "tokens per row");
ABSL_FLAG(int32_t, docs_per_row, 4, "documents packed into each row");
ABSL_FLAG(int32_t, steps, 10, "timed steps");
ABSL_FLAG(int32_t, warmup_steps, 2, "untimed steps first");
ABSL_FLAG(int32_t, threads, 2, "compute threads");

namespace {

double PeakRssMegabytes() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace

namespace corescape::bench {

int RunBenchmark() {
  auto config = corescape::model::PresetConfig(absl::GetFlag(FLAGS_model));
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  openblas_set_num_threads(threads);
  corescape::ThreadPool pool(threads);
  corescape::model::LocalCoreAttention attention(&pool);

  auto model = corescape::model::Transformer::Create(*config);
  if (!model.ok()) return 1;
  model->InitializeWeights(1);
  std::vector<uint8_t> decay(model->layout().total_size(), 1);
  corescape::optim::AdamW optimizer({}, decay);

  corescape::model::ModelBatch batch;
  batch.batch_size = absl::GetFlag(FLAGS_batch);
  batch.seq_len = absl::GetFlag(FLAGS_seq);
  const int docs = absl::GetFlag(FLAGS_docs_per_row);
  std::mt19937 rng(7);
  for (int row = 0; row < batch.batch_size; ++row) {
    const int length = batch.seq_len / docs;
    for (int d = 0; d < docs; ++d) {
      const int start = d * length;
      const int this_length = d + 1 == docs ? batch.seq_len - start : length;
      for (int i = 0; i < this_length; ++i) {
        batch.tokens.push_back(rng() % config->vocab_size);
        batch.targets.push_back(rng() % config->vocab_size);
        batch.positions.push_back(i);
      }
      corescape::kernels::AttentionTask task;
      task.q_begin = 0;
      task.q_end = this_length;
      task.q_row = task.kv_row = int64_t{row} * batch.seq_len + start;
      batch.attention_tasks.push_back(task);
    }
  }

  const double rss_before = PeakRssMegabytes();
  corescape::model::Activations activations;
  const int warmup = absl::GetFlag(FLAGS_warmup_steps);
  const int steps = absl::GetFlag(FLAGS_steps);
  absl::Time start;
  double last_loss = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    if (step == warmup) start = absl::Now();
    if (!model->ZeroGradients().ok()) return 1;
    auto loss = model->Forward(batch, attention, activations);
    if (!loss.ok()) return 1;
    if (!model->Backward(attention, activations, 1.0f / loss->tokens).ok()) return 1;
    if (!optimizer.Step(model->parameters().data(), model->gradients().data(),
                        model->parameters().size(), 1e-4).ok()) {
      return 1;
    }
    last_loss = loss->mean();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double tokens = static_cast<double>(steps) * batch.rows();
  std::printf(
      "{\"impl\": \"corescape\", \"model\": \"%s\", \"parameters\": %lld, \"batch\": %d, "
      "\"seq\": %d, \"threads\": %d, \"tokens_per_s\": %.1f, \"step_ms\": %.2f, "
      "\"loss\": %.4f, \"peak_rss_mb\": %.1f, \"rss_before_steps_mb\": %.1f}\n",
      absl::GetFlag(FLAGS_model).c_str(), static_cast<long long>(config->ParameterCount()),
      batch.batch_size, batch.seq_len, threads, tokens / seconds, 1e3 * seconds / steps,
      last_loss, PeakRssMegabytes(), rss_before);
  return 0;
}

}  // namespace corescape::bench
