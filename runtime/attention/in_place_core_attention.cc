#include "runtime/attention/in_place_core_attention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/documents_message.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "glog/logging.h"
#include "runtime/comm/handle_set.h"

namespace corescape::attention {
namespace {

using Handles = comm::HandleSet;
using comm::Post;
using comm::WaitAll;

// Ping-pong calls name half 0 (A) or 1 (B); -1 is a whole micro-batch's.
absl::Status CheckPingPongHalf(int half) {
  if (half == 0 || half == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("in-place attention: no half ", half));
}

int64_t Bytes(const std::vector<float>& floats) {
  return static_cast<int64_t>(floats.size() * sizeof(float));
}

}  // namespace

absl::StatusOr<std::unique_ptr<InPlaceCoreAttention>> InPlaceCoreAttention::Create(
    std::unique_ptr<comm::Communicator> communicator, const InPlaceOptions& options) {
  if (communicator == nullptr) return absl::InvalidArgumentError("no attention communicator");
  if (options.n_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-place attention: ", options.n_layers, " layers"));
  }
  if (!(options.tolerance >= 0 && options.tolerance < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-place attention: tolerance ", options.tolerance, " is not in [0, 1)"));
  }
  return std::unique_ptr<InPlaceCoreAttention>(
      new InPlaceCoreAttention(std::move(communicator), options));
}

InPlaceCoreAttention::MicroBatchState::MicroBatchState(int32_t self, int32_t workers,
                                                      ThreadPool* pool)
    : batch(self, pool),
      requests(workers),
      inbound(workers),
      replies(workers),
      results(workers),
      out_headers(workers),
      out_reply_headers(workers),
      in_headers(workers),
      in_reply_headers(workers),
      peer_messages(workers) {}

InPlaceCoreAttention::InPlaceCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                                           const InPlaceOptions& options)
    : communicator_(std::move(communicator)),
      options_(options),
      self_(communicator_->rank()),
      workers_(communicator_->world_size()),
      pool_(std::make_unique<ThreadPool>(options.threads > 0 ? options.threads
                                                             : DefaultThreadCount())) {
  for (auto& state : states_) {
    state = std::make_unique<MicroBatchState>(self_, workers_, pool_.get());
  }
}

InPlaceCoreAttention::~InPlaceCoreAttention() {
  const std::string job = communicator_->job_id();
  if (states_[0]->in_flight || states_[1]->in_flight) {
    // The caller gave up mid-schedule: the peers are owed a call, so nobody
    // can end cleanly.
    communicator_->Abort("a worker's in-place attention closed with an exchange in flight");
  }
  if (absl::Status health = communicator_->health(); !health.ok()) {
    LOG(INFO) << "in-place attention " << job << " rank " << self_ << " closes broken: " << health;
    return;
  }
  // Every peer sends `end` on the header tag: a peer still inside an
  // exchange sees it as a mismatch instead of waiting for its timeout.
  ExchangeHeader end;
  end.pass = Pass::kEnd;
  end.exchange = exchange_;
  const HeaderBytes end_bytes = EncodeHeader(end);
  Handles receives, sends;
  absl::Status posted;
  std::vector<HeaderBytes>& in_headers = states_[0]->in_headers;
  for (int32_t p = 0; p < workers_ && posted.ok(); ++p) {
    if (p == self_) continue;
    posted = Post(receives,
                  communicator_->RecvAsync(p, kHeaderTag, in_headers[p].data(), kHeaderBytes));
    if (posted.ok()) {
      posted = Post(sends, communicator_->SendAsync(p, kHeaderTag, end_bytes.data(), kHeaderBytes));
    }
  }
  absl::Status received = WaitAll(receives);
  absl::Status sent = WaitAll(sends);
  for (const absl::Status& s : {posted, received, sent}) {
    if (!s.ok()) {
      LOG(WARNING) << "in-place attention " << job << " rank " << self_
                   << ": could not end with the other workers: " << s;
      return;
    }
  }
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    const std::string who = absl::StrCat("worker ", communicator_->DescribePeer(p));
    auto header = DecodeHeader(in_headers[p], who);
    if (!header.ok()) {
      LOG(WARNING) << header.status();
    } else if (header->pass != Pass::kEnd || header->exchange != exchange_) {
      LOG(WARNING) << "in-place attention " << job << " rank " << self_ << ": " << who
                   << " ended with " << header->Describe() << ", this worker after " << exchange_
                   << " exchanges";
    }
  }
  LOG(INFO) << "in-place attention " << job << " rank " << self_
            << " done: " << stats_.micro_batches << " micro-batches, " << stats_.tasks_computed
            << " tasks computed here (" << stats_.peer_tasks_computed << " of other workers), "
            << stats_.tasks_shipped << " of this worker's tasks computed by other workers"
            << (stats_.speed_weights.empty()
                    ? std::string()
                    : absl::StrCat("; last planned with speed weights (",
                                   absl::StrJoin(stats_.speed_weights, ", ",
                                                 [](std::string* out, double w) {
                                                   absl::StrAppend(out,
                                                                   absl::StrFormat("%.3f", w));
                                                 }),
                                   ")"));
}

