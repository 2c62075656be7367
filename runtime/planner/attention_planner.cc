#include "runtime/planner/attention_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/cheapest_range.h"
#include "runtime/planner/plan_summary.h"

namespace corescape::planner {
namespace {

// A query range of one document waiting for a server.
struct Piece {
  int32_t doc;
  int64_t begin;
  int64_t end;
};

class Planner {
 public:
  Planner(const PlanInput& input, double tolerance)
      : input_(input),
        overhead_(input.cost.task_overhead_flops / FlopsPerPair(input)),
        q_bytes_(QBytesPerToken(input.model)),
        kv_bytes_(KvBytesPerToken(input.model)),
        docs_(FlattenDocuments(input)) {
    double total_work = 0, total_speed = 0;
    for (const InputDocument& d : docs_) total_work += Work(d.length);
    for (const AttentionServer& s : input.servers) total_speed += s.speed;
    capacity_.resize(input.servers.size());
    for (size_t s = 0; s < input.servers.size(); ++s) {
      capacity_[s] = (1.0 + tolerance) * total_work * input.servers[s].speed / total_speed;
    }
  }

  std::vector<PlannedTask> Run() {
    std::vector<int32_t> home(input_.worker_documents.size(), -1);
    for (int32_t s = 0; s < static_cast<int32_t>(input_.servers.size()); ++s) {
      if (input_.servers[s].colocated_worker != kNoWorker) {
        home[input_.servers[s].colocated_worker] = s;
      }
    }
    std::vector<std::vector<int32_t>> home_docs(input_.servers.size());
    for (int32_t d = 0; d < static_cast<int32_t>(docs_.size()); ++d) {
      const int32_t s = home[docs_[d].worker];
      if (s >= 0) {
        home_docs[s].push_back(d);
      } else {
        pool_.push_back(Piece{d, 0, docs_[d].length});
      }
    }
    EstimatePieceSize(home_docs);
    for (int32_t s = 0; s < static_cast<int32_t>(home_docs.size()); ++s) {
      KeepAtHome(s, home_docs[s]);
    }
    PlacePool();
    return std::move(tasks_);
  }

  int64_t pieces_placed() const { return pieces_placed_; }

 private:
  double Work(int64_t begin, int64_t end) const {
    return static_cast<double>(CausalPairs(begin, end)) + overhead_;
  }
  double Work(int64_t length) const { return Work(0, length); }

  void Assign(int32_t doc, int64_t begin, int64_t end, int32_t server) {
    if (end <= begin) return;
    tasks_.push_back(PlannedTask{docs_[doc].worker, docs_[doc].index, begin, end, server});
    capacity_[server] -= Work(begin, end);
  }

  // A cut too big for one server is cut again into pieces that fill
  // servers with room; how big those pieces are decides where the cut
  // should be (cheapest_range.h). Estimate: the spare capacity of the server
  // an average pair of shed work lands on, sum(spare^2) / sum(spare) over
  // the servers under capacity before anything moves.
  void EstimatePieceSize(const std::vector<std::vector<int32_t>>& home_docs) {
    double sum = 0, sum_squares = 0;
    for (size_t s = 0; s < capacity_.size(); ++s) {
      double load = 0;
      for (int32_t d : home_docs[s]) load += Work(docs_[d].length);
      const double spare = capacity_[s] - load - overhead_;
      if (spare <= 0) continue;
      sum += spare;
      sum_squares += spare * spare;
    }
    piece_pairs_ = sum > 0 ? static_cast<int64_t>(sum_squares / sum) : 0;
  }

  // Step 2: keep the documents of the colocated worker, shedding what is
  // over capacity into the pool.
  void KeepAtHome(int32_t server, std::vector<int32_t> docs) {
    double load = 0;
    for (int32_t d : docs) load += Work(docs_[d].length);
    double excess = load - capacity_[server];
    std::stable_sort(docs.begin(), docs.end(), [&](int32_t a, int32_t b) {
      return docs_[a].length > docs_[b].length;
    });
    for (int32_t d : docs) {
      const int64_t length = docs_[d].length;
      if (excess <= 0) {
        Assign(d, 0, length, server);
        continue;
      }
      if (Work(length) <= excess) {
        pool_.push_back(Piece{d, 0, length});
        excess -= Work(length);
        continue;
      }
      // Cut the rest of the excess out of this document. A range strictly
      // inside leaves two pieces at home: one more task overhead to cover.
      const int64_t edge_pairs = static_cast<int64_t>(std::ceil(excess));
      const int64_t interior_pairs = static_cast<int64_t>(std::ceil(excess + overhead_));
      const QueryRange cut =
          CheapestRange(length, edge_pairs, interior_pairs, q_bytes_, kv_bytes_, piece_pairs_);
      pool_.push_back(Piece{d, cut.begin, cut.end});
      Assign(d, 0, cut.begin, server);
      Assign(d, cut.end, length, server);
      excess = 0;
    }
  }

