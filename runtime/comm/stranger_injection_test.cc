// A stranger on the data plane during a live all-reduce: a process-like
// client with its own UCP context and worker (real UCX over TCP loopback)
// that has learned a rank's UCP worker address (only a dialer that proved
// the secret is handed it; the worst case is that it leaked) connects to
// it and sends, on every 16-bit communicator key, for every sender rank and
// the sequence numbers in use, data messages as active messages and as UCP
// tagged messages, small (eager) and large (rendezvous), and bind messages
// with tokens it guessed; meanwhile it may hold an unproven handshake on
// the rank's listener. The ranks' results must be bitwise the sum computed
// here, no rank may fail, and the rank's transport must have counted the
// stranger's messages as dropped.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <ucp/api/ucp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/base/host_port.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/message_tag.h"
#include "runtime/comm/transport.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

constexpr int kWorld = 2;
constexpr int64_t kSmallCount = 64;        // 256 bytes: eager, one message each way
constexpr int64_t kLargeCount = 1 << 18;   // 1 MiB: rendezvous
constexpr int64_t kStrangerPayload = kSmallCount * 4;  // exactly a small all-reduce message
constexpr unsigned kDataMessageAmId = 1;   // the transport's data-message id
constexpr unsigned kBindMessageAmId = 2;   // the transport's bind-message id
constexpr int kGuessedBinds = 16;

// A handshake connection to a rank's listener (plain TCP, as the transport
// speaks it).
class HandshakeClient {
 public:
  explicit HandshakeClient(const std::string& address) {
    absl::StatusOr<HostPort> hp = ParseHostPort(address);
    EXPECT_TRUE(hp.ok()) << hp.status();
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(hp->port);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval timeout{.tv_sec = 20, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    EXPECT_EQ(connect(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)), 0);
  }
  ~HandshakeClient() { close(fd_); }

  bool Send(const HelloMessage& message) {
    absl::StatusOr<HelloMessage::Bytes> bytes = message.Serialize();
    return bytes.ok() &&
           send(fd_, bytes->data(), bytes->size(), MSG_NOSIGNAL) ==
               static_cast<ssize_t>(bytes->size());
  }
  absl::StatusOr<HelloMessage> Receive() {
    HelloMessage::Bytes reply{};
    if (recv(fd_, reply.data(), reply.size(), MSG_WAITALL) != static_cast<ssize_t>(reply.size())) {
      return absl::DeadlineExceededError("no answer to our hello");
    }
    return HelloMessage::Parse(absl::string_view(reply.data(), reply.size()));
  }

 private:
  int fd_ = -1;
};

// A client that speaks UCX but knows no secret.
class Stranger {
 public:
  static std::unique_ptr<Stranger> Connect(const std::string& worker_address) {
    auto s = std::unique_ptr<Stranger>(new Stranger);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
    ucp_config_t* config = nullptr;
    EXPECT_EQ(ucp_config_read(nullptr, nullptr, &config), UCS_OK);
    // TCP only: UCX 1.13's shared-memory transport silently loses some of
    // these small header+payload active messages on the sending side
    // ("Invalid am_short_iov length"), which would make the victim's drop
    // counts fall short of what the stranger believes it sent.
    EXPECT_EQ(ucp_config_modify(config, "TLS", "tcp"), UCS_OK);
    // The ranks' UCX is confined to the loopback device (their listen
    // address); a stranger's interfaces elsewhere could not be answered.
    EXPECT_EQ(ucp_config_modify(config, "NET_DEVICES", "lo"), UCS_OK);
    EXPECT_EQ(ucp_init(&params, config, &s->context_), UCS_OK);
    ucp_config_release(config);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    EXPECT_EQ(ucp_worker_create(s->context_, &wp, &s->worker_), UCS_OK);

    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(worker_address.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) {
      static_cast<Stranger*>(arg)->failed_ = true;
    };
    ep.err_handler.arg = s.get();
    EXPECT_EQ(ucp_ep_create(s->worker_, &ep, &s->ep_), UCS_OK);
    return s;
  }

