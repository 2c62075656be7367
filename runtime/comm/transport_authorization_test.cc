// Data messages between two real transports (UCX on loopback) over one
// endpoint adopted by a hello handler: what the endpoint was adopted for is
// delivered (posted first or held until posted, eager or rendezvous, size
// checked); a tag claiming another sender rank or communicator, or a wrong
// link token, is dropped and counted as forged.
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/comm/hello_handler_test_util.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/message_tag.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {
namespace {

constexpr uint16_t kKey = 0x1234;
constexpr uint64_t kToken = 0x5eed5eed5eed5eedull;

// Accepts a hello claiming rank 0 and adopts the endpoint on confirmation,
// authorizing it for kKey, rank 0 and kToken.
class AdoptRankZero : public HelloHandler {
 public:
  explicit AdoptRankZero(Transport* transport) : transport_(transport) {}
  Verdict OnHello(EndpointId, const std::string&, const HelloMessage& hello) override {
    return AcceptingVerdict(hello, /*acceptor_rank=*/1, std::string(kHandshakeNonceBytes, 'a'),
                            std::string(kHandshakeProofBytes, 'p'));
  }
  bool OnConfirm(EndpointId endpoint, const std::string&,
                 absl::StatusOr<HelloMessage> confirm) override {
    if (!confirm.ok() || confirm->type != HelloType::kConfirm) return false;
    transport_->AuthorizeEndpoint(endpoint,
                                  {.key = kKey, .source_rank = 0, .link_token = kToken});
    adopted_.Notify();
    return true;
  }
  bool WaitAdopted() { return adopted_.WaitForNotificationWithTimeout(absl::Seconds(20)); }

 private:
  Transport* transport_;
  absl::Notification adopted_;
};

class TransportAuthorizationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TransportOptions options;
    options.listen_address = "127.0.0.1:0";
    auto receiver = Transport::Create(options);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = *std::move(receiver);
    auto sender = Transport::Create(options);
    ASSERT_TRUE(sender.ok()) << sender.status();
    sender_ = *std::move(sender);
    handler_ = std::make_unique<AdoptRankZero>(receiver_.get());
    ASSERT_TRUE(receiver_->RegisterHelloHandler("j", 1, handler_.get()).ok());

    HelloMessage hello;
    hello.generation = 1;
    hello.world_size = 2;
    hello.job_id = "j";
    hello.nonce = std::string(kHandshakeNonceBytes, 'n');
    absl::Notification answered;
    sender_->Connect(receiver_->address(), hello,
                     [&](EndpointId e, absl::StatusOr<HelloMessage> reply) {
                       EXPECT_TRUE(reply.ok()) << reply.status();
                       endpoint_ = e;
                       answered.Notify();
                     });
    ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(20)));
    ASSERT_NE(endpoint_, 0u);
    Authorize(kToken);
    HelloMessage confirm = hello;
    confirm.type = HelloType::kConfirm;
    confirm.nonce.clear();
    confirm.proof = std::string(kHandshakeProofBytes, 'd');
    sender_->SendHandshake(endpoint_, confirm);
    ASSERT_TRUE(handler_->WaitAdopted());
  }

  void TearDown() override {
    if (sender_ != nullptr && endpoint_ != 0) sender_->Close(endpoint_);
    if (receiver_ != nullptr) receiver_->UnregisterHelloHandler("j", 1);
    sender_.reset();
    receiver_.reset();
  }

  // What the sender's side of the endpoint sends with (its own choice: a
  // member would use the real token).
  void Authorize(uint64_t token) {
    sender_->AuthorizeEndpoint(endpoint_, {.key = kKey, .source_rank = 1, .link_token = token});
  }

  void SendAndWait(uint64_t tag, const std::vector<float>& data) {
    auto send = sender_->Send(endpoint_, tag, data.data(),
                              static_cast<int64_t>(data.size() * sizeof(float)));
    ASSERT_TRUE(sender_->WaitFor(*send, absl::Now() + absl::Seconds(20)));
    ASSERT_TRUE(send->status().ok()) << send->status();
  }

  // Waits until the receiver has counted `forged` forged drops.
  void WaitForForged(uint64_t forged) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (receiver_->dropped_messages().count(DropReason::kForged) < forged &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(receiver_->dropped_messages().count(DropReason::kForged), forged);
  }

  std::unique_ptr<Transport> receiver_;
  std::unique_ptr<Transport> sender_;
  std::unique_ptr<AdoptRankZero> handler_;
  EndpointId endpoint_ = 0;
};

