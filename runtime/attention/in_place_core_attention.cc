#include "runtime/attention/in_place_core_attention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/handle_set.h"

namespace corescape::attention {
namespace {

using Handles = comm::HandleSet;
using comm::Post;
using comm::WaitAll;

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

InPlaceCoreAttention::InPlaceCoreAttention(std::unique_ptr<comm::Communicator> communicator,
                                           const InPlaceOptions& options)
    : communicator_(std::move(communicator)),
      options_(options),
      self_(communicator_->rank()),
      workers_(communicator_->world_size()),
      pool_(std::make_unique<ThreadPool>(options.threads > 0 ? options.threads
                                                             : DefaultThreadCount())),
      batch_(self_, pool_.get()),
      requests_(workers_),
      inbound_(workers_),
      replies_(workers_),
      results_(workers_),
      out_headers_(workers_),
      out_reply_headers_(workers_),
      in_headers_(workers_),
      in_reply_headers_(workers_),
      peer_documents_(workers_) {}

InPlaceCoreAttention::~InPlaceCoreAttention() {
  const std::string job = communicator_->job_id();
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
  for (int32_t p = 0; p < workers_ && posted.ok(); ++p) {
    if (p == self_) continue;
    posted = Post(receives,
                  communicator_->RecvAsync(p, kHeaderTag, in_headers_[p].data(), kHeaderBytes));
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
    auto header = DecodeHeader(in_headers_[p], who);
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
            << stats_.tasks_shipped << " of this worker's tasks computed by other workers";
}

void InPlaceCoreAttention::Abort(const std::string& reason) { communicator_->Abort(reason); }

absl::Status InPlaceCoreAttention::Fail(absl::Status status) {
  communicator_->Abort(status.message());
  return status;
}

ExchangeHeader InPlaceCoreAttention::MakeHeader(Pass pass, int layer,
                                                const kernels::AttentionShape& shape) const {
  ExchangeHeader h;
  h.pass = pass;
  h.flags = pass == Pass::kBackward && !options_.keep_qkv_for_backward ? kCarriesForwardTensors : 0;
  h.exchange = exchange_;
  h.micro_batch = static_cast<uint64_t>(micro_batch_);
  h.layer = layer;
  h.n_layers = options_.n_layers;
  h.n_heads = shape.n_heads;
  h.n_kv_heads = shape.n_kv_heads;
  h.head_dim = shape.head_dim;
  h.softmax_scale = shape.softmax_scale;
  return h;
}

absl::Status InPlaceCoreAttention::CheckCallOrder(Pass pass, int layer) const {
  if (pass == Pass::kForward && layer == 0) return absl::OkStatus();  // a new micro-batch
  auto out_of_order = [&](const std::string& expected) {
    const std::string previous =
        last_call_ ? absl::StrCat(PassName(last_call_->first), " layer ", last_call_->second,
                                  " of micro-batch ", micro_batch_)
                   : std::string("no forward of layer 0");
    return absl::FailedPreconditionError(absl::StrCat("in-place attention on worker ", self_, ": ",
                                                      PassName(pass), " layer ", layer, " after ",
                                                      previous, "; expected ", expected));
  };
  if (!last_call_) return out_of_order("the forward of layer 0 of a new micro-batch");
  const auto [last_pass, last_layer] = *last_call_;
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

absl::Status InPlaceCoreAttention::BeginMicroBatch(const kernels::AttentionShape& shape,
                                                   absl::Span<const kernels::AttentionTask> tasks,
                                                   int64_t rows) {
  if (absl::Status s = kernels::ValidateAttentionArgs(shape, tasks, std::max<int64_t>(rows, 1),
                                                      std::max<int64_t>(rows, 1));
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> lengths, document_rows;
  lengths.reserve(tasks.size());
  document_rows.reserve(tasks.size());
  for (const kernels::AttentionTask& task : tasks) {
    if (task.q_begin != 0 || task.q_row != task.kv_row) {
      return absl::UnimplementedError(
          "in-place attention takes whole-document tasks (q_begin 0, q_row = kv_row)");
    }
    lengths.push_back(task.q_end);
    document_rows.push_back(task.q_row);
  }
  ++micro_batch_;
  ++stats_.micro_batches;
  plan_.reset();
  tasks_.assign(tasks.begin(), tasks.end());
  rows_ = rows;

  // Tell every other worker this worker's document lengths; hear theirs.
  ExchangeHeader announce = MakeHeader(Pass::kForward, 0, shape);
  announce.num_documents = static_cast<int32_t>(lengths.size());
  const HeaderBytes announce_bytes = EncodeHeader(announce);
  Handles receives, sends;
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    absl::Status s = Post(
        receives, communicator_->RecvAsync(p, kHeaderTag, in_headers_[p].data(), kHeaderBytes));
    if (s.ok()) {
      s = Post(sends, communicator_->SendAsync(p, kHeaderTag, announce_bytes.data(), kHeaderBytes));
    }
    if (s.ok() && !lengths.empty()) {
      s = Post(sends, communicator_->SendAsync(p, kDocumentsTag, lengths.data(),
                                               lengths.size() * sizeof(int64_t)));
    }
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    auto header = CheckPeerHeader(announce, in_headers_[p], p, -1, "document list");
    if (!header.ok()) return Fail(header.status());
    peer_documents_[p].resize(header->num_documents);
    if (header->num_documents == 0) continue;
    if (absl::Status s =
            Post(receives, communicator_->RecvAsync(p, kDocumentsTag, peer_documents_[p].data(),
                                                    peer_documents_[p].size() * sizeof(int64_t)));
        !s.ok()) {
      return Fail(s);
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(sends); !s.ok()) return Fail(s);

  std::vector<std::vector<int64_t>> all_lengths(workers_);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) {
      all_lengths[p] = lengths;
      continue;
    }
    for (int64_t length : peer_documents_[p]) {
      if (length < 1 || length > (int64_t{1} << 32)) {
        return Fail(absl::DataLossError(absl::StrCat("document length ", length, " from worker ",
                                                     communicator_->DescribePeer(p), " in ",
                                                     announce.Describe())));
      }
    }
    all_lengths[p] = peer_documents_[p];
  }
  PlanOptions plan_options;
  plan_options.servers = workers_;
  plan_options.tolerance = options_.tolerance;
  plan_options.planner = options_.planner;
  plan_options.in_place = true;
  auto plan = PlanMicroBatch(std::move(all_lengths), shape, plan_options);
  if (!plan.ok()) return Fail(plan.status());
  plan_ = *std::move(plan);
  query_rows_.resize(workers_);
  kv_rows_.resize(workers_);
  for (int32_t s = 0; s < workers_; ++s) {
    query_rows_[s] = WorkerQueryRows(*plan_, s, self_, document_rows);
    kv_rows_[s] = WorkerKvRows(*plan_, s, self_, document_rows);
  }
  batch_.Begin(&*plan_, options_.n_layers, options_.keep_qkv_for_backward);
  stats_.tasks_computed += batch_.num_tasks();
  for (const planner::PlannedTask& task : plan_->plan.tasks) {
    if (task.server == self_ && task.worker != self_) ++stats_.peer_tasks_computed;
    if (task.worker == self_ && task.server != self_) ++stats_.tasks_shipped;
  }
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::CheckSameMicroBatch(
    absl::Span<const kernels::AttentionTask> tasks, int64_t rows) const {
  if (!plan_.has_value() || rows != rows_ ||
      !std::equal(tasks.begin(), tasks.end(), tasks_.begin(), tasks_.end())) {
    return absl::FailedPreconditionError(
        "in-place attention: the tasks differ from those of this micro-batch's layer 0 forward");
  }
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::Exchange(ExchangeHeader header, const ExchangeSteps& steps) {
  const auto& shares = plan_->shares;  // [computing worker][source worker]
  Handles request_headers, request_payloads, reply_headers, reply_payloads, sends;
  // Every receive first, then every send: nobody waits on anybody's order.
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    inbound_[p].resize(steps.request_floats(shares[self_][p]));
    results_[p].resize(steps.reply_floats(shares[p][self_]));
    absl::Status s = Post(request_headers, communicator_->RecvAsync(
                                               p, kHeaderTag, in_headers_[p].data(), kHeaderBytes));
    if (s.ok() && !inbound_[p].empty()) {
      s = Post(request_payloads,
               communicator_->RecvAsync(p, kPayloadTag, inbound_[p].data(), Bytes(inbound_[p])));
    }
    if (s.ok()) {
      s = Post(reply_headers, communicator_->RecvAsync(p, kReplyHeaderTag,
                                                       in_reply_headers_[p].data(), kHeaderBytes));
    }
    if (s.ok() && !results_[p].empty()) {
      s = Post(reply_payloads, communicator_->RecvAsync(p, kReplyPayloadTag, results_[p].data(),
                                                        Bytes(results_[p])));
    }
    if (!s.ok()) return Fail(s);
  }
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    requests_[p].resize(steps.request_floats(shares[p][self_]));
    steps.fill_request(p, requests_[p].data());
    ExchangeHeader request = header;
    request.payload_bytes = Bytes(requests_[p]);
    out_headers_[p] = EncodeHeader(request);
    absl::Status s =
        Post(sends, communicator_->SendAsync(p, kHeaderTag, out_headers_[p].data(), kHeaderBytes));
    if (s.ok() && !requests_[p].empty()) {
      s = Post(sends, communicator_->SendAsync(p, kPayloadTag, requests_[p].data(),
                                               request.payload_bytes));
    }
    if (!s.ok()) return Fail(s);
  }
  // This worker's own share, while the peers' requests travel.
  requests_[self_].resize(steps.request_floats(shares[self_][self_]));
  steps.fill_request(self_, requests_[self_].data());
  steps.take(self_, requests_[self_].data());

  if (absl::Status s = WaitAll(request_headers); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    auto got = CheckPeerHeader(header, in_headers_[p], p, static_cast<int64_t>(inbound_[p].size()),
                               "request");
    if (!got.ok()) return Fail(got.status());
  }
  if (absl::Status s = WaitAll(request_payloads); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p != self_) steps.take(p, inbound_[p].data());
  }
  if (absl::Status s = steps.compute(); !s.ok()) {
    return Fail(absl::Status(s.code(), absl::StrCat("in-place attention on worker ", self_, " at ",
                                                    header.Describe(), ": ", s.message())));
  }

  for (int32_t p = 0; p < workers_; ++p) {
    replies_[p].resize(steps.reply_floats(shares[self_][p]));
    steps.put_reply(p, replies_[p].data());
    if (p == self_) continue;
    ExchangeHeader reply = header;
    reply.payload_bytes = Bytes(replies_[p]);
    out_reply_headers_[p] = EncodeHeader(reply);
    absl::Status s = Post(
        sends,
        communicator_->SendAsync(p, kReplyHeaderTag, out_reply_headers_[p].data(), kHeaderBytes));
    if (s.ok() && !replies_[p].empty()) {
      s = Post(sends, communicator_->SendAsync(p, kReplyPayloadTag, replies_[p].data(),
                                               reply.payload_bytes));
    }
    if (!s.ok()) return Fail(s);
  }
  if (absl::Status s = WaitAll(reply_headers); !s.ok()) return Fail(s);
  for (int32_t p = 0; p < workers_; ++p) {
    if (p == self_) continue;
    auto got = CheckPeerHeader(header, in_reply_headers_[p], p,
                               static_cast<int64_t>(results_[p].size()), "reply");
    if (!got.ok()) return Fail(got.status());
  }
  if (absl::Status s = WaitAll(reply_payloads); !s.ok()) return Fail(s);
  if (absl::Status s = WaitAll(sends); !s.ok()) return Fail(s);
  // In rank order, so the sums into dK/dV do not depend on arrival order.
  for (int32_t p = 0; p < workers_; ++p) {
    steps.consume(p, p == self_ ? replies_[p].data() : results_[p].data());
  }
  ++exchange_;
  ++stats_.exchanges;
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::Forward(int layer, const kernels::AttentionShape& shape,
                                           absl::Span<const kernels::AttentionTask> tasks,
                                           const float* q, const float* k, const float* v,
                                           int64_t rows, float* o, float* lse) {
  if (absl::Status s = communicator_->health(); !s.ok()) return s;
  if (layer < 0 || layer >= options_.n_layers) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " of a ", options_.n_layers, "-layer model")));
  }
  if (absl::Status s = CheckCallOrder(Pass::kForward, layer); !s.ok()) return Fail(s);
  if (layer == 0) {
    if (absl::Status s = BeginMicroBatch(shape, tasks, rows); !s.ok()) return Fail(s);
  } else if (absl::Status s = CheckSameMicroBatch(tasks, rows); !s.ok()) {
    return Fail(s);
  }
  const RowWidths widths = RowWidths::Of(shape);
  batch_.PrepareForward(layer, widths);
  ExchangeSteps steps;
  steps.request_floats = [&](const WorkerShare& s) { return ForwardRequestFloats(s, widths); };
  steps.reply_floats = [&](const WorkerShare& s) { return ForwardReplyFloats(s, widths); };
  steps.fill_request = [&](int32_t p, float* out) {
    out = GatherRows(q, widths.q, query_rows_[p], out);
    out = GatherRows(k, widths.kv, kv_rows_[p], out);
    GatherRows(v, widths.kv, kv_rows_[p], out);
  };
  steps.take = [&](int32_t source, const float* in) {
    batch_.TakeForwardRequest(layer, source, widths, in);
  };
  steps.compute = [&] { return batch_.RunForward(layer, shape); };
  steps.put_reply = [&](int32_t source, float* out) {
    batch_.PutForwardReply(layer, source, widths, out);
  };
  steps.consume = [&](int32_t p, const float* in) {
    in = ScatterRows(in, widths.q, query_rows_[p], o, /*accumulate=*/false);
    ScatterRows(in, widths.lse, query_rows_[p], lse, /*accumulate=*/false);
  };
  if (absl::Status s = Exchange(MakeHeader(Pass::kForward, layer, shape), steps); !s.ok()) {
    return s;
  }
  last_call_ = {Pass::kForward, layer};
  return absl::OkStatus();
}

