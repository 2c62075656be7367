// Communicators of P ranks inside one process: each rank has its own
// Transport (its own UCP context, worker and listener on loopback) and runs
// on its own thread. The multi-process tests in tests/comm/ cover real
// processes and kill -9.
#include "runtime/comm/communicator.h"

#include <cstring>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "runtime/comm/handshake_proof.h"
#include "runtime/comm/hello_handler_test_util.h"
#include "runtime/comm/hello_message.h"

namespace corescape::comm {
namespace {

// A transport listening on a free loopback port.
absl::StatusOr<std::unique_ptr<Transport>> LoopbackTransport() {
  TransportOptions options;
  options.listen_address = "127.0.0.1:0";
  return Transport::Create(options);
}

struct Group {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::string> addresses;
};

Group MakeTransports(int world) {
  Group g;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<std::unique_ptr<Transport>> t = LoopbackTransport();
    EXPECT_TRUE(t.ok()) << t.status();
    g.addresses.push_back((*t)->address());
    g.transports.push_back(std::move(*t));
  }
  return g;
}

CommunicatorOptions Options(const Group& g, int rank, uint64_t generation = 1) {
  CommunicatorOptions o;
  o.rank = rank;
  o.world_size = static_cast<int>(g.addresses.size());
  o.generation = generation;
  o.peer_addresses = g.addresses;
  o.secret_token = "token";
  o.job_id = "unit";
  o.timeout = absl::Seconds(10);
  return o;
}

// Runs body(rank, communicator) on every rank concurrently.
void RunGroup(Group& g, const std::function<void(int, Communicator&)>& body,
              uint64_t generation = 1) {
  const int world = static_cast<int>(g.addresses.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> c =
          Communicator::Create(g.transports[r].get(), Options(g, r, generation));
      ASSERT_TRUE(c.ok()) << c.status();
      body(r, **c);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(CommunicatorTest, CollectivesOnThreeRanks) {
  Group g = MakeTransports(3);
  RunGroup(g, [](int rank, Communicator& c) {
    // All-reduce, small and large (ring) paths.
    for (int64_t count : {0, 1, 5, 100000}) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + i % 7);
      ASSERT_TRUE(c.AllReduce(data.data(), count, ReduceOp::kSum).ok());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(3 + 3 * (i % 7))) << i;
      }
    }
    // All-gather-v with an empty slot.
    std::vector<int64_t> sizes = {3, 0, 70000};
    std::vector<char> send(sizes[rank], static_cast<char>('a' + rank));
    std::vector<char> recv(70003, 0);
    ASSERT_TRUE(c.AllGatherV(send.data(), sizes[rank], recv.data(), sizes).ok());
    EXPECT_EQ(recv[0], 'a');
    EXPECT_EQ(recv[2], 'a');
    EXPECT_EQ(recv[3], 'c');
    EXPECT_EQ(recv[70002], 'c');
    // Reduce-scatter, broadcast, barrier.
    std::vector<float> in(6, static_cast<float>(rank + 1));
    std::vector<float> out(2);
    ASSERT_TRUE(c.ReduceScatter(in.data(), out.data(), std::vector<int64_t>{2, 2, 2},
                                ReduceOp::kMean)
                    .ok());
    EXPECT_EQ(out[0], 2.0f);
    std::vector<char> b(100, rank == 1 ? 'x' : 'y');
    ASSERT_TRUE(c.Broadcast(b.data(), 100, 1).ok());
    EXPECT_EQ(b[99], 'x');
    ASSERT_TRUE(c.Barrier().ok());
  });
}