void InPlaceCoreAttention::Abort(const std::string& reason) { communicator_->Abort(reason); }

absl::Status InPlaceCoreAttention::SetSpeedWeights(VersionedSpeedWeights weights) {
  return absl::FailedPreconditionError(absl::StrCat(
      "in-place attention plans with the workers' measured speeds; it takes no attention "
      "servers' speed weights (version ",
      weights.version, ")"));
}

absl::Status InPlaceCoreAttention::OfferShippedPlan(ShippedPlan plan) {
  return absl::FailedPreconditionError(absl::StrCat(
      "in-place attention is planned by the workers; it takes no scheduler plan (step ",
      plan.step, ")"));
}

absl::Status InPlaceCoreAttention::Fail(absl::Status status) {
  communicator_->Abort(status.message());
  return status;
}

ExchangeHeader InPlaceCoreAttention::MakeHeader(const MicroBatchState& state, Pass pass, int layer,
                                                const kernels::AttentionShape& shape) const {
  return CallHeader(exchange_, state.micro_batch, state.half, pass, layer, options_.n_layers, shape,
                    options_.keep_qkv_for_backward);
}

absl::Status InPlaceCoreAttention::CheckSameKind(const MicroBatchState& state, int half) const {
  if (state.half == half) return absl::OkStatus();
  auto kind = [](int h) {
    return h < 0 ? std::string("a whole micro-batch") : absl::StrCat("half ", h == 0 ? "A" : "B");
  };
  return absl::FailedPreconditionError(absl::StrCat("in-place attention on worker ", self_,
                                                    ": a call of ", kind(half), " continues ",
                                                    kind(state.half), "'s micro-batch"));
}

absl::StatusOr<InPlaceCoreAttention::MicroBatchState*> InPlaceCoreAttention::StateFor(
    int half, bool starting) {
  if (half < -1 || half > 1) {
    return absl::InvalidArgumentError(absl::StrCat("in-place attention: no half ", half));
  }
  MicroBatchState& state = *states_[half < 0 ? 0 : half];
  if (starting) {
    const bool busy = half < 0 ? (states_[0]->in_flight || states_[1]->in_flight)
                               : state.in_flight.has_value();
    if (busy) {
      return absl::FailedPreconditionError(absl::StrCat(
          "in-place attention on worker ", self_, ": ",
          half < 0 ? std::string("a whole micro-batch's call")
                   : absl::StrCat("half ", half == 0 ? "A" : "B", "'s next call"),
          " while an exchange is unfinished"));
    }
  } else if (!state.in_flight) {
    return absl::FailedPreconditionError(absl::StrCat("in-place attention on worker ", self_,
                                                      ": finishing half ", half == 0 ? "A" : "B",
                                                      ", which has no call started"));
  }
  return &state;
}

