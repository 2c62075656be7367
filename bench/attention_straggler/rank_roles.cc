#include "bench/attention_straggler/rank_roles.h"

#include <cblas.h>
#include <sys/resource.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/attention_straggler/attention_step.h"
#include "bench/attention_straggler/rank_results.h"
#include "runtime/attention/attention_server_session.h"
#include "runtime/attention/disaggregated_core_attention.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/directory_rendezvous.h"
#include "runtime/base/thread_pool.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::bench {
namespace {

constexpr char kToken[] = "attention-straggler";

// This process's transport and everyone's addresses, indexed by rank.
struct Membership {
  std::unique_ptr<comm::Transport> transport;
  std::vector<std::string> addresses;
};

absl::StatusOr<Membership> Join(const RankOptions& options, int rank, int world) {
  comm::TransportOptions transport_options;
  transport_options.listen_address = "127.0.0.1:0";
  auto transport = comm::Transport::Create(transport_options);
  if (!transport.ok()) return transport.status();
  auto addresses = RendezvousThroughDirectory(options.run_dir, rank, world,
                                              (*transport)->address(), options.timeout);
  if (!addresses.ok()) return addresses.status();
  return Membership{*std::move(transport), *std::move(addresses)};
}

// A communicator over ranks 0..world-1 of the membership.
absl::StatusOr<std::unique_ptr<comm::Communicator>> Connect(Membership& m, int rank, int world,
                                                            const std::string& job_id,
                                                            const RankOptions& options) {
  comm::CommunicatorOptions o;
  o.rank = rank;
  o.world_size = world;
  o.generation = 1;
  o.peer_addresses.assign(m.addresses.begin(), m.addresses.begin() + world);
  o.secret_token = kToken;
  o.job_id = job_id;
  o.timeout = options.timeout;
  return comm::Communicator::Create(m.transport.get(), o);
}

// User + system CPU time of the whole process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::unique_ptr<ThreadPool> KernelPool(const StragglerConfig& config) {
  openblas_set_num_threads(1);  // the kernel parallelises over tasks itself
  if (config.threads <= 1) return nullptr;
  return std::make_unique<ThreadPool>(config.threads);
}

void RecordPlan(const attention::MicroBatchPlan* plan, WorkerResult& result) {
  if (plan == nullptr) return;
  result.plan_imbalance = plan->plan.imbalance;
  result.plan_tasks = static_cast<double>(plan->plan.stats.tasks);
  result.plan_split_documents = static_cast<double>(plan->plan.stats.split_documents);
  for (const planner::ServerLoad& load : plan->plan.servers) {
    result.plan_server_pairs.push_back(static_cast<double>(load.pairs));
  }
}

}  // namespace

absl::Status RunWorker(const StragglerConfig& config, AttentionMode mode, int worker,
                       const RankOptions& options) {
  const bool disaggregated = mode == AttentionMode::kDisaggregated;
  const int world = config.workers + (disaggregated ? config.servers : 0);
  std::unique_ptr<ThreadPool> pool = KernelPool(config);
  auto membership = Join(options, worker, world);
  if (!membership.ok()) return membership.status();
  auto data_parallel = Connect(*membership, worker, config.workers, "straggler/dp", options);
  if (!data_parallel.ok()) return data_parallel.status();

  std::unique_ptr<model::CoreAttentionExecutor> executor;
  attention::DisaggregatedCoreAttention* remote = nullptr;
  if (disaggregated) {
    auto communicator = Connect(*membership, worker, world, "straggler/attn", options);
    if (!communicator.ok()) return communicator.status();
    attention::DisaggregatedOptions o;
    o.workers = config.workers;
    o.servers = config.servers;
    o.n_layers = config.layers;
    o.tolerance = config.tolerance;
    o.keep_qkv_for_backward = config.keep_qkv_for_backward;
    auto created = attention::DisaggregatedCoreAttention::Create(*std::move(communicator), o);
    if (!created.ok()) return created.status();
    remote = created->get();
    executor = *std::move(created);
  } else {
    executor = std::make_unique<model::LocalCoreAttention>(pool.get());
  }

  WorkerTensors tensors = MakeWorkerTensors(config, worker);
  WorkerResult result;
  result.worker = worker;
  for (int repeat = 0; repeat < config.warmup + config.repeats; ++repeat) {
    if (absl::Status s = (*data_parallel)->Barrier(); !s.ok()) return s;
    const comm::ByteCounters before = remote ? remote->communicator().counters()
                                             : comm::ByteCounters{};
    const double cpu_before = ProcessCpuSeconds();
    auto seconds = RunAttentionStep(*executor, config, tensors);
    if (!seconds.ok()) return seconds.status();
    if (repeat < config.warmup) continue;
    result.cpu_seconds.push_back(ProcessCpuSeconds() - cpu_before);
    result.forward_seconds.push_back(seconds->forward);
    result.backward_seconds.push_back(seconds->backward);
    if (remote != nullptr) {
      const comm::ByteCounters moved = remote->communicator().counters() - before;
      result.bytes_moved.push_back(static_cast<double>(moved.total_sent() +
                                                       moved.total_received()));
    }
  }
  if (remote != nullptr) RecordPlan(remote->current_plan(), result);
  executor.reset();  // disaggregated: tells the servers this worker is done
  if (absl::Status s = WriteOutputs(tensors, options.run_dir, mode, worker); !s.ok()) return s;
  return WriteFileAtomically(WorkerResultPath(options.run_dir, worker),
                             EncodeWorkerResult(result));
}

absl::Status RunServer(const StragglerConfig& config, int server, const RankOptions& options) {
  const int world = config.workers + config.servers;
  const int rank = config.workers + server;
  std::unique_ptr<ThreadPool> pool = KernelPool(config);
  auto membership = Join(options, rank, world);
  if (!membership.ok()) return membership.status();
  auto communicator = Connect(*membership, rank, world, "straggler/attn", options);
  if (!communicator.ok()) return communicator.status();

  attention::ServerSessionOptions o;
  o.workers = config.workers;
  o.servers = config.servers;
  o.tolerance = config.tolerance;
  o.keep_qkv_for_backward = config.keep_qkv_for_backward;
  o.pool = pool.get();
  attention::AttentionServerSession session(communicator->get(), o);
  ServerResult result;
  result.server = server;
  double compute_before = 0, cpu_before = ProcessCpuSeconds();
  for (bool done = false; !done;) {
    if (absl::Status s = session.ServeOne(&done); !s.ok()) {
      (*communicator)->Abort(s.message());  // the workers fail with it too
      return s;
    }
    const attention::ServerSessionStats& stats = session.stats();
    if (done || stats.exchanges % config.exchanges_per_repeat() != 0) continue;
    // A repeat ends with its last exchange; the next one's first exchange
    // waits for the workers' barrier, asleep.
    const int64_t repeat = stats.exchanges / config.exchanges_per_repeat() - 1;
    const double cpu = ProcessCpuSeconds();
    if (repeat >= config.warmup) {
      result.compute_seconds.push_back(stats.kernel_seconds - compute_before);
      result.cpu_seconds.push_back(cpu - cpu_before);
    }
    compute_before = stats.kernel_seconds;
    cpu_before = cpu;
  }
  result.tasks = static_cast<double>(session.stats().tasks);
  result.query_rows = static_cast<double>(session.stats().query_rows);
  return WriteFileAtomically(ServerResultPath(options.run_dir, server),
                             EncodeServerResult(result));
}

}  // namespace corescape::bench
