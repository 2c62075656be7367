#ifndef CORESCAPE_RUNTIME_DATA_SHARD_WRITER_H_
#define CORESCAPE_RUNTIME_DATA_SHARD_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/data/shard_format.h"

namespace corescape::data {

struct ShardSummary {
  std::string path;
  uint32_t token_width_bytes = 0;
  uint32_t vocab_size = 0;
  int64_t token_count = 0;
  int64_t document_count = 0;
  int64_t file_bytes = 0;
  uint32_t payload_crc32c = 0;
};

// Streams documents into a token shard. Tokens go to "<path>.tmp.<pid>" as
// they arrive (only the document offsets stay in memory, 8 bytes each);
// Finish() writes the offsets and the header, fsyncs and renames onto
// `path`, so readers see the old file or the complete new one. A writer
// destroyed before Finish() removes its temp file.
class ShardWriter {
 public:
  // token_width_bytes: 2, 4, or 0 to pick the smallest that fits vocab_size.
  static absl::StatusOr<std::unique_ptr<ShardWriter>> Create(
      const std::string& path, uint32_t vocab_size, uint32_t token_width_bytes = 0);

  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Fails (writing nothing) if any token is negative or >= vocab_size.
  absl::Status AddDocument(absl::Span<const int32_t> tokens);

  absl::StatusOr<ShardSummary> Finish();

  int64_t token_count() const { return static_cast<int64_t>(offsets_.back()); }
  int64_t document_count() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  const std::string& path() const { return path_; }

 private:
  ShardWriter(std::string path, std::string temp_path, int fd, uint32_t vocab_size,
              uint32_t token_width_bytes);

  absl::Status WriteBytes(const void* data, size_t size);  // buffered
  absl::Status FlushBuffer();
  absl::Status Fail(absl::Status status);  // remembers the first error

  std::string path_;
  std::string temp_path_;
  int fd_;
  uint32_t vocab_size_;
  uint32_t token_width_bytes_;
  std::vector<uint64_t> offsets_{0};
  std::string buffer_;
  uint32_t payload_crc_ = 0;
  int64_t payload_bytes_ = 0;
  absl::Status error_;
  bool finished_ = false;
};

// Convenience: the whole shard from in-memory documents.
absl::StatusOr<ShardSummary> WriteShard(const std::string& path, uint32_t vocab_size,
                                        const std::vector<std::vector<int32_t>>& documents,
                                        uint32_t token_width_bytes = 0);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_SHARD_WRITER_H_