absl::Status InPlaceCoreAttention::CheckCallOrder(const MicroBatchState& state, Pass pass,
                                                  int layer) const {
  if (pass == Pass::kForward && layer == 0) return absl::OkStatus();  // a new micro-batch
  auto out_of_order = [&](const std::string& expected) {
    const std::string previous =
        state.last_call ? absl::StrCat(PassName(state.last_call->first), " layer ",
                                       state.last_call->second, " of micro-batch ",
                                       state.micro_batch)
                        : std::string("no forward of layer 0");
    return absl::FailedPreconditionError(absl::StrCat("in-place attention on worker ", self_, ": ",
                                                      PassName(pass), " layer ", layer, " after ",
                                                      previous, "; expected ", expected));
  };
  if (!state.last_call) return out_of_order("the forward of layer 0 of a new micro-batch");
  const auto [last_pass, last_layer] = *state.last_call;
  if (pass == Pass::kForward) {
    if (last_pass != Pass::kForward || last_layer != layer - 1) {
      return out_of_order(absl::StrCat("forward layer ", last_layer + 1));
    }
    return absl::OkStatus();
  }
  const int last = options_.n_layers - 1;
  const bool after_forward = last_pass == Pass::kForward && last_layer == last && layer == last;
  const bool after_backward = last_pass == Pass::kBackward && last_layer == layer + 1;
  if (!after_forward && !after_backward) {
    return out_of_order("backward in reverse layer order after the last forward");
  }
  return absl::OkStatus();
}

absl::StatusOr<ExchangeHeader> InPlaceCoreAttention::CheckPeerHeader(const ExchangeHeader& expected,
                                                                     const HeaderBytes& bytes,
                                                                     int32_t peer,
                                                                     int64_t expected_floats,
                                                                     const char* what) const {
  const std::string who = absl::StrCat("worker ", communicator_->DescribePeer(peer));
  auto header = DecodeHeader(bytes, who);
  if (!header.ok()) return header.status();
  if (absl::Status s = CheckHeaderMatches(expected, *header, who); !s.ok()) return s;
  if (expected_floats >= 0 &&
      header->payload_bytes != expected_floats * static_cast<int64_t>(sizeof(float))) {
    return absl::DataLossError(absl::StrCat(who, " sends a ", what, " of ", header->payload_bytes,
                                            " bytes for ", expected.Describe(), "; the plan says ",
                                            expected_floats * sizeof(float)));
  }
  return header;
}

