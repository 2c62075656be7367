#include "runtime/attention/attention_server_session.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/comm/handle_set.h"

namespace corescape::attention {
namespace {

using Handles = comm::HandleSet;
using comm::Post;
using comm::WaitAll;

}  // namespace

AttentionServerSession::AttentionServerSession(comm::Communicator* communicator,
                                               const ServerSessionOptions& options)
    : communicator_(communicator),
      options_(options),
      server_(communicator->rank() - options.workers),
      headers_(options.workers),
      requests_(options.workers),
      replies_(options.workers),
      planner_(absl::StrCat("attention server ", server_), [&options] {
        PlanOptions plan;
        plan.servers = options.servers;
        plan.tolerance = options.tolerance;
        plan.planner = options.planner;
        return plan;
      }()) {}

std::string AttentionServerSession::Describe(int32_t worker) const {
  return absl::StrCat("worker ", communicator_->DescribePeer(worker));
}

absl::Status AttentionServerSession::Serve() {
  if (server_ < 0 || server_ >= options_.servers ||
      communicator_->world_size() != options_.workers + options_.servers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention server rank ", communicator_->rank(), " of ", communicator_->world_size(),
        " does not fit ", options_.workers, " workers + ", options_.servers, " servers"));
  }
  for (bool done = false; !done;) {
    if (absl::Status s = ServeOne(&done); !s.ok()) {
      communicator_->Abort(s.message());
      SetQueueDepth(0);  // nothing is answered any more
      return s;
    }
  }
  return absl::OkStatus();
}

void AttentionServerSession::SetQueueDepth(int32_t queued) {
  if (queued == queue_depth_) return;
  queue_depth_ = queued;
  if (options_.on_queue_depth) options_.on_queue_depth(queued);
}

absl::Status AttentionServerSession::ReceiveRequestHeaders(Handles& receives) {
  // In posting order; after each wait, every header that has landed by then
  // counts, whichever worker's it is.
  for (size_t i = 0; i < receives.size(); ++i) {
    if (absl::Status s = receives[i]->Wait(); !s.ok()) {
      WaitAll(receives).IgnoreError();
      return s;
    }
    int32_t arrived = 0;
    for (auto& receive : receives) arrived += receive->Test() ? 1 : 0;
    SetQueueDepth(arrived);
  }
  receives.clear();
  return absl::OkStatus();
}

absl::Status AttentionServerSession::CheckOrder(const ExchangeHeader& h) const {
  auto out_of_order = [&](const std::string& expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention server ", server_, ": workers sent ", h.Describe(), " after ",
        last_ ? last_->Describe() : std::string("nothing"), "; expected ", expected));
  };
  if (last_ && (h.n_layers != last_->n_layers || !(h.shape().n_heads == last_->n_heads &&
                                                    h.n_kv_heads == last_->n_kv_heads &&
                                                    h.head_dim == last_->head_dim &&
                                                    h.softmax_scale == last_->softmax_scale))) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention server ", server_, ": the model shape changed mid-job at ",
                     h.Describe()));
  }
  // Ping-pong: the halves are micro-batches m (A) and m + 1 (B), and B's
  // call of each (pass, layer) comes right after A's.
  if (h.ping_pong() && h.half() == 1) {
    if (!last_ || !last_->ping_pong() || last_->half() != 0 ||
        last_->micro_batch + 1 != h.micro_batch || last_->pass != h.pass ||
        last_->layer != h.layer) {
      return out_of_order("half B's call right after the same call of half A");
    }
    return h.pass == Pass::kBackward ? CheckKeptTensors(h) : absl::OkStatus();
  }
  const uint64_t next_micro_batch = last_ ? last_->micro_batch + 1 : 0;
  if (h.pass == Pass::kForward && h.layer == 0) {
    if (h.micro_batch != next_micro_batch) {
      return out_of_order(absl::StrCat("micro-batch ", next_micro_batch));
    }
    return absl::OkStatus();
  }
  // The previous exchange: this micro-batch's previous call, or for half A
  // half B's call of the same step (which follows A's previous call).
  if (h.ping_pong()) {
    if (!last_ || !last_->ping_pong() || last_->half() != 1 ||
        last_->micro_batch != h.micro_batch + 1) {
      return out_of_order(absl::StrCat("half B (micro-batch ", h.micro_batch + 1,
                                       ") to finish its call before half A's next"));
    }
  } else if (!last_ || last_->ping_pong() || h.micro_batch != last_->micro_batch) {
    return out_of_order("the forward of layer 0 of a new micro-batch");
  }
  if (h.pass == Pass::kForward) {
    if (last_->pass != Pass::kForward || last_->layer != h.layer - 1) {
      return out_of_order(absl::StrCat("forward layer ", last_->layer + 1));
    }
    return absl::OkStatus();
  }
  const bool after_forward = last_->pass == Pass::kForward && last_->layer == h.n_layers - 1 &&
                             h.layer == h.n_layers - 1;
  const bool after_backward = last_->pass == Pass::kBackward && last_->layer == h.layer + 1;
  if (!after_forward && !after_backward) {
    return out_of_order("backward in reverse layer order after the last forward");
  }
  return CheckKeptTensors(h);
}

