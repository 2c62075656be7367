// Training-step throughput of corescape's CPU transformer: forward,
// backward and AdamW on packed random documents, tokens/s and peak memory.
// Prints one JSON line; run.sh puts it beside PyTorch eager on the same
// model, batch and thread count.
#include <cblas.h>
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "bench/bench_main.h"
#include "bench/train_throughput/timed_steps.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/model_ops.h"
#include "runtime/model/transformer.h"

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
  auto ops = corescape::model::OpenModelOps(corescape::device::Device::Cpu(),
                                            corescape::model::Precision::kFp32, &pool);
  if (!ops.ok()) return 1;
  std::shared_ptr<corescape::model::ModelOps> shared_ops = *std::move(ops);
  auto model = corescape::model::Transformer::Create(*config, shared_ops);
  if (!model.ok()) return 1;
  model->InitializeWeights(1);
  const corescape::model::ModelBatch batch =
      PackedRandomBatch(*config, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_seq),
                        absl::GetFlag(FLAGS_docs_per_row));

  const double rss_before = PeakRssMegabytes();
  const int steps = absl::GetFlag(FLAGS_steps);
  auto timed = TimeTrainingSteps(*model, shared_ops->local_attention(), batch,
                                 absl::GetFlag(FLAGS_warmup_steps), steps);
  if (!timed.ok()) {
    std::fprintf(stderr, "%s\n", timed.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "{\"impl\": \"corescape\", \"model\": \"%s\", \"parameters\": %lld, \"batch\": %d, "
      "\"seq\": %d, \"threads\": %d, \"tokens_per_s\": %.1f, \"step_ms\": %.2f, "
      "\"loss\": %.4f, \"peak_rss_mb\": %.1f, \"rss_before_steps_mb\": %.1f}\n",
      absl::GetFlag(FLAGS_model).c_str(), static_cast<long long>(config->ParameterCount()),
      batch.batch_size, batch.seq_len, threads, batch.rows() / timed->step_seconds,
      1e3 * timed->step_seconds, timed->last_loss, PeakRssMegabytes(), rss_before);
  return 0;
}

}  // namespace corescape::bench
