#include "runtime/base/thread_pool.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "glog/logging.h"

namespace corescape {

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this] { WorkerMain(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mutex_);
    shutting_down_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

bool ThreadPool::ClaimChunk(Loop* loop, int64_t* begin, int64_t* end) {
  if (loop->next_begin >= loop->n) return false;
  *begin = loop->next_begin;
  *end = std::min(loop->n, *begin + loop->chunk);
  loop->next_begin = *end;
  ++loop->chunks_running;
  if (loop->next_begin >= loop->n) {
    auto it = std::find(loops_.begin(), loops_.end(), loop);
    if (it != loops_.end()) loops_.erase(it);
  }
  return true;
}

bool ThreadPool::HasWorkOrShutdown() const {
  return shutting_down_ || !loops_.empty();
}

void ThreadPool::WorkerMain() {
  absl::MutexLock lock(&mutex_);
  while (true) {
    mutex_.Await(absl::Condition(this, &ThreadPool::HasWorkOrShutdown));
    if (loops_.empty()) return;  // shutting down with nothing left to do
    Loop* loop = loops_.front();
    int64_t begin, end;
    if (!ClaimChunk(loop, &begin, &end)) continue;
    mutex_.Unlock();
    (*loop->body)(begin, end);
    mutex_.Lock();
    // The owner returns once chunks_running reaches 0 with nothing left to
    // claim, so this is the worker's last touch of `loop`.
    --loop->chunks_running;
  }
}

void ThreadPool::ParallelFor(
    int64_t n, const std::function<void(int64_t begin, int64_t end)>& body,
    int64_t chunk_size) {
  if (n <= 0) return;
  if (chunk_size <= 0) {
    const int64_t target_chunks = int64_t{4} * num_threads_;
    chunk_size = (n + target_chunks - 1) / target_chunks;
  }
  if (num_threads_ == 1 || n <= chunk_size) {
    body(0, n);
    return;
  }
  Loop loop{&body, n, chunk_size, /*next_begin=*/0, /*chunks_running=*/0};
  absl::MutexLock lock(&mutex_);
  loops_.push_back(&loop);
  int64_t begin, end;
  while (ClaimChunk(&loop, &begin, &end)) {
    mutex_.Unlock();
    body(begin, end);
    mutex_.Lock();
    --loop.chunks_running;
  }
  mutex_.Await(absl::Condition(
      +[](Loop* l) { return l->chunks_running == 0; }, &loop));
}

void ParallelForOn(ThreadPool* pool, int64_t n,
                   const std::function<void(int64_t begin, int64_t end)>& body,
                   int64_t chunk_size) {
  if (pool != nullptr) {
    pool->ParallelFor(n, body, chunk_size);
  } else if (n > 0) {
    body(0, n);
  }
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("CORESCAPE_NUM_THREADS"); env != nullptr) {
    int threads = 0;
    if (absl::SimpleAtoi(env, &threads) && threads > 0) return threads;
    LOG(WARNING) << "ignoring CORESCAPE_NUM_THREADS=\"" << env
                 << "\": not a positive integer";
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool* DefaultThreadPool() {
  static ThreadPool* const pool = new ThreadPool(DefaultThreadCount());
  return pool;
}

}  // namespace corescape
