#include "runtime/planner/distca_greedy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/plan_summary.h"

namespace corescape::planner {
namespace {

// A mirrored set of positions of one document on one rank: pair indices
// [lo, hi), pair j being positions j and length-1-j (the centre of an odd
// document is a pair of one token).
struct Item {
  int32_t doc;
  int64_t lo;
  int64_t hi;
  int32_t rank;
  int64_t pairs;
};

struct Range {
  int64_t begin;
  int64_t end;
};

// Query ranges of pair indices [lo, hi): a front and a back range, merged
// when they touch. Returns how many of `out` it filled.
int MirroredRanges(int64_t length, int64_t lo, int64_t hi, Range out[2]) {
  if (hi <= lo) return 0;
  const int64_t half = (length + 1) / 2;
  const Range front{lo, std::min(hi, half)};
  const Range back{std::max(length - hi, half), length - lo};
  int n = 0;
  if (back.end > back.begin && front.end == back.begin) {
    out[n++] = Range{front.begin, back.end};
    return n;
  }
  out[n++] = front;
  if (back.end > back.begin) out[n++] = back;
  return n;
}

int64_t MirroredPairs(int64_t length, int64_t lo, int64_t hi) {
  Range ranges[2];
  const int n = MirroredRanges(length, lo, hi, ranges);
  int64_t pairs = 0;
  for (int i = 0; i < n; ++i) pairs += CausalPairs(ranges[i].begin, ranges[i].end);
  return pairs;
}

int64_t MirroredTokens(int64_t length, int64_t lo, int64_t hi) {
  Range ranges[2];
  const int n = MirroredRanges(length, lo, hi, ranges);
  int64_t tokens = 0;
  for (int i = 0; i < n; ++i) tokens += ranges[i].end - ranges[i].begin;
  return tokens;
}

std::vector<Item> ZigZagLayout(const std::vector<InputDocument>& docs, int n_ranks, int64_t budget) {
  std::vector<Item> items;
  int rank = 0;
  int64_t room = budget;
  for (int32_t d = 0; d < static_cast<int32_t>(docs.size()); ++d) {
    const int64_t length = docs[d].length;
    int64_t lo = 0;
    const int64_t hi = (length + 1) / 2;
    while (lo < hi) {
      const int64_t tokens = MirroredTokens(length, lo, hi);
      if (rank == n_ranks - 1 || tokens <= room) {
        items.push_back(Item{d, lo, hi, rank, MirroredPairs(length, lo, hi)});
        room -= tokens;
        break;
      }
      // Cut: half of the room from the front, half from the back.
      const int64_t k = std::min(room / 2, hi - lo);
      if (k > 0) {
        items.push_back(Item{d, lo, lo + k, rank, MirroredPairs(length, lo, lo + k)});
        lo += k;
      }
      ++rank;
      room = budget;
    }
  }
  return items;
}

}  // namespace

absl::StatusOr<Plan> PlanDistcaGreedy(const PlanInput& input, const DistcaOptions& options) {
  if (absl::Status s = ValidatePlanInput(input); !s.ok()) return s;
  if (!(options.tolerance >= 0)) {
    return absl::InvalidArgumentError("tolerance must be >= 0");
  }
  if (options.token_budget < 0) {
    return absl::InvalidArgumentError("token_budget must be >= 0");
  }
  const int n_ranks = static_cast<int>(input.servers.size());
  const int n_workers = static_cast<int>(input.worker_documents.size());
  if (options.token_budget == 0 && n_workers != n_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "without a token budget DistCA's greedy needs one server per worker (ranks), got ",
        n_ranks, " servers for ", n_workers, " workers"));
  }

  const std::vector<InputDocument> docs = FlattenDocuments(input);
  std::vector<Item> items;
  if (options.token_budget > 0) {
    items = ZigZagLayout(docs, n_ranks, options.token_budget);
  } else {
    for (int32_t d = 0; d < static_cast<int32_t>(docs.size()); ++d) {
      const int64_t length = docs[d].length;
      items.push_back(Item{d, 0, (length + 1) / 2, docs[d].worker, DocumentPairs(length)});
    }
  }

  std::vector<int64_t> load(n_ranks, 0);
  int64_t total = 0;
  for (const Item& item : items) {
    load[item.rank] += item.pairs;
    total += item.pairs;
  }
  const double mean = static_cast<double>(total) / n_ranks;
  std::vector<int32_t> receivers;
  for (int32_t r = 0; r < n_ranks; ++r) {
    if (load[r] < mean) receivers.push_back(r);
  }
  std::stable_sort(receivers.begin(), receivers.end(),
                   [&](int32_t a, int32_t b) { return load[a] < load[b]; });

  const double hidden = static_cast<double>(input.model.hidden);
  const double kv_width = static_cast<double>(input.model.n_kv_heads) * input.model.head_dim;
  int64_t moves = 0;
  for (const int32_t r : receivers) {
    while (mean - static_cast<double>(load[r]) > options.tolerance * mean) {
      const double need = mean - static_cast<double>(load[r]);
      int64_t best = -1;
      double best_ratio = std::numeric_limits<double>::infinity();
      double best_amount = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        const Item& item = items[i];
        if (item.pairs == 0) continue;
        const double surplus = static_cast<double>(load[item.rank]) - mean;
        if (surplus <= 0) continue;
        const double length = static_cast<double>(docs[item.doc].length);
        const double amount = std::min({need, surplus, static_cast<double>(item.pairs)});
        const double elements = amount / (length + 1) * hidden + 2 * (length + 1) * kv_width;
        const double ratio = elements / amount;
        if (ratio < best_ratio) {
          best_ratio = ratio;
          best = static_cast<int64_t>(i);
          best_amount = amount;
        }
      }
      if (best < 0) break;
      Item& donor_item = items[best];
      const int64_t length = docs[donor_item.doc].length;
      const int64_t k = std::min(static_cast<int64_t>(std::floor(best_amount / (length + 1))),
                                 donor_item.hi - donor_item.lo);
      if (k <= 0) break;  // nothing movable at pair granularity
      const int64_t cut = donor_item.hi - k;
      const int64_t moved = MirroredPairs(length, cut, donor_item.hi);
      Item moved_item{donor_item.doc, cut, donor_item.hi, r, moved};
      load[donor_item.rank] -= moved;
      load[r] += moved;
      donor_item.hi = cut;
      donor_item.pairs -= moved;
      items.push_back(moved_item);  // may invalidate donor_item
      ++moves;
    }
  }

  std::vector<PlannedTask> tasks;
  for (const Item& item : items) {
    Range ranges[2];
    const InputDocument& doc = docs[item.doc];
    const int n = MirroredRanges(doc.length, item.lo, item.hi, ranges);
    for (int i = 0; i < n; ++i) {
      tasks.push_back(PlannedTask{doc.worker, doc.index, ranges[i].begin, ranges[i].end, item.rank});
    }
  }
  absl::StatusOr<Plan> plan = SummarizePlan(input, std::move(tasks));
  if (plan.ok()) plan->stats.planner_steps = moves;
  return plan;
}

}  // namespace corescape::planner
