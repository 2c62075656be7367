#include "runtime/optim/mask_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace corescape::optim {
namespace {

constexpr uint8_t kMagic = 0x5C;  // 'SCAPE mask', version 1

// The refusal of an entry that is out of order or out of range: off the hot
// path, so it names the entry.
absl::Status MisplacedEntryError(const MaskPartitionView& mask, int64_t position) {
  return absl::InvalidArgumentError(absl::StrCat(
      "mask indices must be sorted, unique and in range [", mask.begin, ", ", mask.end,
      "): entry ", position, " is ", mask.indices[position],
      position > 0 ? absl::StrCat(", after ", mask.indices[position - 1]) : ""));
}

// 7 bits per byte, at least one byte.
int VarintBytes(uint64_t value) { return (std::bit_width(value | 1) + 6) / 7; }

// Writes value's varint at p (VarintBytes(value) bytes); returns the end.
char* WriteVarint(char* p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

bool GetVarint(absl::string_view& in, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const uint8_t byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    value |= uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

template <typename T>
void PutFixed(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}

template <typename T>
T GetFixed(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

int64_t GapListBytes(absl::Span<const int64_t> sorted, int64_t begin) {
  int64_t bytes = 0;
  int64_t next = begin;  // smallest value the next entry may take
  for (int64_t index : sorted) {
    bytes += VarintBytes(static_cast<uint64_t>(index - next));
    next = index + 1;
  }
  return bytes;
}

// Writes GapListBytes(sorted, begin) bytes at p; returns the end.
char* WriteGapList(char* p, absl::Span<const int64_t> sorted, int64_t begin) {
  int64_t next = begin;
  for (int64_t index : sorted) {
    p = WriteVarint(p, static_cast<uint64_t>(index - next));
    next = index + 1;
  }
  return p;
}

// Appends begin + the position of every set bit of words[0, n_words),
// ascending, visiting only the set bits.
template <typename WordAt>
void AppendSetBits(WordAt word_at, int64_t n_words, int64_t begin, std::vector<int64_t>& out) {
  for (int64_t w = 0; w < n_words; ++w) {
    uint64_t word = word_at(w);
    while (word != 0) {
      out.push_back(begin + 64 * w + std::countr_zero(word));
      word &= word - 1;
    }
  }
}

// Reads `count` gaps and hands each index they give, ascending and inside
// [begin, end), to visit(index).
template <typename Visit>
absl::Status ForEachGap(absl::string_view& in, int64_t count, int64_t begin, int64_t end,
                        Visit visit) {
  int64_t next = begin;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t gap;
    if (!GetVarint(in, gap)) return absl::DataLossError("mask: truncated varint");
    if (gap >= static_cast<uint64_t>(end - next)) {
      return absl::DataLossError("mask: index past the end of its range");
    }
    const int64_t index = next + static_cast<int64_t>(gap);
    visit(index);
    next = index + 1;
  }
  return absl::OkStatus();
}

absl::Status GetGapList(absl::string_view& in, int64_t count, int64_t begin, int64_t end,
                        std::vector<int64_t>& out) {
  out.clear();
  out.reserve(count);
  return ForEachGap(in, count, begin, end, [&](int64_t index) { out.push_back(index); });
}

// A zeroed bitmap of `words` words, reused by the thread's next call: a
// fresh one per mask would fault its pages in every step.
std::vector<uint64_t>& ScratchBitmap(int64_t words) {
  thread_local std::vector<uint64_t> bits;
  bits.assign(words, 0);
  return bits;
}

void FlipBit(std::vector<uint64_t>& bits, int64_t offset) {
  bits[offset >> 6] ^= uint64_t{1} << (offset & 63);
}

// The set bits of a bitmap over [begin, ...), ascending.
std::vector<int64_t> SetBitsOf(const std::vector<uint64_t>& bits, int64_t begin) {
  int64_t count = 0;
  for (uint64_t word : bits) count += std::popcount(word);
  std::vector<int64_t> out;
  out.reserve(count);
  AppendSetBits([&](int64_t w) { return bits[w]; }, static_cast<int64_t>(bits.size()), begin, out);
  return out;
}

// Whether a symmetric difference over `range` coordinates of lists with
// `entries` entries in all goes through a bitmap: when it has no more
// words than the lists have entries (a merge of random masks mispredicts a
// branch on about every other entry; the bitmap's XORs and bit scan do
// not).
bool DifferenceByBitmap(int64_t range, int64_t entries) { return (range + 63) / 64 <= entries; }

// The coordinates in exactly one of two sorted, duplicate-free lists of
// [begin, end): as bits of the thread's scratch bitmap when
// DifferenceByBitmap says so (and every index lies in the range), else as
// a merged list. Sized and written as a gap list without listing the bits.
class Change {
 public:
  Change(absl::Span<const int64_t> a, absl::Span<const int64_t> b, int64_t begin, int64_t end)
      : begin_(begin) {
    if (DifferenceByBitmap(end - begin, static_cast<int64_t>(a.size() + b.size()))) {
      std::vector<uint64_t>& bits = ScratchBitmap((end - begin + 63) / 64);
      const uint64_t range = static_cast<uint64_t>(end - begin);
      bool in_range = true;
      for (absl::Span<const int64_t> list : {a, b}) {
        for (int64_t index : list) {
          const uint64_t offset = static_cast<uint64_t>(index - begin);
          if (offset >= range) {
            in_range = false;  // not this range's list: no bit to set
            break;
          }
          FlipBit(bits, static_cast<int64_t>(offset));
        }
        if (!in_range) break;
      }
      if (in_range) {
        bits_ = &bits;
        for (uint64_t word : bits) count_ += std::popcount(word);
        return;
      }
    }
    list_.reserve(a.size() + b.size());
    std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(list_));
    count_ = static_cast<int64_t>(list_.size());
  }

  int64_t count() const { return count_; }
  // VarintBytes(count) + the gap list's bytes: the change-from-previous
  // payload.
  int64_t PayloadBytes() const {
    int64_t bytes = VarintBytes(static_cast<uint64_t>(count_));
    if (bits_ == nullptr) return bytes + GapListBytes(list_, begin_);
    int64_t next = 0;
    ForEachBit([&](int64_t offset) {
      bytes += VarintBytes(static_cast<uint64_t>(offset - next));
      next = offset + 1;
      return true;
    });
    return bytes;
  }
  char* WritePayload(char* p) const {
    p = WriteVarint(p, static_cast<uint64_t>(count_));
    if (bits_ == nullptr) return WriteGapList(p, list_, begin_);
    int64_t next = 0;
    ForEachBit([&](int64_t offset) {
      p = WriteVarint(p, static_cast<uint64_t>(offset - next));
      next = offset + 1;
      return true;
    });
    return p;
  }
  // The payload written at p when it takes at most `limit` bytes: its end;
  // else nullptr, with [p, p + limit) overwritten. From the bitmap in one
  // pass over the bits (sizing first, then writing, takes two).
  char* WriteWithin(char* p, int64_t limit) const {
    // The count and the gaps are below 2^32 (the range is): 5 bytes each at most.
    constexpr int64_t kMaxVarint = 5;
    if (bits_ == nullptr || limit < kMaxVarint) {
      return PayloadBytes() <= limit ? WritePayload(p) : nullptr;
    }
    char* const end = p + limit;
    p = WriteVarint(p, static_cast<uint64_t>(count_));
    int64_t next = 0;
    bool fits = true;
    ForEachBit([&](int64_t offset) {
      const uint64_t gap = static_cast<uint64_t>(offset - next);
      if (end - p < kMaxVarint && end - p < VarintBytes(gap)) {
        fits = false;
        return false;
      }
      p = WriteVarint(p, gap);
      next = offset + 1;
      return true;
    });
    return fits ? p : nullptr;
  }

 private:
  // visit(offset) for every set bit, ascending, while it returns true.
  template <typename Visit>
  void ForEachBit(Visit visit) const {
    const std::vector<uint64_t>& bits = *bits_;
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
        if (!visit(static_cast<int64_t>(64 * w) + std::countr_zero(word))) return;
      }
    }
  }

