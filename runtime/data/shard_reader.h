#ifndef CORESCAPE_RUNTIME_DATA_SHARD_READER_H_
#define CORESCAPE_RUNTIME_DATA_SHARD_READER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/shard_format.h"

namespace corescape::data {

// A read-only view of stored tokens, 16- or 32-bit wide, read as int32.
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const unsigned char* data, int64_t size, uint32_t width_bytes)
      : data_(data), size_(size), width_bytes_(width_bytes) {}

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t operator[](int64_t i) const {
    if (width_bytes_ == 2) {
      uint16_t value;
      std::memcpy(&value, data_ + 2 * i, 2);
      return value;
    }
    uint32_t value;
    std::memcpy(&value, data_ + 4 * i, 4);
    return static_cast<int32_t>(value);
  }
  TokenSpan subspan(int64_t begin, int64_t count) const {
    return TokenSpan(data_ + begin * width_bytes_, count, width_bytes_);
  }
  void CopyTo(int32_t* out) const {
    for (int64_t i = 0; i < size_; ++i) out[i] = (*this)[i];
  }
  std::vector<int32_t> ToVector() const {
    std::vector<int32_t> out(static_cast<size_t>(size_));
    CopyTo(out.data());
    return out;
  }

 private:
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
  uint32_t width_bytes_ = 2;
};

// A token shard mapped read-only. Open() validates the whole file before
// returning (magic, version, header checksum, sizes against the file size,
// payload checksum, document offsets, every token < vocab_size), so the
// accessors below never fail. Errors are DataLoss (or FailedPrecondition for
// an unsupported version) and name the file and the byte offset.
// Opening costs one pass over the file.
class ShardReader {
 public:
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(const std::string& path);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  const ShardHeader& header() const { return header_; }
  int64_t token_count() const { return static_cast<int64_t>(header_.token_count); }
  int64_t document_count() const { return static_cast<int64_t>(header_.document_count); }
  uint32_t vocab_size() const { return header_.vocab_size; }
  uint32_t token_width_bytes() const { return header_.token_width_bytes; }
  int64_t file_bytes() const { return file_bytes_; }

  // Index of the first token of document d; d == document_count() gives
  // token_count().
  int64_t DocumentBegin(int64_t d) const;
  int64_t DocumentLength(int64_t d) const { return DocumentBegin(d + 1) - DocumentBegin(d); }
  TokenSpan Document(int64_t d) const {
    return tokens_.subspan(DocumentBegin(d), DocumentLength(d));
  }
  TokenSpan Tokens() const { return tokens_; }

 private:
  ShardReader() = default;

  std::string path_;
  ShardHeader header_;
  const unsigned char* mapping_ = nullptr;
  int64_t file_bytes_ = 0;
  TokenSpan tokens_;
  const unsigned char* offsets_ = nullptr;
};

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_SHARD_READER_H_