absl::Status InPlaceCoreAttention::BeginMicroBatch(MicroBatchState& state,
                                                   const kernels::AttentionShape& shape,
                                                   absl::Span<const kernels::AttentionTask> tasks,
                                                   int64_t rows) {
  auto documents = WholeDocuments(shape, tasks, rows, "in-place attention");
  if (!documents.ok()) return documents.status();
  const std::vector<int64_t>& lengths = documents->lengths;
  const std::vector<int64_t>& document_rows = documents->rows;
  if (state.timed_seconds > 0) {
    own_speed_.Record(state.timed_cost, state.timed_seconds);
    state.timed_cost = state.timed_seconds = 0;
  }
  state.micro_batch = next_micro_batch_++;
  ++stats_.micro_batches;
  state.plan.reset();
  state.last_call.reset();
  state.tasks.assign(tasks.begin(), tasks.end());
  state.rows = rows;
  std::vector<HeaderBytes>& in_headers = state.in_headers;
  std::vector<std::vector<int64_t>>& messages = state.peer_messages;

  // Tell every other worker this worker's document lengths and speed
  // (documents_message.h); hear theirs.
  const DocumentsFormat format = DocumentsFormat::InPlace();
  const std::optional<double> my_speed =
      options_.learn_speeds ? own_speed_.Speed() : std::optional<double>();
  DocumentsMessage mine;
  mine.lengths = lengths;
  if (my_speed) mine.weights = VersionedSpeedWeights{0, {*my_speed}};
  ExchangeHeader announce = MakeHeader(state, Pass::kForward, 0, shape);
  const std::vector<int64_t> message = EncodeDocumentsMessage(mine, announce);
  const HeaderBytes announce_bytes = EncodeHeader(announce);
  std::vector<ExchangeHeader> announces(workers_);
  Handles receives, sends;
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    absl::Status s = Post(
        receives, communicator_->RecvAsync(p, kHeaderTag, in_headers[p].data(), kHeaderBytes));
    if (s.ok()) {
      s = Post(sends, communicator_->SendAsync(p, kHeaderTag, announce_bytes.data(), kHeaderBytes));
    }
    if (s.ok() && !message.empty()) {
      s = Post(sends, communicator_->SendAsync(p, kDocumentsTag, message.data(),
                                               message.size() * sizeof(int64_t)));
    }
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    const std::string who = absl::StrCat("worker ", communicator_->DescribePeer(p));
    auto header = CheckPeerHeader(announce, in_headers[p], p, -1, "document list");
    if (!header.ok()) return Fail(header.status());
    auto words = ExpectedDocumentsWords(*header, p, format, who);
    if (!words.ok()) return Fail(words.status());
    announces[p] = *header;
    messages[p].resize(*words);
    if (messages[p].empty()) continue;
    if (absl::Status s =
            Post(receives, communicator_->RecvAsync(p, kDocumentsTag, messages[p].data(),
                                                    messages[p].size() * sizeof(int64_t)));
        !s.ok()) {
      return Fail(s);
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(sends); !s.ok()) return Fail(s);

  std::vector<std::vector<int64_t>> all_lengths(workers_);
  std::vector<std::optional<double>> speeds(workers_);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) {
      all_lengths[p] = lengths;
      speeds[p] = my_speed;
      continue;
    }
    auto received = DecodeDocumentsMessage(
        messages[p], announces[p], format, absl::StrCat("worker ", communicator_->DescribePeer(p)));
    if (!received.ok()) return Fail(received.status());
    if (received->weights && options_.learn_speeds) speeds[p] = received->weights->weights[0];
    all_lengths[p] = std::move(received->lengths);
  }
  if (absl::Status s = CheckAnnouncedLengths(all_lengths, announce.Describe()); !s.ok()) {
    return Fail(s);
  }
  PlanOptions plan_options;
  plan_options.servers = workers_;
  plan_options.tolerance = options_.tolerance;
  plan_options.planner = options_.planner;
  plan_options.in_place = true;
  // Every worker has every announced speed (bit for bit): all plan alike.
  plan_options.server_speeds = planner::NormalisedSpeedWeights(speeds);
  stats_.speed_weights = plan_options.server_speeds;
  auto plan = PlanMicroBatch(std::move(all_lengths), shape, plan_options);
  if (!plan.ok()) return Fail(plan.status());
  state.plan = *std::move(plan);
  state.query_rows.resize(workers_);
  state.kv_rows.resize(workers_);
  for (int32_t s = 0; s < workers_; ++s) {
    state.query_rows[s] = WorkerQueryRows(*state.plan, s, self_, document_rows);
    state.kv_rows[s] = WorkerKvRows(*state.plan, s, self_, document_rows);
  }
  state.batch.Begin(&*state.plan, options_.n_layers, options_.keep_qkv_for_backward);
  last_begun_ = &state;
  stats_.tasks_computed += state.batch.num_tasks();
  for (const planner::PlannedTask& task : state.plan->plan.tasks) {
    if (task.server == self_ && task.worker != self_) ++stats_.peer_tasks_computed;
    if (task.worker == self_ && task.server != self_) ++stats_.tasks_shipped;
  }
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::StartExchange(MicroBatchState& state, ExchangeHeader header,
                                                 ExchangeSteps steps) {
  const auto& shares = state.plan->shares;  // [computing worker][source worker]
  InFlightExchange& call = state.in_flight.emplace();
  call.header = header;
  call.steps = std::move(steps);
  const ExchangeSteps& st = call.steps;
  ++exchange_;
  ++stats_.exchanges;
  // Every receive first, then every send: nobody waits on anybody's order.
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    state.inbound[p].resize(st.request_floats(shares[self_][p]));
    state.results[p].resize(st.reply_floats(shares[p][self_]));
    absl::Status s = Post(call.request_headers,
                          communicator_->RecvAsync(p, kHeaderTag, state.in_headers[p].data(),
                                                   kHeaderBytes));
    if (s.ok() && !state.inbound[p].empty()) {
      s = Post(call.request_payloads,
               communicator_->RecvAsync(p, kPayloadTag, state.inbound[p].data(),
                                        Bytes(state.inbound[p])));
    }
    if (s.ok()) {
      s = Post(call.reply_headers,
               communicator_->RecvAsync(p, kReplyHeaderTag, state.in_reply_headers[p].data(),
                                        kHeaderBytes));
    }
    if (s.ok() && !state.results[p].empty()) {
      s = Post(call.reply_payloads,
               communicator_->RecvAsync(p, kReplyPayloadTag, state.results[p].data(),
                                        Bytes(state.results[p])));
    }
    if (!s.ok()) return Fail(s);
  }
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    state.requests[p].resize(st.request_floats(shares[p][self_]));
    st.fill_request(p, state.requests[p].data());
    ExchangeHeader request = header;
    request.payload_bytes = Bytes(state.requests[p]);
    state.out_headers[p] = EncodeHeader(request);
    absl::Status s = Post(call.sends, communicator_->SendAsync(p, kHeaderTag,
                                                               state.out_headers[p].data(),
                                                               kHeaderBytes));
    if (s.ok() && !state.requests[p].empty()) {
      s = Post(call.sends, communicator_->SendAsync(p, kPayloadTag, state.requests[p].data(),
                                                    request.payload_bytes));
    }
    if (!s.ok()) return Fail(s);
  }
  // This worker's own share, while the peers' requests travel.
  state.requests[self_].resize(st.request_floats(shares[self_][self_]));
  st.fill_request(self_, state.requests[self_].data());
  st.take(self_, state.requests[self_].data());
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::CheckPeerHeaders(
    const ExchangeHeader& expected, const std::vector<HeaderBytes>& headers,
    const std::vector<std::vector<float>>& payloads, const char* what) const {
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    auto got = CheckPeerHeader(expected, headers[p], p, static_cast<int64_t>(payloads[p].size()),
                               what);
    if (!got.ok()) return got.status();
  }
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::FinishExchange(MicroBatchState& state) {
  // Moved out: however this ends, the exchange is no longer in flight.
  InFlightExchange call = *std::move(state.in_flight);
  state.in_flight.reset();
  const ExchangeHeader& header = call.header;
  const ExchangeSteps& st = call.steps;
  const auto& shares = state.plan->shares;
  if (absl::Status s = WaitAll(call.request_headers); !s.ok()) return Fail(s);
  if (absl::Status s = CheckPeerHeaders(header, state.in_headers, state.inbound, "request");
      !s.ok()) {
    return Fail(s);
  }
  if (absl::Status s = WaitAll(call.request_payloads); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p != self_) st.take(p, state.inbound[p].data());
  }
  const absl::Time compute_start = options_.clock->Now();
  if (absl::Status s = st.compute(); !s.ok()) {
    return Fail(absl::Status(s.code(), absl::StrCat("in-place attention on worker ", self_, " at ",
                                                    header.Describe(), ": ", s.message())));
  }
  state.timed_seconds += absl::ToDoubleSeconds(options_.clock->Now() - compute_start);
  state.timed_cost += PassCost(state.plan->plan, self_, header.pass == Pass::kBackward);

  for (int32_t p = 0; p < workers_; ++p) {
    state.replies[p].resize(st.reply_floats(shares[self_][p]));
    st.put_reply(p, state.replies[p].data());
    if (p == self_) continue;
    ExchangeHeader reply = header;
    reply.payload_bytes = Bytes(state.replies[p]);
    state.out_reply_headers[p] = EncodeHeader(reply);
    absl::Status s = Post(call.sends,
                          communicator_->SendAsync(p, kReplyHeaderTag,
                                                   state.out_reply_headers[p].data(),
                                                   kHeaderBytes));
    if (s.ok() && !state.replies[p].empty()) {
      s = Post(call.sends, communicator_->SendAsync(p, kReplyPayloadTag, state.replies[p].data(),
                                                    reply.payload_bytes));
    }
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = WaitAll(call.reply_headers); !s.ok()) return Fail(s);
  if (absl::Status s = CheckPeerHeaders(header, state.in_reply_headers, state.results, "reply");
      !s.ok()) {
    return Fail(s);
  }
  if (absl::Status s = WaitAll(call.reply_payloads); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(call.sends); !s.ok()) return Fail(s);
  // In rank order, so the sums into dK/dV do not depend on arrival order.
  for (int32_t p = 0; p < workers_; ++p) {
    st.consume(p, p == self_ ? state.replies[p].data() : state.results[p].data());
  }
  state.last_call = {header.pass, header.layer};
  return absl::OkStatus();
}

