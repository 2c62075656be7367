#ifndef CORESCAPE_RUNTIME_COMM_COMMUNICATOR_H_
#define CORESCAPE_RUNTIME_COMM_COMMUNICATOR_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/byte_counters.h"
#include "runtime/comm/collective_algorithms.h"
#include "runtime/comm/comm_types.h"
#include "runtime/comm/control_message.h"
#include "runtime/comm/handshake_proof.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {

struct CommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  // Messages of another generation are rejected, never mixed in: a new
  // generation after any membership change.
  uint64_t generation = 0;
  // Data address (Transport::address()) of every rank, indexed by rank.
  std::vector<std::string> peer_addresses;
  // Presented in the first message on every endpoint, both ways; peers
  // without it are dropped and logged. At most 128 bytes.
  std::string secret_token;
  // Connecting, and every wait inside an operation, fail after this long
  // (naming the peer) instead of hanging. Must exceed the largest compute
  // skew between ranks at a collective.
  absl::Duration timeout = absl::Seconds(30);
  std::string job_id;  // routes incoming connections; in logs. At most 128 bytes.
  // Algorithm thresholds; must be equal on every rank (checked at connect).
  AlgorithmSettings algorithms;
};

namespace internal {
struct HandleState;
struct Operation;
struct LifeToken;
struct PointToPointResult;
class CollectiveChannel;
}  // namespace internal

// An asynchronous operation. Wait() returns its result (the same on every
// call); the buffers given when it started must stay valid until then.
// Destroying a handle waits for a collective or a send to finish (bounded
// by the communicator's timeout) and withdraws a receive nobody waited for.
class CollectiveHandle {
 public:
  ~CollectiveHandle();
  CollectiveHandle(const CollectiveHandle&) = delete;
  CollectiveHandle& operator=(const CollectiveHandle&) = delete;

  absl::Status Wait();
  bool Test();  // true once Wait() would return without blocking

 private:
  friend class Communicator;
  explicit CollectiveHandle(std::shared_ptr<internal::HandleState> state)
      : state_(std::move(state)) {}
  std::shared_ptr<internal::HandleState> state_;
};

// What a hello carries so that peers with different world sizes or
// algorithm settings refuse each other (public: it holds no secret).
uint64_t SettingsFingerprint(const CommunicatorOptions& options);

