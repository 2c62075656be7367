#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_H_

// 1-bit masks over a rank's range [begin, end): bit `offset` (= index −
// begin) lives in byte offset/8 at position offset%8, LSB first — the
// layout of MaskEncoding::kBitmask (runtime/optim/mask_codec.h), so bits
// made on the device go on the wire as they are. Words are 32 bits of that
// byte string on a little-endian machine (x86-64, aarch64, the GPU), which
// is how the launches address them.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

CORESCAPE_HOST_DEVICE int64_t MaskWords(int64_t range) { return (range + 31) / 32; }

// Word `word` of the mask whose per-coordinate flags (0 or 1) are `flags`.
CORESCAPE_HOST_DEVICE uint32_t PackMaskWord(const uint8_t* flags, int64_t word, int64_t range) {
  uint32_t bits = 0;
  const int64_t first = word * 32;
  const int64_t count = range - first < 32 ? range - first : 32;
  for (int64_t b = 0; b < count; ++b) bits |= static_cast<uint32_t>(flags[first + b] != 0) << b;
  return bits;
}

CORESCAPE_HOST_DEVICE bool MaskBit(const uint32_t* words, int64_t offset) {
  return (words[offset / 32] >> (offset % 32)) & 1u;
}

// The flag of one coordinate from the packed words (unpacking).
CORESCAPE_HOST_DEVICE void UnpackMaskElement(const uint32_t* words, int64_t offset, uint8_t* flags) {
  flags[offset] = MaskBit(words, offset) ? 1 : 0;
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_H_
