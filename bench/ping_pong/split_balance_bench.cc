// How evenly ping-pong's two halves split a micro-batch: the row split at
// ceil(B/2) (the old rule) against SplitIntoHalves (the row that minimises
// the larger half's estimated cost), on micro-batches packed from DistCA's
// shipped document lengths (../shared/data/distca_dist_wlbllm.json) the way
// the loader packs them: documents end to end, cut at row ends. Prints, per
// model, row length and rows per micro-batch, the larger half's estimated
// forward cost over an even share (1 = perfect; the other half's compute
// must hide this one's attention), mean and worst over the samples, and how
// often the split moved off the middle. Estimates only: no step is timed.
//
// Run: bazel run -c opt //bench/ping_pong:split_balance_bench

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/planner/document_samples.h"
#include "runtime/model/model_config.h"
#include "runtime/train/ping_pong_schedule.h"

ABSL_FLAG(std::string, models, "small,llama-500m", "model presets");
ABSL_FLAG(std::string, seq_lens, "2048,8192,32768,131072", "tokens per row");
ABSL_FLAG(std::string, rows, "4,8", "rows per micro-batch");
ABSL_FLAG(int, samples, 200, "micro-batches per configuration");
ABSL_FLAG(std::string, data_dir, "", "directory of distca_dist_wlbllm.json (default: ../shared/data)");

namespace corescape::bench {
namespace {

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "%s\n", what.c_str());
    std::exit(1);
  }
}

std::vector<int> Ints(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    out.push_back(std::atoi(std::string(part).c_str()));
  }
  return out;
}

// One micro-batch of `rows` rows of `seq_len` tokens: the sampled documents
// laid end to end and cut at row ends (a piece per row, as the loader makes
// them; tokens are not needed for the estimate).
model::ModelBatch PackRows(const std::vector<int64_t>& documents, int rows, int seq_len) {
  model::ModelBatch batch;
  batch.batch_size = rows;
  batch.seq_len = seq_len;
  batch.tokens.assign(batch.rows(), 0);
  batch.targets.assign(batch.rows(), -1);
  batch.positions.assign(batch.rows(), 0);
  int64_t row = 0, column = 0;
  for (int64_t length : documents) {
    while (length > 0 && row < rows) {
      const int64_t piece = std::min<int64_t>(length, seq_len - column);
      const int64_t first = row * seq_len + column;
      batch.attention_tasks.push_back({0, piece, first, first});
      length -= piece;
      column += piece;
      if (column == seq_len) {
        ++row;
        column = 0;
      }
    }
  }
  return batch;
}

// The larger half's estimate over an even share of the whole.
double LargerHalfOverEven(const std::array<model::ModelBatch, 2>& halves,
                          const model::ModelConfig& config) {
  const double a = static_cast<double>(train::EstimatedForwardFlops(halves[0], config));
  const double b = static_cast<double>(train::EstimatedForwardFlops(halves[1], config));
  return std::max(a, b) / ((a + b) / 2);
}

}  // namespace

int RunBenchmark() {
  const std::string dir = bench::DataDirectory(absl::GetFlag(FLAGS_data_dir));
  auto lengths = bench::LoadLengths(dir + "/distca_dist_wlbllm.json");
  Check(lengths.ok(), std::string(lengths.status().message()));
  std::printf("| model | row tokens | rows | middle: mean | middle: worst | by cost: mean | "
              "by cost: worst | split moved |\n|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_models), ',')) {
    auto config = model::PresetConfig(name);
    Check(config.ok(), std::string(config.status().message()));
    for (int seq_len : Ints(absl::GetFlag(FLAGS_seq_lens))) {
      for (int rows : Ints(absl::GetFlag(FLAGS_rows))) {
        double middle_sum = 0, middle_worst = 0, cost_sum = 0, cost_worst = 0;
        int moved = 0;
        const int samples = absl::GetFlag(FLAGS_samples);
        for (int s = 0; s < samples; ++s) {
          bench::BatchSampling sampling;
          sampling.ranks = 1;
          sampling.tokens_per_rank = int64_t{rows} * seq_len;
          sampling.round_to = 1;
          sampling.seed = 1 + s;
          const auto documents = bench::SampleRankBatches(*lengths, sampling);
          const model::ModelBatch batch = PackRows(documents[0], rows, seq_len);
          auto middle = train::SplitAtRow(batch, (rows + 1) / 2);
          auto by_cost = train::SplitIntoHalves(batch, *config);
          Check(middle.ok() && by_cost.ok(), "split failed");
          const double m = LargerHalfOverEven(*middle, *config);
          const double c = LargerHalfOverEven(*by_cost, *config);
          Check(c <= m + 1e-12, "the cost split is worse than the middle one");
          middle_sum += m;
          cost_sum += c;
          middle_worst = std::max(middle_worst, m);
          cost_worst = std::max(cost_worst, c);
          moved += (*by_cost)[0].batch_size != (rows + 1) / 2;
        }
        std::printf("| %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %d%% |\n",
                    std::string(name).c_str(), seq_len, rows, middle_sum / samples,
                    middle_worst, cost_sum / samples, cost_worst, 100 * moved / samples);
      }
    }
  }
  return 0;
}

}  // namespace corescape::bench