absl::StatusOr<InPlaceCoreAttention::MicroBatchState*> InPlaceCoreAttention::PrepareCall(
    int half, Pass pass, int layer) {
  if (absl::Status s = communicator_->health(); !s.ok()) return s;
  auto found = StateFor(half, /*starting=*/true);
  if (!found.ok()) return Fail(found.status());
  MicroBatchState& state = **found;
  if (layer < 0 || layer >= options_.n_layers) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " of a ", options_.n_layers, "-layer model")));
  }
  if (pass == Pass::kForward && layer == 0) state.half = half;  // a new micro-batch
  if (absl::Status s = CheckSameKind(state, half); !s.ok()) return Fail(s);
  if (absl::Status s = CheckCallOrder(state, pass, layer); !s.ok()) return Fail(s);
  return &state;
}

absl::Status InPlaceCoreAttention::StartForwardCall(int half,
                                                    const model::AttentionForwardCall& c) {
  const int layer = c.in.layer;
  const kernels::AttentionShape& shape = c.in.shape;
  auto prepared = PrepareCall(half, Pass::kForward, layer);
  if (!prepared.ok()) return prepared.status();
  MicroBatchState& state = **prepared;
  if (layer == 0) {
    if (absl::Status s = BeginMicroBatch(state, shape, c.in.tasks, c.in.rows); !s.ok())
      return Fail(s);
  } else if (absl::Status s = CheckSame(state, c.in.tasks, c.in.rows); !s.ok()) {
    return Fail(s);
  }
  const RowWidths widths = RowWidths::Of(shape);
  state.batch.PrepareForward(layer, widths);
  MicroBatchState* st = &state;
  ExchangeSteps steps;
  steps.request_floats = [widths](const WorkerShare& s) { return ForwardRequestFloats(s, widths); };
  steps.reply_floats = [widths](const WorkerShare& s) { return ForwardReplyFloats(s, widths); };
  steps.fill_request = [st, widths, q = c.in.q, k = c.in.k, v = c.in.v](int32_t p, float* out) {
    out = GatherRows(q, widths.q, st->query_rows[p], out);
    out = GatherRows(k, widths.kv, st->kv_rows[p], out);
    GatherRows(v, widths.kv, st->kv_rows[p], out);
  };
  steps.take = [st, widths, layer](int32_t source, const float* in) {
    st->batch.TakeForwardRequest(layer, source, widths, in);
  };
  steps.compute = [st, layer, shape] { return st->batch.RunForward(layer, shape); };
  steps.put_reply = [st, widths, layer](int32_t source, float* out) {
    st->batch.PutForwardReply(layer, source, widths, out);
  };
  steps.consume = [st, widths, o = c.o, lse = c.lse](int32_t p, const float* in) {
    in = ScatterRows(in, widths.q, st->query_rows[p], o, /*accumulate=*/false);
    ScatterRows(in, widths.lse, st->query_rows[p], lse, /*accumulate=*/false);
  };
  return StartExchange(state, MakeHeader(state, Pass::kForward, layer, shape), std::move(steps));
}

