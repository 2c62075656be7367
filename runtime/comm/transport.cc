// Transport: UCP context and worker, the handshake listener, the progress
// thread and its work queue. Connection handling is in transport_connections.cc, data messages
// in transport_messages.cc.
#include "runtime/comm/transport.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include <ucp/api/ucp.h>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "glog/logging.h"
#include "runtime/base/host_port.h"
#include "runtime/comm/message_tag.h"
#include "runtime/comm/transport_internal.h"
#include "runtime/comm/ucx_status.h"

namespace corescape::comm {
namespace {

// After the last activity the progress thread keeps polling this long before
// it sleeps on the event fd: short enough to cost little CPU on a shared
// machine, long enough to keep a busy exchange off the sleep/wake path.
absl::Duration SpinWindow() {
  static const absl::Duration window = [] {
    const char* env = getenv("CORESCAPE_UCX_SPIN_US");
    int us = env != nullptr ? atoi(env) : 50;
    return absl::Microseconds(us < 0 ? 0 : us);
  }();
  return window;
}

// How long a thread in WaitFor drives UCX itself before it blocks and
// leaves the rest to the progress thread. Short by default: on a machine
// with more runnable threads than cores (the 2-core CI box, or P ranks per
// node), a spinning waiter takes the CPU its peers need and every operation
// gets slower (measured: 1 KiB all-reduce at P=4 on 2 cores, 1 ms with no
// spin, 6-10 ms with 2 ms). Raise it on nodes with cores to spare.
absl::Duration WaitSpin() {
  static const absl::Duration spin = [] {
    const char* env = getenv("CORESCAPE_UCX_WAIT_SPIN_US");
    int us = env != nullptr ? atoi(env) : 50;
    return absl::Microseconds(us < 0 ? 0 : us);
  }();
  return spin;
}

// Longest sleep: timers (connection deadlines) are checked at least this often.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(100);
// How often a busy progress thread looks at the handshake sockets.
constexpr absl::Duration kSocketPollInterval = absl::Milliseconds(1);
// How long shutdown waits for UCX to finish closing endpoints.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

// UCX's transports when UCX_TLS is not set: every one but shared memory.
// Endpoints made from worker addresses with peer failure detection get no
// rendezvous (RMA) lane in UCX 1.13 (only client/server endpoints did), so
// between processes on one host large messages would crawl through the
// shared-memory FIFO as active-message fragments (measured 0.03-0.15 GB/s
// against 0.3-0.6 over TCP loopback); TCP loopback is what large messages
// took before anyway. UCX_TLS=sm,tcp brings shared memory back.
constexpr char kDefaultTransports[] = "^sm";

// Shared-memory transports take part in peer failure detection only when
// asked to; without that UCX leaves them out of endpoints that use
// UCP_ERR_HANDLING_MODE_PEER (ours). UCX reads these from the environment
// when it opens its interfaces (ucp_config_modify does not reach transport
// options in 1.13); a value already in the environment wins, and nothing is
// set when UCX_TLS leaves the transport out (UCX would warn about an unused
// variable), which includes UCX_TLS unset (kDefaultTransports).
void EnableSharedMemoryErrorHandling() {
  const char* tls_env = getenv("UCX_TLS");
  if (tls_env == nullptr || absl::StartsWith(tls_env, "^")) return;
  const std::string tls = tls_env;
  auto selected = [&](absl::string_view transport) {
    return absl::StrContains(tls, "all") || absl::StrContains(tls, "sm") ||
           absl::StrContains(tls, "shm") || absl::StrContains(tls, transport);
  };
  if (selected("posix")) setenv("UCX_POSIX_ERROR_HANDLING", "y", /*overwrite=*/0);
  if (selected("sysv")) setenv("UCX_SYSV_ERROR_HANDLING", "y", /*overwrite=*/0);
}

// Rendezvous over TCP goes as active-message fragments of UCX's TCP segment
// size (UCX 1.13 gives our endpoints no RMA lane, see kDefaultTransports);
// its 8 KiB default made 16 MiB all-reduces about half as fast as before
// (measured 0.35 against 0.7-0.8 GB/s, P = 2 on loopback; 256 KiB / 1 MiB:
// 0.5-0.87). The receive segment is what one connection may hold per
// message being received; a value in the environment wins.
void EnlargeTcpSegments() {
  setenv("UCX_TCP_TX_SEG_SIZE", "256K", /*overwrite=*/0);
  setenv("UCX_TCP_RX_SEG_SIZE", "1M", /*overwrite=*/0);
}

bool IsWildcard(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (addr.ss_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr);
  }
  return false;
}

bool IsLoopback(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr) >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr);
  }
  return false;
}

