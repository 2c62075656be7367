// Forward+backward throughput of the CUDA core-attention kernels on whole
// causal documents of 4k-32k tokens: the tensor-core bf16 launches
// (core_attention_mma.cu) against the fp32 ones (core_attention.cu, up to
// --fp32_max_length: they are two orders slower) and against cuBLAS's bf16
// GEMM (8192^3, fp32 accumulate), both measured in the same run.
//
// FLOPs, the usual attention convention: for a document of L tokens,
// pairs = L(L+1)/2 causal (query, key) pairs; forward = 4·pairs·head_dim·
// n_heads (QK^T and PV, 2 FLOPs per multiply-add); backward = 2.5× forward
// (five such products: S recomputed, dP, dV, dQ, dK). The kernel executes
// more: its dQ and dK/dV passes each recompute S and dP.
// Skips (exit 0) when built without --config=cuda or run without a GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "bench/bench_main.h"

ABSL_FLAG(std::vector<std::string>, lengths, std::vector<std::string>({"4096", "8192", "16384", "32768"}),
          "document lengths, one causal document each");
ABSL_FLAG(int, heads, 16, "query heads");
ABSL_FLAG(int, kv_heads, 8, "key/value heads (GQA)");
ABSL_FLAG(int, head_dim, 128, "head size (at most 128)");
ABSL_FLAG(int64_t, fp32_max_length, 8192, "longest document the fp32 kernel is timed on");
ABSL_FLAG(int, repeats, 2, "timed runs per length after one warm-up (best is reported)");

#if defined(CORESCAPE_WITH_CUDA)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/device/device_runtime.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"
#include "runtime/kernels/cuda/gemm.h"

