#ifndef CORESCAPE_RUNTIME_PLANNER_ATTENTION_PLANNER_H_
#define CORESCAPE_RUNTIME_PLANNER_ATTENTION_PLANNER_H_

// corescape's core-attention planner. Pure and deterministic: the same input
// gives the same plan, with no I/O, clocks or randomness.
//
// Objective: every server's time (FLOPs / speed) at most (1 + tolerance)
// times perfect balance, and within that as few bytes moved as it can.
//
//  1. Capacity: server s may hold (1 + tolerance) * total * speed_s / sum of
//     speeds (FLOPs as pair-equivalents, the per-task overhead included).
//  2. Keep at home: each worker's documents start on the server colocated
//     with it (their Q/K/V is already there, no bytes). A server over its
//     capacity sheds its longest documents whole while each fits in the
//     excess, then cuts the rest of the excess out of the next longest as
//     one query range [a, b) chosen to minimise the bytes of sending it
//     (cheapest_range.h): (b - a) Q rows plus the K/V prefix [0, b), repeated
//     once per piece if the range is bigger than the spare room of a typical
//     receiver and so will be cut again. Longest first because moving a
//     document of length L costs ~L tokens of bytes for ~L^2/2 pairs, and one
//     range of a long document is never dearer than several short documents
//     of the same cost.
//  3. Place what was shed (and all documents of workers without a colocated
//     server) largest first, each on the server whose spare capacity fits it
//     most tightly (best fit keeps big gaps for big pieces, so few pieces
//     are cut). A piece that fits nowhere gives its top part to the server
//     with the most room and goes back in line with the rest: pieces of one
//     document end up smallest at the bottom, which keeps the K/V prefixes
//     they repeat short.
//
// The tolerance is the knob between balance and bytes: 0 balances exactly
// (a cut for nearly every receiving server); 0.02 meets the 1.02 bar with
// far fewer cuts.

#include "absl/status/statusor.h"
#include "runtime/planner/plan.h"

namespace corescape::planner {

struct PlannerOptions {
  double tolerance = 0.02;
};

absl::StatusOr<Plan> PlanAttention(const PlanInput& input, const PlannerOptions& options);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_ATTENTION_PLANNER_H_