// The network device that holds `addr` (any loopback address: the loopback
// device), so UCX's own TCP interfaces open on it alone.
absl::StatusOr<std::string> NetworkDeviceOf(const sockaddr_storage& addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", strerror(errno)));
  }
  std::string device;
  for (const ifaddrs* i = list; i != nullptr && device.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != addr.ss_family) continue;
    if (IsLoopback(addr)) {
      if ((i->ifa_flags & IFF_LOOPBACK) != 0) device = i->ifa_name;
    } else if (addr.ss_family == AF_INET) {
      if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
          reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr) {
        device = i->ifa_name;
      }
    } else if (std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr,
                           sizeof(in6_addr)) == 0) {
      device = i->ifa_name;
    }
  }
  freeifaddrs(list);
  if (device.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TransportOptions.listen_address: no network device of this machine has address ",
        SockaddrToString(addr)));
  }
  return device;
}

// The handshake listener: a plain TCP socket on exactly `addr`.
absl::StatusOr<int> Listen(const sockaddr_storage& addr, socklen_t length,
                           const std::string& listen_address) {
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 || listen(fd, 128) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("listening on ", listen_address, ": ", strerror(error)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(const TransportOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("TransportOptions.timeout must be positive");
  }
  auto transport = absl::WrapUnique(new Transport(options));
  if (absl::Status s = transport->Init(); !s.ok()) return s;
  return transport;
}

Transport::Transport(const TransportOptions& options) : options_(options) {}

absl::Status Transport::Init() {
  absl::StatusOr<HostPort> listen = ParseHostPort(options_.listen_address, /*min_port=*/0);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TransportOptions.listen_address: ", listen.status().message()));
  }
  absl::StatusOr<ResolvedAddress> addr = ResolveAddress(*listen, /*passive=*/true);
  if (!addr.ok()) return addr.status();

  EnableSharedMemoryErrorHandling();
  EnlargeTcpSegments();
  absl::StatusOr<int> listen_fd = Listen(addr->storage, addr->length, options_.listen_address);
  if (!listen_fd.ok()) return listen_fd.status();
  listen_fd_ = *listen_fd;
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  bound_port_ = SockaddrPort(bound);

  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return UcxError(s, "reading UCX configuration");
  }
  if (getenv("UCX_TLS") == nullptr) {
    if (ucs_status_t s = ucp_config_modify(config, "TLS", kDefaultTransports); s != UCS_OK) {
      ucp_config_release(config);
      return UcxError(s, "setting UCX_TLS");
    }
  }
  // UCX's TCP interfaces listen on every network device unless told
  // otherwise: keep them on the listen address's device. An operator's
  // UCX_NET_DEVICES wins (it may name RDMA devices).
  if (!IsWildcard(addr->storage) && getenv("UCX_NET_DEVICES") == nullptr) {
    absl::StatusOr<std::string> device = NetworkDeviceOf(addr->storage);
    if (!device.ok()) {
      ucp_config_release(config);
      return device.status();
    }
    if (ucs_status_t s = ucp_config_modify(config, "NET_DEVICES", device->c_str()); s != UCS_OK) {
      ucp_config_release(config);
      return UcxError(s, "setting UCX_NET_DEVICES");
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  // Data messages are active messages the transport matches itself
  // (transport_messages.cc): UCX's tag matching is worker-wide, so any
  // connection could deliver into any receive. Tags are enabled only as a
  // sink: nothing posts a tagged receive, and what a stranger sends tagged
  // is received into nothing and counted (DropTaggedMessages). Without the
  // feature UCX 1.13 drops such messages in its transport layer, but logs a
  // warning with a backtrace for every one.
  params.features = UCP_FEATURE_AM | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = "corescape";
  ucs_status_t init_status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (init_status != UCS_OK) return UcxError(init_status, "ucp_init");

  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd/epoll: ", strerror(errno)));
  }
  socket_epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (socket_epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll: ", strerror(errno)));
  }
  for (int fd : {wake_fd_, socket_epoll_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;  // the listener; endpoints are named by their (nonzero) id
    epoll_ctl(socket_epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  }

  // The worker is created on the progress thread, which is the only thread
  // that touches it.
  absl::Status init_result;
  absl::Notification initialized;
  progress_thread_ = std::thread([&, this] {
    {
      absl::MutexLock lock(&ucx_mu_);
      ucx_holder_.store(std::this_thread::get_id());
      init_result = InitOnProgressThread();
      ucx_holder_.store(std::thread::id());
    }
    const bool ok = init_result.ok();
    initialized.Notify();  // init_result/addr are not touched after this
    if (ok) ProgressLoop();
  });
  initialized.WaitForNotification();
  if (!init_result.ok()) {
    progress_thread_.join();
    return init_result;
  }
  std::string host = options_.advertise_host;
  if (host.empty()) {
    host = listen->host;
    if (host == "0.0.0.0" || host == "::") {
      char name[256] = {};
      gethostname(name, sizeof(name) - 1);
      host = name;
    }
  }
  address_ = HostPort{host, bound_port_}.ToString();
  LOG(INFO) << "data plane listening on " << options_.listen_address << " (port "
            << bound_port_ << "), advertised as " << address_;
  return absl::OkStatus();
}

absl::Status Transport::InitOnProgressThread() {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one thread at a time: the UCX lock
  if (ucs_status_t s = ucp_worker_create(context_, &wp, &worker_); s != UCS_OK) {
    return UcxError(s, "ucp_worker_create");
  }
  if (ucs_status_t s = ucp_worker_get_efd(worker_, &worker_fd_); s != UCS_OK) {
    return UcxError(s, "ucp_worker_get_efd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = worker_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker_fd_, &ev);

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  if (ucs_status_t s = ucp_worker_get_address(worker_, &address, &address_length); s != UCS_OK) {
    return UcxError(s, "ucp_worker_get_address");
  }
  worker_address_.assign(reinterpret_cast<const char*>(address), address_length);
  ucp_worker_release_address(worker_, address);
  if (worker_address_.size() > kMaxWorkerAddressBytes) {
    return absl::InternalError(absl::StrCat("the UCP worker address has ",
                                            worker_address_.size(), " bytes (at most ",
                                            kMaxWorkerAddressBytes, ")"));
  }

  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  handler.id = kDataMessageAmId;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  handler.cb = &Transport::OnDataMessage;
  handler.arg = this;
  if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &handler); s != UCS_OK) {
    return UcxError(s, "ucp_worker_set_am_recv_handler");
  }
  handler.id = kBindMessageAmId;
  handler.cb = &Transport::OnBindMessage;
  if (ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &handler); s != UCS_OK) {
    return UcxError(s, "ucp_worker_set_am_recv_handler");
  }
  return absl::OkStatus();
}

Transport::~Transport() {
  if (progress_thread_.joinable()) {
    Enqueue([this] { ShutdownOnProgressThread(); });
    progress_thread_.join();
  } else if (worker_ != nullptr) {
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (socket_epoll_fd_ >= 0) close(socket_epoll_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
}

void Transport::ShutdownOnProgressThread() {
  std::vector<EndpointId> ids;
  for (const auto& [id, endpoint] : endpoints_) ids.push_back(id);
  if (!ids.empty()) {
    LOG(INFO) << "data plane shutting down with " << ids.size() << " open endpoint(s)";
  }
  for (EndpointId id : ids) ForceClose(id);
  for (const auto& [raw, request] : in_flight_) {
    if (request->is_receive() && request->ucx_request_ != nullptr) {
      ucp_request_cancel(worker_, request->ucx_request_);
    }
  }
  const absl::Time deadline = absl::Now() + kShutdownGrace;
  // Flushes, closes and bind-token sends too: their completions must run
  // here, before the worker goes (what it completes on the way is never
  // finished, and its operation leaks).
  while ((!endpoints_.empty() || !in_flight_.empty() || !pending_ops_.empty()) &&
         absl::Now() < deadline) {
    ucp_worker_progress(worker_);
    RunQueuedWork();
  }
  RunQueuedWork();  // completions queued by the last progress
  if (!endpoints_.empty() || !in_flight_.empty() || !pending_ops_.empty()) {
    LOG(WARNING) << "data plane shutdown: " << endpoints_.size() << " endpoint(s), "
                 << in_flight_.size() << " message(s) and " << pending_ops_.size()
                 << " other operation(s) still open after " << kShutdownGrace;
    for (const auto& [raw, request] : in_flight_) {
      LOG(WARNING) << "  still open: " << (request->is_receive() ? "receive " : "send ")
                   << TagDebugString(request->tag());
    }
  }
  // Whatever UCX did not finish is failed here so no waiter hangs.
  std::vector<std::shared_ptr<MessageRequest>> left;
  for (auto& [raw, request] : in_flight_) left.push_back(request);
  in_flight_.clear();
  for (auto& request : left) {
    FinishRequest(request.get(), absl::CancelledError("data plane transport shut down"), 0);
  }
  // Messages that arrived but were never received (a peer's last control
  // message after we stopped listening, or traffic of a broken
  // communicator) go back to UCX; receives still posted fail.
  ReleaseAllHeld();
  for (auto& [id, endpoint] : endpoints_) CloseSocket(endpoint.get());
  if (listen_fd_ >= 0) {
    epoll_ctl(socket_epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    close(listen_fd_);
    listen_fd_ = -1;
  }
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
  endpoints_.clear();
  for (PendingUcxOp* op : pending_ops_) delete op;
  pending_ops_.clear();
  absl::MutexLock lock(&queue_mu_);
  stop_ = true;
}

// ---------------------------------------------------------------------------
// Progress thread and work queue.

bool Transport::HoldsUcxLock() const {
  return std::this_thread::get_id() == ucx_holder_.load();
}

bool Transport::WaitFor(const MessageRequest& request, absl::Time deadline) {
  const absl::Time spin_until = std::min(deadline, absl::Now() + WaitSpin());
  while (!request.done()) {
    if (ucx_mu_.TryLock()) {
      ucx_holder_.store(std::this_thread::get_id());
      RunQueuedWork();
      ProgressSome();
      ucx_holder_.store(std::thread::id());
      ucx_mu_.Unlock();
    } else {
      std::this_thread::yield();
    }
    if (absl::Now() >= spin_until) break;
  }
  return request.done() || request.WaitUntil(deadline);
}

unsigned Transport::ProgressSome() {
  unsigned progressed = 0;
  if (worker_ == nullptr) return 0;  // shut down
  for (int i = 0; i < 64; ++i) {
    unsigned n = ucp_worker_progress(worker_);
    if (n == 0) break;
    progressed += n;
  }
  if (progressed > 0) DropTaggedMessages();
  return progressed;
}

void Transport::Enqueue(std::function<void()> fn) {
  bool wake;
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(std::move(fn));
    wake = sleeping_;
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof(one));
    (void)n;
  }
}

void Transport::Run(std::function<void()> fn) { Enqueue(std::move(fn)); }

void Transport::RunAndWait(std::function<void()> fn) {
  if (HoldsUcxLock()) {
    fn();
    return;
  }
  absl::Notification done;
  Enqueue([&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
}

void Transport::RunAt(absl::Time when, std::function<void()> fn) {
  Enqueue([this, when, fn = std::move(fn)]() mutable { timers_.emplace(when, std::move(fn)); });
}

bool Transport::RunQueuedWork() {
  std::deque<std::function<void()>> batch;
  {
    absl::MutexLock lock(&queue_mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) fn();
  return !batch.empty();
}

void Transport::RunDueTimers() {
  const absl::Time now = absl::Now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    std::function<void()> fn = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    fn();
  }
}

void Transport::ProgressLoop() {
  absl::Time last_activity = absl::Now();
  while (true) {
    bool had_work;
    unsigned progressed;
    {
      absl::MutexLock lock(&ucx_mu_);
      ucx_holder_.store(std::this_thread::get_id());
      had_work = RunQueuedWork();
      progressed = ProgressSome();
      // Handshake sockets: at most every kSocketPollInterval while busy
      // (a system call per round would slow the data path), at once after
      // a sleep.
      if (const absl::Time now = absl::Now(); now >= next_socket_poll_) {
        had_work = PollSockets() > 0 || had_work;
        next_socket_poll_ = now + kSocketPollInterval;
      }
      RunDueTimers();
      ucx_holder_.store(std::thread::id());
    }
    {
      absl::MutexLock lock(&queue_mu_);
      if (stop_) return;
    }
    const absl::Time now = absl::Now();
    if (had_work || progressed > 0) {
      last_activity = now;
      continue;
    }
    if (now - last_activity < SpinWindow()) continue;

    // Idle: sleep until UCX has an event, work is queued, or a timer is due.
    ucs_status_t armed;
    absl::Duration sleep = kMaxSleep;
    {
      absl::MutexLock lock(&ucx_mu_);
      armed = ucp_worker_arm(worker_);
      if (!timers_.empty()) sleep = std::min(sleep, timers_.begin()->first - now);
    }
    if (armed == UCS_ERR_BUSY) continue;
    {
      absl::MutexLock lock(&queue_mu_);
      if (!queue_.empty() || stop_) continue;
      sleeping_ = true;
    }
    int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(absl::Ceil(
        std::max(sleep, absl::ZeroDuration()), absl::Milliseconds(1))));
    if (armed != UCS_OK) timeout_ms = std::min(timeout_ms, 1);  // cannot arm: poll
    epoll_event events[4];
    int n = epoll_wait(epoll_fd_, events, 4, timeout_ms);
    {
      absl::MutexLock lock(&queue_mu_);
      sleeping_ = false;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t value;
        ssize_t r = read(wake_fd_, &value, sizeof(value));
        (void)r;
      }
    }
    last_activity = absl::Now();
    next_socket_poll_ = absl::InfinitePast();
  }
}

}  // namespace corescape::comm