absl::Status InPlaceCoreAttention::StartBackwardCall(int half,
                                                     const model::AttentionBackwardCall& c) {
  const int layer = c.in.layer;
  const kernels::AttentionShape& shape = c.in.shape;
  auto prepared = PrepareCall(half, Pass::kBackward, layer);
  if (!prepared.ok()) return prepared.status();
  MicroBatchState& state = **prepared;
  if (absl::Status s = CheckSame(state, c.in.tasks, c.in.rows); !s.ok()) return Fail(s);
  const RowWidths widths = RowWidths::Of(shape);
  const bool resend = !options_.keep_qkv_for_backward;
  if (absl::Status s = state.batch.PrepareBackward(layer, widths, resend); !s.ok()) {
    return Fail(s);
  }
  MicroBatchState* st = &state;
  ExchangeSteps steps;
  steps.request_floats = [widths, resend](const WorkerShare& s) {
    return BackwardRequestFloats(s, widths, resend);
  };
  steps.reply_floats = [widths](const WorkerShare& s) { return BackwardReplyFloats(s, widths); };
  steps.fill_request = [st, widths, resend, q = c.in.q, k = c.in.k, v = c.in.v, o = c.o,
                        lse = c.lse, d_o = c.d_o](int32_t p, float* out) {
    out = GatherRows(d_o, widths.q, st->query_rows[p], out);
    if (!resend) return;
    out = GatherRows(q, widths.q, st->query_rows[p], out);
    out = GatherRows(k, widths.kv, st->kv_rows[p], out);
    out = GatherRows(v, widths.kv, st->kv_rows[p], out);
    out = GatherRows(o, widths.q, st->query_rows[p], out);
    GatherRows(lse, widths.lse, st->query_rows[p], out);
  };
  steps.take = [st, widths, layer, resend](int32_t source, const float* in) {
    st->batch.TakeBackwardRequest(layer, source, widths, resend, in);
  };
  steps.compute = [st, layer, shape] { return st->batch.RunBackward(layer, shape); };
  steps.put_reply = [st, widths](int32_t source, float* out) {
    st->batch.PutBackwardReply(source, widths, out);
  };
  steps.consume = [st, widths, d_q = c.d_q, d_k = c.d_k, d_v = c.d_v](int32_t p, const float* in) {
    in = ScatterRows(in, widths.q, st->query_rows[p], d_q, /*accumulate=*/false);
    // A document split over workers gets a partial K/V gradient from each.
    in = ScatterRows(in, widths.kv, st->kv_rows[p], d_k, /*accumulate=*/true);
    ScatterRows(in, widths.kv, st->kv_rows[p], d_v, /*accumulate=*/true);
  };
  return StartExchange(state, MakeHeader(state, Pass::kBackward, layer, shape), std::move(steps));
}

