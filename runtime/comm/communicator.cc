// Communicator: creation, connecting to the peers (hello both ways),
// destruction. Operations are in communicator_ops.cc, failure handling in
// communicator_failure.cc.
#include "runtime/comm/communicator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/base/host_port.h"
#include "runtime/comm/communicator_internal.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {
namespace {

// Both sides' refusal when a proof does not verify: the two processes hold
// different secrets (or one is a stranger).
constexpr char kWrongSecret[] =
    "wrong secret (its handshake proof does not verify: not a member of this job's generation)";

constexpr absl::Duration kMaxConnectBackoff = absl::Milliseconds(500);

absl::Status ValidateOptions(const CommunicatorOptions& o) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions: ", why));
  };
  if (o.world_size < 1 || o.world_size > kMaxWorldSize) {
    return bad(absl::StrCat("world_size ", o.world_size, " outside [1, ", kMaxWorldSize, "]"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return bad(absl::StrCat("rank ", o.rank, " outside [0, ", o.world_size, ")"));
  }
  if (static_cast<int>(o.peer_addresses.size()) != o.world_size) {
    return bad(absl::StrCat("peer_addresses has ", o.peer_addresses.size(),
                            " entries; world_size is ", o.world_size));
  }
  for (int r = 0; r < o.world_size; ++r) {
    if (r == o.rank) continue;
    if (absl::StatusOr<HostPort> hp = ParseHostPort(o.peer_addresses[r]); !hp.ok()) {
      return bad(absl::StrCat("peer_addresses[", r, "]: ", hp.status().message()));
    }
  }
  if (o.secret_token.empty()) return bad("secret_token is empty");
  if (o.secret_token.size() > kMaxSecretBytes) {
    return bad(absl::StrCat("secret_token longer than ", kMaxSecretBytes, " bytes"));
  }
  if (o.job_id.size() > kMaxJobIdBytes) {
    return bad(absl::StrCat("job_id longer than ", kMaxJobIdBytes, " bytes"));
  }
  if (o.timeout <= absl::ZeroDuration()) return bad("timeout must be positive");
  return ValidateSettings(o.algorithms);
}

// Everything a matching peer shares; a process without the token cannot
// compute it, so it cannot produce tags our receives match.
uint16_t TagKey(const CommunicatorOptions& o) {
  uint64_t secret = Fingerprint64(o.secret_token, Fingerprint64(o.job_id));
  return CommunicatorKey(secret ^ SettingsFingerprint(o), o.generation);
}

}  // namespace

uint64_t SettingsFingerprint(const CommunicatorOptions& o) {
  return Fingerprint64(
      absl::StrCat("world=", o.world_size, ";", DescribeSettings(o.algorithms)));
}

CollectiveHandle::~CollectiveHandle() {
  if (state_ != nullptr) state_->Release();
}

absl::Status CollectiveHandle::Wait() { return state_->Wait(); }

bool CollectiveHandle::Test() { return state_->Test(); }

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    Transport* transport, const CommunicatorOptions& options) {
  if (transport == nullptr) return absl::InvalidArgumentError("transport is null");
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::unique_ptr<Communicator> communicator(new Communicator(transport, options));
  if (absl::Status s = communicator->Connect(); !s.ok()) return s;
  return communicator;
}

Communicator::Communicator(Transport* transport, const CommunicatorOptions& options)
    : transport_(transport),
      options_(options),
      settings_fingerprint_(SettingsFingerprint(options)),
      tag_key_(TagKey(options)),
      life_(std::make_shared<internal::LifeToken>()) {
  {
    absl::MutexLock lock(&life_->mu);
    life_->communicator = this;
  }
  absl::MutexLock lock(&mu_);
  peers_.resize(options_.world_size);
  for (int r = 0; r < options_.world_size; ++r) {
    peers_[r].address = options_.peer_addresses[r];
    peers_[r].dials = r > options_.rank;
  }
}

std::string Communicator::DescribePeer(int rank) const {
  if (rank < 0 || rank >= options_.world_size) return absl::StrCat("rank ", rank);
  return absl::StrCat("rank ", rank, " (", options_.peer_addresses[rank], ")");
}

absl::Status Communicator::DecorateError(absl::string_view what,
                                         const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat("job '", options_.job_id, "' generation ", options_.generation,
                                   " rank ", options_.rank, ": ", what,
                                   what.empty() ? "" : ": ", status.message()));
}

HelloMessage Communicator::MakeHello(HelloType type) const {
  HelloMessage hello;
  hello.type = type;
  hello.generation = options_.generation;
  hello.rank = options_.rank;
  hello.world_size = options_.world_size;
  hello.settings_fingerprint = settings_fingerprint_;
  hello.job_id = options_.job_id;
  return hello;
}

