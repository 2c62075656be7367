#ifndef CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_STATE_H_
#define CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace corescape::optim {

// A checkpoint blob of named arrays: "CSOPTST1", entry count, entries
// (name, type, bytes, little-endian data), FNV-1a 64 of all that. Readers
// check names, types and sizes, so a state from another optimizer or
// buffer size is refused rather than half-loaded.
// The checksum that ends a blob: FNV-1a 64 of every byte before it. Public
// so that a tool which edits a blob on purpose (the fuzzer) can reseal it.
uint64_t StateChecksum(absl::string_view bytes);

class StateWriter {
 public:
  void AddFloats(const std::string& name, absl::Span<const float> values);
  void AddInt64s(const std::string& name, absl::Span<const int64_t> values);
  void AddInt64(const std::string& name, int64_t value) { AddInt64s(name, {&value, 1}); }
  void AddDoubles(const std::string& name, absl::Span<const double> values);
  void AddString(const std::string& name, absl::string_view value);
  std::string Finish() const;

 private:
  struct Entry {
    uint8_t type;
    std::string bytes;
  };
  std::map<std::string, Entry> entries_;
};

inline constexpr int64_t kMaxStateCount = int64_t{1} << 40;

class StateReader {
 public:
  static absl::StatusOr<StateReader> Parse(absl::string_view blob);

  absl::StatusOr<std::vector<float>> Floats(const std::string& name) const;
  absl::StatusOr<std::vector<int64_t>> Int64s(const std::string& name) const;
  absl::StatusOr<int64_t> Int64(const std::string& name) const;
  // An Int64 that counts something (steps): in [0, kMaxStateCount], so
  // arithmetic on it cannot overflow.
  absl::StatusOr<int64_t> Count(const std::string& name) const;
  absl::StatusOr<std::vector<double>> Doubles(const std::string& name) const;
  absl::StatusOr<std::string> String(const std::string& name) const;
  // Floats of exactly `size` entries.
  absl::StatusOr<std::vector<float>> FloatsOfSize(const std::string& name, int64_t size) const;
  bool Has(const std::string& name) const { return entries_.count(name) > 0; }

 private:
  struct Entry {
    uint8_t type;
    std::string bytes;
  };
  absl::StatusOr<const Entry*> Find(const std::string& name, uint8_t type) const;
  std::map<std::string, Entry> entries_;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_STATE_H_