  int64_t begin_;
  const std::vector<uint64_t>* bits_ = nullptr;  // the thread's scratch: valid until its next use
  std::vector<int64_t> list_;
  int64_t count_ = 0;
};

}  // namespace

absl::Status CheckMaskPartition(const MaskPartitionView& mask) {
  int64_t next = mask.begin;  // smallest value the next entry may take
  for (const int64_t& index : mask.indices) {
    if (index < next || index >= mask.end) {
      return MisplacedEntryError(mask, &index - mask.indices.data());
    }
    next = index + 1;
  }
  return absl::OkStatus();
}

const char* MaskEncodingName(MaskEncoding encoding) {
  switch (encoding) {
    case MaskEncoding::kBitmask: return "bitmask";
    case MaskEncoding::kIndexList: return "index-list";
    case MaskEncoding::kDeltaIndices: return "delta-indices";
    case MaskEncoding::kChangeFromPrevious: return "change-from-previous";
  }
  return "unknown";
}

std::optional<int64_t> MaskPayloadBytes(MaskEncoding encoding, const MaskPartitionView& mask,
                                        const std::vector<int64_t>* previous) {
  const int64_t count = static_cast<int64_t>(mask.indices.size());
  switch (encoding) {
    case MaskEncoding::kBitmask: return (mask.end - mask.begin + 7) / 8;
    case MaskEncoding::kIndexList: return count * 4;
    case MaskEncoding::kDeltaIndices: return GapListBytes(mask.indices, mask.begin);
    case MaskEncoding::kChangeFromPrevious: {
      if (previous == nullptr) return std::nullopt;
      return Change(mask.indices, *previous, mask.begin, mask.end).PayloadBytes();
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::string> EncodeMaskPartition(MaskPartitionHeader header,
                                                const MaskPartitionView& mask,
                                                const std::vector<int64_t>* previous,
                                                std::optional<MaskEncoding> force) {
  if (mask.end < mask.begin || mask.end - mask.begin > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError("mask range must be non-negative and < 2^32 long");
  }
  // One pass over the indices (each pass reads them from memory again):
  // their order and range, and the delta encoding's size.
  int64_t delta_bytes = 0;
  int64_t next = mask.begin;  // smallest value the next entry may take
  for (const int64_t& index : mask.indices) {
    if (index < next || index >= mask.end) {
      return MisplacedEntryError(mask, &index - mask.indices.data());
    }
    delta_bytes += VarintBytes(static_cast<uint64_t>(index - next));
    next = index + 1;
  }
  // The previous part is sorted (a part this range encoded or decoded
  // before): its ends bound it.
  if (previous != nullptr && !previous->empty() &&
      (previous->front() < mask.begin || previous->back() >= mask.end)) {
    return absl::InvalidArgumentError("previous mask outside the range");
  }
  header.count = static_cast<int64_t>(mask.indices.size());
  // The sizes MaskPayloadBytes gives, with the symmetric difference computed
  // once for both sizing and writing, and only when change-from-previous
  // is a candidate.
  std::optional<Change> changed;
  const bool change_candidate = !force || *force == MaskEncoding::kChangeFromPrevious;
  if (previous != nullptr && change_candidate) changed.emplace(mask.indices, *previous, mask.begin, mask.end);
  auto payload_bytes = [&](MaskEncoding e) -> std::optional<int64_t> {
    if (e == MaskEncoding::kDeltaIndices) return delta_bytes;
    if (e != MaskEncoding::kChangeFromPrevious) return MaskPayloadBytes(e, mask, nullptr);
    if (!changed) return std::nullopt;
    return changed->PayloadBytes();
  };
  int64_t best = -1;
  if (force) {
    std::optional<int64_t> bytes = payload_bytes(*force);
    if (!bytes) return absl::FailedPreconditionError("change-from-previous needs a previous mask");
    header.encoding = *force;
    best = *bytes;
  } else {
    // The smallest of the other three; change-from-previous is written
    // straight into the output below and taken where it is smaller still
    // (a tie keeps the lower encoding), so it is not sized first.
    for (MaskEncoding e :
         {MaskEncoding::kBitmask, MaskEncoding::kIndexList, MaskEncoding::kDeltaIndices}) {
      std::optional<int64_t> bytes = payload_bytes(e);
      if (bytes && (best < 0 || *bytes < best)) {
        best = *bytes;
        header.encoding = e;
      }
    }
  }
  std::string out;
  out.reserve(kMaskHeaderBytes + best);
  out.push_back(static_cast<char>(kMagic));
  out.push_back(static_cast<char>(header.encoding));
  PutFixed<uint16_t>(out, static_cast<uint16_t>(header.rank));
  PutFixed<uint32_t>(out, static_cast<uint32_t>(header.count));
  PutFixed<uint64_t>(out, header.mask_epoch);
  PutFixed<int64_t>(out, header.step);
  // The payload is written in place: its size is known exactly (or bounded,
  // for change-from-previous tried against the others).
  out.resize(kMaskHeaderBytes + best, '\0');
  char* const payload = out.data() + kMaskHeaderBytes;
  if (!force && changed) {
    if (char* written = changed->WriteWithin(payload, best - 1); written != nullptr) {
      header.encoding = MaskEncoding::kChangeFromPrevious;
      out[1] = static_cast<char>(header.encoding);
      out.resize(kMaskHeaderBytes + (written - payload));
      return out;
    }
    std::memset(payload, 0, static_cast<size_t>(best));  // the bitmask sets bits in zeros
  }
  char* end = payload;
  switch (header.encoding) {
    case MaskEncoding::kBitmask: {
      unsigned char* bits = reinterpret_cast<unsigned char*>(payload);
      for (int64_t index : mask.indices) {
        const uint64_t offset = static_cast<uint64_t>(index - mask.begin);
        bits[offset >> 3] |= static_cast<unsigned char>(1u << (offset & 7));
      }
      end = payload + (mask.end - mask.begin + 7) / 8;
      break;
    }
    case MaskEncoding::kIndexList:
      for (int64_t index : mask.indices) {
        const uint32_t offset = static_cast<uint32_t>(index - mask.begin);
        std::memcpy(end, &offset, sizeof(offset));
        end += sizeof(offset);
      }
      break;
    case MaskEncoding::kDeltaIndices:
      end = WriteGapList(payload, mask.indices, mask.begin);
      break;
    case MaskEncoding::kChangeFromPrevious:
      end = changed->WritePayload(payload);
      break;
  }
  if (end - payload != best) {
    return absl::InternalError(absl::StrCat("mask: ", MaskEncodingName(header.encoding), " payload of ",
                                            end - payload, " bytes, sized as ", best));
  }
  return out;
}

absl::StatusOr<DecodedMaskPartition> DecodeMaskPartition(absl::string_view bytes, int64_t begin,
                                                         int64_t end,
                                                         const std::vector<int64_t>* previous) {
  if (static_cast<int64_t>(bytes.size()) < kMaskHeaderBytes ||
      static_cast<uint8_t>(bytes[0]) != kMagic) {
    return absl::DataLossError("mask: missing or bad header");
  }
  DecodedMaskPartition out;
  MaskPartitionHeader& h = out.header;
  const uint8_t encoding = static_cast<uint8_t>(bytes[1]);
  if (encoding > static_cast<uint8_t>(MaskEncoding::kChangeFromPrevious)) {
    return absl::DataLossError(absl::StrCat("mask: unknown encoding ", encoding));
  }
  h.encoding = static_cast<MaskEncoding>(encoding);
  h.rank = GetFixed<uint16_t>(bytes.data() + 2);
  h.count = GetFixed<uint32_t>(bytes.data() + 4);
  h.mask_epoch = GetFixed<uint64_t>(bytes.data() + 8);
  h.step = GetFixed<int64_t>(bytes.data() + 16);
  absl::string_view payload = bytes.substr(kMaskHeaderBytes);
  const int64_t range = end - begin;
  if (h.count > range) return absl::DataLossError("mask: more entries than its range");
  switch (h.encoding) {
    case MaskEncoding::kBitmask: {
      if (static_cast<int64_t>(payload.size()) != (range + 7) / 8) {
        return absl::DataLossError("mask: bitmask of the wrong size");
      }
      // 64 coordinates per word, visiting only the set bits; bits past the
      // range in the last byte are ignored.
      out.indices.reserve(h.count);
      const int64_t words = range / 64;
      AppendSetBits([&](int64_t w) { return GetFixed<uint64_t>(payload.data() + 8 * w); }, words,
                    begin, out.indices);
      for (int64_t offset = 64 * words; offset < range; ++offset) {
        if ((static_cast<uint8_t>(payload[offset / 8]) >> (offset % 8)) & 1) {
          out.indices.push_back(begin + offset);
        }
      }
      break;
    }
    case MaskEncoding::kIndexList: {
      if (static_cast<int64_t>(payload.size()) != h.count * 4) {
        return absl::DataLossError("mask: index list of the wrong size");
      }
      out.indices.reserve(h.count);
      for (int64_t i = 0; i < h.count; ++i) {
        const int64_t index = begin + GetFixed<uint32_t>(payload.data() + 4 * i);
        if (index >= end || (!out.indices.empty() && index <= out.indices.back())) {
          return absl::DataLossError("mask: index list not sorted or out of range");
        }
        out.indices.push_back(index);
      }
      payload = {};
      break;
    }
    case MaskEncoding::kDeltaIndices:
      if (absl::Status s = GetGapList(payload, h.count, begin, end, out.indices); !s.ok()) return s;
      break;
    case MaskEncoding::kChangeFromPrevious: {
      if (previous == nullptr) {
        return absl::FailedPreconditionError(
            "mask: change-from-previous without the previous mask");
      }
      uint64_t changes;
      if (!GetVarint(payload, changes) || changes > static_cast<uint64_t>(range)) {
        return absl::DataLossError("mask: bad change count");
      }
      // The previous mask is the receiver's own, sorted: its ends bound it.
      if (!previous->empty() && (previous->front() < begin || previous->back() >= end)) {
        return absl::FailedPreconditionError("mask: the previous mask is outside the range");
      }
      if (DifferenceByBitmap(range, static_cast<int64_t>(previous->size() + changes))) {
        // The changes flip the previous mask's bits as they are read.
        std::vector<uint64_t>& bits = ScratchBitmap((range + 63) / 64);
        for (int64_t index : *previous) {
          if (static_cast<uint64_t>(index - begin) >= static_cast<uint64_t>(range)) {
            return absl::FailedPreconditionError("mask: the previous mask is outside the range");
          }
          FlipBit(bits, index - begin);
        }
        if (absl::Status s = ForEachGap(payload, static_cast<int64_t>(changes), begin, end,
                                        [&](int64_t index) { FlipBit(bits, index - begin); });
            !s.ok()) {
          return s;
        }
        out.indices = SetBitsOf(bits, begin);
      } else {
        std::vector<int64_t> changed;
        if (absl::Status s = GetGapList(payload, changes, begin, end, changed); !s.ok()) return s;
        out.indices.reserve(previous->size() + changed.size());
        std::set_symmetric_difference(previous->begin(), previous->end(), changed.begin(), changed.end(),
                                      std::back_inserter(out.indices));
      }
      break;
    }
  }
  if (h.encoding != MaskEncoding::kBitmask && h.encoding != MaskEncoding::kIndexList &&
      !payload.empty()) {
    return absl::DataLossError("mask: trailing bytes");
  }
  if (static_cast<int64_t>(out.indices.size()) != h.count) {
    return absl::DataLossError(absl::StrCat("mask: header says ", h.count, " entries, payload has ",
                                            out.indices.size()));
  }
  return out;
}

}  // namespace corescape::optim
