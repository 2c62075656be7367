#include "runtime/train/data_parallel_trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "runtime/data/test_util.h"
#include "runtime/model/cpu_execution_for_test.h"
#include "runtime/model/training_flops.h"

namespace corescape::train {
namespace {

using data::testing::TestPath;

std::string PrepareDataset() {
  static const std::string* dir = [] {
    std::string text;
    for (int doc = 0; doc < 300; ++doc) {
      for (int i = 0; i <= doc % 7; ++i) text += absl::StrCat("line ", doc * 31 % 17, " of ", i, "\n");
      text += "%\n";
    }
    absl::StatusOr<std::string> dataset = data::testing::PrepareTestDataset(text);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    return new std::string(dataset.value_or(""));
  }();
  return *dir;
}

TrainerConfig Config(int micro_batch) {
  TrainerConfig config;
  config.model = *model::PresetConfig("tiny");
  config.train_data = {PrepareDataset()};
  config.seq_len = 32;
  config.micro_batch = micro_batch;
  config.steps = 6;
  config.schedule.peak_lr = 3e-3;
  config.schedule.warmup_steps = 2;
  config.schedule.total_steps = 6;
  config.threads = 1;
  return config;
}

// P ranks as threads: each collective waits for all ranks, then sums their
// buffers in rank order (deterministic) and hands every rank the result.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), buffers_(size) {}

  class Member final : public DataParallelGroup {
   public:
    Member(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int world_size() const override { return group_->size_; }
    absl::Status AllReduceSum(float* data, int64_t count) override {
      group_->Reduce(rank_, data, count);
      return absl::OkStatus();
    }
    absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                            absl::Span<const int64_t> bytes_per_rank) override {
      group_->Gather(rank_, send, send_bytes, recv, bytes_per_rank);
      return absl::OkStatus();
    }
    absl::StatusOr<std::unique_ptr<optim::PendingCollective>> StartAllGatherV(
        const void* send, int64_t send_bytes, void* recv,
        absl::Span<const int64_t> bytes_per_rank) override {
      // Completed at once: every rank reaches the same call in lock-step.
      group_->Gather(rank_, send, send_bytes, recv, bytes_per_rank);
      struct Done final : optim::PendingCollective {
        absl::Status Wait() override { return absl::OkStatus(); }
      };
      return std::unique_ptr<optim::PendingCollective>(new Done());
    }
    int64_t bytes_sent() const override { return 0; }
    int64_t bytes_received() const override { return 0; }
    DataParallelGroup* control_channel() override { return control; }

    DataParallelGroup* control = nullptr;  // what control_channel() offers

   private:
    ThreadGroup* group_;
    int rank_;
  };

 private:
  void Gather(int rank, const void* send, int64_t send_bytes, void* recv,
              absl::Span<const int64_t> bytes_per_rank) {
    absl::MutexLock lock(&mu_);
    const uint64_t round = round_;
    sends_.resize(size_);
    recvs_.resize(size_);
    sends_[rank] = std::string(static_cast<const char*>(send), send_bytes);
    recvs_[rank] = recv;
    if (++arrived_ == size_) {
      for (int r = 0; r < size_; ++r) {
        char* out = static_cast<char*>(recvs_[r]);
        for (int from = 0; from < size_; ++from) {
          std::memcpy(out, sends_[from].data(), sends_[from].size());
          out += bytes_per_rank[from];
        }
      }
      arrived_ = 0;
      ++round_;
    } else {
      auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return round_ != round; };
      mu_.Await(absl::Condition(&done));
    }
  }

  void Reduce(int rank, float* data, int64_t count) {
    absl::MutexLock lock(&mu_);
    const uint64_t round = round_;
    buffers_[rank] = data;
    if (++arrived_ == size_) {
      std::vector<float> sum(count, 0.0f);
      for (int r = 0; r < size_; ++r) {
        for (int64_t i = 0; i < count; ++i) sum[i] += buffers_[r][i];
      }
      for (int r = 0; r < size_; ++r) std::copy(sum.begin(), sum.end(), buffers_[r]);
      arrived_ = 0;
      ++round_;
    } else {
      auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return round_ != round; };
      mu_.Await(absl::Condition(&done));
    }
  }

  const int size_;
  absl::Mutex mu_;
  std::vector<float*> buffers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> sends_ ABSL_GUARDED_BY(mu_);
  std::vector<void*> recvs_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;
};

