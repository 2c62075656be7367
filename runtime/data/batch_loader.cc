#include "runtime/data/batch_loader.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/base/deterministic_random.h"

namespace corescape::data {
namespace {

// Salt so epoch orders differ from the prepare-time split for one seed.
constexpr uint64_t kEpochSalt = 0x65706F6368ull;  // "epoch"

// FNV-1a, 64-bit, over the values' bytes.
class Fingerprint {
 public:
  void Add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (value >> (8 * i)) & 0xFF;
      hash_ *= 0x100000001B3ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xCBF29CE484222325ull;
};

}  // namespace

std::string LoaderState::ToJson() const {
  nlohmann::json out = {{"epoch", epoch},
                        {"row", row},
                        {"fingerprint", absl::StrFormat("%016x", fingerprint)}};
  return out.dump();
}

absl::StatusOr<LoaderState> LoaderState::FromJson(absl::string_view text) {
  nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_object() || !in.contains("epoch") ||
      !in["epoch"].is_number_integer() || !in.contains("row") || !in["row"].is_number_integer() ||
      !in.contains("fingerprint") || !in["fingerprint"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loader state is not {\"epoch\": int, \"row\": int, \"fingerprint\": hex}: ", text));
  }
  LoaderState state;
  state.epoch = in["epoch"].get<int64_t>();
  state.row = in["row"].get<int64_t>();
  if (!absl::SimpleHexAtoi(in["fingerprint"].get<std::string>(), &state.fingerprint)) {
    return absl::InvalidArgumentError(absl::StrCat("loader state fingerprint is not hex: ", text));
  }
  return state;
}

absl::StatusOr<std::unique_ptr<BatchLoader>> BatchLoader::Create(
    std::shared_ptr<const ShardSet> documents, const BatchLoaderOptions& options) {
  if (documents == nullptr || documents->document_count() == 0) {
    return absl::InvalidArgumentError("the loader has no documents");
  }
  if (options.seq_len <= 0 || options.micro_batch_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("seq_len ", options.seq_len,
                                                   " and micro_batch_size ",
                                                   options.micro_batch_size,
                                                   " must be positive"));
  }
  if (options.world_size <= 0 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " is not in [0, ",
                                                   options.world_size, ")"));
  }
  if (options.eos_id < 0 || static_cast<uint32_t>(options.eos_id) >= documents->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("eos id ", options.eos_id,
                                                   " is outside the vocabulary of ",
                                                   documents->vocab_size()));
  }
  return std::unique_ptr<BatchLoader>(new BatchLoader(std::move(documents), options));
}

absl::StatusOr<std::unique_ptr<BatchLoader>> BatchLoader::CreateValidation(
    std::shared_ptr<const ShardSet> documents, BatchLoaderOptions options) {
  options.shuffle = false;
  options.repeat = false;
  return Create(std::move(documents), options);
}

BatchLoader::BatchLoader(std::shared_ptr<const ShardSet> documents,
                         const BatchLoaderOptions& options)
    : documents_(std::move(documents)), options_(options) {
  Fingerprint fingerprint;
  fingerprint.Add(static_cast<uint64_t>(documents_->document_count()));
  for (int64_t d = 0; d < documents_->document_count(); ++d) {
    fingerprint.Add(static_cast<uint64_t>(documents_->DocumentLength(d)));
  }
  fingerprint.Add(static_cast<uint64_t>(options_.seq_len));
  fingerprint.Add(options_.shuffle ? options_.seed : ~uint64_t{0});
  fingerprint.Add(static_cast<uint64_t>(options_.eos_id));
  fingerprint_ = fingerprint.value();
  tokens_per_epoch_ = documents_->token_count() + documents_->document_count();
  rows_per_epoch_ = (tokens_per_epoch_ + options_.seq_len - 1) / options_.seq_len;
}

int64_t BatchLoader::steps_per_epoch() const {
  return (rows_per_epoch_ + global_batch_rows() - 1) / global_batch_rows();
}

