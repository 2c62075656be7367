#ifndef CORESCAPE_RUNTIME_DATA_UNICODE_CLASSES_H_
#define CORESCAPE_RUNTIME_DATA_UNICODE_CLASSES_H_

#include <cstdint>

namespace corescape::data {

enum class UnicodeClass { kLetter, kNumber, kOther };

// Whether GPT-2's regex sees a code point as \p{L}, \p{N} or neither, from
// tables generated out of Python's `regex` module (gen_unicode_classes.py),
// so the answer does not depend on the C library or the locale.
UnicodeClass ClassifyCodePoint(int32_t code_point);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_UNICODE_CLASSES_H_
