// Forward+backward throughput of the blocked CPU core-attention kernel
// against the naive reference and the machine's sgemm, on a skewed batch:
// one 4096-token document (cut DistCA-style into a mirrored head/tail pair
// plus the middle) and many short documents. 8 heads over 2 kv heads,
// head_dim 64. FLOPs are the usual attention convention: forward
// 4 * pairs * head_dim per head, backward 2.5x that (the kernel's actual
// arithmetic is higher: its backward runs 7 tile products per (query, key)
// tile instead of 5, recomputing scores in both of its passes, so it executes
// 1.4x the counted backward FLOPs).
// Thread count: CORESCAPE_NUM_THREADS, else all hardware threads.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "bench/best_seconds.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cpu/core_attention_reference.h"

namespace corescape::kernels {
namespace {

using bench::BestSeconds;

double ForwardFlops(const AttentionBatch& b) {
  return 4.0 * CausalPairs(b.tasks) * b.shape.head_dim * b.shape.n_heads;
}

struct Buffers {
  std::vector<float> o, lse, d_q, d_k, d_v;
  explicit Buffers(const AttentionBatch& b)
      : o(b.q_floats()), lse(b.lse_floats()), d_q(b.q_floats()),
        d_k(b.kv_floats()), d_v(b.kv_floats()) {}
};

void CheckOk(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

struct KernelTimes {
  double forward_s, backward_s;
};

KernelTimes TimeKernel(const AttentionBatch& b, ThreadPool* pool, Buffers& out,
                       int repeats) {
  KernelTimes t;
  t.forward_s = BestSeconds(repeats, [&] {
    CheckOk(CoreAttentionForward(b.shape, b.tasks, b.q.data(), b.q_rows,
                                 b.k.data(), b.v.data(), b.kv_rows,
                                 out.o.data(), out.lse.data(), pool));
  });
  t.backward_s = BestSeconds(repeats, [&] {
    std::fill(out.d_k.begin(), out.d_k.end(), 0.0f);
    std::fill(out.d_v.begin(), out.d_v.end(), 0.0f);
    CheckOk(CoreAttentionBackward(
        b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(),
        b.kv_rows, out.o.data(), out.lse.data(), b.d_o.data(), out.d_q.data(),
        out.d_k.data(), out.d_v.data(), pool));
  });
  return t;
}

double ReferenceSeconds(const AttentionBatch& b, Buffers& out) {
  return BestSeconds(1, [&] {
    CheckOk(ReferenceAttentionForward(b.shape, b.tasks, b.q.data(), b.q_rows,
                                      b.k.data(), b.v.data(), b.kv_rows,
                                      out.o.data(), out.lse.data()));
    CheckOk(ReferenceAttentionBackward(
        b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(),
        b.kv_rows, b.d_o.data(), out.d_q.data(), out.d_k.data(),
        out.d_v.data()));
  });
}

// GFLOP/s of C = A B for n x n x n.
double SgemmGflops(int n, int repeats) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(a), c(a.size());
  const double s = BestSeconds(repeats, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * n / s / 1e9;
}

// Same tile shape and operand layout as the kernel's score product.
double TileSgemmGflops(ThreadPool* pool) {
  constexpr int kTile = 64;
  constexpr int kPerItem = 200;
  const int items = 8 * pool->num_threads();
  const double s = BestSeconds(3, [&] {
    pool->ParallelFor(
        items,
        [&](int64_t begin, int64_t end) {
          std::vector<float> a(kTile * kTile, 0.5f), b(a), c(a.size());
          for (int64_t i = begin; i < end; ++i) {
            for (int r = 0; r < kPerItem; ++r) {
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kTile, kTile,
                          kTile, 1.0f, a.data(), kTile, b.data(), kTile, 1.0f,
                          c.data(), kTile);
            }
          }
        },
        /*chunk_size=*/1);
  });
  return 2.0 * kTile * kTile * kTile * kPerItem * items / s / 1e9;
}

// A 4096-token document as the mirrored pair [0, 1024), [3072, 4096) plus the
// middle, and `short_documents` documents of 16..384 tokens (log-uniform).
std::vector<DocumentPieces> SkewedDocuments(std::mt19937_64& rng,
                                            int64_t long_length,
                                            int short_documents) {
  std::vector<DocumentPieces> docs;
  const int64_t quarter = long_length / 4;
  docs.push_back({long_length,
                  {{0, quarter},
                   {long_length - quarter, long_length},
                   {quarter, long_length - quarter}}});
  std::uniform_real_distribution<double> log_length(std::log(16.0),
                                                    std::log(384.0));
  for (int i = 0; i < short_documents; ++i) {
    const int64_t length = std::lround(std::exp(log_length(rng)));
    docs.push_back({length, {{0, length}}});
  }
  return docs;
}

int Main() {
  const AttentionShape shape{8, 2, 64, 0.125f};
  ThreadPool* pool = DefaultThreadPool();
  ThreadPool single(1);
  std::mt19937_64 rng(2024);
  const AttentionBatch batch =
      MakeBatch(shape, SkewedDocuments(rng, 4096, 64), rng);
  // The reference is ~100x slower, so it runs on a smaller batch of the same
  // kind; rates are comparable.
  const AttentionBatch small =
      MakeBatch(shape, SkewedDocuments(rng, 1024, 8), rng);

  std::printf("core attention bench: %d heads / %d kv heads, head_dim %d, "
              "%d threads\n", shape.n_heads, shape.n_kv_heads, shape.head_dim,
              pool->num_threads());
  std::printf("batch: %zu tasks, %lld query tokens, %lld causal pairs/head "
              "(one 4096-token doc as head/tail pair + middle, 64 short docs)\n",
              batch.tasks.size(), static_cast<long long>(batch.q_rows),
              static_cast<long long>(CausalPairs(batch.tasks)));

  const double big_sgemm = SgemmGflops(1024, 3);
  std::printf("sgemm 1024^3, OpenBLAS's own threads:   %7.1f GFLOP/s\n",
              big_sgemm);
  const double fwd_flops = ForwardFlops(batch);
  const double total_flops = 3.5 * fwd_flops;
  Buffers out(batch);
  for (ThreadPool* p : {&single, pool}) {
    if (p == pool && pool->num_threads() == 1) break;
    const double tile_sgemm = TileSgemmGflops(p);
    const KernelTimes t = TimeKernel(batch, p, out, 3);
    const double gflops = total_flops / (t.forward_s + t.backward_s) / 1e9;
    std::printf("-- %d thread(s): sgemm 64^3 tiles %.1f GFLOP/s\n",
                p->num_threads(), tile_sgemm);
    std::printf("   blocked kernel: fwd %6.1f ms %5.1f GFLOP/s | bwd %6.1f ms "
                "%5.1f GFLOP/s | fwd+bwd %5.1f GFLOP/s\n",
                t.forward_s * 1e3, fwd_flops / t.forward_s / 1e9,
                t.backward_s * 1e3, 2.5 * fwd_flops / t.backward_s / 1e9,
                gflops);
    std::printf("   fwd+bwd / tile sgemm = %.2f", gflops / tile_sgemm);
    if (p == pool) {
      std::printf(", fwd+bwd / sgemm 1024^3 = %.2f", gflops / big_sgemm);
    }
    std::printf("\n");
  }

  Buffers small_out(small);
  const double small_flops = 3.5 * ForwardFlops(small);
  const KernelTimes small_kernel = TimeKernel(small, &single, small_out, 3);
  Buffers reference_out(small);
  const double reference_s = ReferenceSeconds(small, reference_out);
  const double kernel_gflops =
      small_flops / (small_kernel.forward_s + small_kernel.backward_s) / 1e9;
  const double reference_gflops = small_flops / reference_s / 1e9;
  std::printf("small batch (1024-token doc + 8 short, %lld pairs/head), 1 "
              "thread: blocked %.1f GFLOP/s, naive reference (fp64) %.2f "
              "GFLOP/s, speedup %.1f x\n",
              static_cast<long long>(CausalPairs(small.tasks)), kernel_gflops,
              reference_gflops, kernel_gflops / reference_gflops);
  std::printf("  max relative error vs reference: O %.1e, dQ %.1e, dK %.1e, "
              "dV %.1e\n",
              RelativeError(small_out.o, reference_out.o),
              RelativeError(small_out.d_q, reference_out.d_q),
              RelativeError(small_out.d_k, reference_out.d_k),
              RelativeError(small_out.d_v, reference_out.d_v));
  return 0;
}

}  // namespace
}  // namespace corescape::kernels

int main() { return corescape::kernels::Main(); }
