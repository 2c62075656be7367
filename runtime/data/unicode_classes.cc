#include "runtime/data/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace corescape::data {
namespace {

struct ClassRange {
  int32_t first;
  int32_t last;
  UnicodeClass value;
};

constexpr ClassRange kRanges[] = {
#include "runtime/data/unicode_classes_table.inc"
};

}  // namespace

UnicodeClass ClassifyCodePoint(int32_t code_point) {
  if (code_point < 0x80) {
    if ((code_point >= 'a' && code_point <= 'z') || (code_point >= 'A' && code_point <= 'Z')) {
      return UnicodeClass::kLetter;
    }
    if (code_point >= '0' && code_point <= '9') return UnicodeClass::kNumber;
    return UnicodeClass::kOther;
  }
  // The first range ending at or after the code point.
  const ClassRange* range = std::lower_bound(
      std::begin(kRanges), std::end(kRanges), code_point,
      [](const ClassRange& r, int32_t c) { return r.last < c; });
  if (range != std::end(kRanges) && range->first <= code_point) return range->value;
  return UnicodeClass::kOther;
}

}  // namespace corescape::data