absl::Status InPlaceCoreAttention::FinishCall(int half, Pass pass) {
  auto found = StateFor(half, /*starting=*/false);
  if (!found.ok()) return Fail(found.status());
  if ((*found)->in_flight->header.pass != pass) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "in-place attention on worker ", self_, ": finishing a ", PassName(pass), " of half ",
        half, " whose started call is ", (*found)->in_flight->header.Describe())));
  }
  return FinishExchange(**found);
}

absl::Status InPlaceCoreAttention::Forward(const model::AttentionForwardCall& call) {
  if (absl::Status s = StartForwardCall(-1, call); !s.ok()) return s;
  return FinishExchange(*states_[0]);
}

absl::Status InPlaceCoreAttention::Backward(const model::AttentionBackwardCall& call) {
  if (absl::Status s = StartBackwardCall(-1, call); !s.ok()) return s;
  return FinishExchange(*states_[0]);
}

absl::Status InPlaceCoreAttention::StartForward(int half, const model::AttentionForwardCall& call) {
  if (absl::Status s = CheckPingPongHalf(half); !s.ok()) return Fail(s);
  return StartForwardCall(half, call);
}

absl::Status InPlaceCoreAttention::FinishForward(int half) {
  return FinishCall(half, Pass::kForward);
}

absl::Status InPlaceCoreAttention::StartBackward(int half,
                                                 const model::AttentionBackwardCall& call) {
  if (absl::Status s = CheckPingPongHalf(half); !s.ok()) return Fail(s);
  return StartBackwardCall(half, call);
}

absl::Status InPlaceCoreAttention::FinishBackward(int half) {
  return FinishCall(half, Pass::kBackward);
}

}  // namespace corescape::attention