TEST(CommunicatorTest, PointToPointAndCounters) {
  Group g = MakeTransports(2);
  RunGroup(g, [](int rank, Communicator& c) {
    std::vector<char> buf(1 << 20, static_cast<char>(rank));
    std::vector<char> in(1 << 20);
    const int peer = 1 - rank;
    auto r = c.RecvAsync(peer, 77, in.data(), in.size());
    ASSERT_TRUE(r.ok()) << r.status();
    auto s = c.SendAsync(peer, 77, buf.data(), buf.size());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Wait().ok());
    ASSERT_TRUE((*r)->Wait().ok());
    EXPECT_EQ(in[12345], static_cast<char>(peer));
    ByteCounters counters = c.counters();
    EXPECT_EQ(counters[CollectiveKind::kPointToPoint].bytes_sent, 1 << 20);
    EXPECT_EQ(counters[CollectiveKind::kPointToPoint].bytes_received, 1 << 20);
    EXPECT_EQ(counters[CollectiveKind::kPointToPoint].operations, 2);
    // A receive of the wrong size names the peer.
    if (rank == 0) {
      char small[4];
      auto bad = c.RecvAsync(1, 5, small, 4);
      ASSERT_TRUE(bad.ok());
      absl::Status st = (*bad)->Wait();
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st;
    } else {
      char big[8] = {};
      auto sent = c.SendAsync(0, 5, big, 8);
      ASSERT_TRUE(sent.ok());
      (*sent)->Wait().IgnoreError();
    }
  });
}

TEST(CommunicatorTest, AsyncAllGatherOverlapsCaller) {
  Group g = MakeTransports(2);
  RunGroup(g, [](int rank, Communicator& c) {
    std::vector<int64_t> sizes = {1 << 20, 1 << 19};
    std::vector<char> send(sizes[rank], static_cast<char>(rank + 1));
    std::vector<char> recv(sizes[0] + sizes[1]);
    auto h = c.AllGatherVAsync(send.data(), sizes[rank], recv.data(), sizes);
    ASSERT_TRUE(h.ok()) << h.status();
    std::fill(send.begin(), send.end(), 0);  // send may be reused at once
    std::vector<float> x(1000, 1.0f);
    ASSERT_TRUE(c.AllReduce(x.data(), 1000, ReduceOp::kSum).ok());  // queued behind it
    ASSERT_TRUE((*h)->Wait().ok());
    EXPECT_EQ(recv[0], 1);
    EXPECT_EQ(recv[sizes[0]], 2);
    EXPECT_EQ(x[999], 2.0f);
  });
}

TEST(CommunicatorTest, WrongTokenIsRejected) {
  Group g = MakeTransports(2);
  std::thread good([&] {
    CommunicatorOptions o = Options(g, 1);
    o.timeout = absl::Seconds(2);
    auto c = Communicator::Create(g.transports[1].get(), o);
    // Never joined by a real rank 0: times out.
    EXPECT_FALSE(c.ok());
  });
  CommunicatorOptions bad = Options(g, 0);
  bad.secret_token = "wrong";
  bad.timeout = absl::Seconds(3);
  auto c = Communicator::Create(g.transports[0].get(), bad);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied) << c.status();
  EXPECT_NE(c.status().message().find("wrong secret"), std::string::npos) << c.status();
  good.join();
}

// Ranks whose schedules differ would wait for messages the other never
// sends: every AlgorithmSettings field is in the handshake's fingerprint.
TEST(CommunicatorTest, DifferentAlgorithmSettingsAreRejected) {
  Group g = MakeTransports(2);
  std::thread acceptor([&] {
    CommunicatorOptions o = Options(g, 1);
    o.timeout = absl::Seconds(2);
    EXPECT_FALSE(Communicator::Create(g.transports[1].get(), o).ok());
  });
  CommunicatorOptions dialer = Options(g, 0);
  dialer.algorithms.ring_receive_depth = 3;
  dialer.timeout = absl::Seconds(3);
  auto c = Communicator::Create(g.transports[0].get(), dialer);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied) << c.status();
  EXPECT_NE(c.status().message().find("different algorithm settings"), std::string::npos)
      << c.status();
  acceptor.join();
}

