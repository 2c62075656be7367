#ifndef CORESCAPE_RUNTIME_COMM_TRANSPORT_H_
#define CORESCAPE_RUNTIME_COMM_TRANSPORT_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/comm/handshake_stream.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/message_request.h"

namespace corescape::comm {

struct TransportOptions {
  // HOST:PORT to listen on for peers; port 0 picks a free port.
  std::string listen_address = "0.0.0.0:0";
  // Host part of address(). Empty: the listen host, or this machine's
  // hostname when listening on a wildcard address.
  std::string advertise_host;
  // How long an accepted connection may take to present its hello and to
  // find the communicator it names before it is dropped.
  absl::Duration timeout = absl::Seconds(30);
};

// Names an endpoint (one UCP endpoint = one connection to a peer process).
// Ids are never reused, so a stale id is detected instead of reaching
// another peer.
using EndpointId = uint64_t;

// What an endpoint may deliver once its owner has completed the handshake on
// it: messages whose tag carries `key` and `source_rank` (message_tag.h) and
// whose header carries `link_token` (LinkToken in handshake_proof.h). Sends
// on the endpoint carry the same token.
struct EndpointAuthorization {
  uint16_t key = 0;
  int source_rank = 0;
  uint64_t link_token = 0;
};

// Why the transport threw a data message away on arrival. A new reason goes
// last, with its entry in kDropReasons (the static_asserts below check both).
enum class DropReason {
  // From an endpoint no communicator adopted: a stranger that never passed
  // the handshake (or a connection already closed).
  kUnauthenticated,
  // From an adopted endpoint, but the tag names another communicator or
  // sender rank, or the link token is wrong.
  kForged,
  // A header that is not a data-message header.
  kMalformed,
  // Unreceived messages beyond the bounds (kMaxUnexpectedMessages...).
  kOverLimit,
  // UCP tagged messages: nothing here sends or receives them, so whoever
  // sends one is not a member.
  kTagged,
};

// How a DropReason reads outside the process. Dashboards match the metric
// label and operators grep the log texts, so none of them may change.
struct DropReasonText {
  DropReason reason;
  const char* metric_label;  // reason="..." of corescape_data_plane_dropped_messages_total
  const char* log_total;     // its entry in the drop summary's totals
  const char* log_latest;    // the drop summary's "latest:" reason
};

// One entry per DropReason, in enum order (so indexable by it).
inline constexpr DropReasonText kDropReasons[] = {
    {DropReason::kUnauthenticated, "unauthenticated", "unauthenticated",
     "unauthenticated endpoint"},
    {DropReason::kForged, "forged", "forged", "forged header"},
    {DropReason::kMalformed, "malformed", "malformed", "malformed header"},
    {DropReason::kOverLimit, "over_limit", "over limit", "over the held-message limit"},
    {DropReason::kTagged, "tagged", "tagged", "tagged message"},
};
inline constexpr size_t kDropReasonCount = std::size(kDropReasons);
static_assert(static_cast<size_t>(DropReason::kTagged) + 1 == kDropReasonCount,
              "every DropReason needs an entry in kDropReasons");
static_assert(
    [] {
      for (size_t i = 0; i < kDropReasonCount; ++i) {
        if (static_cast<size_t>(kDropReasons[i].reason) != i) return false;
      }
      return true;
    }(),
    "kDropReasons must be in enum order");

// Indexes instead of searching: the static_asserts above make it safe.
constexpr const DropReasonText& DropReasonTextOf(DropReason reason) {
  return kDropReasons[static_cast<size_t>(reason)];
}

// Data messages the transport threw away on arrival, by reason. Each is
// counted once; a log line per second at most summarizes them.
struct DroppedMessageCounts {
  std::array<uint64_t, kDropReasonCount> by_reason{};

