#include "runtime/attention/disaggregated_core_attention.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/comm/handle_set.h"

namespace corescape::attention {
namespace {

using Handles = comm::HandleSet;
using comm::Post;
using comm::WaitAll;

PlanOptions ParticipantPlanOptions(const DisaggregatedOptions& options) {
  PlanOptions plan;
  plan.servers = options.servers;
  plan.tolerance = options.tolerance;
  plan.planner = options.planner;
  return plan;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DisaggregatedCoreAttention>> DisaggregatedCoreAttention::Create(
    std::unique_ptr<comm::Communicator> communicator, const DisaggregatedOptions& options) {
  if (communicator == nullptr) return absl::InvalidArgumentError("no attention communicator");
  if (options.workers < 1 || options.servers < 1 || options.n_layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("disaggregated attention: ", options.workers,
                                                   " workers, ", options.servers, " servers, ",
                                                   options.n_layers, " layers"));
  }
  if (communicator->world_size() != options.workers + options.servers ||
      communicator->rank() >= options.workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention communicator rank ", communicator->rank(), " of ", communicator->world_size(),
        " does not fit ", options.workers, " workers + ", options.servers, " servers"));
  }
  return std::unique_ptr<DisaggregatedCoreAttention>(
      new DisaggregatedCoreAttention(std::move(communicator), options));
}

DisaggregatedCoreAttention::MicroBatchState::MicroBatchState(int32_t workers, int32_t servers)
    : requests(servers),
      replies(servers),
      send_headers(workers + servers),
      reply_headers(workers + servers) {}

DisaggregatedCoreAttention::DisaggregatedCoreAttention(
    std::unique_ptr<comm::Communicator> communicator, const DisaggregatedOptions& options)
    : communicator_(std::move(communicator)),
      options_(options),
      rank_(communicator_->rank()),
      weights_(VersionedSpeedWeights::Equal(options.servers)),
      planner_(absl::StrCat("attention worker ", rank_), ParticipantPlanOptions(options)) {
  for (auto& state : states_) {
    state = std::make_unique<MicroBatchState>(options.workers, options.servers);
  }
}

DisaggregatedCoreAttention::~DisaggregatedCoreAttention() {
  if (next_micro_batch_ > 0) {
    LOG(INFO) << "attention worker " << rank_ << ": " << planner_.sources().Describe();
  }
  if (states_[0]->in_flight || states_[1]->in_flight) {
    // The caller gave up mid-schedule: the servers are owed a call the
    // other workers may never make, so nobody can end cleanly.
    communicator_->Abort("a worker's attention executor closed with an exchange in flight");
  }
  if (!communicator_->health().ok()) return;
  ExchangeHeader end;
  end.pass = Pass::kEnd;
  end.exchange = exchange_;
  // The servers acknowledge: closing before they have read the end would
  // look to them like a worker leaving mid-job.
  Handles handles;
  std::vector<HeaderBytes>& send_headers = states_[0]->send_headers;
  std::vector<HeaderBytes>& reply_headers = states_[0]->reply_headers;
  for (int32_t s = 0; s < options_.servers; ++s) {
    send_headers[s] = EncodeHeader(end);
    if (!Post(handles, communicator_->RecvAsync(server_rank(s), kReplyHeaderTag,
                                                reply_headers[s].data(), kHeaderBytes))
             .ok() ||
        !Post(handles, communicator_->SendAsync(server_rank(s), kHeaderTag, send_headers[s].data(),
                                                kHeaderBytes))
             .ok()) {
      break;
    }
  }
  if (absl::Status s = WaitAll(handles); !s.ok()) {
    LOG(WARNING) << "could not tell the attention servers this worker is done: " << s;
  }
}

void DisaggregatedCoreAttention::Abort(const std::string& reason) { communicator_->Abort(reason); }

absl::Status DisaggregatedCoreAttention::SetSpeedWeights(VersionedSpeedWeights weights) {
  if (absl::Status s = ValidateSpeedWeights(
          weights.weights, options_.servers,
          absl::StrCat("speed weights version ", weights.version));
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&weights_mu_);
  weights_ = std::move(weights);
  return absl::OkStatus();
}

