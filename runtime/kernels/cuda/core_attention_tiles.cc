#include "runtime/kernels/cuda/core_attention_tiles.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace corescape::kernels::cuda {
namespace {

// gridDim.y (heads) and gridDim.x (tiles) limits of a launch.
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();

}  // namespace

absl::StatusOr<CoreAttentionTiles> PlanCoreAttentionTiles(const AttentionShape& shape,
                                                          absl::Span<const AttentionTask> tasks, int64_t q_rows,
                                                          int64_t kv_rows) {
  if (absl::Status status = ValidateAttentionArgs(shape, tasks, q_rows, kv_rows); !status.ok()) return status;
  if (shape.head_dim > kAttentionMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim ", shape.head_dim, " exceeds the CUDA kernel's ",
                                                   kAttentionMaxHeadDim));
  }
  if (shape.n_heads > kMaxGridY) {
    return absl::InvalidArgumentError(absl::StrCat("n_heads ", shape.n_heads, " exceeds ", kMaxGridY));
  }
  CoreAttentionTiles tiles;
  tiles.dims = {shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.softmax_scale};

  for (const AttentionTask& task : tasks) {
    for (int64_t pos = task.q_begin; pos < task.q_end; pos += kAttentionQueryTile) {
      tiles.query_tiles.push_back({task.q_row + (pos - task.q_begin), pos, task.kv_row,
                                   static_cast<int32_t>(std::min<int64_t>(kAttentionQueryTile, task.q_end - pos))});
    }
  }
  std::stable_sort(tiles.query_tiles.begin(), tiles.query_tiles.end(), [](const QueryTile& a, const QueryTile& b) {
    return a.q_pos + a.n_queries > b.q_pos + b.n_queries;
  });

  // Documents by kv_row: their tasks (in call order) and their key extent.
  struct Document {
    std::vector<const AttentionTask*> tasks;
    int64_t length = 0;
  };
  std::map<int64_t, Document> documents;
  for (const AttentionTask& task : tasks) {
    Document& doc = documents[task.kv_row];
    doc.tasks.push_back(&task);
    doc.length = std::max(doc.length, task.q_end);
  }
  // Interval colouring by start row: the first wave whose last row range
  // ends at or before this document's start.
  std::vector<int64_t> wave_last_end;
  std::vector<std::vector<KeyTile>> waves;
  for (const auto& [kv_row, doc] : documents) {
    size_t wave = 0;
    while (wave < wave_last_end.size() && wave_last_end[wave] > kv_row) ++wave;
    if (wave == wave_last_end.size()) {
      wave_last_end.push_back(0);
      waves.emplace_back();
    }
    wave_last_end[wave] = kv_row + doc.length;
    for (int64_t k_pos = 0; k_pos < doc.length; k_pos += kAttentionKeyTile) {
      KeyTile tile;
      tile.kv_row = kv_row;
      tile.k_pos = k_pos;
      tile.n_keys = static_cast<int32_t>(std::min<int64_t>(kAttentionKeyTile, doc.length - k_pos));
      tile.first_segment = static_cast<int64_t>(tiles.segments.size());
      for (const AttentionTask* task : doc.tasks) {
        const int64_t first = std::max(task->q_begin, k_pos);
        if (first >= task->q_end) continue;
        tiles.segments.push_back({task->q_row + (first - task->q_begin), first, task->q_end - first});
        ++tile.n_segments;
      }
      if (tile.n_segments > 0) waves[wave].push_back(tile);
    }
  }
  for (const std::vector<KeyTile>& wave : waves) {
    if (static_cast<int64_t>(wave.size()) > kMaxGridX) {
      return absl::InvalidArgumentError(absl::StrCat(wave.size(), " key tiles in one launch exceed ", kMaxGridX));
    }
    tiles.key_tiles.insert(tiles.key_tiles.end(), wave.begin(), wave.end());
    tiles.wave_ends.push_back(static_cast<int64_t>(tiles.key_tiles.size()));
  }
  if (static_cast<int64_t>(tiles.query_tiles.size()) > kMaxGridX) {
    return absl::InvalidArgumentError(
        absl::StrCat(tiles.query_tiles.size(), " query tiles in one launch exceed ", kMaxGridX));
  }
  return tiles;
}

CoreAttentionTilesView UploadedCoreAttentionTiles::view() const {
  return {dims,
          query_tiles.as<const QueryTile>(),
          n_query_tiles,
          key_tiles.as<const KeyTile>(),
          segments.as<const QuerySegment>(),
          wave_ends.data(),
          static_cast<int64_t>(wave_ends.size())};
}

namespace {

template <typename T>
absl::StatusOr<device::DeviceBuffer> UploadVector(const std::vector<T>& host, device::CachingAllocator& allocator,
                                                  device::Stream& stream) {
  absl::StatusOr<device::DeviceBuffer> buffer = allocator.Allocate(host.size() * sizeof(T));
  if (!buffer.ok() || host.empty()) return buffer;
  if (absl::Status status = allocator.runtime()->CopyAsync(buffer->data(), host.data(), host.size() * sizeof(T),
                                                           device::CopyKind::kHostToDevice, stream);
      !status.ok()) {
    return status;
  }
  return buffer;
}

}  // namespace

absl::StatusOr<UploadedCoreAttentionTiles> UploadCoreAttentionTiles(const CoreAttentionTiles& tiles,
                                                                    device::CachingAllocator& allocator,
                                                                    device::Stream& stream) {
  UploadedCoreAttentionTiles uploaded;
  uploaded.dims = tiles.dims;
  uploaded.n_query_tiles = static_cast<int64_t>(tiles.query_tiles.size());
  uploaded.wave_ends = tiles.wave_ends;
  absl::StatusOr<device::DeviceBuffer> query_tiles = UploadVector(tiles.query_tiles, allocator, stream);
  if (!query_tiles.ok()) return query_tiles.status();
  uploaded.query_tiles = std::move(*query_tiles);
  absl::StatusOr<device::DeviceBuffer> key_tiles = UploadVector(tiles.key_tiles, allocator, stream);
  if (!key_tiles.ok()) return key_tiles.status();
  uploaded.key_tiles = std::move(*key_tiles);
  absl::StatusOr<device::DeviceBuffer> segments = UploadVector(tiles.segments, allocator, stream);
  if (!segments.ok()) return segments.status();
  uploaded.segments = std::move(*segments);
  if (absl::Status status = stream.Synchronize(); !status.ok()) return status;
  return uploaded;
}

}  // namespace corescape::kernels::cuda
