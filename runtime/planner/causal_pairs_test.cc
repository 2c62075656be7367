#include "runtime/planner/causal_pairs.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/planner/cheapest_range.h"

namespace corescape::planner {
namespace {

int64_t SlowPairs(int64_t begin, int64_t end) {
  int64_t pairs = 0;
  for (int64_t p = begin; p < end; ++p) pairs += p + 1;
  return pairs;
}

TEST(CausalPairsTest, MatchesQueryTimesKeysMinusTriangle) {
  for (int64_t b = 0; b < 40; ++b) {
    for (int64_t e = b; e < 60; ++e) {
      const int64_t q = e - b;
      EXPECT_EQ(CausalPairs(b, e), SlowPairs(b, e));
      EXPECT_EQ(CausalPairs(b, e), q * e - q * (q - 1) / 2);
    }
  }
  EXPECT_EQ(DocumentPairs(16384), 134225920);
  EXPECT_EQ(CausalPairs(5, 3), 0);
}

TEST(CausalPairsTest, MirroredPairsCostLengthPlusOne) {
  const int64_t length = 1000;
  for (int64_t i = 0; i < length / 2; ++i) {
    EXPECT_EQ(CausalPairs(i, i + 1) + CausalPairs(length - 1 - i, length - i), length + 1);
  }
}

TEST(CausalPairsTest, SolversAreExactInverses) {
  for (int64_t begin = 0; begin < 30; ++begin) {
    const int64_t limit = begin + 50;
    for (int64_t pairs = 0; pairs <= CausalPairs(begin, limit) + 5; pairs += 7) {
      const int64_t at_least = EndForAtLeast(begin, pairs, limit);
      if (CausalPairs(begin, limit) >= pairs) {
        EXPECT_GE(CausalPairs(begin, at_least), pairs);
        if (at_least > begin + 1) {
          EXPECT_LT(CausalPairs(begin, at_least - 1), pairs);
        }
      } else {
        EXPECT_EQ(at_least, limit);
      }
      const int64_t at_most = EndForAtMost(begin, pairs, limit);
      EXPECT_LE(CausalPairs(begin, at_most), pairs);
      if (at_most < limit) {
        EXPECT_GT(CausalPairs(begin, at_most + 1), pairs);
      }
    }
  }
  for (int64_t end = 1; end < 60; ++end) {
    for (int64_t pairs = 0; pairs <= DocumentPairs(end) + 5; pairs += 5) {
      const int64_t at_least = BeginForAtLeast(end, pairs);
      if (DocumentPairs(end) >= pairs) {
        EXPECT_GE(CausalPairs(at_least, end), pairs);
        if (at_least < end - 1) {
          EXPECT_LT(CausalPairs(at_least + 1, end), pairs);
        }
      } else {
        EXPECT_EQ(at_least, 0);
      }
      const int64_t at_most = BeginForAtMost(end, pairs);
      EXPECT_LE(CausalPairs(at_most, end), pairs);
      if (at_most > 0) {
        EXPECT_GT(CausalPairs(at_most - 1, end), pairs);
      }
    }
  }
}

TEST(CausalPairsTest, SolversHandleLongDocuments) {
  const int64_t length = 4'000'000;  // 8e12 pairs: beyond double's exact sqrt
  const int64_t pairs = DocumentPairs(length) / 3;
  const int64_t end = EndForAtLeast(0, pairs, length);
  EXPECT_GE(CausalPairs(0, end), pairs);
  EXPECT_LT(CausalPairs(0, end - 1), pairs);
  const int64_t begin = BeginForAtLeast(length, pairs);
  EXPECT_GE(CausalPairs(begin, length), pairs);
  EXPECT_LT(CausalPairs(begin + 1, length), pairs);
}

// Brute force over every range with enough pairs.
QueryRange SlowCheapest(int64_t length, int64_t edge, int64_t interior, int64_t q, int64_t kv) {
  QueryRange best{0, length};
  int64_t best_bytes = RangeBytes(best, q, kv);
  for (int64_t a = 0; a < length; ++a) {
    for (int64_t b = a + 1; b <= length; ++b) {
      const bool inside = a > 0 && b < length;
      if (CausalPairs(a, b) < (inside ? interior : edge)) continue;
      const int64_t bytes = RangeBytes({a, b}, q, kv);
      if (bytes < best_bytes) best = {a, b}, best_bytes = bytes;
    }
  }
  return best;
}

TEST(CheapestRangeTest, HasEnoughPairsAndNearlyMinimalBytes) {
  const int64_t q = 8192, kv = 4096;  // DistCA's shape, bf16
  for (int64_t length : {7, 64, 200, 333}) {
    for (int64_t edge = 1; edge < DocumentPairs(length); edge += DocumentPairs(length) / 13 + 1) {
      const int64_t interior = edge + 3;
      const QueryRange r = CheapestRange(length, edge, interior, q, kv);
      ASSERT_LE(0, r.begin);
      ASSERT_LT(r.begin, r.end);
      ASSERT_LE(r.end, length);
      const bool inside = r.begin > 0 && r.end < length;
      EXPECT_GE(CausalPairs(r.begin, r.end), inside ? interior : edge);
      const QueryRange best = SlowCheapest(length, edge, interior, q, kv);
      // Near the true optimum (it checks a few candidates only; rounding
      // matters most in tiny documents).
      const double slack = length < 64 ? 1.15 : 1.02;
      EXPECT_LE(RangeBytes(r, q, kv), slack * RangeBytes(best, q, kv))
          << "length " << length << " edge " << edge;
    }
  }
}

TEST(CheapestRangeTest, RangeCutIntoPiecesKeepsTheTailAtHome) {
  // A 64k-token document must shed 3/4 of its pairs in pieces of ~1/4: the
  // cheapest range stops short of the end (the owner keeps the tail, whose
  // K/V prefix would otherwise be sent with every piece) and beats cutting
  // off the tail under the piece model.
  const int64_t length = 65536, q = 8192, kv = 4096;
  const int64_t pairs = DocumentPairs(length) / 4 * 3, piece = DocumentPairs(length) / 4;
  const QueryRange r = CheapestRange(length, pairs, pairs, q, kv, piece);
  EXPECT_GE(CausalPairs(r.begin, r.end), pairs);
  EXPECT_LT(r.end, length);
  const QueryRange tail{BeginForAtLeast(length, pairs), length};
  EXPECT_LT(RangeBytes(r, q, kv, piece), 0.95 * RangeBytes(tail, q, kv, piece));
  // One piece: the plain (b - a) * q + b * kv.
  EXPECT_EQ(RangeBytes({10, 20}, q, kv), 10 * q + 20 * kv);
  // Pieces cut from the end: [10, 20) at most 100 pairs each is [15, 20)
  // (90 pairs), then [10, 15) (65): ends 20 and 15.
  EXPECT_EQ(RangeBytes({10, 20}, q, kv, 100), 10 * q + (20 + 15) * kv);
}

TEST(CheapestRangeTest, WholeDocumentWhenAskedForMore) {
  const QueryRange r = CheapestRange(100, DocumentPairs(100) + 1, DocumentPairs(100) + 1, 2, 1);
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.end, 100);
}

}  // namespace
}  // namespace corescape::planner