absl::Status DisaggregatedCoreAttention::OfferShippedPlan(ShippedPlan plan) {
  if (rank_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention worker ", rank_, " got the scheduler's plan of step ", plan.step,
        "; only worker 0 ships plans"));
  }
  shipped_plans_.Offer(std::move(plan));
  return absl::OkStatus();
}

absl::Status DisaggregatedCoreAttention::Fail(absl::Status status) {
  communicator_->Abort(status.message());
  return status;
}

void DisaggregatedCoreAttention::Notify(ExchangeEvent::Kind kind,
                                        const ExchangeHeader& header) const {
  if (options_.on_exchange_event) options_.on_exchange_event(ExchangeEvent{kind, header});
}

ExchangeHeader DisaggregatedCoreAttention::MakeHeader(const MicroBatchState& state, Pass pass,
                                                      int layer,
                                                      const kernels::AttentionShape& shape) const {
  return CallHeader(exchange_, state.micro_batch, state.half, pass, layer, options_.n_layers, shape,
                    options_.keep_qkv_for_backward);
}

absl::Status DisaggregatedCoreAttention::BeginMicroBatch(
    MicroBatchState& state, const kernels::AttentionShape& shape,
    absl::Span<const kernels::AttentionTask> tasks, int64_t rows) {
  auto documents = WholeDocuments(shape, tasks, rows, "disaggregated attention");
  if (!documents.ok()) return documents.status();
  const std::vector<int64_t>& lengths = documents->lengths;
  const std::vector<int64_t>& document_rows = documents->rows;
  state.micro_batch = next_micro_batch_++;
  state.plan.reset();
  state.tasks.assign(tasks.begin(), tasks.end());
  state.rows = rows;
  std::vector<HeaderBytes>& in_headers = state.reply_headers;

  // Tell every other rank this worker's document lengths (worker 0 adds the
  // speed weights everyone plans with, and the scheduler's plan of this
  // micro-batch if it has one); hear the other workers'.
  DocumentsMessage mine;
  mine.lengths = lengths;
  std::optional<ShippedPlanQueue::Found> shipped;
  if (rank_ == 0) {
    absl::MutexLock lock(&weights_mu_);
    mine.weights = weights_;
    if (ship_plans_.load()) shipped = shipped_plans_.FindMatching(lengths);
    if (shipped) mine.plan = shipped->plan;
  }
  ExchangeHeader announce = MakeHeader(state, Pass::kForward, 0, shape);
  const std::vector<int64_t> message = EncodeDocumentsMessage(mine, announce);
  const HeaderBytes announce_bytes = EncodeHeader(announce);
  const int world = communicator_->world_size();
  std::vector<std::vector<int64_t>> all_lengths(options_.workers);
  std::vector<std::vector<int64_t>> messages(options_.workers);
  std::vector<ExchangeHeader> announces(options_.workers);
  Handles receives, sends;
  for (int peer = 0; peer < options_.workers; ++peer) {
    if (peer == rank_) continue;
    if (absl::Status s =
            Post(receives, communicator_->RecvAsync(peer, kDocumentsHeaderTag,
                                                    in_headers[peer].data(), kHeaderBytes));
        !s.ok()) {
      return Fail(s);
    }
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank_) continue;
    absl::Status s = Post(sends, communicator_->SendAsync(peer, kDocumentsHeaderTag,
                                                          announce_bytes.data(), kHeaderBytes));
    if (s.ok() && !message.empty()) {
      s = Post(sends, communicator_->SendAsync(peer, kDocumentsTag, message.data(),
                                               message.size() * sizeof(int64_t)));
    }
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  for (int peer = 0; peer < options_.workers; ++peer) {
    if (peer == rank_) continue;
    const std::string who = absl::StrCat("worker ", communicator_->DescribePeer(peer));
    auto header = DecodeHeader(in_headers[peer], who);
    if (!header.ok()) return Fail(header.status());
    if (absl::Status s = CheckHeaderMatches(announce, *header, who); !s.ok()) return Fail(s);
    auto words = ExpectedDocumentsWords(*header, peer,
                                        DocumentsFormat::Disaggregated(options_.servers), who);
    if (!words.ok()) return Fail(words.status());
    announces[peer] = *header;
    messages[peer].resize(*words);
    if (*words > 0) {
      if (absl::Status s = Post(receives, communicator_->RecvAsync(
                                              peer, kDocumentsTag, messages[peer].data(),
                                              *words * sizeof(int64_t)));
          !s.ok()) {
        return Fail(s);
      }
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(sends); !s.ok()) return Fail(s);
  DocumentsMessage worker0 = rank_ == 0 ? std::move(mine) : DocumentsMessage{};
  for (int peer = 0; peer < options_.workers; ++peer) {
    if (peer == rank_) {
      all_lengths[peer] = lengths;
      continue;
    }
    auto received = DecodeDocumentsMessage(
        messages[peer], announces[peer], DocumentsFormat::Disaggregated(options_.servers),
        absl::StrCat("worker ", communicator_->DescribePeer(peer)));
    if (!received.ok()) return Fail(received.status());
    all_lengths[peer] = std::move(received->lengths);
    if (peer == 0) worker0 = *std::move(received);
  }

  auto plan = planner_.Plan(std::move(all_lengths), worker0, announce);
  if (!plan.ok()) return Fail(plan.status());
  state.plan = *std::move(plan);
  // A plan that did not fit stays queued for the micro-batch it was made for.
  if (shipped && state.plan->source == MicroBatchPlan::Source::kScheduler) {
    shipped_plans_.Consume(shipped->id);
  }
  state.query_rows.resize(options_.servers);
  state.kv_rows.resize(options_.servers);
  for (int32_t s = 0; s < options_.servers; ++s) {
    state.query_rows[s] = WorkerQueryRows(*state.plan, s, rank_, document_rows);
    state.kv_rows[s] = WorkerKvRows(*state.plan, s, rank_, document_rows);
  }
  last_begun_ = &state;
  return absl::OkStatus();
}

absl::Status DisaggregatedCoreAttention::StartExchange(
    MicroBatchState& state, ExchangeHeader header,
    const std::function<int64_t(int32_t)>& request_floats,
    const std::function<void(int32_t, float*)>& fill,
    const std::function<int64_t(int32_t)>& reply_floats,
    std::function<void(int32_t, const float*)> consume) {
  InFlightExchange call;
  call.header = header;
  call.consume = std::move(consume);
  // Receives first: the replies of this half's exchange match them before
  // those of any later exchange with the same server (FIFO per peer and tag).
  for (int32_t s = 0; s < options_.servers; ++s) {
    const int peer = server_rank(s);
    state.replies[s].resize(reply_floats(s));
    absl::Status status =
        Post(call.header_receives,
             communicator_->RecvAsync(peer, kReplyHeaderTag, state.reply_headers[s].data(),
                                      kHeaderBytes));
    if (status.ok() && !state.replies[s].empty()) {
      status = Post(call.payload_receives,
                    communicator_->RecvAsync(peer, kReplyPayloadTag, state.replies[s].data(),
                                             state.replies[s].size() * sizeof(float)));
    }
    if (!status.ok()) return Fail(status);
  }
  for (int32_t s = 0; s < options_.servers; ++s) {
    const int peer = server_rank(s);
    state.requests[s].resize(request_floats(s));
    fill(s, state.requests[s].data());
    header.payload_bytes = static_cast<int64_t>(state.requests[s].size() * sizeof(float));
    state.send_headers[s] = EncodeHeader(header);
    absl::Status status = Post(
        call.sends,
        communicator_->SendAsync(peer, kHeaderTag, state.send_headers[s].data(), kHeaderBytes));
    if (status.ok() && !state.requests[s].empty()) {
      status =
          Post(call.sends, communicator_->SendAsync(peer, kPayloadTag, state.requests[s].data(),
                                                    header.payload_bytes));
    }
    if (!status.ok()) return Fail(status);
  }
  state.in_flight = std::move(call);
  ++exchange_;
  Notify(ExchangeEvent::Kind::kRequestsSent, state.in_flight->header);
  return absl::OkStatus();
}

absl::Status DisaggregatedCoreAttention::FinishExchange(int half, Pass pass) {
  if (half < -1 || half > 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  MicroBatchState& state = *states_[half < 0 ? 0 : half];
  if (!state.in_flight || state.in_flight->header.pass != pass) {
    return absl::FailedPreconditionError(absl::StrCat(
        "disaggregated attention: no ", PassName(pass), " call of half ", half,
        " in flight to finish"));
  }
  // Moved out: however this ends, the exchange is no longer in flight.
  InFlightExchange call = *std::move(state.in_flight);
  state.in_flight.reset();
  const ExchangeHeader& header = call.header;
  Notify(ExchangeEvent::Kind::kWaitingForReplies, header);
  if (absl::Status s = WaitAll(call.header_receives); !s.ok()) return Fail(s);
  for (int32_t s = 0; s < options_.servers; ++s) {
    const std::string who =
        absl::StrCat("attention server ", communicator_->DescribePeer(server_rank(s)));
    auto reply = DecodeHeader(state.reply_headers[s], who);
    if (!reply.ok()) return Fail(reply.status());
    if (absl::Status st = CheckHeaderMatches(header, *reply, who); !st.ok()) return Fail(st);
    const int64_t expected = static_cast<int64_t>(state.replies[s].size() * sizeof(float));
    if (reply->payload_bytes != expected) {
      return Fail(absl::DataLossError(absl::StrCat(
          who, " answers ", header.Describe(), " with ", reply->payload_bytes,
          " bytes; the plan says ", expected)));
    }
  }
  if (absl::Status s = WaitAll(call.payload_receives); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(call.sends); !s.ok()) return Fail(s);
  for (int32_t s = 0; s < options_.servers; ++s) call.consume(s, state.replies[s].data());
  Notify(ExchangeEvent::Kind::kRepliesReceived, header);
  return absl::OkStatus();
}

absl::StatusOr<DisaggregatedCoreAttention::MicroBatchState*>
DisaggregatedCoreAttention::PrepareCall(int half, Pass pass, int layer) {
  if (absl::Status s = communicator_->health(); !s.ok()) return s;
  if (half < -1 || half > 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  if (layer < 0 || layer >= options_.n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " of a ", options_.n_layers, "-layer model"));
  }
  MicroBatchState& state = *states_[half < 0 ? 0 : half];
  if (state.in_flight) {
    return absl::FailedPreconditionError(
        absl::StrCat("disaggregated attention: half ", half, " already has ",
                     state.in_flight->header.Describe(), " in flight"));
  }
  if (pass == Pass::kForward && layer == 0) {
    state.half = half;  // a new micro-batch
  } else if (state.half != half) {
    return absl::FailedPreconditionError(
        "disaggregated attention: a micro-batch mixes ping-pong and plain calls");
  }
  return &state;
}

absl::Status DisaggregatedCoreAttention::StartForwardCall(int half,
                                                          const model::AttentionForwardCall& c) {
  auto prepared = PrepareCall(half, Pass::kForward, c.in.layer);
  if (!prepared.ok()) return prepared.status();
  MicroBatchState& state = **prepared;
  if (c.in.layer == 0) {
    if (absl::Status s = BeginMicroBatch(state, c.in.shape, c.in.tasks, c.in.rows); !s.ok())
      return s;
  } else if (absl::Status s = CheckSame(state, c.in.tasks, c.in.rows); !s.ok()) {
    return s;
  }
  const RowWidths widths = RowWidths::Of(c.in.shape);
  const auto& shares = state.plan->shares;
  MicroBatchState* st = &state;
  return StartExchange(
      state, MakeHeader(state, Pass::kForward, c.in.layer, c.in.shape),
      [&](int32_t s) { return ForwardRequestFloats(shares[s][rank_], widths); },
      [&](int32_t s, float* out) {
        out = GatherRows(c.in.q, widths.q, state.query_rows[s], out);
        out = GatherRows(c.in.k, widths.kv, state.kv_rows[s], out);
        GatherRows(c.in.v, widths.kv, state.kv_rows[s], out);
      },
      [&](int32_t s) { return ForwardReplyFloats(shares[s][rank_], widths); },
      // Runs at FinishExchange.
      [st, widths, o = c.o, lse = c.lse](int32_t s, const float* in) {
        in = ScatterRows(in, widths.q, st->query_rows[s], o, /*accumulate=*/false);
        ScatterRows(in, widths.lse, st->query_rows[s], lse, /*accumulate=*/false);
      });
}

absl::Status DisaggregatedCoreAttention::StartBackwardCall(int half,
                                                           const model::AttentionBackwardCall& c) {
  auto prepared = PrepareCall(half, Pass::kBackward, c.in.layer);
  if (!prepared.ok()) return prepared.status();
  MicroBatchState& state = **prepared;
  if (absl::Status s = CheckSame(state, c.in.tasks, c.in.rows); !s.ok()) return s;
  const RowWidths widths = RowWidths::Of(c.in.shape);
  const bool resend = !options_.keep_qkv_for_backward;
  const auto& shares = state.plan->shares;
  MicroBatchState* st = &state;
  return StartExchange(
      state, MakeHeader(state, Pass::kBackward, c.in.layer, c.in.shape),
      [&](int32_t s) { return BackwardRequestFloats(shares[s][rank_], widths, resend); },
      [&](int32_t s, float* out) {
        out = GatherRows(c.d_o, widths.q, state.query_rows[s], out);
        if (!resend) return;
        out = GatherRows(c.in.q, widths.q, state.query_rows[s], out);
        out = GatherRows(c.in.k, widths.kv, state.kv_rows[s], out);
        out = GatherRows(c.in.v, widths.kv, state.kv_rows[s], out);
        out = GatherRows(c.o, widths.q, state.query_rows[s], out);
        GatherRows(c.lse, widths.lse, state.query_rows[s], out);
      },
      [&](int32_t s) { return BackwardReplyFloats(shares[s][rank_], widths); },
      [st, widths, d_q = c.d_q, d_k = c.d_k, d_v = c.d_v](int32_t s, const float* in) {
        in = ScatterRows(in, widths.q, st->query_rows[s], d_q, /*accumulate=*/false);
        // A document split over servers gets a partial K/V gradient from each.
        in = ScatterRows(in, widths.kv, st->kv_rows[s], d_k, /*accumulate=*/true);
        ScatterRows(in, widths.kv, st->kv_rows[s], d_v, /*accumulate=*/true);
      });
}

absl::Status DisaggregatedCoreAttention::Forward(const model::AttentionForwardCall& call) {
  if (absl::Status s = StartForwardCall(-1, call); !s.ok()) return s;
  return FinishExchange(-1, Pass::kForward);
}

absl::Status DisaggregatedCoreAttention::Backward(const model::AttentionBackwardCall& call) {
  if (absl::Status s = StartBackwardCall(-1, call); !s.ok()) return s;
  return FinishExchange(-1, Pass::kBackward);
}

absl::Status DisaggregatedCoreAttention::StartForward(int half,
                                                      const model::AttentionForwardCall& call) {
  if (half != 0 && half != 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  return StartForwardCall(half, call);
}

absl::Status DisaggregatedCoreAttention::FinishForward(int half) {
  if (half != 0 && half != 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  return FinishExchange(half, Pass::kForward);
}

absl::Status DisaggregatedCoreAttention::StartBackward(int half,
                                                       const model::AttentionBackwardCall& call) {
  if (half != 0 && half != 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  return StartBackwardCall(half, call);
}

absl::Status DisaggregatedCoreAttention::FinishBackward(int half) {
  if (half != 0 && half != 1) return absl::InvalidArgumentError(absl::StrCat("half ", half));
  return FinishExchange(half, Pass::kBackward);
}

}  // namespace corescape::attention