// Plays rank 1 by hand on a bare transport: records the hello a real rank 0
// sends and answers with an accept whose proof is made with another secret.
class ImpostorAcceptor final : public HelloHandler {
 public:
  Verdict OnHello(EndpointId, const std::string&, const HelloMessage& hello) override {
    absl::MutexLock lock(&mu_);
    hellos_.push_back(hello);
    const std::string nonce(kHandshakeNonceBytes, 'i');
    return AcceptingVerdict(
        hello, /*acceptor_rank=*/1, nonce,
        HandshakeProof(HandshakeSide::kAcceptor, "not-the-secret",
                       {.job_id = hello.job_id, .generation = hello.generation,
                        .world_size = hello.world_size,
                        .settings_fingerprint = hello.settings_fingerprint, .dialer_rank = 0,
                        .acceptor_rank = 1, .dialer_nonce = hello.nonce, .acceptor_nonce = nonce}));
  }
  bool OnConfirm(EndpointId, const std::string&, absl::StatusOr<HelloMessage> confirm) override {
    absl::MutexLock lock(&mu_);
    confirms_.push_back(std::move(confirm));
    return false;
  }
  std::vector<HelloMessage> hellos() {
    absl::MutexLock lock(&mu_);
    return hellos_;
  }
  std::vector<absl::StatusOr<HelloMessage>> confirms() {
    absl::MutexLock lock(&mu_);
    return confirms_;
  }

 private:
  absl::Mutex mu_;
  std::vector<HelloMessage> hellos_;
  std::vector<absl::StatusOr<HelloMessage>> confirms_;
};

TEST(CommunicatorTest, TheSecretNeverCrossesTheWireAndAnImpostorIsRefused) {
  Group g = MakeTransports(2);
  CommunicatorOptions o = Options(g, 0);
  o.secret_token = "the-real-secret-0123456789";
  o.timeout = absl::Seconds(5);
  ImpostorAcceptor impostor;
  ASSERT_TRUE(g.transports[1]->RegisterHelloHandler(o.job_id, o.generation, &impostor).ok());
  auto c = Communicator::Create(g.transports[0].get(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied) << c.status();
  EXPECT_NE(c.status().message().find("wrong secret"), std::string::npos) << c.status();
  std::vector<HelloMessage> hellos = impostor.hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].nonce.size(), kHandshakeNonceBytes);
  EXPECT_TRUE(hellos[0].proof.empty());  // the dialer proves nothing before the acceptor
  absl::StatusOr<HelloMessage::Bytes> wire = hellos[0].Serialize();
  ASSERT_TRUE(wire.ok());
  EXPECT_EQ(absl::string_view(wire->data(), wire->size()).find(o.secret_token),
            absl::string_view::npos);
  // It told the impostor why, with no proof of its own.
  for (int i = 0; i < 200 && impostor.confirms().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  std::vector<absl::StatusOr<HelloMessage>> confirms = impostor.confirms();
  ASSERT_EQ(confirms.size(), 1u);
  ASSERT_TRUE(confirms[0].ok()) << confirms[0].status();
  EXPECT_EQ(confirms[0]->type, HelloType::kReject);
  EXPECT_TRUE(confirms[0]->proof.empty());
  EXPECT_NE(confirms[0]->reason.find("wrong secret"), std::string::npos);
  g.transports[1]->UnregisterHelloHandler(o.job_id, o.generation);
}