HandshakeTranscript Communicator::Transcript(int dialer_rank, int acceptor_rank,
                                             const std::string& dialer_nonce,
                                             const std::string& acceptor_nonce) const {
  return {.job_id = options_.job_id,
          .generation = options_.generation,
          .world_size = options_.world_size,
          .settings_fingerprint = settings_fingerprint_,
          .dialer_rank = dialer_rank,
          .acceptor_rank = acceptor_rank,
          .dialer_nonce = dialer_nonce,
          .acceptor_nonce = acceptor_nonce};
}

absl::Status Communicator::CheckPeerHello(int expected_rank, const HelloMessage& hello) const {
  if (hello.job_id != options_.job_id) {
    return absl::PermissionDeniedError(absl::StrCat("job '", hello.job_id, "'"));
  }
  if (hello.generation != options_.generation) {
    return absl::PermissionDeniedError(absl::StrCat("generation ", hello.generation,
                                                    ", expected ", options_.generation));
  }
  if (hello.world_size != options_.world_size) {
    return absl::PermissionDeniedError(absl::StrCat(
        "world size ", hello.world_size, ", expected ", options_.world_size));
  }
  if (hello.rank != expected_rank) {
    return absl::PermissionDeniedError(absl::StrCat("it is rank ", hello.rank));
  }
  if (hello.settings_fingerprint != settings_fingerprint_) {
    return absl::PermissionDeniedError(
        "different algorithm settings (AlgorithmSettings)");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Connecting.

absl::Status Communicator::Connect() {
  if (options_.world_size == 1) {
    absl::MutexLock lock(&mu_);
    connecting_ = false;
  } else {
    if (absl::Status s =
            transport_->RegisterHelloHandler(options_.job_id, options_.generation, this);
        !s.ok()) {
      return s;
    }
    registered_ = true;
    const absl::Time deadline = absl::Now() + options_.timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      if (!fatal_connect_error_.ok()) return fatal_connect_error_;
      const absl::Time now = absl::Now();
      bool all_connected = true;
      absl::Time wake = deadline;
      for (int r = 0; r < options_.world_size; ++r) {
        if (r == options_.rank) continue;
        Peer& p = peers_[r];
        if (p.state == LinkState::kConnected) continue;
        all_connected = false;
        if (!p.dials || p.state != LinkState::kIdle) continue;
        if (now >= p.retry_at) {
          StartConnectAttempt(r);
        } else {
          wake = std::min(wake, p.retry_at);
        }
      }
      if (all_connected) break;
      if (now >= deadline) {
        std::string missing;
        for (int r = 0; r < options_.world_size; ++r) {
          const Peer& p = peers_[r];
          if (r == options_.rank || p.state == LinkState::kConnected) continue;
          absl::StrAppend(&missing, missing.empty() ? "" : "; ", DescribePeer(r),
                          p.dials ? (p.last_error.ok() ? ": no answer"
                                                       : absl::StrCat(": ", p.last_error.message()))
                                  : ": it never connected to us");
        }
        return DecorateError("", absl::DeadlineExceededError(absl::StrCat(
                                     "could not connect to every peer within ",
                                     absl::FormatDuration(options_.timeout),
                                     ": ", missing)));
      }
      const uint64_t seen = connect_events_;
      auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return connect_events_ != seen;
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), wake);
    }
    for (int r = 0; r < options_.world_size; ++r) {
      if (r != options_.rank) PostControlRecv(r);
    }
    connecting_ = false;
  }
  LOG(INFO) << "job '" << options_.job_id << "' generation " << options_.generation << " rank "
            << options_.rank << "/" << options_.world_size << ": data plane connected";
  executor_ = std::thread([this] { ExecutorLoop(); });
  return absl::OkStatus();
}

void Communicator::StartConnectAttempt(int peer) {
  Peer& p = peers_[peer];
  absl::StatusOr<std::string> nonce = NewHandshakeNonce();
  if (!nonce.ok()) {
    fatal_connect_error_ = DecorateError("", nonce.status());
    return;
  }
  p.state = LinkState::kConnecting;
  p.dialer_nonce = *std::move(nonce);
  HelloMessage hello = MakeHello(HelloType::kHello);
  hello.nonce = p.dialer_nonce;
  std::shared_ptr<internal::LifeToken> life = life_;
  Transport* transport = transport_;
  transport_->Connect(
      p.address, hello,
      [life, transport, peer](EndpointId endpoint, absl::StatusOr<HelloMessage> reply) {
        bool delivered = false;
        internal::WithCommunicator(life, [&](Communicator* c) {
          delivered = true;
          c->OnConnectResult(peer, endpoint, std::move(reply));
        });
        if (!delivered && endpoint != 0) transport->Close(endpoint);
      });
}

