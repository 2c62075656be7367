#ifndef CORESCAPE_RUNTIME_COMM_WIRE_CODEC_H_
#define CORESCAPE_RUNTIME_COMM_WIRE_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace corescape::comm::wire {

// Little-endian fixed-width fields at fixed offsets of a fixed-size buffer
// (handshake and control messages). Callers check bounds by construction.
inline void PutU16(char* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline uint16_t GetU16(const char* p) {
  uint16_t v = 0;
  for (int i = 0; i < 2; ++i) v |= static_cast<uint16_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
inline uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
inline uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
// Copies at most `capacity` bytes of `s` to p; the length is stored apart.
inline void PutBytes(char* p, absl::string_view s, size_t capacity) {
  std::memcpy(p, s.data(), s.size() < capacity ? s.size() : capacity);
}

// 32-bit FNV-1a over a byte range: catches truncated or garbled messages.
inline uint32_t Checksum32(const char* p, size_t n) {
  uint32_t hash = 0x811c9dc5u;
  for (size_t i = 0; i < n; ++i) {
    hash ^= static_cast<unsigned char>(p[i]);
    hash *= 0x01000193u;
  }
  return hash;
}

// Printable form of untrusted bytes for error messages.
inline std::string Printable(absl::string_view s, size_t max_len = 64) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (s.size() > max_len) out += "...";
  return out;
}

}  // namespace corescape::comm::wire

#endif  // CORESCAPE_RUNTIME_COMM_WIRE_CODEC_H_
