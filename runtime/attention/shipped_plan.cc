#include "runtime/attention/shipped_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace corescape::attention {
namespace {

constexpr int64_t kPlanHeaderWords = 3;
constexpr int64_t kWordsPerTask = 5;

bool FitsInt32(int64_t value) {
  return value >= std::numeric_limits<int32_t>::min() &&
         value <= std::numeric_limits<int32_t>::max();
}

}  // namespace

std::vector<int64_t> PlannedDocumentLengths(const ShippedPlan& plan, int32_t worker) {
  std::vector<int64_t> lengths;
  for (const planner::PlannedTask& task : plan.tasks) {
    if (task.worker != worker || task.document < 0) continue;
    if (static_cast<size_t>(task.document) >= lengths.size()) lengths.resize(task.document + 1, 0);
    lengths[task.document] = std::max(lengths[task.document], task.q_end);
  }
  return lengths;
}

std::vector<int64_t> EncodeShippedPlan(const ShippedPlan& plan) {
  std::vector<int64_t> words;
  words.reserve(kPlanHeaderWords + kWordsPerTask * plan.tasks.size());
  words.push_back(plan.step);
  words.push_back(static_cast<int64_t>(plan.speed_weights_version));
  words.push_back(static_cast<int64_t>(plan.tasks.size()));
  for (const planner::PlannedTask& task : plan.tasks) {
    words.insert(words.end(), {task.worker, task.document, task.q_begin, task.q_end, task.server});
  }
  return words;
}

absl::StatusOr<ShippedPlan> DecodeShippedPlan(absl::Span<const int64_t> words,
                                              absl::string_view who) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("attention plan from ", who, ": ", what));
  };
  if (static_cast<int64_t>(words.size()) < kPlanHeaderWords) {
    return bad(absl::StrCat(words.size(), " words, fewer than its header"));
  }
  const int64_t count = words[2];
  if (count < 0 || count > kMaxShippedPlanTasks ||
      static_cast<int64_t>(words.size()) != kPlanHeaderWords + kWordsPerTask * count) {
    return bad(absl::StrCat(words.size(), " words for ", count, " tasks"));
  }
  ShippedPlan plan;
  plan.step = words[0];
  plan.speed_weights_version = static_cast<uint64_t>(words[1]);
  plan.tasks.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t* t = words.data() + kPlanHeaderWords + kWordsPerTask * i;
    if (!FitsInt32(t[0]) || !FitsInt32(t[1]) || !FitsInt32(t[4])) {
      return bad(absl::StrCat("task ", i, " names worker ", t[0], ", document ", t[1],
                              ", server ", t[4]));
    }
    planner::PlannedTask task;
    task.worker = static_cast<int32_t>(t[0]);
    task.document = static_cast<int32_t>(t[1]);
    task.q_begin = t[2];
    task.q_end = t[3];
    task.server = static_cast<int32_t>(t[4]);
    plan.tasks.push_back(task);
  }
  return plan;
}

void ShippedPlanQueue::Offer(ShippedPlan plan) {
  std::vector<int64_t> worker0_lengths = PlannedDocumentLengths(plan, 0);
  absl::MutexLock lock(&mu_);
  entries_.push_back(Entry{next_id_++, std::move(worker0_lengths), std::move(plan)});
  while (entries_.size() > capacity_) entries_.pop_front();
}

std::optional<ShippedPlanQueue::Found> ShippedPlanQueue::FindMatching(
    absl::Span<const int64_t> lengths) const {
  absl::MutexLock lock(&mu_);
  for (const Entry& entry : entries_) {
    if (std::equal(entry.worker0_lengths.begin(), entry.worker0_lengths.end(), lengths.begin(),
                   lengths.end())) {
      return Found{entry.id, entry.plan};
    }
  }
  return std::nullopt;
}

void ShippedPlanQueue::Consume(uint64_t id) {
  absl::MutexLock lock(&mu_);
  while (!entries_.empty() && entries_.front().id <= id) entries_.pop_front();
}

size_t ShippedPlanQueue::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace corescape::attention