void Communicator::OnConnectResult(int peer, EndpointId endpoint,
                                   absl::StatusOr<HelloMessage> reply) {
  absl::MutexLock lock(&mu_);
  ++connect_events_;
  Peer& p = peers_[peer];
  if (!connecting_ || p.state != LinkState::kConnecting) {
    if (endpoint != 0) transport_->Close(endpoint);
    return;
  }
  if (!reply.ok()) {
    // Most often the peer is not listening yet: try again shortly.
    VLOG(1) << "connecting to " << DescribePeer(peer) << ": " << reply.status();
    p.state = LinkState::kIdle;
    p.last_error = reply.status();
    p.retry_at = absl::Now() + p.backoff;
    p.backoff = std::min(p.backoff * 2, kMaxConnectBackoff);
    return;
  }
  if (reply->type == HelloType::kReject) {
    transport_->Close(endpoint);
    fatal_connect_error_ = DecorateError(
        "", absl::PermissionDeniedError(absl::StrCat(DescribePeer(peer),
                                                     " rejected our connection: ",
                                                     reply->reason)));
    LOG(ERROR) << fatal_connect_error_.message();
    return;
  }
  if (absl::Status s = reply->type == HelloType::kAccept
                           ? CheckPeerHello(peer, *reply)
                           : absl::PermissionDeniedError("its answer is not an accept");
      !s.ok()) {
    transport_->Close(endpoint);
    fatal_connect_error_ = DecorateError(
        "", absl::PermissionDeniedError(absl::StrCat("the process at ", p.address,
                                                     " is not rank ", peer,
                                                     " of this communicator: ", s.message())));
    LOG(ERROR) << fatal_connect_error_.message();
    return;
  }
  const HandshakeTranscript transcript = Transcript(options_.rank, peer, p.dialer_nonce,
                                                    reply->nonce);
  if (!ConstantTimeEquals(reply->proof,
                          HandshakeProof(HandshakeSide::kAcceptor, options_.secret_token,
                                         transcript))) {
    // Tell it why (it logs the refusal), then hang up.
    HelloMessage refusal = MakeHello(HelloType::kReject);
    refusal.reason = kWrongSecret;
    transport_->SendHandshake(endpoint, refusal);
    transport_->Close(endpoint, /*flush_first=*/true);
    fatal_connect_error_ = DecorateError(
        "", absl::PermissionDeniedError(absl::StrCat(
                "the process at ", p.address, " claiming rank ", peer, ": ", kWrongSecret)));
    LOG(ERROR) << fatal_connect_error_.message();
    return;
  }
  HelloMessage confirm = MakeHello(HelloType::kConfirm);
  confirm.proof = HandshakeProof(HandshakeSide::kDialer, options_.secret_token, transcript);
  transport_->SendHandshake(endpoint, confirm);
  AdoptEndpoint(peer, endpoint, LinkToken(options_.secret_token, transcript));
}

void Communicator::AdoptEndpoint(int peer, EndpointId endpoint, uint64_t link_token) {
  Peer& p = peers_[peer];
  transport_->AuthorizeEndpoint(
      endpoint, {.key = tag_key_, .source_rank = peer, .link_token = link_token});
  p.endpoint = endpoint;
  p.state = LinkState::kConnected;
  p.failed = false;
  std::shared_ptr<internal::LifeToken> life = life_;
  transport_->SetErrorHandler(endpoint, [life, peer](absl::Status error) {
    internal::WithCommunicator(life, [&](Communicator* c) { c->OnPeerError(peer, error); });
  });
}