  uint64_t count(DropReason reason) const { return by_reason[static_cast<size_t>(reason)]; }
  uint64_t total() const {
    uint64_t sum = 0;
    for (uint64_t n : by_reason) sum += n;
    return sum;
  }
};

// Receives the hellos that incoming connections present for one
// (job, generation), and the dialer's confirmation that follows an accepted
// hello (hello_message.h). Runs on the progress thread and must not block.
class HelloHandler {
 public:
  struct Verdict {
    bool accept = false;
    HelloMessage reply;  // kAccept or kReject
  };
  // On accept the transport sends the reply and waits for the dialer's
  // confirmation; the endpoint carries nothing else until OnConfirm adopts it.
  virtual Verdict OnHello(EndpointId endpoint, const std::string& peer_address,
                          const HelloMessage& hello) = 0;
  // The message that followed an accepted hello on `endpoint` (kConfirm or
  // kReject), or why none came (error, timeout). Returns whether the handler
  // adopts the endpoint: it then owns it and must Close() it eventually;
  // otherwise the transport closes it.
  virtual bool OnConfirm(EndpointId endpoint, const std::string& peer_address,
                         absl::StatusOr<HelloMessage> confirm) = 0;

 protected:
  ~HelloHandler() = default;
};

// One per process: a UCP context and worker, a TCP listener of its own on
// HOST:PORT, and a progress thread. UCX is called by one thread at a time
// (the worker runs in UCX's serialized mode), whoever holds the UCX lock: the
// progress thread, or a thread waiting in WaitFor(), which drives UCX itself
// for a moment instead of waiting for the progress thread to wake it (a
// thread hand-off per message costs more than the message on a busy
// machine). Other threads hand work over through a queue that the lock
// holder drains. The progress thread polls briefly after activity and then
// sleeps on the worker's event fd and the transport's sockets, so an idle
// process costs no CPU.
//
// Connections: the listener is the transport's own, not UCX's. A peer's
// first bytes go to the handshake (handshake_stream.h: HelloMessage and its
// proofs, fixed sizes, bounded). Only once both proofs verified do the two
// sides swap UCP worker addresses and bind tokens; each creates a UCP
// endpoint of its own from the other's address, sends only on it, and
// names its handshake connection by sending the other's token first. So no
// stranger's bytes reach UCX's connection manager (there is no UCX
// listener); UCX's own TCP interfaces are confined to the network device of
// the listen address (UCX_NET_DEVICES, unless set), and each side learns of
// the other's end from the handshake connection, which stays open for the
// link's life.
//
// Everything after the handshake is data messages: UCP active messages
// whose header is (tag, link token). The transport matches them to receives
// by tag itself, and only from endpoints a communicator adopted after a
// completed handshake, for the key and sender rank it adopted them for:
// UCX's tag matching is worker-wide and would take a stranger's message for
// a member's. Messages that arrive before their receive is posted are held
// (bounded: kMaxUnexpectedMessages, kMaxUnexpectedBytes); large ones stay
// in UCX as rendezvous descriptors and are fetched straight into the
// receive buffer once it is posted.
class Transport {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Create(const TransportOptions& options);
  // Closes every endpoint. Communicators using the transport must be
  // destroyed first.
  ~Transport();

  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // advertise_host:bound_port, what peers connect to (RegisterRequest.data_address).
  std::string address() const { return address_; }
  const TransportOptions& options() const { return options_; }
  // This process's UCP worker address, which only a dialer that proved a
  // communicator's secret is handed (tests play a stranger who learned it).
  const std::string& worker_address() const { return worker_address_; }

  // Bounds on messages held before their receive is posted. Rendezvous
  // messages count against the number only (their data stays with the
  // sender until received); eager ones against both.
  static constexpr size_t kMaxUnexpectedMessages = 16384;
  static constexpr size_t kMaxUnexpectedBytes = size_t{256} << 20;
  // Accepted connections that have not completed a handshake (no hello yet,
  // parked, or awaiting the dialer's proof); more are closed on arrival.
  static constexpr size_t kMaxUnprovenConnections = 64;