// Steps both ranks `steps` times, each on its own thread (their collectives
// meet in the group); returns each rank's losses.
std::array<std::vector<double>, 2> StepBothRanks(std::unique_ptr<DataParallelTrainer> (&ranks)[2],
                                                 int steps) {
  std::array<std::vector<double>, 2> losses;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r]() {
      for (int i = 0; i < steps; ++i) {
        auto result = ranks[r]->Step();
        ASSERT_TRUE(result.ok()) << result.status();
        losses[r].push_back(result->loss);
      }
    });
  }
  for (auto& t : threads) t.join();
  return losses;
}

TEST(DataParallelTrainerTest, TwoRanksOfBEqualOneRankOf2BAndStayIdentical) {
  SingleProcessGroup single;
  auto reference = DataParallelTrainer::Create(Config(4), &single);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<double> reference_losses;
  for (int i = 0; i < 6; ++i) {
    auto result = (*reference)->Step();
    ASSERT_TRUE(result.ok()) << "step " << i + 1 << ": " << result.status();
    reference_losses.push_back(result->loss);
  }

  ThreadGroup group(2);
  ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
  std::unique_ptr<DataParallelTrainer> ranks[2];
  for (int r = 0; r < 2; ++r) {
    auto trainer = DataParallelTrainer::Create(Config(2), &members[r]);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ranks[r] = *std::move(trainer);
  }
  const std::array<std::vector<double>, 2> losses = StepBothRanks(ranks, 6);
  EXPECT_EQ(ranks[0]->model().parameters(), ranks[1]->model().parameters());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(losses[0][i], losses[1][i]);
    EXPECT_NEAR(losses[0][i], reference_losses[i], 1e-5 * reference_losses[i]) << "step " << i;
  }
  EXPECT_LT(reference_losses.back(), reference_losses.front());
}

// AdamS and SCAPE synchronize inside the optimizer: replicas must still
// agree bitwise, SCAPE must send less, and both must learn.
TEST(DataParallelTrainerTest, AdamSAndScapeKeepReplicasIdentical) {
  for (const char* optimizer : {"adams", "scape"}) {
    ThreadGroup group(2);
    ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
    std::unique_ptr<DataParallelTrainer> ranks[2];
    for (int r = 0; r < 2; ++r) {
      TrainerConfig config = Config(2);
      config.optimizer.name = optimizer;
      config.steps = 8;
      config.schedule.total_steps = 8;
      config.optimizer.scape.density = 0.1;
      config.optimizer.scape.dense_warmup_steps = 2;
      auto trainer = DataParallelTrainer::Create(config, &members[r]);
      ASSERT_TRUE(trainer.ok()) << optimizer << ": " << trainer.status();
      ranks[r] = *std::move(trainer);
    }
    const std::vector<double> losses = StepBothRanks(ranks, 8)[0];
    EXPECT_EQ(ranks[0]->model().parameters(), ranks[1]->model().parameters()) << optimizer;
    EXPECT_LT(losses.back(), losses.front()) << optimizer;
    auto snapshot = ranks[0]->Snapshot();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    EXPECT_TRUE(snapshot->blobs.count("optimizer_state")) << optimizer;
  }
}