  // Step 3: best-fit decreasing with cuts for pieces that fit nowhere.
  void PlacePool() {
    auto smaller = [&](const Piece& a, const Piece& b) {
      const int64_t wa = CausalPairs(a.begin, a.end);
      const int64_t wb = CausalPairs(b.begin, b.end);
      if (wa != wb) return wa < wb;
      return std::tie(b.doc, b.begin) < std::tie(a.doc, a.begin);  // lower doc first
    };
    std::make_heap(pool_.begin(), pool_.end(), smaller);
    // Servers by spare capacity; all of them, so that the pathological case
    // where no server has room still has somewhere to go.
    std::set<std::pair<double, int32_t>> room;
    for (int32_t s = 0; s < static_cast<int32_t>(capacity_.size()); ++s) {
      room.insert({capacity_[s], s});
    }
    auto place = [&](const Piece& p, int32_t server) {
      room.erase({capacity_[server], server});
      Assign(p.doc, p.begin, p.end, server);
      room.insert({capacity_[server], server});
      ++pieces_placed_;
    };
    bool raised_for_piece = false;
    while (!pool_.empty()) {
      std::pop_heap(pool_.begin(), pool_.end(), smaller);
      const Piece piece = pool_.back();
      pool_.pop_back();
      const double work = Work(piece.begin, piece.end);
      auto fit = room.lower_bound({work, std::numeric_limits<int32_t>::min()});
      if (fit != room.end()) {
        place(piece, fit->second);
        raised_for_piece = false;
        continue;
      }
      // Fits nowhere: fill the roomiest server with the top part [m, end)
      // and put [begin, m) back in line. Cutting from the top, roomiest
      // server first, lays the pieces out with the smallest at the bottom,
      // which keeps the cut points, hence the K/V prefixes each later piece
      // repeats, as low as they can be (and is the layout CheapestRange
      // assumed). ~6% fewer bytes than giving each server the bottom part.
      const auto [spare, server] = *room.rbegin();
      const int64_t fits = static_cast<int64_t>(std::floor(spare - overhead_));
      const int64_t tail_begin = BeginForAtMost(piece.end, fits);
      const int64_t head_end = EndForAtMost(piece.begin, fits, piece.end);
      if (tail_begin > piece.begin && tail_begin < piece.end) {
        place(Piece{piece.doc, tail_begin, piece.end}, server);
        pool_.push_back(Piece{piece.doc, piece.begin, tail_begin});
      } else if (head_end > piece.begin) {  // the top token is too big, a bottom one fits
        place(Piece{piece.doc, piece.begin, head_end}, server);
        pool_.push_back(Piece{piece.doc, head_end, piece.end});
      } else {
        // Not even one token fits anywhere: the spare capacity has run out
        // (cuts added task overheads; token granularity). Raise
        // every server's capacity by its share of what is left, once per
        // piece; after that, overflow the roomiest server.
        if (raised_for_piece) {
          place(piece, server);
          raised_for_piece = false;
          continue;
        }
        RaiseCapacity(work, room);
        raised_for_piece = true;
        pool_.push_back(piece);
        std::push_heap(pool_.begin(), pool_.end(), smaller);
        continue;
      }
      raised_for_piece = false;
      std::push_heap(pool_.begin(), pool_.end(), smaller);
    }
  }

  // Spreads the work still waiting (`work` for the piece in hand plus the
  // pool), and one task overhead per server for the cuts to come, over all
  // servers in proportion to speed.
  void RaiseCapacity(double work, std::set<std::pair<double, int32_t>>& room) {
    double waiting = work + overhead_ * static_cast<double>(capacity_.size());
    for (const Piece& p : pool_) waiting += Work(p.begin, p.end);
    double total_speed = 0;
    for (const AttentionServer& s : input_.servers) total_speed += s.speed;
    room.clear();
    for (size_t s = 0; s < capacity_.size(); ++s) {
      capacity_[s] += waiting * input_.servers[s].speed / total_speed;
      room.insert({capacity_[s], static_cast<int32_t>(s)});
    }
  }

  const PlanInput& input_;
  const double overhead_;  // per-task overhead in pair-equivalents
  const int64_t q_bytes_;
  const int64_t kv_bytes_;
  std::vector<InputDocument> docs_;
  std::vector<double> capacity_;  // spare work per server
  std::vector<Piece> pool_;
  std::vector<PlannedTask> tasks_;
  int64_t pieces_placed_ = 0;
  int64_t piece_pairs_ = 0;  // expected size of a piece cut for one server
};

}  // namespace

absl::StatusOr<Plan> PlanAttention(const PlanInput& input, const PlannerOptions& options) {
  if (absl::Status s = ValidatePlanInput(input); !s.ok()) return s;
  if (!std::isfinite(options.tolerance) || options.tolerance < 0) {
    return absl::InvalidArgumentError("tolerance must be finite and >= 0");
  }
  Planner planner(input, options.tolerance);
  absl::StatusOr<Plan> plan = SummarizePlan(input, planner.Run());
  if (plan.ok()) plan->stats.planner_steps = planner.pieces_placed();
  return plan;
}

}  // namespace corescape::planner
