#ifndef CORESCAPE_RUNTIME_DATA_BATCH_LOADER_H_
#define CORESCAPE_RUNTIME_DATA_BATCH_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/data/shard_set.h"

namespace corescape::data {

// A contiguous piece of one document inside one row.
struct Segment {
  int32_t row;              // row within the micro-batch, 0..batch_size-1
  int32_t start;            // first column in the row
  int32_t length;           // tokens
  int64_t document;         // index in the ShardSet
  int64_t position_offset;  // position of the piece's first token in its document
};

// One rank's micro-batch: batch_size rows of seq_len tokens, row-major.
struct PackedBatch {
  int32_t batch_size = 0;
  int32_t seq_len = 0;
  std::vector<int32_t> tokens;     // [B*T]; pad id where a row is not filled
  std::vector<int32_t> targets;    // [B*T]; next token of the same document, -1 = ignore
                                   // (padding, and the last token of a document: its eos)
  std::vector<int32_t> positions;  // [B*T]; RoPE position within the document (0 on padding)
  // Attention is causal WITHIN each segment only. Segments are in row, then
  // column order; in each row they tile [0, filled) exactly and the rest of
  // the row (only ever at the end of an epoch) is padding.
  std::vector<Segment> segments;
};

// Where a loader is: the next global batch starts at global row `row` of
// epoch `epoch`. Rows are numbered independently of world size and micro-
// batch size, so a state can be restored under a different split of the
// same global batch.
struct LoaderState {
  int64_t epoch = 0;
  int64_t row = 0;
  // Identifies (documents, seq_len, seed, shuffle): Restore refuses a state
  // from another dataset or packing.
  uint64_t fingerprint = 0;

  std::string ToJson() const;
  static absl::StatusOr<LoaderState> FromJson(absl::string_view json);
  bool operator==(const LoaderState&) const = default;
};

struct BatchLoaderOptions {
  int32_t seq_len = 0;           // T
  int32_t micro_batch_size = 0;  // b: rows per rank per step
  int32_t rank = 0;
  int32_t world_size = 1;        // W; a global batch is W*b rows
  uint64_t seed = 1;
  bool shuffle = true;           // false: documents in ShardSet order
  bool repeat = true;            // false: stop after one epoch
  int32_t eos_id = -1;           // appended to every document; must be < vocab
  int32_t pad_id = -1;           // fills rows the epoch's tokens do not
};

// Packs documents into fixed-length rows. Each epoch lays the documents out
// end to end, each followed by eos_id, in an order shuffled by (seed,
// epoch), and cuts that stream into rows of seq_len tokens: a document that
// does not fit in what is left of a row continues at the start of the next
// row, its positions continuing (37, 38, ...); positions restart at 0 at
// each document start. Only the epoch's last row can be partly filled;
// epochs do not share rows. Global batch s of an epoch is rows
// [s*W*b, (s+1)*W*b); rank r takes rows [s*W*b + r*b, s*W*b + (r+1)*b), so
// W ranks of b rows see exactly the rows one rank of W*b rows sees, in the
// same order. The last global batch of an epoch is completed with padding
// rows (no segments, all targets -1).
//
// Everything is a function of (seed, epoch, row): no other state, so Seek
// and Restore resume exactly. Not thread-safe (it caches the current
// epoch's order).
class BatchLoader {
 public:
  static absl::StatusOr<std::unique_ptr<BatchLoader>> Create(
      std::shared_ptr<const ShardSet> documents, const BatchLoaderOptions& options);

  // One deterministic pass in shard order (shuffle and repeat off): every
  // rank together covers every validation token exactly once.
  static absl::StatusOr<std::unique_ptr<BatchLoader>> CreateValidation(
      std::shared_ptr<const ShardSet> documents, BatchLoaderOptions options);

  // This rank's next micro-batch; nullopt once a non-repeating loader has
  // finished its epoch.
  std::optional<PackedBatch> Next();

  LoaderState state() const { return {epoch_, row_, fingerprint_}; }
  absl::Status Restore(const LoaderState& state);
  // Positions the loader as if Next() had been called `step` times from
  // the start with the current world size and micro-batch size.
  absl::Status Seek(int64_t step);

  int64_t tokens_per_epoch() const { return tokens_per_epoch_; }  // documents + one eos each
  int64_t rows_per_epoch() const { return rows_per_epoch_; }
  int64_t steps_per_epoch() const;
  int64_t global_batch_rows() const {
    return int64_t{options_.world_size} * options_.micro_batch_size;
  }
  const BatchLoaderOptions& options() const { return options_; }

  // The micro-batch made of global rows [first_row, first_row + b) of
  // `epoch` (rows past the epoch's end are padding). Next() is this with
  // first_row = row + rank*b.
  PackedBatch Pack(int64_t epoch, int64_t first_row);

 private:
  BatchLoader(std::shared_ptr<const ShardSet> documents, const BatchLoaderOptions& options);
  void LoadEpochOrder(int64_t epoch);

  std::shared_ptr<const ShardSet> documents_;
  BatchLoaderOptions options_;
  int64_t tokens_per_epoch_ = 0;
  int64_t rows_per_epoch_ = 0;
  uint64_t fingerprint_ = 0;
  int64_t epoch_ = 0;
  int64_t row_ = 0;
  // The order of documents in the cached epoch and where each starts in
  // that epoch's token stream (one more entry: the stream's length).
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
  std::vector<int64_t> stream_start_;
};

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_BATCH_LOADER_H_
