// Projection to scale: one training step at 64-512 GPUs with core attention
// colocated (plain data parallelism: each rank attends its own documents, the
// slowest rank sets the pace) against disaggregated in place (DistCA's mode:
// corescape's planner spreads every rank's attention over all ranks, the
// Q/K/V and results travel, ping-pong overlaps the transfers with compute).
//
// What is measured: attention time per document length (DistCA's H100
// profile, 64/4 heads, head_dim 128, per GPU at tp = 8), NCCL bandwidth on
// H200 (nccl-tests), document lengths (DistCA's samples). What is modelled
// or assumed, all printed with the results: the model (48 layers, hidden
// 8192), linear layers at an assumed MFU, backward = 2.5x forward for
// attention, the fused-kernel time, the inter-node bandwidth, the overlap.
//
// Run: bazel run -c opt //bench/attention_sim:attention_sim [-- --seeds=3]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "bench/attention_sim/profiles.h"
#include "bench/bench_main.h"
#include "bench/planner/document_samples.h"
#include "runtime/planner/attention_planner.h"
#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/plan_summary.h"

ABSL_FLAG(std::string, data_dir, "", "directory of DistCA's data (default ../shared/data)");
ABSL_FLAG(int, seeds, 3, "sampled steps per configuration");
ABSL_FLAG(std::string, gpus, "64,128,256,512", "GPU counts");
ABSL_FLAG(std::string, contexts, "131072,262144,524288", "tokens per data-parallel rank");
ABSL_FLAG(std::string, dists, "prolong,wlbllm", "length samples (distca_dist_<name>.json)");
ABSL_FLAG(double, tolerance, 0.005,
          "planner tolerance (small: transfers are cheap next to compute here)");
ABSL_FLAG(double, mfu, 0.5, "assumed model-FLOPs utilisation of the linear layers");
ABSL_FLAG(double, ib_gbps, 50.0, "assumed inter-node bandwidth per GPU, GB/s (400 Gb/s NIC)");