// A group of ranks over a Transport: CPU collectives and tagged
// point-to-point messages.
//
// Collectives are issued in the same order on every rank (like NCCL) and run
// one at a time, in that order, on the communicator's own thread; async
// handles may be outstanding while the caller computes. Results are
// deterministic and bitwise identical on every rank.
//
// Failure: a peer that dies, resets its connection, aborts, or does not
// deliver within `timeout` breaks the communicator. Every pending and later
// operation then fails with the first error, which names the peer by rank
// and address. Build a new communicator (next generation) to continue.
// A peer that destroys its communicator cleanly says goodbye first; that is
// not a failure unless an operation still needs it.
class Communicator : private HelloHandler {
 public:
  // Connects to every peer (rank i connects to every rank j > i; the lower
  // rank of a pair dials) within options.timeout.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(Transport* transport,
                                                              const CommunicatorOptions& options);
  // Finishes queued operations, says goodbye to the peers, closes the
  // endpoints. Handles must not outlive the communicator.
  ~Communicator();

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  uint64_t generation() const { return options_.generation; }
  const std::string& job_id() const { return options_.job_id; }
  // "rank 2 (10.0.0.3:4000)", as used in errors.
  std::string DescribePeer(int rank) const;

  // In place, fp32. kMean divides the sum by world_size.
  absl::Status AllReduce(float* data, int64_t count, ReduceOp op);
  // recv <- every rank's bytes, concatenated in rank order;
  // recv_bytes_per_rank[r] is rank r's size (the same list on every rank)
  // and send_bytes must equal recv_bytes_per_rank[rank()]. `send` may be the
  // rank's own slot of `recv`.
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> recv_bytes_per_rank);
  // recv <- block rank() of the element-wise reduction of every rank's
  // `send`; blocks are laid out back to back with counts_per_rank elements.
  absl::Status ReduceScatter(const float* send, float* recv,
                             absl::Span<const int64_t> counts_per_rank, ReduceOp op);
  absl::Status Broadcast(void* data, int64_t bytes, int root);
  absl::Status Barrier();

  // Asynchronous forms. AllGatherVAsync copies `send` into its slot of
  // `recv` before returning, so `send` may be reused at once; the sizes are
  // copied too.
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> AllGatherVAsync(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> recv_bytes_per_rank);
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> AllReduceAsync(float* data, int64_t count,
                                                                    ReduceOp op);
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> ReduceScatterAsync(
      const float* send, float* recv, absl::Span<const int64_t> counts_per_rank, ReduceOp op);
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> BroadcastAsync(void* data, int64_t bytes,
                                                                    int root);

  // Point to point: a message of exactly `bytes` to/from `peer` (not
  // rank()), matched by `tag` (< 2^32). Messages with the same (peer, tag)
  // are matched in the order they were sent. Independent of the collectives.
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> SendAsync(int peer, uint64_t tag,
                                                              const void* data, int64_t bytes);
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> RecvAsync(int peer, uint64_t tag, void* data,
                                                              int64_t bytes);

  // Exact payload bytes moved by this rank, per kind (see byte_counters.h).
  ByteCounters counters() const;
  // OK, or why the communicator is broken.
  absl::Status health() const;
  // Breaks the communicator on purpose (e.g. the scheduler ended the
  // generation): pending operations fail with `reason`, peers are told.
  void Abort(absl::string_view reason);

 private:
  friend class internal::CollectiveChannel;
  friend struct internal::PointToPointResult;

  enum class LinkState { kIdle, kConnecting, kConnected };
  struct Peer {
    std::string address;
    EndpointId endpoint = 0;
    LinkState state = LinkState::kIdle;
    bool dials = false;                // we connect to it (our rank is lower)
    absl::Time retry_at;               // next connection attempt
    absl::Duration backoff = absl::Milliseconds(20);
    absl::Status last_error;           // of the latest attempt, for the timeout message
    std::string dialer_nonce;          // of our latest attempt (we dial)
    bool failed = false;               // its endpoint reported an error
    bool departed = false;             // it said goodbye
    uint64_t departed_after = 0;       // ... after this many collectives
    bool acked_our_goodbye = false;
    ControlMessage::Bytes control_buffer{};
    std::shared_ptr<MessageRequest> control_recv;
  };
  // A hello we accepted whose dialer has not proven the secret yet. Several
  // may claim one rank (a stranger cannot displace the real one); at most
  // kMaxUnconfirmedPerRank each, for at most the transport's timeout.
  struct UnconfirmedHello {
    int rank = 0;
    std::string expected_proof;
    uint64_t link_token = 0;
  };
  static constexpr int kMaxUnconfirmedPerRank = 4;
  // A message an operation or point-to-point handle has in flight; kept so
  // a failure can cancel it.
  struct Pending {
    std::shared_ptr<MessageRequest> request;
    int peer;
    bool point_to_point;
  };

  Communicator(Transport* transport, const CommunicatorOptions& options);
  absl::Status Connect();
  void StartConnectAttempt(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnConnectResult(int peer, EndpointId endpoint, absl::StatusOr<HelloMessage> reply);
  absl::Status CheckPeerHello(int expected_rank, const HelloMessage& hello) const;
  HelloMessage MakeHello(HelloType type) const;
  HandshakeTranscript Transcript(int dialer_rank, int acceptor_rank, const std::string& dialer_nonce,
                                 const std::string& acceptor_nonce) const;
  Verdict OnHello(EndpointId endpoint, const std::string& peer_address,
                  const HelloMessage& hello) override;
  bool OnConfirm(EndpointId endpoint, const std::string& peer_address,
                 absl::StatusOr<HelloMessage> confirm) override;
  // Makes `endpoint` rank `peer`'s link and authorizes it on the transport
  // to carry this communicator's messages from that rank.
  void AdoptEndpoint(int peer, EndpointId endpoint, uint64_t link_token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Failure handling (communicator_failure.cc).
  void OnPeerError(int peer, absl::Status error);
  void PostControlRecv(int peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnControlMessage(int peer, const MessageRequest& request);
  void SendControl(int peer, ControlType type, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // First failure wins: records it, cancels every pending receive, tells the
  // peers (if notify_peers) and closes the endpoints.
  void Break(absl::Status reason, bool notify_peers);
  void SayGoodbye();
  absl::Status DecorateError(absl::string_view what, const absl::Status& status) const;

  // Operations (communicator_ops.cc).
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> Enqueue(
      CollectiveKind kind, std::function<absl::Status(MessageChannel&)> body);
  void ExecutorLoop();
  absl::Status RunOperation(internal::Operation& op);
  void UntrackPending(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<CollectiveHandle>> StartPointToPoint(bool send, int peer,
                                                                      uint64_t tag, void* data,
                                                                      int64_t bytes);
  void CountBytes(CollectiveKind kind, bool sent, int64_t bytes);
  // Unavailable if `peer` has left or failed.
  absl::Status PeerGone(int peer) const;
  void* Scratch(int slot, int64_t bytes);  // executor thread only

  Transport* const transport_;
  const CommunicatorOptions options_;
  const uint64_t settings_fingerprint_;
  const uint16_t tag_key_;
  std::shared_ptr<internal::LifeToken> life_;  // lets transport callbacks outlive us safely

  mutable absl::Mutex mu_;
  absl::flat_hash_map<EndpointId, UnconfirmedHello> unconfirmed_ ABSL_GUARDED_BY(mu_);
  std::vector<Peer> peers_ ABSL_GUARDED_BY(mu_);
  bool connecting_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status fatal_connect_error_ ABSL_GUARDED_BY(mu_);
  uint64_t connect_events_ ABSL_GUARDED_BY(mu_) = 0;  // wakes Connect()
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<internal::Operation>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;         // next collective issued
  uint64_t completed_collectives_ ABSL_GUARDED_BY(mu_) = 0;  // all earlier ones done
  uint64_t running_sequence_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};  // none
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_pending_id_ ABSL_GUARDED_BY(mu_) = 1;

  mutable absl::Mutex counters_mu_;
  ByteCounters counters_ ABSL_GUARDED_BY(counters_mu_);

  std::vector<std::unique_ptr<char[]>> scratch_;  // executor thread only
  std::vector<int64_t> scratch_bytes_;
  std::thread executor_;
  bool registered_ = false;  // hello handler registered
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_COMMUNICATOR_H_
