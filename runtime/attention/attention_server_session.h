#ifndef CORESCAPE_RUNTIME_ATTENTION_ATTENTION_SERVER_SESSION_H_
#define CORESCAPE_RUNTIME_ATTENTION_ATTENTION_SERVER_SESSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "runtime/attention/wire_format.h"
#include "runtime/base/thread_pool.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/handle_set.h"

namespace corescape::attention {

// What one micro-batch cost this server, for the scheduler to learn its
// speed: the planner's FLOPs of the passes it ran (forward, and backward
// when there was one) and the seconds spent computing them.
struct MicroBatchTiming {
  uint64_t micro_batch = 0;
  double cost_units = 0;
  double seconds = 0;
};

struct ServerSessionOptions {
  int32_t workers = 1;
  int32_t servers = 1;
  double tolerance = 0.05;
  PlannerKind planner = PlannerKind::kCorescape;
  // Keep each layer's Q/K/V/O/LSE from forward until its backward (memory:
  // all layers of one micro-batch); false: workers resend them.
  bool keep_qkv_for_backward = true;
  ThreadPool* pool = nullptr;  // for the kernel; null: the calling thread
  // Called (on the serving thread) once a micro-batch with work for this
  // server is over; may be empty.
  std::function<void(const MicroBatchTiming&)> on_micro_batch_timing;
  // Called (on the serving thread) whenever the server's queue depth
  // changes: the workers' requests of the current exchange whose header has
  // arrived and that are not answered yet (0..workers; 0 between exchanges
  // and once Serve returns). Requests still in the transport's buffers
  // (a ping-pong half B while half A computes) are not counted. May be empty.
  std::function<void(int32_t queued_requests)> on_queue_depth;
};

struct ServerSessionStats {
  int64_t exchanges = 0;
  int64_t micro_batches = 0;
  int64_t tasks = 0;        // kernel tasks run (forward)
  int64_t query_rows = 0;   // forward query rows computed
  double kernel_seconds = 0;
  PlanSourceCounts plan_sources;  // the scheduler's plans vs planned here
};

// An attention server's part of one job generation: for every exchange
// (wire_format.h) it hears all workers, checks they are in step with each
// other and with the call order (per micro-batch forward of layers 0..L-1,
// then optionally backward of L-1..0), takes the same plan as the workers
// (announced_micro_batch.h), copies every worker's rows into one fused batch, runs ONE kernel
// call over all of them (K/V gradients of a document's pieces summed by the
// kernel), and answers each worker with its rows. Buffers are reused across
// exchanges, so memory stays at the largest micro-batch's. Ping-pong halves
// (two micro-batches whose calls alternate, A's then B's of each layer) are
// served in that order with one state per half.
class AttentionServerSession {
 public:
  // `communicator`: rank = workers + server index, world = workers + servers.
  AttentionServerSession(comm::Communicator* communicator, const ServerSessionOptions& options);

  // Serves until every worker has said it is done (OK) or an error (the
  // communicator is aborted with it, so the workers fail too).
  absl::Status Serve();
  // One exchange; *done once the workers ended the job.
  absl::Status ServeOne(bool* done);

  const ServerSessionStats& stats() const { return stats_; }
  int32_t server_index() const { return server_; }
  // The plan of the current micro-batch (null before the first), made with
  // worker 0's speed weights.
  const MicroBatchPlan* current_plan() const { return plan_ ? &*plan_ : nullptr; }

 private:
  struct Tensors {
    std::vector<float> q, k, v, o, lse;
  };
  // The micro-batch state of the other ping-pong half, parked while the
  // current half's is in plan_, tasks_, layers_ and timing_ (see UseHalf).
  struct ParkedHalf {
    std::optional<MicroBatchPlan> plan;
    std::vector<kernels::AttentionTask> tasks;
    std::vector<Tensors> layers;
    MicroBatchTiming timing;
  };
  // Waits for the exchange's request headers (one per worker), reporting
  // the queue depth as they arrive.
  absl::Status ReceiveRequestHeaders(comm::HandleSet& receives);
  void SetQueueDepth(int32_t queued);
  absl::Status CheckOrder(const ExchangeHeader& header) const;
  // A backward's keep_qkv_for_backward agrees with this server's.
  absl::Status CheckKeptTensors(const ExchangeHeader& header) const;
  // Makes `half`'s micro-batch current (swaps it with parked_; a plain
  // micro-batch is half 0).
  void UseHalf(int half);
  absl::Status ReceiveDocuments(const ExchangeHeader& header);
  absl::Status Compute(const ExchangeHeader& header);
  Tensors& ForwardTensors(int layer) { return options_.keep_qkv_for_backward ? layers_[layer] : layers_[0]; }
  std::string Describe(int32_t worker) const;
  // Hands a finished micro-batch's timing to on_micro_batch_timing and
  // clears it.
  void ReportTiming(MicroBatchTiming& timing);

  comm::Communicator* const communicator_;
  const ServerSessionOptions options_;
  const int32_t server_;
  uint64_t exchange_ = 0;
  std::optional<ExchangeHeader> last_;  // the previous exchange
  std::optional<MicroBatchPlan> plan_;
  std::vector<kernels::AttentionTask> tasks_;  // this server's fused batch
  std::vector<Tensors> layers_;
  std::vector<float> d_o_, d_q_, d_k_, d_v_;
  std::vector<HeaderBytes> headers_;
  std::vector<std::vector<float>> requests_, replies_;  // [worker]
  ServerSessionStats stats_;
  MicroBatchTiming timing_;  // of the current micro-batch
  int current_half_ = 0;
  int32_t queue_depth_ = 0;  // as last reported to on_queue_depth
  ParkedHalf parked_;
  ParticipantPlanner planner_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_ATTENTION_SERVER_SESSION_H_
