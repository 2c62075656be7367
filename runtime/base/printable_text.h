#ifndef CORESCAPE_RUNTIME_BASE_PRINTABLE_TEXT_H_
#define CORESCAPE_RUNTIME_BASE_PRINTABLE_TEXT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

// Text one user stores and another reads on a terminal (job names, reasons,
// event texts): which characters could make it lie there, decided once.
// Unsafe: bytes that are not UTF-8, C0 controls (NUL, newline, ESC, ...),
// DEL, C1 controls (U+0080..U+009F, which some terminals obey as CSI), and
// the Unicode bidi embeddings, overrides and isolates (U+202A..U+202E,
// U+2066..U+2069), which reorder what follows them on the line.
namespace corescape {

// The first unsafe character of `text`, described for an error message
// ("control character U+001B at byte 3"); nullopt when there is none.
std::optional<std::string> FirstUnsafeCharacter(absl::string_view text);

// `text` with every unsafe character written as an escape a person can read
// and no terminal obeys: "\n", "\t", "\x1b", "\u202e"; a byte that is not
// UTF-8 as "\xff"; and "\\" for a backslash, so an escape in the output
// always means one of these.
std::string EscapeUnsafeCharacters(absl::string_view text);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_PRINTABLE_TEXT_H_