// Given a group with a control channel, the trainer sends its token counts
// and losses over the channel, and SCAPE's mask exchange encodes and issues
// its collectives on its own thread (the group is the optimizer's alone):
// not a bit changes against a group that carries both, and the encoding
// leaves the step's path. A lock-step group: any collective issued out of
// order on one rank would pair with another kind on the other and fail.
TEST(DataParallelTrainerTest, ScapeMaskGoesOverItsOwnThreadWhenTheGroupHasAControlChannel) {
  constexpr int kSteps = 7;
  std::vector<float> parameters[2];
  std::vector<double> losses[2];
  optim::OptimizerStepPhases last_phases[2];
  for (int variant = 0; variant < 2; ++variant) {
    const bool with_channel = variant == 1;
    ThreadGroup group(2), control(2);
    ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
    ThreadGroup::Member control_members[2] = {{&control, 0}, {&control, 1}};
    std::unique_ptr<DataParallelTrainer> ranks[2];
    for (int r = 0; r < 2; ++r) {
      if (with_channel) members[r].control = &control_members[r];
      TrainerConfig config = Config(2);
      config.optimizer.name = "scape";
      config.steps = kSteps;
      config.schedule.total_steps = kSteps;
      config.optimizer.scape.density = 0.1;
      config.optimizer.scape.dense_warmup_steps = 1;
      auto trainer = DataParallelTrainer::Create(config, &members[r]);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      ranks[r] = *std::move(trainer);
    }
    losses[variant] = StepBothRanks(ranks, kSteps)[0];
    parameters[variant] = ranks[0]->model().parameters();
    EXPECT_EQ(ranks[1]->model().parameters(), parameters[variant]);
    last_phases[variant] = ranks[0]->optimizer().last_step().phases;
  }
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(parameters[1], parameters[0]);
  EXPECT_GT(last_phases[0].encode, 0.0);  // shared: encoded on the step's thread
  EXPECT_EQ(last_phases[1].encode, 0.0);
  EXPECT_GT(last_phases[1].coding_overlapped, 0.0);
}

// Local core attention that fails once, at its n-th call (counting Forward
// and Backward; -1: never), the way a remote executor fails when a server
// dies. It records the q_end list of every layer-0 forward, whole micro-
// batches and ping-pong halves (the default StartForward calls Forward)
// alike: what a disaggregated executor would have had to be planned for.
class TestAttention final : public model::CoreAttentionExecutor {
 public:
  explicit TestAttention(int fail_at_call = -1) : fail_at_call_(fail_at_call) {}
  absl::Status Forward(const model::AttentionForwardCall& call) override {
    if (++calls_ == fail_at_call_) return absl::UnavailableError("attention server 1 died");
    if (call.in.layer == 0) {
      std::vector<int64_t>& ends = documents_.emplace_back();
      for (const kernels::AttentionTask& task : call.in.tasks) ends.push_back(task.q_end);
    }
    return local_.Forward(call);
  }
  absl::Status Backward(const model::AttentionBackwardCall& call) override {
    if (++calls_ == fail_at_call_) return absl::UnavailableError("attention server 1 died");
    return local_.Backward(call);
  }

  const std::vector<std::vector<int64_t>>& documents() const { return documents_; }

 private:
  model::LocalCoreAttention local_{nullptr};
  const int fail_at_call_;
  int calls_ = 0;
  std::vector<std::vector<int64_t>> documents_;
};

