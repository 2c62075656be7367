#ifndef CORESCAPE_RUNTIME_BASE_CRC32C_H_
#define CORESCAPE_RUNTIME_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace corescape {

// CRC-32C (Castagnoli, the polynomial of iSCSI/ext4/gRPC), software
// slicing-by-8: ~1–2 GB/s, enough to verify shards once at open time.
// Extend lets a writer checksum a payload it streams out piece by piece:
//   Crc32c(a + b) == Crc32cExtend(Crc32c(a), b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t Crc32c(const void* data, size_t size) {
  return Crc32cExtend(0, data, size);
}

inline uint32_t Crc32c(absl::string_view bytes) {
  return Crc32cExtend(0, bytes.data(), bytes.size());
}

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_CRC32C_H_
