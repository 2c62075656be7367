#include "runtime/data/shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/crc32c.h"

namespace corescape::data {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status CorruptAt(const std::string& path, int64_t offset, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("shard ", path, ": byte offset ", offset, ": ", what));
}

uint64_t LoadU64(const unsigned char* p) {
  uint64_t value;
  std::memcpy(&value, p, 8);
  return value;
}

}  // namespace

ShardReader::~ShardReader() {
  if (mapping_ != nullptr) {
    munmap(const_cast<unsigned char*>(mapping_), static_cast<size_t>(file_bytes_));
  }
}

int64_t ShardReader::DocumentBegin(int64_t d) const {
  return static_cast<int64_t>(LoadU64(offsets_ + 8 * d));
}

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no shard ", path));
    return ErrnoError("cannot open shard", path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status status = ErrnoError("cannot stat shard", path);
    close(fd);
    return status;
  }
  std::unique_ptr<ShardReader> reader(new ShardReader());
  reader->path_ = path;
  reader->file_bytes_ = st.st_size;
  if (st.st_size > 0) {
    void* mapping = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      absl::Status status = ErrnoError("cannot map shard", path);
      close(fd);
      return status;
    }
    reader->mapping_ = static_cast<const unsigned char*>(mapping);
  }
  close(fd);
  const unsigned char* bytes = reader->mapping_;
  const int64_t file_bytes = reader->file_bytes_;

  absl::StatusOr<ShardHeader> header = DecodeShardHeader(
      absl::string_view(reinterpret_cast<const char*>(bytes), static_cast<size_t>(file_bytes)),
      path);
  if (!header.ok()) return header.status();
  reader->header_ = *header;
  absl::StatusOr<ShardLayout> layout = LayoutOf(*header);
  if (!layout.ok()) return CorruptAt(path, 24, layout.status().message());
  if (file_bytes != layout->file_bytes) {
    int64_t at = std::min(file_bytes, layout->file_bytes);
    return CorruptAt(path, at,
                     absl::StrCat("file is ", file_bytes, " bytes but its header (",
                                  header->token_count, " tokens, ", header->document_count,
                                  " documents) needs exactly ", layout->file_bytes,
                                  file_bytes < layout->file_bytes ? " (truncated)"
                                                                  : " (trailing bytes)"));
  }
  uint32_t payload_crc =
      Crc32c(bytes + kShardHeaderBytes, static_cast<size_t>(file_bytes - kShardHeaderBytes));
  if (payload_crc != header->payload_crc32c) {
    return CorruptAt(path, kShardHeaderBytes,
                     absl::StrFormat("payload checksum mismatch (stored 0x%08x, computed "
                                     "0x%08x over bytes [%d, %d)): the file is corrupted",
                                     header->payload_crc32c, payload_crc, kShardHeaderBytes,
                                     file_bytes));
  }
  for (int64_t at = kShardHeaderBytes + layout->token_bytes; at < layout->offsets_offset; ++at) {
    if (bytes[at] != 0) return CorruptAt(path, at, "padding before the offsets is not zero");
  }

  // Document offsets: start at 0, never decrease, end at token_count.
  const unsigned char* offsets = bytes + layout->offsets_offset;
  const int64_t documents = static_cast<int64_t>(header->document_count);
  uint64_t previous = 0;
  for (int64_t d = 0; d <= documents; ++d) {
    uint64_t offset = LoadU64(offsets + 8 * d);
    int64_t at = layout->offsets_offset + 8 * d;
    if (d == 0 && offset != 0) {
      return CorruptAt(path, at, absl::StrCat("first document offset is ", offset, ", not 0"));
    }
    if (offset < previous) {
      return CorruptAt(path, at,
                       absl::StrCat("offset of document ", d, " is ", offset,
                                    ", before the previous document's start ", previous));
    }
    if (offset > header->token_count) {
      return CorruptAt(path, at,
                       absl::StrCat("offset of document ", d, " is ", offset,
                                    ", past the last token (", header->token_count, ")"));
    }
    previous = offset;
  }
  if (previous != header->token_count) {
    return CorruptAt(path, layout->offsets_offset + 8 * documents,
                     absl::StrCat("last document offset is ", previous, " but the shard holds ",
                                  header->token_count, " tokens"));
  }

  reader->tokens_ = TokenSpan(bytes + kShardHeaderBytes,
                              static_cast<int64_t>(header->token_count),
                              header->token_width_bytes);
  reader->offsets_ = offsets;
  const TokenSpan& tokens = reader->tokens_;
  for (int64_t i = 0; i < tokens.size(); ++i) {
    if (static_cast<uint32_t>(tokens[i]) >= header->vocab_size) {
      // Which document: the last one starting at or before token i.
      int64_t lo = 0, hi = documents;  // invariant: begin(lo) <= i < begin(hi)
      while (hi - lo > 1) {
        int64_t mid = (lo + hi) / 2;
        if (reader->DocumentBegin(mid) <= i) lo = mid; else hi = mid;
      }
      return CorruptAt(path, kShardHeaderBytes + i * header->token_width_bytes,
                       absl::StrCat("token ", i, " (document ", lo, ") is ",
                                    static_cast<uint32_t>(tokens[i]),
                                    ", outside the vocabulary [0, ", header->vocab_size, ")"));
    }
  }
  return reader;
}

}  // namespace corescape::data