// Core attention failing on one rank mid-step (or mid-validation) makes
// every rank drop that step; redone with a new executor, training ends
// bitwise where it would have without the failure.
TEST(DataParallelTrainerTest, StepDroppedOnEveryRankWhenAttentionFailsAndRedoneExactly) {
  auto train = [](bool fail) {
    ThreadGroup group(2);
    ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
    std::unique_ptr<DataParallelTrainer> ranks[2];
    for (int r = 0; r < 2; ++r) {
      TrainerConfig config = Config(2);
      config.grad_accum = 2;
      // Rank 1 fails in the backward of step 3's second micro-batch (2 layers:
      // 8 calls per step), then in its first validation call.
      const int calls_per_step = 2 * 2 * config.model.n_layers;
      config.attention = std::make_shared<TestAttention>(
          fail && r == 1 ? 2 * calls_per_step + calls_per_step - 1 : -1);
      auto trainer = DataParallelTrainer::Create(config, &members[r]);
      EXPECT_TRUE(trainer.ok()) << trainer.status();
      ranks[r] = *std::move(trainer);
    }
    std::vector<double> losses;
    std::vector<double> validation(2, 0.0);
    int dropped[2] = {0, 0};
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r]() {
        while (ranks[r]->step() < 6) {
          auto result = ranks[r]->Step();
          if (!result.ok()) {
            ASSERT_TRUE(IsDiscardedForAttention(result.status())) << result.status();
            EXPECT_EQ(ranks[r]->step(), 2);
            EXPECT_NE(result.status().message().find(r == 1 ? "failed here: attention server 1 "
                                                              "died"
                                                            : "failed on 1 other rank"),
                      std::string::npos)
                << result.status();
            ++dropped[r];
            // The new executor fails at the first call of the validation.
            if (r == 1) {
              ASSERT_TRUE(ranks[r]
                              ->SetAttention(std::make_shared<TestAttention>(
                                  4 * 2 * 2 * ranks[r]->config().model.n_layers + 1))
                              .ok());
            }
            continue;
          }
          if (r == 0) losses.push_back(result->loss);
        }
        auto val = ranks[r]->Validate(2);
        if (!val.ok()) {
          ASSERT_TRUE(IsDiscardedForAttention(val.status())) << val.status();
          ++dropped[r];
          if (r == 1) {
            ASSERT_TRUE(ranks[r]->SetAttention(nullptr).ok());
          }
          val = ranks[r]->Validate(2);
        }
        ASSERT_TRUE(val.ok()) << val.status();
        validation[r] = *val;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ranks[0]->model().parameters(), ranks[1]->model().parameters());
    EXPECT_EQ(dropped[0], fail ? 2 : 0);
    EXPECT_EQ(dropped[1], fail ? 2 : 0);
    EXPECT_EQ(validation[0], validation[1]);
    return std::make_tuple(ranks[0]->model().parameters(), losses, validation[0]);
  };
  const auto [clean_params, clean_losses, clean_validation] = train(false);
  const auto [params, losses, validation] = train(true);
  EXPECT_EQ(params, clean_params);
  EXPECT_EQ(losses, clean_losses);
  EXPECT_EQ(validation, clean_validation);
  ASSERT_EQ(losses.size(), 6u);
}

TEST(DataParallelTrainerTest, ResumeFromSnapshotContinuesBitwise) {
  SingleProcessGroup group;
  auto straight = DataParallelTrainer::Create(Config(2), &group);
  ASSERT_TRUE(straight.ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*straight)->Step().ok());

  auto first = DataParallelTrainer::Create(Config(2), &group);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*first)->Step().ok());
  const std::string dir = TestPath("checkpoints");
  auto snapshot = (*first)->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_TRUE(checkpoint::WriteCheckpoint(dir, *snapshot).ok());
  auto loaded = checkpoint::LoadNewestCheckpoint(dir);
  ASSERT_TRUE(loaded.ok());
  auto resumed = DataParallelTrainer::Create(Config(2), &group);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->Restore(*loaded).ok());
  EXPECT_EQ((*resumed)->step(), 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_EQ((*resumed)->model().parameters(), (*straight)->model().parameters());
}