namespace corescape::bench {
namespace {

using device::DeviceBuffer;

struct Session {
  std::unique_ptr<device::DeviceRuntime> runtime;
  std::unique_ptr<device::CachingAllocator> allocator;
  std::unique_ptr<device::Stream> stream;
  std::unique_ptr<device::Event> start, end;
};

absl::Status Check(const absl::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return status;
}

// Best milliseconds of `repeats` runs of fn after one warm-up, timed by
// events on the stream.
template <typename Fn>
absl::StatusOr<double> BestMilliseconds(Session& s, int repeats, Fn fn) {
  if (absl::Status status = fn(); !status.ok()) return status;
  double best = INFINITY;
  for (int i = 0; i < repeats; ++i) {
    if (absl::Status status = s.stream->Record(*s.start); !status.ok()) return status;
    if (absl::Status status = fn(); !status.ok()) return status;
    if (absl::Status status = s.stream->Record(*s.end); !status.ok()) return status;
    if (absl::Status status = s.end->Synchronize(); !status.ok()) return status;
    absl::StatusOr<float> ms = s.runtime->ElapsedMilliseconds(*s.start, *s.end);
    if (!ms.ok()) return ms.status();
    best = std::min(best, static_cast<double>(*ms));
  }
  return best;
}

template <typename T>
absl::StatusOr<DeviceBuffer> Filled(Session& s, const std::vector<T>& random, int64_t count) {
  absl::StatusOr<DeviceBuffer> buffer = s.allocator->Allocate(count * sizeof(T));
  if (!buffer.ok()) return buffer;
  if (absl::Status status = s.runtime->CopyAsync(buffer->data(), random.data(), count * sizeof(T),
                                                 device::CopyKind::kHostToDevice, *s.stream);
      !status.ok()) {
    return status;
  }
  return buffer;
}

// Waits for the copy: its source is a temporary.
absl::StatusOr<DeviceBuffer> Zeroed(Session& s, int64_t count) {
  absl::StatusOr<DeviceBuffer> buffer = Filled(s, std::vector<float>(count, 0.0f), count);
  if (!buffer.ok()) return buffer;
  if (absl::Status status = s.stream->Synchronize(); !status.ok()) return status;
  return buffer;
}

// cuBLAS bf16 GEMM TFLOP/s at n^3: the in-run baseline.
absl::StatusOr<double> GemmTflops(Session& s, int repeats) {
  constexpr int64_t n = 8192;
  absl::StatusOr<std::unique_ptr<kernels::cuda::CublasHandle>> handle = kernels::cuda::CublasHandle::Create();
  if (!handle.ok()) return handle.status();
  std::vector<uint16_t> ones(n * n, kernels::cuda::Bf16FromFloat(0.01f));
  absl::StatusOr<DeviceBuffer> x = s.allocator->Allocate(n * n * 2), w = s.allocator->Allocate(n * n * 2),
                               y = s.allocator->Allocate(n * n * 4);
  if (!x.ok() || !w.ok() || !y.ok()) return absl::ResourceExhaustedError("GEMM buffers");
  for (DeviceBuffer* b : {&*x, &*w}) {
    if (absl::Status status =
            s.runtime->CopyAsync(b->data(), ones.data(), n * n * 2, device::CopyKind::kHostToDevice, *s.stream);
        !status.ok()) {
      return status;
    }
  }
  absl::StatusOr<double> ms = BestMilliseconds(s, repeats, [&] {
    return kernels::cuda::LinearForwardBf16(**handle, x->as<uint16_t>(), w->as<uint16_t>(), y->as<float>(), n, n,
                                            n, device::CudaStreamOf(*s.stream));
  });
  if (!ms.ok()) return ms.status();
  return 2.0 * n * n * n / (*ms * 1e-3) / 1e12;
}

int Run() {
  if (device::CudaDeviceCount() == 0) {
    std::printf("skipped: no CUDA GPU on this machine\n");
    return 0;
  }
  Session s;
  auto runtime = device::OpenDevice(device::Device::Cuda(0));
  if (!Check(runtime.status()).ok()) return 1;
  s.runtime = std::move(*runtime);
  s.allocator = std::make_unique<device::CachingAllocator>(s.runtime.get());
  auto stream = s.runtime->CreateStream();
  auto start = s.runtime->CreateEvent(), end = s.runtime->CreateEvent();
  if (!Check(stream.status()).ok() || !Check(start.status()).ok() || !Check(end.status()).ok()) return 1;
  s.stream = std::move(*stream);
  s.start = std::move(*start);
  s.end = std::move(*end);

  const kernels::AttentionShape shape{absl::GetFlag(FLAGS_heads), absl::GetFlag(FLAGS_kv_heads),
                                      absl::GetFlag(FLAGS_head_dim),
                                      1.0f / std::sqrt(static_cast<float>(absl::GetFlag(FLAGS_head_dim)))};
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<int64_t> lengths;
  for (const std::string& text : absl::GetFlag(FLAGS_lengths)) {
    int64_t length = 0;
    if (!absl::SimpleAtoi(text, &length) || length <= 0 || length > (int64_t{1} << 20)) {
      std::fprintf(stderr, "--lengths: '%s' is not a length in 1..2^20\n", text.c_str());
      return 1;
    }
    lengths.push_back(length);
  }
  absl::StatusOr<double> gemm = GemmTflops(s, repeats);
  if (!Check(gemm.status()).ok()) return 1;
  std::printf("baseline: cuBLAS bf16 GEMM 8192^3 %.1f TFLOP/s\n", *gemm);
  std::printf("core attention, %d heads / %d kv heads, head_dim %d, one causal document; kernels: fp32 "
              "(CUDA cores) and bf16 (tensor cores, fp32 accumulate):\n",
              shape.n_heads, shape.n_kv_heads, shape.head_dim);
  std::printf("%8s %6s %10s %10s %10s %12s %14s %10s\n", "length", "kernel", "fwd ms", "bwd ms", "TFLOP/s",
              "fwd TFLOP/s", "vs bf16 GEMM", "vs fp32");
  // Each line as it is measured: a run stopped at a time limit keeps them.
  std::fflush(stdout);

  const int64_t max_length = *std::max_element(lengths.begin(), lengths.end());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> random(max_length * shape.n_heads * shape.head_dim);
  for (float& value : random) value = normal(rng);
  std::vector<uint16_t> random_bf16(random.size());
  for (size_t i = 0; i < random.size(); ++i) random_bf16[i] = kernels::cuda::Bf16FromFloat(random[i]);

  // The figures so far as one JSON line after every measurement (the last
  // line holds them all), so a run stopped at a time limit keeps them.
  std::string json = "{\"bf16_gemm_tflops\":" + absl::StrCat(*gemm);
  auto print_figures = [&json] {
    std::printf("%s}\n", json.c_str());
    std::fflush(stdout);
  };
  print_figures();
  for (int64_t length : lengths) {
    const std::vector<kernels::AttentionTask> tasks = {{0, length, 0, 0}};
    auto plan = kernels::cuda::PlanCoreAttentionTiles(shape, tasks, length, length);
    if (!Check(plan.status()).ok()) return 1;
    auto tiles = kernels::cuda::UploadCoreAttentionTiles(*plan, *s.allocator, *s.stream);
    if (!Check(tiles.status()).ok()) return 1;
    const int64_t q_floats = length * shape.n_heads * shape.head_dim;
    const int64_t kv_floats = length * shape.n_kv_heads * shape.head_dim;
    double fp32_tflops = 0;  // this length's fp32 kernel, when timed
    for (const bool bf16 : {false, true}) {
      if (!bf16 && length > absl::GetFlag(FLAGS_fp32_max_length)) continue;
      auto q = bf16 ? Filled(s, random_bf16, q_floats) : Filled(s, random, q_floats);
      auto k = bf16 ? Filled(s, random_bf16, kv_floats) : Filled(s, random, kv_floats);
      auto v = bf16 ? Filled(s, random_bf16, kv_floats) : Filled(s, random, kv_floats);
      auto d_o = bf16 ? Filled(s, random_bf16, q_floats) : Filled(s, random, q_floats);
      auto o = Zeroed(s, q_floats), lse = Zeroed(s, length * shape.n_heads),
           delta = Zeroed(s, length * shape.n_heads);
      auto d_q = Zeroed(s, q_floats), d_k = Zeroed(s, kv_floats), d_v = Zeroed(s, kv_floats);
      for (auto* b : {&q, &k, &v, &d_o, &o, &lse, &delta, &d_q, &d_k, &d_v}) {
        if (!Check(b->status()).ok()) return 1;
      }
      const cudaStream_t cuda_stream = device::CudaStreamOf(*s.stream);
      const kernels::cuda::CoreAttentionTilesView view = tiles->view();
      auto forward_ms = BestMilliseconds(s, repeats, [&] {
        return bf16 ? kernels::cuda::LaunchCoreAttentionForwardBf16(view, q->as<uint16_t>(), k->as<uint16_t>(),
                                                                    v->as<uint16_t>(), o->as<float>(),
                                                                    lse->as<float>(), cuda_stream)
                    : kernels::cuda::LaunchCoreAttentionForward(view, q->as<float>(), k->as<float>(),
                                                                v->as<float>(), o->as<float>(), lse->as<float>(),
                                                                cuda_stream);
      });
      if (!Check(forward_ms.status()).ok()) return 1;
      // d_k/d_v accumulate across repeats: only the time is read.
      auto backward_ms = BestMilliseconds(s, repeats, [&] {
        return bf16 ? kernels::cuda::LaunchCoreAttentionBackwardBf16(
                          view, q->as<uint16_t>(), k->as<uint16_t>(), v->as<uint16_t>(), o->as<float>(),
                          lse->as<float>(), d_o->as<uint16_t>(), delta->as<float>(), d_q->as<float>(),
                          d_k->as<float>(), d_v->as<float>(), cuda_stream)
                    : kernels::cuda::LaunchCoreAttentionBackward(
                          view, q->as<float>(), k->as<float>(), v->as<float>(), o->as<float>(), lse->as<float>(),
                          d_o->as<float>(), delta->as<float>(), d_q->as<float>(), d_k->as<float>(),
                          d_v->as<float>(), cuda_stream);
      });
      if (!Check(backward_ms.status()).ok()) return 1;
      const double forward_flops = 4.0 * kernels::CausalPairs(tasks) * shape.head_dim * shape.n_heads;
      const double total_tflops = 3.5 * forward_flops / ((*forward_ms + *backward_ms) * 1e-3) / 1e12;
      const double forward_tflops = forward_flops / (*forward_ms * 1e-3) / 1e12;
      const char* inputs = bf16 ? "bf16" : "fp32";
      if (!bf16) fp32_tflops = total_tflops;
      const std::string vs_fp32 =
          bf16 && fp32_tflops > 0 ? absl::StrCat(absl::SixDigits(total_tflops / fp32_tflops), "x") : "-";
      std::printf("%8lld %6s %10.2f %10.2f %10.2f %12.2f %13.3fx %10s\n", static_cast<long long>(length), inputs,
                  *forward_ms, *backward_ms, total_tflops, forward_tflops, total_tflops / *gemm, vs_fp32.c_str());
      std::fflush(stdout);
      absl::StrAppend(&json, ",\"core_attention_", inputs, "_fwd_bwd_tflops_", length, "\":", total_tflops);
      print_figures();
    }
  }
  return 0;
}

}  // namespace

int RunBenchmark() { return Run(); }

}  // namespace corescape::bench

#else  // !CORESCAPE_WITH_CUDA

namespace corescape::bench {
int RunBenchmark() {
  std::printf("skipped: built without --config=cuda\n");
  return 0;
}
}  // namespace corescape::bench

#endif