  // ---- Data messages (any thread) ----
  // `on_complete` runs on the progress thread when a request completes
  // (also when it fails or is cancelled); it must not block.
  using CompletionCallback = std::function<void(const MessageRequest&)>;
  // The buffer must stay valid and unchanged until the request is done.
  std::shared_ptr<MessageRequest> Send(EndpointId to, uint64_t tag, const void* data,
                                       int64_t bytes, CompletionCallback on_complete = nullptr);
  // Receives a message with exactly `tag` into a buffer of `capacity` bytes;
  // a longer message fails the request (DataLoss).
  std::shared_ptr<MessageRequest> Recv(uint64_t tag, void* data, int64_t capacity,
                                       CompletionCallback on_complete = nullptr);
  // Cancels a receive that has not matched yet (it completes Cancelled).
  // Sends cannot be cancelled: closing their endpoint fails them.
  void Cancel(std::shared_ptr<MessageRequest> request);
  // Lets `endpoint` carry data messages (both ways) for `authorization`;
  // until then its sends fail and what arrives on it is dropped (or, while
  // the handshake is being checked, held until this call). Called by the
  // communicator that adopted the endpoint after a completed handshake.
  void AuthorizeEndpoint(EndpointId endpoint, const EndpointAuthorization& authorization);
  // Drops the messages with communicator key `key` that arrived but were
  // never received (a communicator being destroyed).
  void DiscardUnreceived(uint16_t key);
  DroppedMessageCounts dropped_messages() const;

  // ---- Endpoints (any thread) ----
  // Connects to `peer_address` (HOST:PORT), sends `hello` and waits for the
  // peer's answer. `done` runs on the progress thread with the endpoint and
  // the peer's reply (accept or reject; the caller validates it and then owns
  // the endpoint), or with an error, in which case the endpoint is gone.
  using ConnectCallback =
      std::function<void(EndpointId endpoint, absl::StatusOr<HelloMessage> reply)>;
  void Connect(const std::string& peer_address, const HelloMessage& hello,
               ConnectCallback done);
  // Sends the dialer's last handshake message (kConfirm or kReject) on an
  // endpoint Connect() delivered.
  void SendHandshake(EndpointId endpoint, const HelloMessage& message);
  // Called (on the progress thread) when the endpoint fails: the peer died,
  // reset the connection, or UCX's keepalive gave up. The owner then closes it.
  void SetErrorHandler(EndpointId endpoint, std::function<void(absl::Status)> on_error);
  // Releases the endpoint; its pending sends fail Cancelled. With
  // `flush_first`, data already sent is flushed (bounded by a deadline).
  void Close(EndpointId endpoint, bool flush_first = false);
  // Where the peer is, for messages ("127.0.0.1:4242"); empty if unknown.
  std::string PeerAddress(EndpointId endpoint) const;

  // ---- Incoming connections ----
  // Hellos for (job_id, generation) go to `handler`. Hellos of the same job
  // and an older generation are rejected as stale. Fails if the pair is
  // already registered.
  absl::Status RegisterHelloHandler(const std::string& job_id, uint64_t generation,
                                    HelloHandler* handler);
  // When this returns, the handler is no longer called.
  void UnregisterHelloHandler(const std::string& job_id, uint64_t generation);

  // Waits until `request` is done or `deadline` passes (false), driving UCX
  // from this thread for a short while first. The caller must not hold locks
  // that completion callbacks take.
  bool WaitFor(const MessageRequest& request, absl::Time deadline);

  // ---- Work that needs the UCX lock ----
  void Run(std::function<void()> fn);         // queued for the next lock holder
  void RunAndWait(std::function<void()> fn);  // blocks until fn has run (inline if holding)
  bool HoldsUcxLock() const;
  // Calls fn on the progress thread once `when` has passed.
  void RunAt(absl::Time when, std::function<void()> fn);

 private:
  struct EndpointState;
  struct PendingUcxOp;
  struct ParkedHello;
  struct ArrivedMessage;

  explicit Transport(const TransportOptions& options);
  absl::Status Init();
  absl::Status InitOnProgressThread();
  void ProgressLoop();
  void Enqueue(std::function<void()> fn);
  bool RunQueuedWork();  // true if there was any; needs the UCX lock
  unsigned ProgressSome();  // ucp_worker_progress until idle (bounded); needs the lock
  void RunDueTimers();
  void ShutdownOnProgressThread();