// A GPU's data flow on the CPU kernels trains bitwise like the in-place
// step: for adamw (clipping binding or not), adams and scape's reference and
// catch-up rules the optimizer's state lives in the backend and nothing is
// downloaded per step; for a scape rule with no device form the gradients
// are downloaded and the host optimizer runs. Checkpoints move between the
// two in both directions.
TEST(DataParallelTrainerTest, DeviceCopiesTrainBitwiseLikeInPlace) {
  struct Case {
    const char* optimizer;
    double grad_clip;
    bool on_device;
    optim::ScapeRule rule = optim::ScapeConfig{}.rule;
    bool offload_residuals = false;
  };
  for (const Case& c :
       {Case{"adamw", optim::kDefaultGradClip, true}, Case{"adamw", 1e-3, true},
        Case{"adams", 0, true}, Case{"scape", 0, true},
        Case{"scape", 1e-3, true, optim::ScapeRule::kCatchUp},
        Case{"scape", 0, true, optim::ScapeRule::kCatchUp, true},
        Case{"scape", 1e-3, true, optim::ScapeRule::kReference},
        Case{"scape", optim::kDefaultGradClip, true, optim::ScapeRule::kReference},
        Case{"scape", 1e-3, true, optim::ScapeRule::kReference, true}}) {
    SCOPED_TRACE(absl::StrCat(c.optimizer, " clip ", c.grad_clip, " rule ",
                              optim::ScapeRuleName(c.rule), " offload ", c.offload_residuals));
    TrainerConfig config = Config(2);
    config.optimizer.name = c.optimizer;
    config.optimizer.grad_clip = c.grad_clip;
    config.optimizer.scape.rule = c.rule;
    config.optimizer.scape.offload_residuals = c.offload_residuals;
    SingleProcessGroup group;
    auto in_place = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(in_place.ok()) << in_place.status();
    EXPECT_FALSE((*in_place)->optimizer_on_device());
    config.ops = model::NewDeviceCopiesForTest();
    auto copies = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(copies.ok()) << copies.status();
    EXPECT_EQ((*copies)->optimizer_on_device(), c.on_device);
    for (int i = 0; i < 3; ++i) {
      auto a = (*in_place)->Step();
      auto b = (*copies)->Step();
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " / " << b.status();
      EXPECT_EQ(a->loss, b->loss) << "step " << i + 1;
      EXPECT_EQ(a->grad_norm, b->grad_norm) << "step " << i + 1;
    }
    EXPECT_EQ((*copies)->model().host_parameters_current(), !c.on_device);
    ASSERT_TRUE((*copies)->DownloadParameters().ok());
    EXPECT_EQ((*in_place)->model().parameters(), (*copies)->model().parameters());
    EXPECT_EQ((*in_place)->optimizer().first_moment(), (*copies)->optimizer().first_moment());

    // An in-place checkpoint restores into the device form and back; a
    // restored model reaches the device before its next step.
    auto snapshot = (*in_place)->Snapshot();
    ASSERT_TRUE(snapshot.ok());
    config.ops = model::NewDeviceCopiesForTest();
    auto resumed = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->Restore(*snapshot).ok());
    auto a = (*in_place)->Step();
    auto b = (*resumed)->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss);
    auto device_snapshot = (*resumed)->Snapshot();
    ASSERT_TRUE(device_snapshot.ok()) << device_snapshot.status();
    config.ops = nullptr;
    auto back = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(back.ok());
    ASSERT_TRUE((*back)->Restore(*device_snapshot).ok());
    a = (*in_place)->Step();
    b = (*resumed)->Step();
    auto c_step = (*back)->Step();
    ASSERT_TRUE(a.ok() && b.ok() && c_step.ok());
    EXPECT_EQ(a->loss, b->loss);
    EXPECT_EQ(a->loss, c_step->loss);
    ASSERT_TRUE((*resumed)->DownloadParameters().ok());
    EXPECT_EQ((*in_place)->model().parameters(), (*resumed)->model().parameters());
    EXPECT_EQ((*in_place)->model().parameters(), (*back)->model().parameters());
  }
}

// Two ranks whose dense optimizer lives in the backend all-reduce the
// backend's gradient buffer: they stay identical and match two ranks on
// the host step bitwise.
TEST(DataParallelTrainerTest, TwoRanksWithTheOptimizerOnTheDeviceMatchTheHostStep) {
  struct Case {
    const char* optimizer;
    bool offload_residuals;
    optim::ScapeRule rule = optim::ScapeRule::kReference;
  };
  for (const Case& c :
       {Case{"adamw", false}, Case{"adams", false}, Case{"scape", false}, Case{"scape", true},
        Case{"scape", false, optim::ScapeRule::kCatchUp},
        Case{"scape", true, optim::ScapeRule::kCatchUp}}) {
    SCOPED_TRACE(absl::StrCat(c.optimizer, " rule ", optim::ScapeRuleName(c.rule), " offload ",
                              c.offload_residuals));
    std::vector<float> parameters[2];
    std::array<std::vector<double>, 2> losses[2];
    for (int device = 0; device < 2; ++device) {
      ThreadGroup group(2);
      ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
      std::unique_ptr<DataParallelTrainer> ranks[2];
      for (int r = 0; r < 2; ++r) {
        TrainerConfig config = Config(2);
        config.optimizer.name = c.optimizer;
        // SCAPE with every path of its step: sparse steps, a dense
        // refresh, residual syncs (through the staging buffer when the
        // residual is offloaded).
        config.optimizer.scape.rule = c.rule;
        config.optimizer.scape.offload_residuals = c.offload_residuals;
        config.optimizer.scape.dense_refresh_interval = 3;
        config.optimizer.scape.residual_sync_period = 2;
        if (device) {
          config.ops = model::NewDeviceCopiesForTest();
        }
        auto trainer = DataParallelTrainer::Create(config, &members[r]);
        ASSERT_TRUE(trainer.ok()) << trainer.status();
        EXPECT_EQ((*trainer)->optimizer_on_device(), device == 1);
        ranks[r] = *std::move(trainer);
      }
      losses[device] = StepBothRanks(ranks, 5);
      for (int r = 0; r < 2; ++r) ASSERT_TRUE(ranks[r]->DownloadParameters().ok());
      EXPECT_EQ(ranks[0]->model().parameters(), ranks[1]->model().parameters());
      parameters[device] = ranks[0]->model().parameters();
    }
    EXPECT_EQ(losses[0], losses[1]);
    EXPECT_EQ(parameters[0], parameters[1]);
  }
}