std::vector<float> Iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_F(TransportAuthorizationTest, DeliversWhatTheEndpointWasAdoptedFor) {
  for (size_t count : {size_t{16}, size_t{1} << 20}) {  // eager, rendezvous (4 MiB)
    const uint64_t first = CollectiveTag(kKey, 0, CollectiveKind::kAllReduce, count, 0);
    const uint64_t second = CollectiveTag(kKey, 0, CollectiveKind::kAllReduce, count, 1);
    // Posted before the message arrives.
    std::vector<float> posted(count, -1);
    auto receive = receiver_->Recv(first, posted.data(), count * sizeof(float));
    const std::vector<float> a = Iota(count, 1), b = Iota(count, 1000);
    SendAndWait(first, a);
    ASSERT_TRUE(receiver_->WaitFor(*receive, absl::Now() + absl::Seconds(20)));
    ASSERT_TRUE(receive->status().ok()) << receive->status();
    EXPECT_EQ(receive->transferred_bytes(), static_cast<int64_t>(count * sizeof(float)));
    EXPECT_EQ(posted, a);
    // Arrived (and held) before the receive is posted: a rendezvous send
    // completes only once the receive has fetched its data.
    auto send = sender_->Send(endpoint_, second, b.data(),
                              static_cast<int64_t>(b.size() * sizeof(float)));
    absl::SleepFor(absl::Milliseconds(100));
    std::vector<float> late(count, -1);
    auto held = receiver_->Recv(second, late.data(), count * sizeof(float));
    ASSERT_TRUE(receiver_->WaitFor(*held, absl::Now() + absl::Seconds(20)));
    ASSERT_TRUE(held->status().ok()) << held->status();
    EXPECT_EQ(late, b);
    ASSERT_TRUE(sender_->WaitFor(*send, absl::Now() + absl::Seconds(20)));
    EXPECT_TRUE(send->status().ok()) << send->status();
  }
  EXPECT_EQ(receiver_->dropped_messages().total(), 0u);
}

TEST_F(TransportAuthorizationTest, ALongerMessageFailsTheReceiveWithDataLoss) {
  const uint64_t tag = PointToPointTag(kKey, 0, 7);
  std::vector<float> small(2);
  auto receive = receiver_->Recv(tag, small.data(), small.size() * sizeof(float));
  SendAndWait(tag, Iota(4, 1));
  ASSERT_TRUE(receiver_->WaitFor(*receive, absl::Now() + absl::Seconds(20)));
  EXPECT_EQ(receive->status().code(), absl::StatusCode::kDataLoss) << receive->status();
}

TEST_F(TransportAuthorizationTest, AnotherRankKeyOrTokenIsDroppedAsForged) {
  const std::vector<float> evil = Iota(4, 666);
  // The endpoint was adopted as rank 0's: it may not speak for rank 1, nor
  // for another communicator, nor without the link's token.
  SendAndWait(PointToPointTag(kKey, 1, 7), evil);
  SendAndWait(PointToPointTag(kKey + 1, 0, 7), evil);
  Authorize(kToken + 1);
  SendAndWait(PointToPointTag(kKey, 0, 7), evil);
  WaitForForged(3);
  // None of them is waiting for a receive: a genuine message is the first
  // and only one a receive for the tag gets.
  Authorize(kToken);
  std::vector<float> got(4, -1);
  auto receive = receiver_->Recv(PointToPointTag(kKey, 0, 7), got.data(), 16);
  const std::vector<float> genuine = Iota(4, 1);
  SendAndWait(PointToPointTag(kKey, 0, 7), genuine);
  ASSERT_TRUE(receiver_->WaitFor(*receive, absl::Now() + absl::Seconds(20)));
  ASSERT_TRUE(receive->status().ok()) << receive->status();
  EXPECT_EQ(got, genuine);
  EXPECT_EQ(receiver_->dropped_messages().count(DropReason::kForged), 3u);
  EXPECT_EQ(receiver_->dropped_messages().count(DropReason::kUnauthenticated), 0u);
}

TEST_F(TransportAuthorizationTest, ACancelledReceiveTakesNothing) {
  const uint64_t tag = PointToPointTag(kKey, 0, 9);
  std::vector<float> first(4, -1), second(4, -1);
  auto cancelled = receiver_->Recv(tag, first.data(), 16);
  receiver_->Cancel(cancelled);
  ASSERT_TRUE(cancelled->WaitUntil(absl::Now() + absl::Seconds(20)));
  EXPECT_EQ(cancelled->status().code(), absl::StatusCode::kCancelled);
  auto receive = receiver_->Recv(tag, second.data(), 16);
  SendAndWait(tag, Iota(4, 5));
  ASSERT_TRUE(receiver_->WaitFor(*receive, absl::Now() + absl::Seconds(20)));
  EXPECT_EQ(second, Iota(4, 5));
  EXPECT_EQ(first, std::vector<float>(4, -1));
}

}  // namespace
}  // namespace corescape::comm