  // Progress-thread halves of the public calls.
  void DoSend(const std::shared_ptr<MessageRequest>& request, EndpointId to, uint64_t tag,
              const void* data, int64_t bytes);
  void DoRecv(const std::shared_ptr<MessageRequest>& request, uint64_t tag, void* data,
              int64_t capacity);
  void DoConnect(const std::string& peer_address, const struct sockaddr_storage& addr,
                 socklen_t addr_len, const HelloMessage& hello, ConnectCallback done);
  void DoClose(EndpointId id, bool flush_first);
  void ForceClose(EndpointId id);
  void EraseEndpoint(EndpointId id);

  // Connection management (transport_connections.cc).
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void HandleEndpointError(EndpointId id, absl::Status error);
  EndpointState* CreateEndpoint(const std::string& peer_address, int socket);
  EndpointState* FindEndpoint(EndpointId id);
  // Handshake connections: readiness of the listener and every socket,
  // checked on the progress thread (returns how many were ready).
  int PollSockets();
  void AcceptConnections();
  void OnSocketEvent(EndpointId id, uint32_t events);
  void ReadSocket(EndpointId id);
  // Writes what `endpoint->outbox` holds (what fits now); false if the
  // connection failed (the endpoint was failed).
  bool WriteSocket(EndpointState* endpoint);
  void QueueHandshake(EndpointState* endpoint, const HelloMessage& message);
  void WatchSocket(EndpointState* endpoint);
  void CloseSocket(EndpointState* endpoint);
  // An item the handshake connection completed (hello, reply, ready frame,
  // bound byte), handled by the endpoint's role.
  void OnHandshakeItem(EndpointId id);
  void OnReplyReceived(EndpointId id, absl::StatusOr<HelloMessage> reply);
  void OnReadyFrame(EndpointId id, absl::StatusOr<ReadyFrame> frame);
  // Acceptor: the link was adopted; hand the dialer our worker address.
  void SendReadyFrame(EndpointState* endpoint);
  static ucs_status_t OnBindMessage(void* arg, const void* header, size_t header_length,
                                    void* data, size_t length,
                                    const ucp_am_recv_param_t* param);
  void HandleBind(const std::string& token, ucp_ep_h reply_ep);
  // Both sides may send: held sends go out.
  void MarkReady(EndpointState* endpoint);
  void OnHelloReceived(EndpointId id, absl::StatusOr<HelloMessage> hello);
  // A connection closed for not starting with a hello, or refused at the
  // bound on unproven ones: counted, one warning a second at most.
  void NoteRefusal(const std::string& peer, const std::string& why);
  void DispatchHello(EndpointId id, const HelloMessage& hello);
  // The dialer's answer to an accepted hello (or why none came): handed to
  // the handler that accepted it, which adopts the endpoint or not.
  void OnConfirmReceived(EndpointId id, absl::StatusOr<HelloMessage> confirm);
  void RejectEndpoint(EndpointId id, const HelloMessage& hello, const std::string& reason);
  void ExpireParkedHellos();
  // UCX operations with a callback: `op` is owned until its done() has run.
  void TrackUcxOp(ucs_status_ptr_t result, PendingUcxOp* op);
  // A new operation whose completion runs `done` (see PendingUcxOp), and
  // `param` set up for UCX to report it: callback and user data (callers
  // add flags).
  PendingUcxOp* NewUcxOp(std::function<void(ucs_status_t status, size_t length)> done,
                         ucp_request_param_t& param);
  static void OnUcxOpComplete(void* ucx_request, ucs_status_t status, void* user_data);
  void FinishUcxOp(PendingUcxOp* op, ucs_status_t status, size_t length);