HelloHandler::Verdict Communicator::OnHello(EndpointId endpoint, const std::string& peer_address,
                                            const HelloMessage& hello) {
  absl::MutexLock lock(&mu_);
  ++connect_events_;
  auto reject = [&](const std::string& reason) {
    Verdict v;
    v.reply = MakeHello(HelloType::kReject);
    v.reply.reason = reason;
    return v;
  };
  if (hello.world_size != options_.world_size) {
    return reject(absl::StrCat("world size ", hello.world_size, " but this rank has ",
                               options_.world_size));
  }
  if (hello.settings_fingerprint != settings_fingerprint_) {
    return reject("different algorithm settings (AlgorithmSettings)");
  }
  if (hello.rank >= options_.rank) {
    return reject(absl::StrCat("rank ", hello.rank, " must wait for rank ", options_.rank,
                               " to connect (the lower rank dials)"));
  }
  // Whether the claimed rank is already connected, or the communicator
  // formed, is said only to a dialer that proved the secret (OnConfirm): a
  // stranger always ends at the proof.
  int unconfirmed = 0;
  for (const auto& [id, pending] : unconfirmed_) unconfirmed += pending.rank == hello.rank;
  if (unconfirmed >= kMaxUnconfirmedPerRank) {
    return reject(absl::StrCat(unconfirmed, " connections claiming rank ", hello.rank,
                               " have not proven the secret yet"));
  }
  absl::StatusOr<std::string> nonce = NewHandshakeNonce();
  if (!nonce.ok()) return reject(std::string(nonce.status().message()));
  const HandshakeTranscript transcript =
      Transcript(hello.rank, options_.rank, hello.nonce, *nonce);
  unconfirmed_[endpoint] = {
      .rank = hello.rank,
      .expected_proof = HandshakeProof(HandshakeSide::kDialer, options_.secret_token, transcript),
      .link_token = LinkToken(options_.secret_token, transcript)};
  Verdict v;
  v.accept = true;
  v.reply = MakeHello(HelloType::kAccept);
  v.reply.nonce = *std::move(nonce);
  v.reply.proof = HandshakeProof(HandshakeSide::kAcceptor, options_.secret_token, transcript);
  return v;
}

bool Communicator::OnConfirm(EndpointId endpoint, const std::string& peer_address,
                             absl::StatusOr<HelloMessage> confirm) {
  absl::MutexLock lock(&mu_);
  ++connect_events_;
  auto it = unconfirmed_.find(endpoint);
  if (it == unconfirmed_.end()) return false;
  const UnconfirmedHello pending = std::move(it->second);
  unconfirmed_.erase(it);
  auto refuse = [&](absl::string_view why) {
    LOG(WARNING) << "data plane: rejected connection from " << peer_address << " claiming "
                 << DescribePeer(pending.rank) << " of job '" << options_.job_id
                 << "' generation " << options_.generation << ": " << why;
    return false;
  };
  // Whatever ends an unproven attempt (a bad proof, the dialer's refusal, or
  // its hanging up first), the log says the secret was never proven.
  auto unproven = [&](absl::string_view why) {
    return refuse(absl::StrCat("it never proved the job's secret (", why, ")"));
  };
  if (!confirm.ok()) return unproven(confirm.status().message());
  if (confirm->type == HelloType::kReject) return unproven(confirm->reason);
  if (confirm->type != HelloType::kConfirm ||
      !ConstantTimeEquals(confirm->proof, pending.expected_proof)) {
    return unproven(kWrongSecret);
  }
  Peer& p = peers_[pending.rank];
  if (!connecting_) return refuse("this communicator is already formed");
  if (p.state == LinkState::kConnected && !p.failed) {
    return refuse(absl::StrCat("rank ", pending.rank, " is already connected"));
  }
  if (p.state == LinkState::kConnected) transport_->Close(p.endpoint);  // replaced
  VLOG(1) << "accepted " << DescribePeer(pending.rank) << " from " << peer_address;
  AdoptEndpoint(pending.rank, endpoint, pending.link_token);
  return true;
}

// ---------------------------------------------------------------------------
// Destruction.

Communicator::~Communicator() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  if (executor_.joinable()) executor_.join();  // runs what is queued, then stops
  bool formed;
  {
    absl::MutexLock lock(&mu_);
    formed = !connecting_ && broken_.ok();
  }
  if (formed && options_.world_size > 1) SayGoodbye();
  if (registered_) transport_->UnregisterHelloHandler(options_.job_id, options_.generation);
  {
    absl::MutexLock lock(&life_->mu);  // waits for a callback in progress
    life_->communicator = nullptr;
  }
  // No callback reaches us any more; release what UCX still holds.
  std::vector<std::shared_ptr<MessageRequest>> receives;
  std::vector<EndpointId> endpoints;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, pending] : pending_) {
      if (pending.request->is_receive()) receives.push_back(pending.request);
    }
    for (Peer& p : peers_) {
      if (p.control_recv != nullptr) receives.push_back(p.control_recv);
      if (p.endpoint != 0) endpoints.push_back(p.endpoint);
      p.endpoint = 0;
    }
  }
  for (auto& r : receives) transport_->Cancel(r);
  for (EndpointId e : endpoints) transport_->Close(e);
  if (options_.world_size > 1) transport_->DiscardUnreceived(tag_key_);
  // Control receives write into peers_: make sure UCX has let go of them.
  for (auto& r : receives) r->WaitUntil(absl::Now() + absl::Seconds(5));
}

}  // namespace corescape::comm
