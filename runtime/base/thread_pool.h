#ifndef CORESCAPE_RUNTIME_BASE_THREAD_POOL_H_
#define CORESCAPE_RUNTIME_BASE_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace corescape {

// A fixed set of worker threads for data-parallel loops. The thread calling
// ParallelFor works too, so a pool of n threads runs n - 1 workers. Several
// threads may call ParallelFor at once, and a loop body may itself call
// ParallelFor: chunks are claimed only by threads that run them at once, so
// waiting never deadlocks.
class ThreadPool {
 public:
  // num_threads < 1 is treated as 1 (everything runs on the calling thread).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();  // joins the workers; no ParallelFor may be running

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls body(begin, end) on disjoint chunks covering [0, n) and returns
  // when all are done. chunk_size is the items per call (the last may be
  // shorter); 0 picks about four chunks per thread so uneven items still
  // balance. Runs inline, as one call body(0, n), when the pool has one
  // thread or the loop fits in one chunk. Which thread runs which chunk is
  // unspecified, so results must not depend on it.
  void ParallelFor(int64_t n,
                   const std::function<void(int64_t begin, int64_t end)>& body,
                   int64_t chunk_size = 0);

 private:
  struct Loop {
    const std::function<void(int64_t, int64_t)>* body;
    int64_t n;
    int64_t chunk;
    int64_t next_begin;        // guarded by the pool's mutex_
    int64_t chunks_running;    // claimed and not yet finished; guarded by mutex_
  };

  // Claims the next chunk of `loop`, dropping it from the queue once all of
  // its chunks are claimed. Returns false if none is left.
  bool ClaimChunk(Loop* loop, int64_t* begin, int64_t* end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool HasWorkOrShutdown() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void WorkerMain();

  const int num_threads_;
  mutable absl::Mutex mutex_;
  std::deque<Loop*> loops_ ABSL_GUARDED_BY(mutex_);  // loops with unclaimed chunks
  bool shutting_down_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

// pool->ParallelFor(n, body, chunk_size), or body(0, n) on this thread where
// `pool` is null.
void ParallelForOn(ThreadPool* pool, int64_t n,
                   const std::function<void(int64_t begin, int64_t end)>& body,
                   int64_t chunk_size = 0);

// Threads for the default pool: CORESCAPE_NUM_THREADS if it is a positive
// integer, else std::thread::hardware_concurrency() (at least 1).
int DefaultThreadCount();

// A process-wide pool of DefaultThreadCount() threads, created on first use
// and never destroyed.
ThreadPool* DefaultThreadPool();

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_THREAD_POOL_H_
