#include "runtime/base/printable_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape {
namespace {

// One decoded character: its code point and its length in bytes, or
// length 1 and no code point for a byte that does not start valid UTF-8.
struct Decoded {
  std::optional<uint32_t> code_point;
  size_t length = 1;
};

Decoded DecodeAt(absl::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  size_t length;
  uint32_t code_point, min;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code_point = lead & 0x1f, min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code_point = lead & 0x0f, min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code_point = lead & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (at + length > text.size()) return {};
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return {};
    code_point = (code_point << 6) | (byte(at + i) & 0x3f);
  }
  // Overlong forms, UTF-16 surrogates and beyond Unicode are not UTF-8.
  if (code_point < min || (code_point >= 0xd800 && code_point <= 0xdfff) ||
      code_point > 0x10ffff) {
    return {};
  }
  return {code_point, length};
}

bool IsUnsafe(uint32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}

}  // namespace

std::optional<std::string> FirstUnsafeCharacter(absl::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const Decoded decoded = DecodeAt(text, at);
    if (!decoded.code_point) {
      return absl::StrFormat("byte 0x%02x at byte %d is not UTF-8",
                             static_cast<unsigned char>(text[at]), at);
    }
    if (IsUnsafe(*decoded.code_point)) {
      const uint32_t c = *decoded.code_point;
      return absl::StrFormat("%s U+%04X at byte %d",
                             c >= 0x202a ? "bidirectional control" : "control character", c, at);
    }
    at += decoded.length;
  }
  return std::nullopt;
}

std::string EscapeUnsafeCharacters(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const Decoded decoded = DecodeAt(text, at);
    if (!decoded.code_point) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[at]));
    } else if (const uint32_t c = *decoded.code_point; c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (IsUnsafe(c)) {
      // Two calls: absl checks a format string at compile time only when it is a constant.
      if (c < 0x100) {
        absl::StrAppendFormat(&out, "\\x%02x", c);
      } else {
        absl::StrAppendFormat(&out, "\\u%04x", c);
      }
    } else {
      out.append(text.data() + at, decoded.length);
    }
    at += decoded.length;
  }
  return out;
}

}  // namespace corescape