TEST(CommunicatorTest, GenerationsDoNotMix) {
  Group g = MakeTransports(2);
  // Generation 1 and 2 side by side on the same transports: a message sent on
  // generation 1 is never received by generation 2.
  absl::Notification rank1_done;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto old_gen = Communicator::Create(g.transports[r].get(), Options(g, r, 1));
      ASSERT_TRUE(old_gen.ok()) << old_gen.status();
      CommunicatorOptions o = Options(g, r, 2);
      o.timeout = absl::Seconds(2);
      auto new_gen = Communicator::Create(g.transports[r].get(), o);
      ASSERT_TRUE(new_gen.ok()) << new_gen.status();
      int value = 42;
      if (r == 0) {
        auto s = (*old_gen)->SendAsync(1, 9, &value, sizeof(value));
        ASSERT_TRUE((*s)->Wait().ok());
        rank1_done.WaitForNotification();
      } else {
        int got = 0;
        auto h = (*new_gen)->RecvAsync(0, 9, &got, sizeof(got));
        absl::Status st = (*h)->Wait();
        EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;  // timed out
        EXPECT_NE(st.message().find("timed out"), std::string::npos) << st;
        EXPECT_EQ(got, 0);
        auto h2 = (*old_gen)->RecvAsync(0, 9, &got, sizeof(got));
        EXPECT_TRUE((*h2)->Wait().ok());
        EXPECT_EQ(got, 42);
        rank1_done.Notify();
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(CommunicatorTest, DepartedPeer) {
  // Rank 1 sends, then leaves cleanly. What it sent can still be received;
  // anything more fails at once, naming it, and so does the next collective.
  Group g = MakeTransports(2);
  absl::Notification rank1_gone;
  std::thread leaver([&] {
    auto c = Communicator::Create(g.transports[1].get(), Options(g, 1));
    ASSERT_TRUE(c.ok()) << c.status();
    int value = 7;
    auto s = (*c)->SendAsync(0, 1, &value, sizeof(value));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Wait().ok());
    s->reset();
    c->reset();  // goodbye
    rank1_gone.Notify();
  });
  auto c = Communicator::Create(g.transports[0].get(), Options(g, 0));
  ASSERT_TRUE(c.ok()) << c.status();
  rank1_gone.WaitForNotification();
  int got = 0;
  auto r = (*c)->RecvAsync(1, 1, &got, sizeof(got));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->Wait().ok());
  EXPECT_EQ(got, 7);
  auto never = (*c)->RecvAsync(1, 2, &got, sizeof(got));
  ASSERT_TRUE(never.ok());
  absl::Status st = (*never)->Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st;
  float x = 1;
  st = (*c)->AllReduce(&x, 1, ReduceOp::kSum);
  EXPECT_NE(st.message().find("left the communicator after 0 collectives"), std::string::npos)
      << st;
  leaver.join();
}

TEST(CommunicatorTest, WorldSizeOne) {
  auto t = LoopbackTransport();
  ASSERT_TRUE(t.ok());
  CommunicatorOptions o;
  o.peer_addresses = {(*t)->address()};
  o.secret_token = "x";
  auto c = Communicator::Create(t->get(), o);
  ASSERT_TRUE(c.ok()) << c.status();
  float x[3] = {1, 2, 3};
  ASSERT_TRUE((*c)->AllReduce(x, 3, ReduceOp::kMean).ok());
  EXPECT_EQ(x[2], 3.0f);
  char s[2] = {'a', 'b'}, r[2];
  ASSERT_TRUE((*c)->AllGatherV(s, 2, r, std::vector<int64_t>{2}).ok());
  EXPECT_EQ(r[1], 'b');
  ASSERT_TRUE((*c)->Barrier().ok());
  EXPECT_EQ((*c)->counters().total_sent(), 0);
  EXPECT_EQ((*c)->counters()[CollectiveKind::kAllReduce].operations, 1);
}

TEST(CommunicatorTest, InvalidArgumentsFailFast) {
  auto t = LoopbackTransport();
  ASSERT_TRUE(t.ok());
  CommunicatorOptions o;
  o.world_size = 2;
  o.peer_addresses = {(*t)->address()};
  o.secret_token = "x";
  EXPECT_EQ(Communicator::Create(t->get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.peer_addresses = {(*t)->address(), "nonsense"};
  EXPECT_EQ(Communicator::Create(t->get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.peer_addresses = {(*t)->address(), "127.0.0.1:1"};
  o.secret_token = "";
  EXPECT_EQ(Communicator::Create(t->get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::comm
