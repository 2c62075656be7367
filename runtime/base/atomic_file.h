#ifndef CORESCAPE_RUNTIME_BASE_ATOMIC_FILE_H_
#define CORESCAPE_RUNTIME_BASE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape {

// Replaces `path` with `contents` so that a reader (or a crash at any point)
// sees either the old file or the complete new one: write a temp file in the
// same directory, fsync it, rename it over `path`, fsync the directory.
// The file is created with `mode` (before the umask) and never had a wider one.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents, int mode = 0644);

// fsyncs directory `dir`, which makes a rename into it durable. Best effort:
// the rename has happened (or not) either way.
void SyncDirectory(const std::string& dir);

// The directory part of `path`: "." for a bare name, "/" for a top-level one.
std::string DirectoryOf(const std::string& path);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// mkdir -p.
absl::Status MakeDirectories(const std::string& path);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_ATOMIC_FILE_H_