// SCAPE at density 1 (its default catch-up rule in the backend, every
// window one step) and dense AdamS are the same optimizer up to fp32
// rounding ((1−β1)·Σg/(1−β1) vs Σg), through a device backend's data flow.
// Where m is a near-cancellation of larger gradients, AdamS's m/√v turns
// that rounding into up to ~5e-4 of a step (a few of the 300k parameters
// here); a wrong update moves many by a whole step (lr).
TEST(DataParallelTrainerTest, ScapeAtDensityOneMatchesAdamSOnTheDevice) {
  std::vector<float> parameters[2];
  std::vector<double> losses[2];
  const char* optimizers[2] = {"adams", "scape"};
  for (int i = 0; i < 2; ++i) {
    TrainerConfig config = Config(2);
    config.optimizer.name = optimizers[i];
    config.optimizer.scape.density = 1.0;
    config.ops = model::NewDeviceCopiesForTest();
    SingleProcessGroup group;
    auto trainer = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    EXPECT_TRUE((*trainer)->optimizer_on_device());
    for (int step = 0; step < 4; ++step) {
      auto result = (*trainer)->Step();
      ASSERT_TRUE(result.ok()) << optimizers[i] << ": " << result.status();
      losses[i].push_back(result->loss);
    }
    ASSERT_TRUE((*trainer)->DownloadParameters().ok());
    parameters[i] = (*trainer)->model().parameters();
  }
  double worst = 0;
  for (size_t j = 0; j < parameters[0].size(); ++j) {
    worst = std::max(worst, double{std::fabs(parameters[0][j] - parameters[1][j])});
  }
  EXPECT_LT(worst, 2e-3 * Config(2).schedule.peak_lr);
  for (int step = 0; step < 4; ++step) {
    EXPECT_NEAR(losses[1][step], losses[0][step], 1e-5 * losses[0][step]) << "step " << step + 1;
  }
}

// One optimizer path and one checkpoint schema: every optimizer of the
// registry resumes bitwise from its snapshot.
TEST(DataParallelTrainerTest, EveryOptimizerResumesBitwiseFromItsSnapshot) {
  for (const std::string& optimizer : optim::OptimizerNames()) {
    TrainerConfig config = Config(2);
    config.optimizer.name = optimizer;
    config.optimizer.scape.density = 0.1;
    config.optimizer.scape.dense_warmup_steps = 2;
    SingleProcessGroup group;
    auto straight = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(straight.ok()) << optimizer << ": " << straight.status();
    for (int i = 0; i < 6; ++i) ASSERT_TRUE((*straight)->Step().ok()) << optimizer;

    auto first = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(first.ok()) << first.status();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*first)->Step().ok()) << optimizer;
    auto snapshot = (*first)->Snapshot();
    ASSERT_TRUE(snapshot.ok()) << optimizer << ": " << snapshot.status();
    EXPECT_TRUE(snapshot->blobs.count("optimizer_state")) << optimizer;
    auto resumed = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    ASSERT_TRUE((*resumed)->Restore(*snapshot).ok()) << optimizer;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*resumed)->Step().ok()) << optimizer;
    EXPECT_EQ((*resumed)->model().parameters(), (*straight)->model().parameters()) << optimizer;
  }
}

