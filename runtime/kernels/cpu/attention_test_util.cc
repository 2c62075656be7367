#include "runtime/kernels/cpu/attention_test_util.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace corescape::kernels {
namespace {

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

std::vector<std::pair<int64_t, int64_t>> PiecesFromCuts(
    const std::set<int64_t>& cuts) {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    pieces.push_back({*it, *std::next(it)});
  }
  return pieces;
}

}  // namespace

std::vector<DocumentPieces> RandomDocuments(std::mt19937_64& rng,
                                            int documents, int64_t max_length) {
  std::vector<DocumentPieces> result;
  for (int i = 0; i < documents; ++i) {
    DocumentPieces doc;
    doc.length = Uniform(rng, 1, max_length);
    const int64_t length = doc.length;
    switch (Uniform(rng, 0, 3)) {
      case 0:
        doc.pieces = {{0, length}};
        break;
      case 1: {
        std::set<int64_t> cuts = {0, length};
        for (int64_t c = Uniform(rng, 0, 5); c > 0; --c) {
          cuts.insert(Uniform(rng, 0, length));
        }
        if (Uniform(rng, 0, 1) == 1) cuts.insert(std::min<int64_t>(1, length));
        if (Uniform(rng, 0, 1) == 1) cuts.insert(length - 1);
        doc.pieces = PiecesFromCuts(cuts);
        break;
      }
      case 2: {
        if (length < 2) {
          doc.pieces = {{0, length}};
          break;
        }
        const int64_t a = Uniform(rng, 1, length / 2);
        doc.pieces = {{0, a}, {length - a, length}};
        if (length - 2 * a > 0 && Uniform(rng, 0, 1) == 1) {
          doc.pieces.push_back({a, length - a});
        }
        break;
      }
      default: {
        std::set<int64_t> cuts = {0, length};
        for (int64_t c = Uniform(rng, 1, 4); c > 0; --c) {
          cuts.insert(Uniform(rng, 0, length));
        }
        for (const auto& piece : PiecesFromCuts(cuts)) {
          if (Uniform(rng, 0, 2) > 0) doc.pieces.push_back(piece);
        }
        if (doc.pieces.empty()) doc.pieces = {{length - 1, length}};
        break;
      }
    }
    result.push_back(std::move(doc));
  }
  return result;
}

AttentionBatch MakeBatch(const AttentionShape& shape,
                         const std::vector<DocumentPieces>& documents,
                         std::mt19937_64& rng) {
  AttentionBatch batch;
  batch.shape = shape;
  std::vector<int64_t> doc_kv_row;
  for (const DocumentPieces& doc : documents) {
    batch.kv_rows += Uniform(rng, 0, 2);
    doc_kv_row.push_back(batch.kv_rows);
    batch.kv_rows += doc.length;
  }
  for (size_t d = 0; d < documents.size(); ++d) {
    for (const auto& [begin, end] : documents[d].pieces) {
      batch.tasks.push_back({begin, end, /*q_row=*/0, doc_kv_row[d]});
    }
  }
  std::vector<size_t> order(batch.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i : order) {
    batch.q_rows += Uniform(rng, 0, 2);
    batch.tasks[i].q_row = batch.q_rows;
    batch.q_rows += batch.tasks[i].q_end - batch.tasks[i].q_begin;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& values, int64_t size) {
    values.resize(size);
    for (float& value : values) value = normal(rng);
  };
  fill(batch.q, batch.q_floats());
  fill(batch.k, batch.kv_floats());
  fill(batch.v, batch.kv_floats());
  fill(batch.d_o, batch.q_floats());
  return batch;
}

double RelativeError(absl::Span<const float> actual,
                     absl::Span<const float> expected) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i];
    const double a = i < actual.size() ? actual[i] : 0.0;
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  if (norm == 0.0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

}  // namespace corescape::kernels