  ~Stranger() {
    Drain();
    if (ep_ != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      Wait(ucp_ep_close_nbx(ep_, &p), absl::Seconds(5));
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  bool failed() const { return failed_; }

  // One data message as the transport frames it (header: tag, link token),
  // claiming to come from a member (reply endpoint set).
  void SendActiveMessage(uint64_t tag, const std::vector<char>& payload, bool rendezvous) {
    auto header = std::make_unique<char[]>(16);
    wire::PutU64(header.get(), tag);
    wire::PutU64(header.get() + 8, token_rng_());
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY | (rendezvous ? UCP_AM_SEND_FLAG_RNDV : 0);
    ucs_status_ptr_t r = ucp_am_send_nbx(ep_, kDataMessageAmId, header.get(), 16,
                                         payload.data(), payload.size(), &p);
    Track(r, std::move(header), &am_sent_);
  }
  // A bind message (the first a dialer that completed a handshake sends)
  // with a token it guessed.
  void SendBind() {
    auto token = std::make_unique<char[]>(16);
    wire::PutU64(token.get(), token_rng_());
    wire::PutU64(token.get() + 8, token_rng_());
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t r = ucp_am_send_nbx(ep_, kBindMessageAmId, token.get(), 16, nullptr, 0, &p);
    Track(r, std::move(token), &binds_sent_);
  }
  void SendTagged(uint64_t tag, const std::vector<char>& payload) {
    ucp_request_param_t p{};
    Track(ucp_tag_send_nbx(ep_, payload.data(), payload.size(), tag, &p), nullptr, &tagged_sent_);
  }

  // Waits for everything sent so far to complete.
  void Drain() {
    for (auto& [request, header] : outstanding_) Wait(request, absl::Seconds(10));
    outstanding_.clear();
    if (ep_ != nullptr && !failed_) {
      ucp_request_param_t p{};
      Wait(ucp_ep_flush_nbx(ep_, &p), absl::Seconds(10));
    }
  }

  int64_t am_sent() const { return am_sent_; }
  int64_t tagged_sent() const { return tagged_sent_; }
  int64_t binds_sent() const { return binds_sent_; }

 private:
  Stranger() = default;

  void Track(ucs_status_ptr_t r, std::unique_ptr<char[]> header, int64_t* sent) {
    if (UCS_PTR_IS_ERR(r)) return;  // the rank closed the connection
    ++*sent;
    if (r != nullptr) outstanding_.emplace_back(r, std::move(header));
    if (outstanding_.size() >= 512) {
      for (auto& [request, h] : outstanding_) Wait(request, absl::Seconds(10));
      outstanding_.clear();
    }
    if ((*sent & 63) == 0) ucp_worker_progress(worker_);
  }

  // Progresses until `r` (a request or immediate result) is done; frees it.
  bool Wait(ucs_status_ptr_t r, absl::Duration limit) {
    if (r == nullptr) return true;
    if (UCS_PTR_IS_ERR(r)) return false;
    const absl::Time deadline = absl::Now() + limit;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && absl::Now() < deadline) {
      ucp_worker_progress(worker_);
    }
    const ucs_status_t status = ucp_request_check_status(r);
    if (status == UCS_INPROGRESS) ucp_request_cancel(worker_, r);
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
    ucp_request_free(r);
    return status == UCS_OK;
  }

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  std::mt19937_64 token_rng_{12345};
  std::vector<std::pair<void*, std::unique_ptr<char[]>>> outstanding_;
  int64_t am_sent_ = 0;
  int64_t tagged_sent_ = 0;
  int64_t binds_sent_ = 0;
};

// Every key, both sender ranks, the sequence numbers in use now and next.
void SweepEveryKey(Stranger& stranger, const std::atomic<uint64_t>& next_sequence,
                   bool tagged) {
  const std::vector<char> payload(kStrangerPayload, 0x7f);
  for (uint32_t key = 0; key <= 0xffff; ++key) {
    const uint64_t sequence = next_sequence.load();
    for (int sender = 0; sender < kWorld; ++sender) {
      for (uint64_t s = sequence; s <= sequence + 1; ++s) {
        const uint64_t tag = CollectiveTag(static_cast<uint16_t>(key), sender,
                                           CollectiveKind::kAllReduce, s, 0);
        if (tagged) {
          stranger.SendTagged(tag, payload);
        } else {
          stranger.SendActiveMessage(tag, payload, /*rendezvous=*/false);
        }
      }
    }
  }
  // A few large ones, which UCX sends by rendezvous: their descriptors must
  // be released, not kept.
  const std::vector<char> large(size_t{1} << 20, 0x7f);
  for (int i = 0; i < 16; ++i) {
    const uint64_t tag =
        CollectiveTag(static_cast<uint16_t>(i * 4099), 0, CollectiveKind::kAllReduce,
                      next_sequence.load(), 0);
    if (tagged) {
      stranger.SendTagged(tag, large);
    } else {
      stranger.SendActiveMessage(tag, large, /*rendezvous=*/true);
    }
  }
  stranger.Drain();  // before `large` goes
}

float Input(int rank, int64_t iteration, int64_t i) {
  // Non-integers, so a changed value cannot hide in rounding.
  return static_cast<float>(rank + 1) * 0.37f + static_cast<float>((iteration * 31 + i) % 1000) /
                                                    7.0f;
}

struct Ranks {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<Communicator>> communicators;
};

Ranks Form() {
  Ranks ranks;
  std::vector<std::string> addresses;
  for (int r = 0; r < kWorld; ++r) {
    TransportOptions options;
    options.listen_address = "127.0.0.1:0";
    // Long enough that the hello-less stranger is not hung up on mid-sweep.
    options.timeout = absl::Seconds(120);
    absl::StatusOr<std::unique_ptr<Transport>> t = Transport::Create(options);
    EXPECT_TRUE(t.ok()) << t.status();
    addresses.push_back((*t)->address());
    ranks.transports.push_back(*std::move(t));
  }
  ranks.communicators.resize(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      CommunicatorOptions o;
      o.rank = r;
      o.world_size = kWorld;
      o.generation = 3;
      o.peer_addresses = addresses;
      o.secret_token = "the job's secret";
      o.job_id = "stranger-test";
      o.timeout = absl::Seconds(30);
      absl::StatusOr<std::unique_ptr<Communicator>> c =
          Communicator::Create(ranks.transports[r].get(), o);
      EXPECT_TRUE(c.ok()) << c.status();
      if (c.ok()) ranks.communicators[r] = *std::move(c);
    });
  }
  for (auto& t : threads) t.join();
  return ranks;
}