  // Data messages (transport_messages.cc).
  static ucs_status_t OnDataMessage(void* arg, const void* header, size_t header_length,
                                    void* data, size_t length, const ucp_am_recv_param_t* param);
  ucs_status_t HandleDataMessage(const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t& param);
  // Checks a message from an adopted endpoint against its authorization.
  bool Authorized(const EndpointState& endpoint, const ArrivedMessage& message) const;
  // Hands an authorized message to its posted receive or holds it; returns
  // what the UCX callback returns (`param` is null outside the callback).
  ucs_status_t Deliver(ArrivedMessage message, void* data, const ucp_am_recv_param_t* param);
  // Keeps a message's data beyond the UCX callback (a reference to UCX's
  // buffer or descriptor, or a copy); returns what the callback returns.
  static ucs_status_t Retain(ArrivedMessage& message, void* data,
                             const ucp_am_recv_param_t& param);
  void Complete(const std::shared_ptr<MessageRequest>& request, ArrivedMessage& message,
                const void* data);
  void Release(ArrivedMessage& message);
  void ReleaseAllHeld();
  // Receives (into nothing) and counts the tagged messages UCX holds; a
  // bounded number per call. Needs the UCX lock.
  void DropTaggedMessages();
  // `detail` is formatted only when a summary line is logged: a flood of
  // dropped messages must not cost a string each.
  void NoteDrop(DropReason reason, absl::FunctionRef<std::string()> detail);
  static void OnSendComplete(void* ucx_request, ucs_status_t status, void* user_data);
  static void OnReceiveDataComplete(void* ucx_request, ucs_status_t status, size_t length,
                                    void* user_data);
  void FinishRequest(MessageRequest* request, absl::Status status, int64_t bytes);

  const TransportOptions options_;
  std::string address_;

  // UCX objects: created, used and destroyed on the progress thread.
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string worker_address_;  // ucp_worker_get_address: what ready frames carry
  int listen_fd_ = -1;          // the handshake listener
  uint16_t bound_port_ = 0;
  int worker_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: new work in the queue
  int epoll_fd_ = -1;  // the progress thread sleeps on it
  int socket_epoll_fd_ = -1;  // the listener and handshake sockets (inside epoll_fd_)

  std::thread progress_thread_;
  // Whoever holds ucx_mu_ may call UCX and touch the state marked
  // "UCX lock" below; ucx_holder_ says which thread that is.
  absl::Mutex ucx_mu_;
  std::atomic<std::thread::id> ucx_holder_{};

  absl::Mutex queue_mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool sleeping_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;

  // State under the UCX lock.
  std::multimap<absl::Time, std::function<void()>> timers_;
  std::map<EndpointId, std::unique_ptr<EndpointState>> endpoints_;
  // Which endpoint a message came on: UCX names it by its ucp_ep_h.
  absl::flat_hash_map<ucp_ep_h, EndpointId> endpoint_by_ep_;
  // Posted receives waiting for their tag, oldest first.
  absl::flat_hash_map<uint64_t, std::deque<std::shared_ptr<MessageRequest>>> posted_;
  // Authorized messages waiting for their receive, oldest first.
  absl::flat_hash_map<uint64_t, std::deque<ArrivedMessage>> unexpected_;
  size_t unexpected_count_ = 0;
  size_t unexpected_bytes_ = 0;
  EndpointId next_endpoint_id_ = 1;
  absl::flat_hash_map<int, EndpointId> endpoint_by_socket_;
  // Bind tokens handed out in ready frames, not yet presented.
  absl::flat_hash_map<std::string, EndpointId> pending_binds_;
  absl::Time next_socket_poll_ = absl::InfinitePast();
  // Refused or malformed connections: logged once a second at most.
  absl::Time last_refusal_log_ = absl::InfinitePast();
  uint64_t refusals_since_log_ = 0;
  // Requests UCX still holds, keyed by our object, kept alive until their callback.
  absl::flat_hash_map<MessageRequest*, std::shared_ptr<MessageRequest>> in_flight_;
  std::vector<ParkedHello> parked_;
  absl::flat_hash_set<PendingUcxOp*> pending_ops_;

  // Dropped data messages by DropReason (read from any thread).
  std::array<std::atomic<uint64_t>, kDropReasonCount> dropped_{};
  absl::Time last_drop_log_ = absl::InfinitePast();  // UCX lock
  uint64_t drops_since_log_ = 0;                      // UCX lock

  // Hello routing: read on the progress thread, written under the mutex.
  mutable absl::Mutex handlers_mu_;
  std::map<std::pair<std::string, uint64_t>, HelloHandler*> handlers_ ABSL_GUARDED_BY(handlers_mu_);
  std::map<EndpointId, std::string> peer_addresses_ ABSL_GUARDED_BY(handlers_mu_);
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_TRANSPORT_H_
