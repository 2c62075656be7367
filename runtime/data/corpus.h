#ifndef CORESCAPE_RUNTIME_DATA_CORPUS_H_
#define CORESCAPE_RUNTIME_DATA_CORPUS_H_

// Raw text in: which files make a corpus and how they split into documents.

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::data {

// Expands files and directories into the corpus's files, in a fixed order:
// inputs in the order given, each directory walked recursively in byte
// order of names. Inside directories, hidden entries (".name") and binary
// files (a NUL byte in the first 4 KiB, e.g. fortune's .dat indexes) are
// skipped. A file reached twice (the same inode, e.g. fortune's "x.u8"
// symlinks to "x") is used once. Files named directly are always used.
// Fails on a missing input or when no file is left.
absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& inputs);

// True when the text holds only ASCII whitespace: such documents are
// skipped.
bool IsBlankDocument(absl::string_view text);

// Calls `visit` with each non-blank document of the file, in order. With an
// empty delimiter the whole file is one document; otherwise a line equal to
// the delimiter (a trailing '\r' ignored) ends the current document, and
// the document's text is its lines, each with its '\n'. The file is
// streamed: only one document is in memory at a time. `visit` returning an
// error stops the walk and that error is returned.
absl::Status ForEachDocument(const std::string& path, absl::string_view delimiter,
                             absl::FunctionRef<absl::Status(absl::string_view)> visit);

}  // namespace corescape::data

#endif  // CORESCAPE_RUNTIME_DATA_CORPUS_H_