namespace corescape::bench {
namespace {

// The modelled training setup. Attention shape = the CSV's; the rest is a
// 34B-class dense model (CodeLlama-34B's depth and widths).
constexpr int kTensorParallel = 8;  // one 8-GPU node = one data-parallel rank
constexpr int kLayers = 48;
constexpr int64_t kHidden = 8192;
constexpr int kHeads = 64;
constexpr int kKvHeads = 4;
constexpr int kHeadDim = 128;
constexpr int64_t kFfn = 22016;
constexpr double kH200PeakFlops = 989e12;  // dense bf16
constexpr double kAttentionBackwardFactor = 2.5;

// Weights per layer: Q and O (hidden^2 each), K and V (hidden x kv width),
// SwiGLU MLP (3 x hidden x ffn).
constexpr double kParamsPerLayer = 2.0 * kHidden * kHidden +
                                   2.0 * kHidden * kKvHeads * kHeadDim + 3.0 * kHidden * kFfn;

struct Profiles {
  AttentionTimeModel attention;
  NcclBandwidth nvlink;
};

struct StepResult {
  double attn_imbalance_colocated = 0;  // max/mean of per-rank attention time
  double attn_imbalance_disagg = 0;
  double layer_imbalance_packed = 0;  // max/mean of linear + attention per rank
  double step_speedup_packed_nvlink_overlap = 0;  // disaggregated vs packed baseline
  double step_speedup_packed_ib_half = 0;
  double attn_speedup = 0;       // max colocated attention / max disaggregated
  double attn_share = 0;         // attention share of the slowest colocated rank
  double comm_over_compute_nvlink = 0;  // max over ranks, forward+backward
  double comm_over_compute_ib = 0;
  double step_speedup_nvlink_overlap = 0;
  double step_speedup_ib_half = 0;
  double plan_ms = 0;
};

// Milliseconds for bytes leaving one node: each of its 8 GPUs sends its head
// shard (1/8) at gbps.
double TransferMs(double bytes, double gbps) {
  return bytes / kTensorParallel / (gbps * 1e9) * 1e3;
}

StepResult SimulateStep(const Profiles& profiles, std::vector<std::vector<int64_t>> batches,
                        int64_t tokens_per_rank) {
  const int ranks = static_cast<int>(batches.size());
  planner::PlanInput input;
  input.model = {.hidden = kHidden, .n_heads = kHeads, .n_kv_heads = kKvHeads,
                 .head_dim = kHeadDim, .bytes_per_element = 2};
  for (int r = 0; r < ranks; ++r) input.servers.push_back({.speed = 1.0, .colocated_worker = r});
  input.worker_documents = std::move(batches);

  const AttentionTimeModel& attention = profiles.attention;
  // Forward attention per rank, ms per layer: one fused call over its tasks.
  std::vector<double> colocated(ranks, attention.launch_ms());
  for (int r = 0; r < ranks; ++r) {
    for (int64_t length : input.worker_documents[r]) {
      colocated[r] += planner::DocumentPairs(length) * attention.PerPairMs(length);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<planner::Plan> plan =
      planner::PlanAttention(input, {.tolerance = absl::GetFlag(FLAGS_tolerance)});
  StepResult result;
  result.plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    std::fprintf(stderr, "planning failed: %s\n", plan.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<double> disagg(ranks, attention.launch_ms());
  // Bytes per rank as worker (out: its Q, K/V to other servers) and as
  // server (in: others' Q, K/V). K/V once per (document, server).
  std::vector<double> q_out(ranks, 0), kv_out(ranks, 0), q_in(ranks, 0), kv_in(ranks, 0);
  const double q_bytes = static_cast<double>(planner::QBytesPerToken(input.model));
  const double kv_bytes = static_cast<double>(planner::KvBytesPerToken(input.model));
  std::map<std::tuple<int, int, int>, int64_t> prefix;
  for (const planner::PlannedTask& t : plan->tasks) {
    disagg[t.server] +=
        planner::CausalPairs(t.q_begin, t.q_end) * attention.PerPairMs(t.q_end - t.q_begin);
    if (t.server == t.worker) continue;
    q_out[t.worker] += (t.q_end - t.q_begin) * q_bytes;
    q_in[t.server] += (t.q_end - t.q_begin) * q_bytes;
    int64_t& p = prefix[{t.worker, t.document, t.server}];
    p = std::max(p, t.q_end);
  }
  for (const auto& [key, p] : prefix) {
    kv_out[std::get<0>(key)] += p * kv_bytes;
    kv_in[std::get<2>(key)] += p * kv_bytes;
  }

  // Linear layers of one rank per layer: 2 FLOPs per weight per token
  // forward, twice that backward, split over the 8 GPUs at the assumed MFU.
  const double linear_fwd_ms = 2.0 * kParamsPerLayer * tokens_per_rank / kTensorParallel /
                               (absl::GetFlag(FLAGS_mfu) * kH200PeakFlops) * 1e3;
  const double linear_bwd_ms = 2.0 * linear_fwd_ms;
  const double bwd = kAttentionBackwardFactor;

  double max_colocated_layer = 0, max_colocated_attn = 0, sum_colocated_attn = 0;
  double max_disagg_attn = 0, sum_disagg_attn = 0;
  // Slowest rank under each bandwidth assumption and overlap model.
  struct Worst {
    double overlap = 0;  // ms per layer
    double half = 0;
    double comm_over_compute = 0;
  };
  Worst nvlink_worst, ib_worst;
  const double ib = absl::GetFlag(FLAGS_ib_gbps);
  for (int r = 0; r < ranks; ++r) {
    const double layer = linear_fwd_ms + linear_bwd_ms + colocated[r] * (1 + bwd);
    if (layer > max_colocated_layer) {
      max_colocated_layer = layer;
      result.attn_share = colocated[r] * (1 + bwd) / layer;
    }
    max_colocated_attn = std::max(max_colocated_attn, colocated[r]);
    sum_colocated_attn += colocated[r];
    max_disagg_attn = std::max(max_disagg_attn, disagg[r]);
    sum_disagg_attn += disagg[r];

    // Forward: send own Q+K/V, return O of served tasks; receive the
    // reverse. Backward (servers kept Q/K/V): send dO, return dQ and the
    // summed dK/dV; receive the reverse. Links are full duplex.
    const double fwd_bytes = std::max(q_out[r] + kv_out[r] + q_in[r], q_in[r] + kv_in[r] + q_out[r]);
    const double bwd_bytes = std::max(q_out[r] + q_in[r] + kv_in[r], q_in[r] + q_out[r] + kv_out[r]);
    const double compute_fwd = linear_fwd_ms + disagg[r];
    const double compute_bwd = linear_bwd_ms + disagg[r] * bwd;
    for (const bool nvlink : {true, false}) {
      auto gbps = [&](double bytes) {
        return nvlink ? profiles.nvlink.BusGBps(bytes / kTensorParallel) : ib;
      };
      const double x_fwd = TransferMs(fwd_bytes, gbps(fwd_bytes));
      const double x_bwd = TransferMs(bwd_bytes, gbps(bwd_bytes));
      // Ping-pong, optimistic: with the two halves alternating across
      // layers, transfers hide completely behind compute when shorter.
      const double overlap = std::max(compute_fwd, x_fwd) + std::max(compute_bwd, x_bwd);
      // Pessimistic: half of every transfer exposed (only the other half's
      // compute of the same layer to hide behind).
      const double half = compute_fwd + compute_bwd + (x_fwd + x_bwd) / 2;
      const double ratio = (x_fwd + x_bwd) / (compute_fwd + compute_bwd);
      Worst& worst = nvlink ? nvlink_worst : ib_worst;
      worst.overlap = std::max(worst.overlap, overlap);
      worst.half = std::max(worst.half, half);
      worst.comm_over_compute = std::max(worst.comm_over_compute, ratio);
    }
  }
  // Stronger colocated baseline: the same documents re-packed across ranks
  // by longest-processing-time-first on each document's whole time on a
  // rank (its linear share + its attention), WLB-LLM-style balancing with
  // whole documents and no context parallelism. Token counts per rank then
  // differ (memory not modelled).
  {
    const double linear_per_token = (linear_fwd_ms + linear_bwd_ms) / tokens_per_rank;
    std::vector<double> doc_ms;
    for (const auto& batch : input.worker_documents) {
      for (int64_t length : batch) {
        doc_ms.push_back(linear_per_token * length +
                         planner::DocumentPairs(length) * attention.PerPairMs(length) * (1 + bwd));
      }
    }
    std::sort(doc_ms.begin(), doc_ms.end(), std::greater<>());
    std::priority_queue<double, std::vector<double>, std::greater<>> rank_ms;
    const double launch = attention.launch_ms() * (1 + bwd);
    for (int r = 0; r < ranks; ++r) rank_ms.push(launch);
    for (double t : doc_ms) {
      const double least = rank_ms.top();
      rank_ms.pop();
      rank_ms.push(least + t);
    }
    double packed_layer = 0, packed_sum = 0;
    while (!rank_ms.empty()) {
      packed_layer = std::max(packed_layer, rank_ms.top());
      packed_sum += rank_ms.top();
      rank_ms.pop();
    }
    result.layer_imbalance_packed = packed_layer / (packed_sum / ranks);
    result.step_speedup_packed_nvlink_overlap = packed_layer / nvlink_worst.overlap;
    result.step_speedup_packed_ib_half = packed_layer / ib_worst.half;
  }
  result.attn_imbalance_colocated = max_colocated_attn / (sum_colocated_attn / ranks);
  result.attn_imbalance_disagg = max_disagg_attn / (sum_disagg_attn / ranks);
  result.attn_speedup = max_colocated_attn / max_disagg_attn;
  result.comm_over_compute_nvlink = nvlink_worst.comm_over_compute;
  result.comm_over_compute_ib = ib_worst.comm_over_compute;
  result.step_speedup_nvlink_overlap = max_colocated_layer / nvlink_worst.overlap;
  result.step_speedup_ib_half = max_colocated_layer / ib_worst.half;
  return result;
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view v : absl::StrSplit(text, ',')) out.push_back(std::stoll(std::string(v)));
  return out;
}

}  // namespace

int RunBenchmark() {
  const std::string dir = DataDirectory(absl::GetFlag(FLAGS_data_dir));
  absl::StatusOr<AttentionTimeModel> attention =
      AttentionTimeModel::FromCsv(dir + "/distca_compute_attn_H100.csv", kTensorParallel);
  absl::StatusOr<NcclBandwidth> nvlink =
      NcclBandwidth::FromCsv(dir + "/distca_nccl_perf_H200.csv", "all_gather", 8);
  if (!attention.ok() || !nvlink.ok()) {
    std::fprintf(stderr, "%s %s\n", attention.status().ToString().c_str(),
                 nvlink.status().ToString().c_str());
    return 1;
  }
  const Profiles profiles{*attention, *nvlink};
  const int seeds = absl::GetFlag(FLAGS_seeds);
  std::printf("Model: %d layers, hidden %lld, %d/%d heads, head_dim %d, ffn %lld (%.1fB params in "
              "layers); tp=%d per rank; linear layers at MFU %.2f of %.0f TFLOP/s; attention "
              "backward %.1fx forward; planner tolerance %.2f; %d seeds; IB %.0f GB/s per GPU "
              "(assumed), NVLink-class from the CSV (all_gather, 8 GPUs).\n",
              kLayers, static_cast<long long>(kHidden), kHeads, kKvHeads, kHeadDim,
              static_cast<long long>(kFfn), kParamsPerLayer * kLayers / 1e9, kTensorParallel,
              absl::GetFlag(FLAGS_mfu), kH200PeakFlops / 1e12, kAttentionBackwardFactor,
              absl::GetFlag(FLAGS_tolerance), seeds, absl::GetFlag(FLAGS_ib_gbps));
  std::printf("Attention: fused call = %.4f ms launch + pairs x per-pair time(L); per-pair time at "
              "64k tokens %.3g ms (tp=8).\n\n",
              attention->launch_ms(), attention->PerPairMs(65536));
  std::printf("| lengths | context | GPUs | attn max/mean coloc / disagg | layer max/mean packed | "
              "attn share of step (coloc) | core-attn speed-up vs coloc | comm/compute NVLink / IB "
              "| step speed-up vs coloc: NVLink overlap / IB half-exposed | step speed-up vs packed: "
              "NVLink overlap / IB half-exposed | plan ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view dist : absl::StrSplit(absl::GetFlag(FLAGS_dists), ',')) {
    absl::StatusOr<std::vector<int64_t>> lengths =
        LoadLengths(dir + "/distca_dist_" + std::string(dist) + ".json");
    if (!lengths.ok()) {
      std::fprintf(stderr, "%s\n", lengths.status().ToString().c_str());
      return 1;
    }
    for (int64_t context : ParseList(absl::GetFlag(FLAGS_contexts))) {
      for (int64_t gpus : ParseList(absl::GetFlag(FLAGS_gpus))) {
        const int ranks = static_cast<int>(gpus / kTensorParallel);
        StepResult mean;
        for (int seed = 1; seed <= seeds; ++seed) {
          const StepResult r = SimulateStep(
              profiles,
              SampleRankBatches(*lengths, {.ranks = ranks, .tokens_per_rank = context,
                                           .round_to = 16, .max_length = context,
                                           .seed = static_cast<uint64_t>(seed)}),
              context);
          auto add = [&](double StepResult::*field) { mean.*field += r.*field / seeds; };
          for (auto field :
               {&StepResult::attn_imbalance_colocated, &StepResult::attn_imbalance_disagg,
                &StepResult::layer_imbalance_packed, &StepResult::attn_speedup,
                &StepResult::attn_share, &StepResult::comm_over_compute_nvlink,
                &StepResult::comm_over_compute_ib, &StepResult::step_speedup_nvlink_overlap,
                &StepResult::step_speedup_ib_half, &StepResult::step_speedup_packed_nvlink_overlap,
                &StepResult::step_speedup_packed_ib_half, &StepResult::plan_ms}) {
            add(field);
          }
        }
        std::printf("| %s | %lldk | %lld | %.2f / %.3f | %.2f | %.0f%% | %.2fx | %.3f / %.3f | "
                    "%.2fx / %.2fx | %.2fx / %.2fx | %.1f |\n",
                    std::string(dist).c_str(), static_cast<long long>(context / 1024),
                    static_cast<long long>(gpus), mean.attn_imbalance_colocated,
                    mean.attn_imbalance_disagg, mean.layer_imbalance_packed, 100 * mean.attn_share,
                    mean.attn_speedup, mean.comm_over_compute_nvlink, mean.comm_over_compute_ib,
                    mean.step_speedup_nvlink_overlap, mean.step_speedup_ib_half,
                    mean.step_speedup_packed_nvlink_overlap, mean.step_speedup_packed_ib_half,
                    mean.plan_ms);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace corescape::bench