// Each step says how much of the gradient it synchronized: all of it while
// dense (warm-up, and the first masked step's mask is still being sent),
// SCAPE's density afterwards, with the bytes of the mask part the rank sent:
// none alone (its part is the mask), some beside a peer.
TEST(DataParallelTrainerTest, StepsReportScapeDensityAndMaskBytes) {
  TrainerConfig config = Config(2);
  config.optimizer.name = "scape";
  config.optimizer.scape.density = 0.25;
  config.optimizer.scape.dense_warmup_steps = 2;
  {
    SingleProcessGroup group;
    auto trainer = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto first = (*trainer)->Step();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->density, 1.0);
    EXPECT_EQ(first->mask_bytes, 0);
    StepResult last;
    for (int i = 0; i < 4; ++i) {
      auto result = (*trainer)->Step();
      ASSERT_TRUE(result.ok()) << result.status();
      last = *result;
    }
    EXPECT_NEAR(last.density, 0.25, 0.01);
    EXPECT_EQ(last.mask_bytes, 0);
  }
  ThreadGroup group(2);
  ThreadGroup::Member members[2] = {{&group, 0}, {&group, 1}};
  std::unique_ptr<DataParallelTrainer> ranks[2];
  for (int r = 0; r < 2; ++r) {
    auto trainer = DataParallelTrainer::Create(config, &members[r]);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ranks[r] = *std::move(trainer);
  }
  StepResult last[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r]() {
      for (int i = 0; i < 5; ++i) {
        auto result = ranks[r]->Step();
        ASSERT_TRUE(result.ok()) << result.status();
        last[r] = *result;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(last[r].density, 0.25, 0.01) << r;
    EXPECT_GT(last[r].mask_bytes, 0) << r;
  }
}

// A step reports its model FLOPs: every micro-batch's matrices over all its
// rows and causal attention over its documents, as model::TrainingFlops
// counts them.
TEST(DataParallelTrainerTest, StepsReportTheirModelFlops) {
  TrainerConfig config = Config(2);
  config.grad_accum = 2;
  SingleProcessGroup group;
  auto trainer = DataParallelTrainer::Create(config, &group);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int step = 0; step < 2; ++step) {
    auto documents = (*trainer)->UpcomingAttentionDocuments(1);
    ASSERT_TRUE(documents.ok()) << documents.status();
    ASSERT_EQ(documents->size(), 2u) << "one list per micro-batch";
    double want = 0;
    for (const std::vector<int64_t>& lengths : *documents) {
      model::ModelBatch batch;
      batch.batch_size = config.micro_batch;
      batch.seq_len = config.seq_len;
      for (int64_t length : lengths) batch.attention_tasks.push_back({0, length, 0, 0});
      want += model::TrainingFlops(config.model, batch);
    }
    auto result = (*trainer)->Step();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_GT(result->model_flops, 0);
    EXPECT_DOUBLE_EQ(result->model_flops, want) << "step " << step;
  }
}

// AdamW clips the synchronized gradient inside the optimizer path: the norm
// before clipping is reported, and a binding clip changes the step.
TEST(DataParallelTrainerTest, AdamWClipsThroughTheOptimizerPath) {
  SingleProcessGroup group;
  TrainerConfig unclipped_config = Config(2);
  unclipped_config.optimizer.grad_clip = 0;
  TrainerConfig clipped_config = Config(2);
  clipped_config.optimizer.grad_clip = 1e-3;
  auto unclipped = DataParallelTrainer::Create(unclipped_config, &group);
  auto clipped = DataParallelTrainer::Create(clipped_config, &group);
  ASSERT_TRUE(unclipped.ok() && clipped.ok());
  auto a = (*unclipped)->Step();
  auto b = (*clipped)->Step();
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_GT(a->grad_norm, 1e-3);
  EXPECT_EQ(a->grad_norm, b->grad_norm);
  EXPECT_NE((*unclipped)->model().parameters(), (*clipped)->model().parameters());
}