absl::Status InPlaceCoreAttention::Backward(int layer, const kernels::AttentionShape& shape,
                                            absl::Span<const kernels::AttentionTask> tasks,
                                            const float* q, const float* k, const float* v,
                                            const float* o, const float* lse, const float* d_o,
                                            int64_t rows, float* d_q, float* d_k, float* d_v) {
  if (absl::Status s = communicator_->health(); !s.ok()) return s;
  if (layer < 0 || layer >= options_.n_layers) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " of a ", options_.n_layers, "-layer model")));
  }
  if (absl::Status s = CheckCallOrder(Pass::kBackward, layer); !s.ok()) return Fail(s);
  if (absl::Status s = CheckSameMicroBatch(tasks, rows); !s.ok()) return Fail(s);
  const RowWidths widths = RowWidths::Of(shape);
  const bool resend = !options_.keep_qkv_for_backward;
  if (absl::Status s = batch_.PrepareBackward(layer, widths, resend); !s.ok()) return Fail(s);
  ExchangeSteps steps;
  steps.request_floats = [&](const WorkerShare& s) {
    return BackwardRequestFloats(s, widths, resend);
  };
  steps.reply_floats = [&](const WorkerShare& s) { return BackwardReplyFloats(s, widths); };
  steps.fill_request = [&](int32_t p, float* out) {
    out = GatherRows(d_o, widths.q, query_rows_[p], out);
    if (!resend) return;
    out = GatherRows(q, widths.q, query_rows_[p], out);
    out = GatherRows(k, widths.kv, kv_rows_[p], out);
    out = GatherRows(v, widths.kv, kv_rows_[p], out);
    out = GatherRows(o, widths.q, query_rows_[p], out);
    GatherRows(lse, widths.lse, query_rows_[p], out);
  };
  steps.take = [&](int32_t source, const float* in) {
    batch_.TakeBackwardRequest(layer, source, widths, resend, in);
  };
  steps.compute = [&] { return batch_.RunBackward(layer, shape); };
  steps.put_reply = [&](int32_t source, float* out) {
    batch_.PutBackwardReply(source, widths, out);
  };
  steps.consume = [&](int32_t p, const float* in) {
    in = ScatterRows(in, widths.q, query_rows_[p], d_q, /*accumulate=*/false);
    // A document split over workers gets a partial K/V gradient from each.
    in = ScatterRows(in, widths.kv, kv_rows_[p], d_k, /*accumulate=*/true);
    ScatterRows(in, widths.kv, kv_rows_[p], d_v, /*accumulate=*/true);
  };
  if (absl::Status s = Exchange(MakeHeader(Pass::kBackward, layer, shape), steps); !s.ok()) {
    return s;
  }
  last_call_ = {Pass::kBackward, layer};
  return absl::OkStatus();
}

}  // namespace corescape::attention