// Runs all-reduces (a one-element vote on going on, then a small and a large
// one per iteration) on every rank until `stop` is set and at least
// `min_iterations` have run; checks every result bitwise against the sum
// computed here. Returns the first failure.
absl::Status AllReduceLoop(Ranks& ranks, std::atomic<bool>& stop,
                           std::atomic<uint64_t>& next_sequence, int64_t min_iterations,
                           int64_t* iterations_run) {
  absl::Mutex mu;
  absl::Status first_error;
  std::atomic<int64_t> iterations{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](absl::Status s) {
        absl::MutexLock lock(&mu);
        if (first_error.ok()) first_error = std::move(s);
        stop = true;
      };
      std::vector<float> small(kSmallCount), large(kLargeCount);
      for (int64_t it = 0;; ++it) {
        // The stranger aims at this iteration's data all-reduces (after the vote).
        if (r == 1) next_sequence = 3 * static_cast<uint64_t>(it) + 1;
        // The ranks see `stop` at different moments, so they vote on going
        // on: a rank that stopped alone would leave the other waiting for
        // its messages until the deadline.
        float go = it < min_iterations || !stop.load() ? 1.0f : 0.0f;
        if (absl::Status s = ranks.communicators[r]->AllReduce(&go, 1, ReduceOp::kSum);
            !s.ok()) {
          fail(s);
          return;
        }
        if (go == 0.0f) break;
        if (r == 1) iterations = it + 1;
        for (std::vector<float>* buffer : {&small, &large}) {
          std::vector<float>& b = *buffer;
          for (size_t i = 0; i < b.size(); ++i) b[i] = Input(r, it, static_cast<int64_t>(i));
          if (absl::Status s = ranks.communicators[r]->AllReduce(b.data(), b.size(),
                                                                  ReduceOp::kSum);
              !s.ok()) {
            fail(s);
            return;
          }
          for (size_t i = 0; i < b.size(); ++i) {
            // One addition of the two inputs: the exact result every
            // algorithm produces for two ranks.
            const float expected = Input(0, it, static_cast<int64_t>(i)) +
                                   Input(1, it, static_cast<int64_t>(i));
            if (std::memcmp(&b[i], &expected, sizeof(float)) != 0) {
              fail(absl::DataLossError(absl::StrCat("rank ", r, " iteration ", it, " element ",
                                                    i, " of ", b.size(), ": ", b[i],
                                                    ", expected ", expected)));
              return;
            }
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  *iterations_run = iterations.load();
  return first_error;
}

// The stranger attacks rank 1 (which receives from rank 0).
void RunAttack(bool send_hello) {
  Ranks ranks = Form();
  ASSERT_TRUE(ranks.communicators[0] && ranks.communicators[1]);
  Transport& victim = *ranks.transports[1];
  const DroppedMessageCounts before = victim.dropped_messages();

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_sequence{0};
  int64_t am_sent = 0, tagged_sent = 0, binds_sent = 0;
  std::thread attacker([&] {
    std::unique_ptr<Stranger> stranger = Stranger::Connect(victim.worker_address());
    for (int i = 0; i < kGuessedBinds; ++i) stranger->SendBind();
    if (send_hello) {
      // A hello as a member would send it (the settings fingerprint is a
      // public function of the world size and algorithm settings): it is
      // accepted and answered with a challenge the stranger cannot meet.
      HelloMessage hello;
      hello.type = HelloType::kHello;
      hello.generation = 3;
      hello.rank = 0;
      hello.world_size = kWorld;
      hello.job_id = "stranger-test";
      hello.nonce = std::string(kHandshakeNonceBytes, 'n');
      CommunicatorOptions member;
      member.world_size = kWorld;
      hello.settings_fingerprint = SettingsFingerprint(member);
      HandshakeClient handshake(victim.address());
      ASSERT_TRUE(handshake.Send(hello));
      absl::StatusOr<HelloMessage> challenge = handshake.Receive();
      ASSERT_TRUE(challenge.ok()) << challenge.status();
      ASSERT_EQ(challenge->type, HelloType::kAccept) << challenge->reason;
      SweepEveryKey(*stranger, next_sequence, /*tagged=*/false);
      SweepEveryKey(*stranger, next_sequence, /*tagged=*/true);
      stranger->Drain();
      // A confirmation with a proof it had to guess.
      HelloMessage confirm = hello;
      confirm.type = HelloType::kConfirm;
      confirm.nonce.clear();
      confirm.proof = std::string(kHandshakeProofBytes, 'p');
      ASSERT_TRUE(handshake.Send(confirm));
      // Refused: the rank hangs up without a ready frame.
      EXPECT_FALSE(handshake.Receive().ok());
    } else {
      SweepEveryKey(*stranger, next_sequence, /*tagged=*/false);
      SweepEveryKey(*stranger, next_sequence, /*tagged=*/true);
    }
    stranger->Drain();
    am_sent = stranger->am_sent();
    tagged_sent = stranger->tagged_sent();
    binds_sent = stranger->binds_sent();
    stop = true;
  });
  int64_t iterations = 0;
  absl::Status result = AllReduceLoop(ranks, stop, next_sequence, /*min_iterations=*/3,
                                      &iterations);
  stop = true;
  attacker.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_GE(iterations, 3);
  // Every data message it got through was seen and dropped.
  const int64_t expected_am = 2 * kWorld * 65536 + 16;
  EXPECT_EQ(am_sent, expected_am);
  EXPECT_EQ(tagged_sent, expected_am);
  EXPECT_EQ(binds_sent, kGuessedBinds);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  // Drops of `reason` since the attack began.
  auto dropped = [&](const DroppedMessageCounts& now, DropReason reason) {
    return now.count(reason) - before.count(reason);
  };
  auto all_counted = [&] {
    const DroppedMessageCounts now = victim.dropped_messages();
    return dropped(now, DropReason::kUnauthenticated) >=
               static_cast<uint64_t>(am_sent + binds_sent) &&
           dropped(now, DropReason::kTagged) >= static_cast<uint64_t>(tagged_sent);
  };
  while (!all_counted() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  const DroppedMessageCounts after = victim.dropped_messages();
  EXPECT_EQ(dropped(after, DropReason::kUnauthenticated),
            static_cast<uint64_t>(am_sent + binds_sent));
  EXPECT_EQ(dropped(after, DropReason::kTagged), static_cast<uint64_t>(tagged_sent));
  EXPECT_EQ(dropped(after, DropReason::kForged), 0u);
  EXPECT_EQ(dropped(after, DropReason::kOverLimit), 0u);
  std::cerr << "stranger sent " << am_sent << " active messages and " << tagged_sent
            << " tagged messages during " << iterations << " all-reduce iterations; dropped "
            << dropped(after, DropReason::kUnauthenticated) << " unauthenticated, "
            << dropped(after, DropReason::kTagged) << " tagged\n";

  // The communicator is still healthy afterwards.
  int64_t more = 0;
  std::atomic<bool> done{true};
  EXPECT_TRUE(AllReduceLoop(ranks, done, next_sequence, 1, &more).ok());
  ranks.communicators.clear();
}

TEST(StrangerInjectionTest, WithoutAHelloChangesNoValueAndAbortsNothing) {
  RunAttack(/*send_hello=*/false);
}

TEST(StrangerInjectionTest, WithAnUnprovenHelloChangesNoValueAndAbortsNothing) {
  RunAttack(/*send_hello=*/true);
}

}  // namespace
}  // namespace corescape::comm