absl::Status AttentionServerSession::CheckKeptTensors(const ExchangeHeader& h) const {
  const bool carries = (h.flags & kCarriesForwardTensors) != 0;
  if (carries == options_.keep_qkv_for_backward) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention server ", server_, ": ", h.Describe(),
        carries ? " resends the forward tensors but this server keeps them"
                : " expects this server to have kept the forward tensors, but it drops them",
        " (keep_qkv_for_backward differs)"));
  }
  return absl::OkStatus();
}

void AttentionServerSession::ReportTiming(MicroBatchTiming& timing) {
  if (options_.on_micro_batch_timing && timing.cost_units > 0 && timing.seconds > 0) {
    options_.on_micro_batch_timing(timing);
  }
  timing = MicroBatchTiming{};
}

void AttentionServerSession::UseHalf(int half) {
  if (half == current_half_) return;
  using std::swap;
  swap(plan_, parked_.plan);
  swap(tasks_, parked_.tasks);
  swap(layers_, parked_.layers);
  swap(timing_, parked_.timing);
  current_half_ = half;
}

absl::Status AttentionServerSession::ReceiveDocuments(const ExchangeHeader& header) {
  // A new micro-batch: this half's previous one is over, and at half A (or
  // a plain micro-batch) the other half's too.
  ReportTiming(timing_);
  if (header.half() == 0) ReportTiming(parked_.timing);
  timing_.micro_batch = header.micro_batch;
  const int32_t workers = options_.workers;
  Handles receives;
  for (int32_t w = 0; w < workers; ++w) {
    if (absl::Status s = Post(receives, communicator_->RecvAsync(w, kDocumentsHeaderTag,
                                                                 headers_[w].data(), kHeaderBytes));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return s;
  std::vector<std::vector<int64_t>> documents(workers);
  // Lengths, and worker 0's speed weights and plan (documents_message.h).
  std::vector<std::vector<int64_t>> messages(workers);
  std::vector<ExchangeHeader> announces(workers);
  for (int32_t w = 0; w < workers; ++w) {
    auto announce = DecodeHeader(headers_[w], Describe(w));
    if (!announce.ok()) return announce.status();
    ExchangeHeader expected = header;
    expected.payload_bytes = 0;
    if (absl::Status s = CheckHeaderMatches(expected, *announce, Describe(w)); !s.ok()) return s;
    auto words = ExpectedDocumentsWords(*announce, w, DocumentsFormat::Disaggregated(options_.servers), Describe(w));
    if (!words.ok()) return words.status();
    announces[w] = *announce;
    messages[w].resize(*words);
    if (*words == 0) continue;
    if (absl::Status s = Post(receives, communicator_->RecvAsync(
                                            w, kDocumentsTag, messages[w].data(),
                                            *words * sizeof(int64_t)));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return s;
  DocumentsMessage worker0;
  for (int32_t w = 0; w < workers; ++w) {
    auto received = DecodeDocumentsMessage(
        messages[w], announces[w], DocumentsFormat::Disaggregated(options_.servers), Describe(w));
    if (!received.ok()) return received.status();
    documents[w] = std::move(received->lengths);
    if (w == 0) worker0 = *std::move(received);
  }
  auto plan = planner_.Plan(std::move(documents), worker0, header);
  if (!plan.ok()) return plan.status();
  plan_ = *std::move(plan);
  stats_.plan_sources = planner_.sources();
  tasks_ = KernelTasks(plan_->batches[server_]);
  ++stats_.micro_batches;
  if (layers_.size() != static_cast<size_t>(header.n_layers)) {
    layers_.resize(options_.keep_qkv_for_backward ? header.n_layers : 1);
  }
  return absl::OkStatus();
}

absl::Status AttentionServerSession::ServeOne(bool* done) {
  *done = false;
  const int32_t workers = options_.workers;
  Handles receives;
  for (int32_t w = 0; w < workers; ++w) {
    if (absl::Status s = Post(receives, communicator_->RecvAsync(w, kHeaderTag,
                                                                 headers_[w].data(), kHeaderBytes));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ReceiveRequestHeaders(receives); !s.ok()) return s;
  std::vector<ExchangeHeader> headers;
  for (int32_t w = 0; w < workers; ++w) {
    auto header = DecodeHeader(headers_[w], Describe(w));
    if (!header.ok()) return header.status();
    headers.push_back(*header);
  }
  const ExchangeHeader& first = headers[0];
  if (first.exchange != exchange_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention server ", server_, ": ", Describe(0), " sent ", first.Describe(),
        ", expected exchange ", exchange_));
  }
  for (int32_t w = 1; w < workers; ++w) {
    if (absl::Status s = CheckHeaderMatches(first, headers[w], Describe(w)); !s.ok()) return s;
  }
  if (first.pass == Pass::kEnd) {
    // Acknowledge, so the workers close only after we have read the end.
    const HeaderBytes ack = EncodeHeader(first);
    Handles sends;
    for (int32_t w = 0; w < workers; ++w) {
      if (absl::Status s = Post(sends, communicator_->SendAsync(w, kReplyHeaderTag, ack.data(),
                                                                kHeaderBytes));
          !s.ok()) {
        WaitAll(sends).IgnoreError();
        return s;
      }
    }
    if (absl::Status s = WaitAll(sends); !s.ok()) return s;
    SetQueueDepth(0);
    ReportTiming(timing_);
    ReportTiming(parked_.timing);
    *done = true;
    return absl::OkStatus();
  }
  if (absl::Status s = CheckOrder(first); !s.ok()) return s;
  UseHalf(first.half());
  if (first.pass == Pass::kForward && first.layer == 0) {
    if (absl::Status s = ReceiveDocuments(first); !s.ok()) return s;
  }
  const RowWidths widths = RowWidths::Of(first.shape());
  const bool carries = (first.flags & kCarriesForwardTensors) != 0;
  const auto& shares = plan_->shares[server_];
  for (int32_t w = 0; w < workers; ++w) {
    const int64_t floats = first.pass == Pass::kForward
                               ? ForwardRequestFloats(shares[w], widths)
                               : BackwardRequestFloats(shares[w], widths, carries);
    if (headers[w].payload_bytes != floats * static_cast<int64_t>(sizeof(float))) {
      return absl::DataLossError(absl::StrCat(
          Describe(w), " sends ", headers[w].payload_bytes, " bytes for ", first.Describe(),
          "; the plan says ", floats * sizeof(float)));
    }
    requests_[w].resize(floats);
    if (floats == 0) continue;
    if (absl::Status s = Post(receives, communicator_->RecvAsync(w, kPayloadTag,
                                                                 requests_[w].data(),
                                                                 floats * sizeof(float)));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = WaitAll(receives); !s.ok()) return s;
  if (absl::Status s = Compute(first); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("attention server ", server_, " at ",
                                               first.Describe(), ": ", s.message()));
  }

  Handles sends;
  std::vector<HeaderBytes> reply_headers(workers);
  for (int32_t w = 0; w < workers; ++w) {
    ExchangeHeader reply = first;
    reply.num_documents = 0;
    reply.payload_bytes = static_cast<int64_t>(replies_[w].size() * sizeof(float));
    reply_headers[w] = EncodeHeader(reply);
    absl::Status s = Post(sends, communicator_->SendAsync(w, kReplyHeaderTag,
                                                          reply_headers[w].data(), kHeaderBytes));
    if (s.ok() && !replies_[w].empty()) {
      s = Post(sends, communicator_->SendAsync(w, kReplyPayloadTag, replies_[w].data(),
                                               reply.payload_bytes));
    }
    if (!s.ok()) {
      WaitAll(sends).IgnoreError();
      return s;
    }
  }
  if (absl::Status s = WaitAll(sends); !s.ok()) return s;
  SetQueueDepth(0);  // every request of this exchange is answered
  last_ = first;
  ++exchange_;
  ++stats_.exchanges;
  return absl::OkStatus();
}

absl::Status AttentionServerSession::Compute(const ExchangeHeader& h) {
  const kernels::AttentionShape shape = h.shape();
  const RowWidths widths = RowWidths::Of(shape);
  const planner::ServerBatch& batch = plan_->batches[server_];
  const auto& shares = plan_->shares[server_];
  const int64_t q_rows = batch.q_rows, kv_rows = batch.kv_rows;
  const bool carries = (h.flags & kCarriesForwardTensors) != 0;
  Tensors& t = ForwardTensors(h.layer);
  const absl::Time start = absl::Now();
  if (h.pass == Pass::kForward || carries) {
    t.q.resize(q_rows * widths.q);
    t.k.resize(kv_rows * widths.kv);
    t.v.resize(kv_rows * widths.kv);
    t.o.resize(q_rows * widths.q);
    t.lse.resize(q_rows * widths.lse);
  } else if (t.q.size() != static_cast<size_t>(q_rows * widths.q) ||
             t.k.size() != static_cast<size_t>(kv_rows * widths.kv)) {
    return absl::InternalError("kept forward tensors do not match this micro-batch");
  }

  if (h.pass == Pass::kForward) {
    for (int32_t w = 0; w < options_.workers; ++w) {
      const WorkerShare& s = shares[w];
      const float* in = requests_[w].data();
      TakeFloats(in, t.q.data() + s.q_row * widths.q, s.q_rows * widths.q);
      TakeFloats(in, t.k.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
      TakeFloats(in, t.v.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
    }
    if (!tasks_.empty()) {
      if (absl::Status s = kernels::CoreAttentionForward(shape, tasks_, t.q.data(), q_rows,
                                                         t.k.data(), t.v.data(), kv_rows,
                                                         t.o.data(), t.lse.data(), options_.pool);
          !s.ok()) {
        return s;
      }
      stats_.tasks += static_cast<int64_t>(tasks_.size());
      stats_.query_rows += q_rows;
    }
    for (int32_t w = 0; w < options_.workers; ++w) {
      const WorkerShare& s = shares[w];
      replies_[w].resize(ForwardReplyFloats(s, widths));
      float* out = replies_[w].data();
      PutFloats(out, t.o.data() + s.q_row * widths.q, s.q_rows * widths.q);
      PutFloats(out, t.lse.data() + s.q_row * widths.lse, s.q_rows * widths.lse);
    }
  } else {
    d_o_.resize(q_rows * widths.q);
    d_q_.resize(q_rows * widths.q);
    d_k_.assign(kv_rows * widths.kv, 0.0f);  // the kernel accumulates
    d_v_.assign(kv_rows * widths.kv, 0.0f);
    for (int32_t w = 0; w < options_.workers; ++w) {
      const WorkerShare& s = shares[w];
      const float* in = requests_[w].data();
      TakeFloats(in, d_o_.data() + s.q_row * widths.q, s.q_rows * widths.q);
      if (!carries) continue;
      TakeFloats(in, t.q.data() + s.q_row * widths.q, s.q_rows * widths.q);
      TakeFloats(in, t.k.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
      TakeFloats(in, t.v.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
      TakeFloats(in, t.o.data() + s.q_row * widths.q, s.q_rows * widths.q);
      TakeFloats(in, t.lse.data() + s.q_row * widths.lse, s.q_rows * widths.lse);
    }
    if (!tasks_.empty()) {
      if (absl::Status s = kernels::CoreAttentionBackward(
              shape, tasks_, t.q.data(), q_rows, t.k.data(), t.v.data(), kv_rows, t.o.data(),
              t.lse.data(), d_o_.data(), d_q_.data(), d_k_.data(), d_v_.data(), options_.pool);
          !s.ok()) {
        return s;
      }
    }
    for (int32_t w = 0; w < options_.workers; ++w) {
      const WorkerShare& s = shares[w];
      replies_[w].resize(BackwardReplyFloats(s, widths));
      float* out = replies_[w].data();
      PutFloats(out, d_q_.data() + s.q_row * widths.q, s.q_rows * widths.q);
      PutFloats(out, d_k_.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
      PutFloats(out, d_v_.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stats_.kernel_seconds += seconds;
  timing_.seconds += seconds;
  timing_.cost_units += PassCost(plan_->plan, server_, h.pass == Pass::kBackward);
  return absl::OkStatus();
}

}  // namespace corescape::attention
