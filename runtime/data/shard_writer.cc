#include "runtime/data/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/crc32c.h"

namespace corescape::data {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Create(
    const std::string& path, uint32_t vocab_size, uint32_t token_width_bytes) {
  if (vocab_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", path, ": vocabulary size is 0"));
  }
  if (token_width_bytes == 0) token_width_bytes = TokenWidthFor(vocab_size);
  if (token_width_bytes != 2 && token_width_bytes != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", path, ": token width ", token_width_bytes, " bytes, expected 2 or 4"));
  }
  if (token_width_bytes == 2 && vocab_size > (1u << 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", path, ": vocabulary of ", vocab_size, " does not fit 16-bit tokens"));
  }
  std::string temp_path = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", temp_path);
  // Placeholder header; the real one is written by Finish().
  std::string zeros(kShardHeaderBytes, '\0');
  if (absl::Status status = WriteAll(fd, zeros.data(), zeros.size(), temp_path);
      !status.ok()) {
    close(fd);
    unlink(temp_path.c_str());
    return status;
  }
  return std::unique_ptr<ShardWriter>(
      new ShardWriter(path, std::move(temp_path), fd, vocab_size, token_width_bytes));
}

ShardWriter::ShardWriter(std::string path, std::string temp_path, int fd,
                         uint32_t vocab_size, uint32_t token_width_bytes)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      vocab_size_(vocab_size),
      token_width_bytes_(token_width_bytes) {
  buffer_.reserve(kBufferBytes);
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) close(fd_);
  if (!finished_) unlink(temp_path_.c_str());
}

absl::Status ShardWriter::Fail(absl::Status status) {
  if (error_.ok()) error_ = status;
  return status;
}

absl::Status ShardWriter::FlushBuffer() {
  if (buffer_.empty()) return absl::OkStatus();
  absl::Status status = WriteAll(fd_, buffer_.data(), buffer_.size(), temp_path_);
  buffer_.clear();
  return status.ok() ? status : Fail(status);
}

absl::Status ShardWriter::WriteBytes(const void* data, size_t size) {
  payload_crc_ = Crc32cExtend(payload_crc_, data, size);
  payload_bytes_ += static_cast<int64_t>(size);
  buffer_.append(static_cast<const char*>(data), size);
  if (buffer_.size() >= kBufferBytes) return FlushBuffer();
  return absl::OkStatus();
}

absl::Status ShardWriter::AddDocument(absl::Span<const int32_t> tokens) {
  if (!error_.ok()) return error_;
  if (finished_) return absl::FailedPreconditionError(absl::StrCat("shard ", path_, " is finished"));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", path_, ": document ", document_count(), " token ", i, " is ", tokens[i],
          ", outside the vocabulary [0, ", vocab_size_, ")"));
    }
  }
  absl::Status status;
  if (token_width_bytes_ == 2) {
    std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    status = WriteBytes(narrow.data(), narrow.size() * 2);
  } else {
    status = WriteBytes(tokens.data(), tokens.size() * 4);  // checked non-negative
  }
  if (!status.ok()) return status;
  offsets_.push_back(offsets_.back() + tokens.size());
  return absl::OkStatus();
}

absl::StatusOr<ShardSummary> ShardWriter::Finish() {
  if (!error_.ok()) return error_;
  if (finished_) return absl::FailedPreconditionError(absl::StrCat("shard ", path_, " is finished"));
  ShardHeader header;
  header.token_width_bytes = token_width_bytes_;
  header.vocab_size = vocab_size_;
  header.token_count = offsets_.back();
  header.document_count = offsets_.size() - 1;
  absl::StatusOr<ShardLayout> layout = LayoutOf(header);
  if (!layout.ok()) return Fail(layout.status());
  // Zero padding up to the 8-aligned offsets table, then the table.
  static constexpr char kZeros[8] = {};
  size_t padding = static_cast<size_t>(layout->offsets_offset - kShardHeaderBytes - payload_bytes_);
  if (absl::Status s = WriteBytes(kZeros, padding); !s.ok()) return s;
  if (absl::Status s = WriteBytes(offsets_.data(), offsets_.size() * sizeof(uint64_t)); !s.ok()) {
    return s;
  }
  if (absl::Status s = FlushBuffer(); !s.ok()) return s;
  header.payload_crc32c = payload_crc_;
  std::string header_bytes = EncodeShardHeader(header);
  if (pwrite(fd_, header_bytes.data(), header_bytes.size(), 0) !=
      static_cast<ssize_t>(header_bytes.size())) {
    return Fail(ErrnoError("cannot write header of", temp_path_));
  }
  if (fsync(fd_) != 0) return Fail(ErrnoError("cannot fsync", temp_path_));
  close(fd_);
  fd_ = -1;
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Fail(ErrnoError("cannot rename onto", path_));
  }
  finished_ = true;
  // The rename is durable only once the directory is synced.
  SyncDirectory(DirectoryOf(path_));
  ShardSummary summary;
  summary.path = path_;
  summary.token_width_bytes = token_width_bytes_;
  summary.vocab_size = vocab_size_;
  summary.token_count = token_count();
  summary.document_count = document_count();
  summary.file_bytes = layout->file_bytes;
  summary.payload_crc32c = payload_crc_;
  return summary;
}

absl::StatusOr<ShardSummary> WriteShard(const std::string& path, uint32_t vocab_size,
                                        const std::vector<std::vector<int32_t>>& documents,
                                        uint32_t token_width_bytes) {
  absl::StatusOr<std::unique_ptr<ShardWriter>> writer =
      ShardWriter::Create(path, vocab_size, token_width_bytes);
  if (!writer.ok()) return writer.status();
  for (const std::vector<int32_t>& document : documents) {
    if (absl::Status status = (*writer)->AddDocument(document); !status.ok()) return status;
  }
  return (*writer)->Finish();
}

}  // namespace corescape::data