// Ping-pong splits each micro-batch into halves: same losses and validation
// loss as whole micro-batches within fp32 rounding; one-row micro-batches
// cannot split and train bitwise as before.
TEST(DataParallelTrainerTest, PingPongTrainsLikeWholeMicroBatches) {
  for (int micro_batch : {4, 3, 1}) {
    SingleProcessGroup group;
    TrainerConfig whole_config = Config(micro_batch);
    whole_config.grad_accum = 2;
    TrainerConfig ping_pong_config = whole_config;
    ping_pong_config.ping_pong = true;
    auto whole = DataParallelTrainer::Create(whole_config, &group);
    auto ping_pong = DataParallelTrainer::Create(ping_pong_config, &group);
    ASSERT_TRUE(whole.ok() && ping_pong.ok());
    for (int i = 0; i < 4; ++i) {
      auto expected = (*whole)->Step();
      auto got = (*ping_pong)->Step();
      ASSERT_TRUE(expected.ok() && got.ok()) << got.status();
      EXPECT_NEAR(got->loss, expected->loss, 1e-5 * expected->loss)
          << "micro-batch " << micro_batch << " step " << i + 1;
      if (micro_batch == 1) {
        EXPECT_EQ(got->loss, expected->loss);
      }
    }
    auto expected = (*whole)->Validate(2);
    auto got = (*ping_pong)->Validate(2);
    ASSERT_TRUE(expected.ok() && got.ok()) << got.status();
    EXPECT_NEAR(*got, *expected, 1e-5 * *expected) << "micro-batch " << micro_batch;
  }
}

// The documents peeked before two steps are those the executor then gets,
// in order; peeking changes nothing about training. Three rows, so ping-
// pong's cost-balanced split row depends on the documents.
TEST(DataParallelTrainerTest, UpcomingAttentionDocumentsAreWhatTheExecutorGets) {
  for (bool ping_pong : {true, false}) {
    SingleProcessGroup group;
    TrainerConfig config = Config(3);
    config.grad_accum = 2;
    config.ping_pong = ping_pong;
    auto peeked_attention = std::make_shared<TestAttention>();
    auto plain_attention = std::make_shared<TestAttention>();
    config.attention = peeked_attention;
    auto peeked = DataParallelTrainer::Create(config, &group);
    config.attention = plain_attention;
    auto plain = DataParallelTrainer::Create(config, &group);
    ASSERT_TRUE(peeked.ok() && plain.ok()) << peeked.status();

    EXPECT_EQ((*peeked)->UpcomingAttentionDocuments(0).status().code(),
              absl::StatusCode::kInvalidArgument);
    auto first = (*peeked)->UpcomingAttentionDocuments(1);
    auto second = (*peeked)->UpcomingAttentionDocuments(2);
    ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
    EXPECT_EQ(first->size(), ping_pong ? 4u : 2u);
    EXPECT_NE(*first, *second);
    auto again = (*peeked)->UpcomingAttentionDocuments(1);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *first);

    for (int i = 0; i < 2; ++i) {
      auto got = (*peeked)->Step();
      auto expected = (*plain)->Step();
      ASSERT_TRUE(got.ok() && expected.ok()) << got.status() << expected.status();
      EXPECT_EQ(got->loss, expected->loss) << "step " << i + 1;
    }
    std::vector<std::vector<int64_t>> announced = *first;
    announced.insert(announced.end(), second->begin(), second->end());
    EXPECT_EQ(peeked_attention->documents(), announced) << "ping_pong " << ping_pong;
    EXPECT_EQ(plain_attention->documents(), announced) << "ping_pong " << ping_pong;
    EXPECT_EQ((*peeked)->model().parameters(), (*plain)->model().parameters());
  }
}

TEST(DataParallelTrainerTest, RestoreRejectsAForeignCheckpoint) {
  SingleProcessGroup group;
  auto trainer = DataParallelTrainer::Create(Config(2), &group);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto snapshot = (*trainer)->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  checkpoint::Checkpoint bad = *snapshot;
  bad.blobs["params"].resize(100);
  EXPECT_FALSE((*trainer)->Restore(bad).ok());
  bad.blobs.erase("loader.json");
  EXPECT_NE((*trainer)->Restore(bad).message().find("loader.json"), std::string::npos);
}

}  // namespace
}  // namespace corescape::train