void BatchLoader::LoadEpochOrder(int64_t epoch) {
  if (epoch == cached_epoch_) return;
  const int64_t count = documents_->document_count();
  order_.resize(static_cast<size_t>(count));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.shuffle) {
    DeterministicShuffle(order_, MixSeed(MixSeed(options_.seed, kEpochSalt),
                                         static_cast<uint64_t>(epoch)));
  }
  stream_start_.resize(static_cast<size_t>(count) + 1);
  stream_start_[0] = 0;
  for (int64_t k = 0; k < count; ++k) {
    stream_start_[k + 1] = stream_start_[k] + documents_->DocumentLength(order_[k]) + 1;
  }
  cached_epoch_ = epoch;
}

PackedBatch BatchLoader::Pack(int64_t epoch, int64_t first_row) {
  LoadEpochOrder(epoch);
  const int32_t rows = options_.micro_batch_size;
  const int32_t seq_len = options_.seq_len;
  PackedBatch batch;
  batch.batch_size = rows;
  batch.seq_len = seq_len;
  const size_t cells = static_cast<size_t>(rows) * seq_len;
  batch.tokens.assign(cells, options_.pad_id);
  batch.targets.assign(cells, -1);
  batch.positions.assign(cells, 0);
  const int32_t eos = options_.eos_id;
  for (int32_t row = 0; row < rows; ++row) {
    const int64_t global_row = first_row + row;
    if (global_row >= rows_per_epoch_) continue;
    const int64_t row_begin = global_row * seq_len;
    const int64_t row_end = std::min(row_begin + seq_len, tokens_per_epoch_);
    // The document (in epoch order) holding the row's first token.
    size_t k = static_cast<size_t>(
        std::upper_bound(stream_start_.begin(), stream_start_.end(), row_begin) -
        stream_start_.begin() - 1);
    const size_t row_base = static_cast<size_t>(row) * seq_len;
    for (int64_t at = row_begin; at < row_end; ++k) {
      const int64_t document = order_[k];
      const TokenSpan text = documents_->Document(document);
      const int64_t length = text.size();  // the eos makes it length + 1
      const int64_t offset = at - stream_start_[k];
      const int64_t count = std::min(length + 1 - offset, row_end - at);
      const int32_t column = static_cast<int32_t>(at - row_begin);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t p = offset + i;  // position in the document
        const size_t cell = row_base + column + i;
        batch.tokens[cell] = p < length ? text[p] : eos;
        batch.targets[cell] = p + 1 < length ? text[p + 1] : (p + 1 == length ? eos : -1);
        batch.positions[cell] = static_cast<int32_t>(p);
      }
      batch.segments.push_back(
          {row, column, static_cast<int32_t>(count), document, offset});
      at += count;
    }
  }
  return batch;
}

std::optional<PackedBatch> BatchLoader::Next() {
  if (!options_.repeat && epoch_ >= 1) return std::nullopt;
  PackedBatch batch =
      Pack(epoch_, row_ + int64_t{options_.rank} * options_.micro_batch_size);
  row_ += global_batch_rows();
  if (row_ >= rows_per_epoch_) {
    ++epoch_;
    row_ = 0;
  }
  return batch;
}

absl::Status BatchLoader::Restore(const LoaderState& state) {
  if (state.fingerprint != fingerprint_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "loader state fingerprint %016x does not match this loader's %016x: it was saved for "
        "other documents, seq_len, seed or eos id",
        state.fingerprint, fingerprint_));
  }
  if (state.epoch < 0 || state.row < 0 || state.row >= rows_per_epoch_) {
    return absl::InvalidArgumentError(absl::StrCat("loader state epoch ", state.epoch, " row ",
                                                   state.row, " is outside the epoch's ",
                                                   rows_per_epoch_, " rows"));
  }
  epoch_ = state.epoch;
  row_ = state.row;
  return absl::OkStatus();
}

absl::Status BatchLoader::Seek(int64_t step) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step ", step, " is negative"));
  const int64_t per_epoch = steps_per_epoch();
  if (!options_.repeat && step > per_epoch) {
    return absl::OutOfRangeError(absl::StrCat("step ", step, " is past the single epoch of ",
                                              per_epoch, " steps"));
  }
  epoch_ = step / per_epoch;
  row_ = (step % per_epoch) * global_batch_rows();
  return absl::OkStatus();
}

}  // namespace corescape::data
