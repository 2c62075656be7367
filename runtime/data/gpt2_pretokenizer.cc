#include "runtime/data/gpt2_pretokenizer.h"

#include <cstdint>

#include "runtime/data/unicode_classes.h"

namespace corescape::data {
namespace {

enum class CharClass { kLetter, kNumber, kSpace, kOther };

struct CodePoint {
  int32_t value;  // -1: a byte that is not valid UTF-8
  int length;     // bytes
};

CodePoint DecodeUtf8(absl::string_view text, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + at;
  const size_t left = text.size() - at;
  const unsigned char lead = p[0];
  if (lead < 0x80) return {lead, 1};
  int length;
  int32_t value, minimum;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return {-1, 1};
  }
  if (left < static_cast<size_t>(length)) return {-1, 1};
  for (int i = 1; i < length; ++i) {
    if ((p[i] & 0xC0) != 0x80) return {-1, 1};
    value = (value << 6) | (p[i] & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid.
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return {-1, 1};
  }
  return {value, length};
}

bool IsUnicodeWhiteSpace(int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

CharClass Classify(int32_t c) {
  if (c < 0) return CharClass::kOther;
  if (IsUnicodeWhiteSpace(c)) return CharClass::kSpace;
  switch (ClassifyCodePoint(c)) {
    case UnicodeClass::kLetter:
      return CharClass::kLetter;
    case UnicodeClass::kNumber:
      return CharClass::kNumber;
    case UnicodeClass::kOther:
      break;
  }
  return CharClass::kOther;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) starting at `at`, or 0.
size_t ContractionLength(absl::string_view text, size_t at) {
  absl::string_view rest = text.substr(at);
  if (rest.size() < 2 || rest[0] != '\'') return 0;
  for (absl::string_view two : {"'s", "'t", "'m", "'d"}) {
    if (rest.substr(0, 2) == two) return 2;
  }
  for (absl::string_view three : {"'re", "'ve", "'ll"}) {
    if (rest.substr(0, 3) == three) return 3;
  }
  return 0;
}

}  // namespace

std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  size_t at = 0;
  while (at < text.size()) {
    if (size_t length = ContractionLength(text, at); length > 0) {
      pieces.push_back(text.substr(at, length));
      at += length;
      continue;
    }
    CodePoint first = DecodeUtf8(text, at);
    CharClass run_class = Classify(first.value);
    size_t run_start = at;
    // " ?X+": one ASCII space may lead a letter, number or other run.
    if (first.value == ' ' && at + 1 < text.size()) {
      CharClass next_class = Classify(DecodeUtf8(text, at + 1).value);
      if (next_class != CharClass::kSpace) {
        run_class = next_class;
        run_start = at + 1;
      }
    }
    if (run_class != CharClass::kSpace) {
      size_t end = run_start;
      while (end < text.size()) {
        CodePoint c = DecodeUtf8(text, end);
        if (Classify(c.value) != run_class) break;
        end += c.length;
      }
      pieces.push_back(text.substr(at, end - at));
      at = end;
      continue;
    }
    // Whitespace: "\s+(?!\S)" keeps the run's last character for the next
    // piece (so " word" stays together) unless the run ends the text or is
    // a single character ("\s+").
    size_t end = at;
    size_t last_start = at;
    int characters = 0;
    while (end < text.size()) {
      CodePoint c = DecodeUtf8(text, end);
      if (Classify(c.value) != CharClass::kSpace) break;
      last_start = end;
      end += c.length;
      ++characters;
    }
    if (end < text.size() && characters >= 2) end = last_start;
    pieces.push_back(text.substr(at, end - at));
    at = end;
  }
  return pieces;
}

}  // namespace corescape::data
