#ifndef CORESCAPE_RUNTIME_COMM_TRANSPORT_H_
#define CORESCAPE_RUNTIME_COMM_TRANSPORT_H_

#include <atomic>
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
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

// One per process: a UCP context and worker, a listener on HOST:PORT, and a
// progress thread. UCX is called by one thread at a time (the worker runs in
// UCX's serialized mode), whoever holds the UCX lock: the progress thread,
// or a thread waiting in WaitFor(), which drives UCX itself for a moment
// instead of waiting for the progress thread to wake it (a thread hand-off
// per message costs more than the message on a busy machine). Other threads
// hand work over through a queue that the lock holder drains. The progress
// thread polls briefly after activity and then sleeps on the worker's event
// fd, so an idle process costs no CPU.
//
// Transports are chosen by UCX's configuration (UCX_TLS, UCX_NET_DEVICES...),
// not here. Connections are made with UCX's sockaddr connection manager; the
// first bytes on each endpoint are a HelloMessage on its UCP stream, and
// everything after that is tagged messages.
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

  // ---- Tagged messages (any thread) ----
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

  explicit Transport(const TransportOptions& options);
  absl::Status Init();
  absl::Status InitOnProgressThread(const struct sockaddr_storage& listen_addr,
                                    socklen_t listen_len);
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
  static void OnConnectionRequest(ucp_conn_request_h request, void* arg);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void HandleConnectionRequest(ucp_conn_request_h request);
  void HandleEndpointError(EndpointId id, ucs_status_t status);
  EndpointState* CreateEndpoint(const std::string& peer_address);
  EndpointState* FindEndpoint(EndpointId id);
  void StartStreamRecv(EndpointState* endpoint,
                       std::function<void(absl::StatusOr<HelloMessage>)> done);
  void StartStreamSend(EndpointState* endpoint, const HelloMessage& message,
                       std::function<void(absl::Status)> done);
  void OnHelloReceived(EndpointId id, absl::StatusOr<HelloMessage> hello);
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
  static void OnStreamRecvComplete(void* ucx_request, ucs_status_t status, size_t length,
                                   void* user_data);
  void FinishUcxOp(PendingUcxOp* op, ucs_status_t status, size_t length);

  // Request completion plumbing.
  static void OnSendComplete(void* ucx_request, ucs_status_t status, void* user_data);
  static void OnRecvComplete(void* ucx_request, ucs_status_t status,
                             const ucp_tag_recv_info_t* info, void* user_data);
  void FinishRequest(MessageRequest* request, absl::Status status, int64_t bytes);

  const TransportOptions options_;
  std::string address_;

  // UCX objects: created, used and destroyed on the progress thread.
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  uint16_t bound_port_ = 0;
  int worker_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: new work in the queue
  int epoll_fd_ = -1;

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
  EndpointId next_endpoint_id_ = 1;
  // Requests UCX still holds, keyed by our object, kept alive until their callback.
  absl::flat_hash_map<MessageRequest*, std::shared_ptr<MessageRequest>> in_flight_;
  std::vector<ParkedHello> parked_;
  absl::flat_hash_set<PendingUcxOp*> pending_ops_;

  // Hello routing: read on the progress thread, written under the mutex.
  mutable absl::Mutex handlers_mu_;
  std::map<std::pair<std::string, uint64_t>, HelloHandler*> handlers_ ABSL_GUARDED_BY(handlers_mu_);
  std::map<EndpointId, std::string> peer_addresses_ ABSL_GUARDED_BY(handlers_mu_);
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_TRANSPORT_H_
