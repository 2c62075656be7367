// What a node's job runners observe for its metrics beyond the reports they
// send: every rank's steps (only rank 0 reports them), checkpoint writes,
// and the attention server's traffic. The runners take a pointer to one
// (null: no metrics) so that they stay free of any metrics library; calls
// come from the runs' threads and must not block.
#ifndef CORESCAPE_DAEMON_RUN_METRICS_H_
#define CORESCAPE_DAEMON_RUN_METRICS_H_

#include <cstdint>
#include <string>

#include "corescape/v1/node.pb.h"

namespace corescape {
namespace comm {
class Transport;
}  // namespace comm

class RunMetrics {
 public:
  virtual ~RunMetrics() = default;

  // One training step of this rank: the report rank 0 sends (built on every
  // rank), the fraction of the gradient's entries it synchronized (1 when
  // dense) and the bytes of its encoded mask part (0 when dense).
  virtual void ObserveStep(const v1::StepReport& report, double density, int64_t mask_bytes) = 0;
  // A checkpoint written, and how long writing it took.
  virtual void ObserveCheckpoint(const std::string& job_id, double seconds) = 0;
  // Payload bytes an attention server received from and sent to the
  // workers since the last call for the job (once per micro-batch served).
  virtual void ObserveAttention(const std::string& job_id, int64_t bytes_in,
                                int64_t bytes_out) = 0;
  // An attention server's queue depth for the job: the workers' requests it
  // has received and not yet answered (AttentionServerSession's
  // on_queue_depth); 0 once the job's session is over.
  virtual void ObserveAttentionQueue(const std::string& job_id, int32_t queued_requests) = 0;
  // The node's data-plane transport, read at every scrape (the messages it
  // dropped); it must outlive the metrics endpoint.
  virtual void WatchDataPlane(const comm::Transport* transport) {}
};

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_RUN_METRICS_H_
