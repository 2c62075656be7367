#include "runtime/optim/optimizer_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace corescape::optim {
namespace {

constexpr char kMagic[] = "CSOPTST1";
constexpr uint8_t kFloat = 1, kInt64 = 2, kString = 3, kDouble = 4;

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
bool Get(absl::string_view& in, T& value) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(&value, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

}  // namespace

uint64_t StateChecksum(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

void StateWriter::AddFloats(const std::string& name, absl::Span<const float> values) {
  entries_[name] = {kFloat, std::string(reinterpret_cast<const char*>(values.data()),
                                        values.size() * sizeof(float))};
}

void StateWriter::AddInt64s(const std::string& name, absl::Span<const int64_t> values) {
  entries_[name] = {kInt64, std::string(reinterpret_cast<const char*>(values.data()),
                                        values.size() * sizeof(int64_t))};
}

void StateWriter::AddDoubles(const std::string& name, absl::Span<const double> values) {
  entries_[name] = {kDouble, std::string(reinterpret_cast<const char*>(values.data()),
                                         values.size() * sizeof(double))};
}

void StateWriter::AddString(const std::string& name, absl::string_view value) {
  entries_[name] = {kString, std::string(value)};
}

std::string StateWriter::Finish() const {
  std::string out(kMagic, 8);
  Put<uint64_t>(out, entries_.size());
  for (const auto& [name, entry] : entries_) {
    Put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    Put<uint8_t>(out, entry.type);
    Put<uint64_t>(out, entry.bytes.size());
    out += entry.bytes;
  }
  Put<uint64_t>(out, StateChecksum(out));
  return out;
}

absl::StatusOr<StateReader> StateReader::Parse(absl::string_view blob) {
  if (blob.size() < 8 + 8 + 8 || blob.substr(0, 8) != absl::string_view(kMagic, 8)) {
    return absl::DataLossError("optimizer state: not a corescape optimizer state");
  }
  uint64_t stored_hash;
  std::memcpy(&stored_hash, blob.data() + blob.size() - 8, 8);
  if (StateChecksum(blob.substr(0, blob.size() - 8)) != stored_hash) {
    return absl::DataLossError("optimizer state: checksum mismatch");
  }
  absl::string_view in = blob.substr(8, blob.size() - 16);
  uint64_t count;
  if (!Get(in, count)) return absl::DataLossError("optimizer state: truncated");
  StateReader reader;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t name_size;
    uint8_t type;
    uint64_t bytes;
    if (!Get(in, name_size) || in.size() < name_size) {
      return absl::DataLossError("optimizer state: truncated");
    }
    std::string name(in.substr(0, name_size));
    in.remove_prefix(name_size);
    if (!Get(in, type) || !Get(in, bytes) || in.size() < bytes) {
      return absl::DataLossError("optimizer state: truncated");
    }
    reader.entries_[name] = {type, std::string(in.substr(0, bytes))};
    in.remove_prefix(bytes);
  }
  if (!in.empty()) return absl::DataLossError("optimizer state: trailing bytes");
  return reader;
}

namespace {

// An entry's bytes as whole values of T (an empty entry: none; memcpy
// must not see the empty vector's null data).
template <typename T, typename Bytes>
std::vector<T> ValuesOf(const Bytes& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

absl::StatusOr<const StateReader::Entry*> StateReader::Find(const std::string& name,
                                                            uint8_t type) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("optimizer state: no entry '", name, "'"));
  }
  if (it->second.type != type) {
    return absl::DataLossError(absl::StrCat("optimizer state: entry '", name, "' has another type"));
  }
  return &it->second;
}

absl::StatusOr<std::vector<float>> StateReader::Floats(const std::string& name) const {
  auto entry = Find(name, kFloat);
  if (!entry.ok()) return entry.status();
  return ValuesOf<float>((*entry)->bytes);
}

absl::StatusOr<std::vector<int64_t>> StateReader::Int64s(const std::string& name) const {
  auto entry = Find(name, kInt64);
  if (!entry.ok()) return entry.status();
  return ValuesOf<int64_t>((*entry)->bytes);
}

absl::StatusOr<std::vector<double>> StateReader::Doubles(const std::string& name) const {
  auto entry = Find(name, kDouble);
  if (!entry.ok()) return entry.status();
  return ValuesOf<double>((*entry)->bytes);
}

absl::StatusOr<int64_t> StateReader::Int64(const std::string& name) const {
  auto values = Int64s(name);
  if (!values.ok()) return values.status();
  if (values->size() != 1) {
    return absl::DataLossError(absl::StrCat("optimizer state: '", name, "' is not one integer"));
  }
  return (*values)[0];
}

absl::StatusOr<int64_t> StateReader::Count(const std::string& name) const {
  auto value = Int64(name);
  if (!value.ok()) return value.status();
  if (*value < 0 || *value > kMaxStateCount) {
    return absl::DataLossError(absl::StrCat("optimizer state: '", name, "' is ", *value,
                                            ", not a count in [0, ", kMaxStateCount, "]"));
  }
  return value;
}

absl::StatusOr<std::string> StateReader::String(const std::string& name) const {
  auto entry = Find(name, kString);
  if (!entry.ok()) return entry.status();
  return (*entry)->bytes;
}

absl::StatusOr<std::vector<float>> StateReader::FloatsOfSize(const std::string& name,
                                                             int64_t size) const {
  auto values = Floats(name);
  if (!values.ok()) return values.status();
  if (static_cast<int64_t>(values->size()) != size) {
    return absl::FailedPreconditionError(absl::StrCat("optimizer state: '", name, "' has ",
                                                      values->size(), " entries, expected ",
                                                      size));
  }
  return values;
}

}  // namespace corescape::optim
