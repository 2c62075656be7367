#include "bench/attention_straggler/attention_step.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "runtime/base/atomic_file.h"

namespace corescape::bench {

WorkerTensors MakeWorkerTensors(const StragglerConfig& config, int worker) {
  WorkerTensors t;
  for (int64_t length : config.DocumentLengths(worker)) {
    t.tasks.push_back({0, length, t.rows, t.rows});
    t.rows += length;
  }
  const int64_t q_width = int64_t{config.n_heads} * config.head_dim;
  const int64_t kv_width = int64_t{config.n_kv_heads} * config.head_dim;
  std::mt19937 rng(static_cast<uint32_t>(config.seed * 1000 + worker));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<float>& x, int64_t width) {
    x.resize(t.rows * width);
    for (float& value : x) value = normal(rng);
  };
  random(t.q, q_width);
  random(t.k, kv_width);
  random(t.v, kv_width);
  random(t.d_o, q_width);
  t.o.assign(config.layers, std::vector<float>(t.rows * q_width));
  t.lse.assign(config.layers, std::vector<float>(t.rows * config.n_heads));
  t.d_q.resize(t.rows * q_width);
  t.d_k.resize(t.rows * kv_width);
  t.d_v.resize(t.rows * kv_width);
  return t;
}

absl::StatusOr<StepSeconds> RunAttentionStep(model::CoreAttentionExecutor& executor,
                                             const StragglerConfig& config,
                                             WorkerTensors& t) {
  const kernels::AttentionShape shape = config.shape();
  auto inputs = [&](int layer) -> model::AttentionInputs {
    return {.layer = layer,
            .shape = shape,
            .tasks = t.tasks,
            .rows = t.rows,
            .q = t.q.data(),
            .k = t.k.data(),
            .v = t.v.data()};
  };
  StepSeconds seconds;
  const absl::Time start = absl::Now();
  for (int layer = 0; layer < config.layers; ++layer) {
    if (absl::Status s = executor.Forward(
            {.in = inputs(layer), .o = t.o[layer].data(), .lse = t.lse[layer].data()});
        !s.ok()) {
      return s;
    }
  }
  const absl::Time forward_done = absl::Now();
  for (int layer = config.layers - 1; layer >= 0; --layer) {
    std::fill(t.d_k.begin(), t.d_k.end(), 0.0f);  // the executor accumulates
    std::fill(t.d_v.begin(), t.d_v.end(), 0.0f);
    if (absl::Status s = executor.Backward({.in = inputs(layer),
                                            .o = t.o[layer].data(),
                                            .lse = t.lse[layer].data(),
                                            .d_o = t.d_o.data(),
                                            .d_q = t.d_q.data(),
                                            .d_k = t.d_k.data(),
                                            .d_v = t.d_v.data()});
        !s.ok()) {
      return s;
    }
  }
  seconds.forward = absl::ToDoubleSeconds(forward_done - start);
  seconds.backward = absl::ToDoubleSeconds(absl::Now() - forward_done);
  return seconds;
}

std::vector<const std::vector<float>*> Outputs(const WorkerTensors& t) {
  return {&t.o[0], &t.lse[0], &t.d_q, &t.d_k, &t.d_v};
}

std::string OutputPath(const std::string& dir, AttentionMode mode, int worker,
                       const std::string& name) {
  return absl::StrCat(dir, "/", ModeName(mode), "-worker", worker, "-", name, ".f32");
}

absl::Status WriteOutputs(const WorkerTensors& t, const std::string& dir, AttentionMode mode,
                          int worker) {
  const std::vector<const std::vector<float>*> outputs = Outputs(t);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::vector<float>& x = *outputs[i];
    absl::string_view bytes(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
    if (absl::Status s = WriteFileAtomically(OutputPath(dir, mode, worker, kOutputNames[i]), bytes);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace corescape::bench
