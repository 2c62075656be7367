#ifndef CORESCAPE_RUNTIME_CHECKPOINT_CHECKPOINT_H_
#define CORESCAPE_RUNTIME_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::checkpoint {

// What a checkpoint holds: the step it was taken after and named blobs
// (parameters, optimizer state, loader state, ...), each checksummed.
struct Checkpoint {
  int64_t step = 0;
  std::map<std::string, std::string> blobs;
};

// Writes <directory>/step-<step>/ so that a crash at any moment leaves
// either no trace of it or a complete, verifiable checkpoint: every blob and
// the manifest (step, sizes, CRC32C) go into a temporary directory, are
// fsynced, and the directory is renamed into place and its parent fsynced.
// Keeps the newest `keep` complete checkpoints (0: all).
absl::Status WriteCheckpoint(const std::string& directory, const Checkpoint& checkpoint,
                             int keep = 0);

// The newest complete checkpoint with step <= max_step, verified (manifest
// and every checksum). Incomplete or corrupt ones are skipped with a
// warning. NOT_FOUND when there is none.
absl::StatusOr<Checkpoint> LoadNewestCheckpoint(
    const std::string& directory,
    int64_t max_step = std::numeric_limits<int64_t>::max());

// manifest.json of a checkpoint directory: the step and each blob's size and
// CRC32C. Parsing bounds every count and names the first problem; wrong JSON
// types are errors (so a damaged manifest makes LoadNewestCheckpoint fall
// back to an older checkpoint).
inline constexpr int kCheckpointFormat = 1;
inline constexpr size_t kMaxCheckpointBlobs = 4096;
inline constexpr uint64_t kMaxCheckpointBlobBytes = uint64_t{1} << 40;

struct CheckpointManifest {
  struct Blob {
    uint64_t bytes = 0;
    uint32_t crc32c = 0;
  };
  int64_t step = 0;
  std::map<std::string, Blob> blobs;
};

std::string CheckpointManifestToJson(const CheckpointManifest& manifest);
// `source` names the file in errors.
absl::StatusOr<CheckpointManifest> ParseCheckpointManifest(absl::string_view text,
                                                           const std::string& source);

// Steps of the complete checkpoints present, ascending (not verified).
std::vector<int64_t> ListCheckpointSteps(const std::string& directory);

}  // namespace corescape::checkpoint

#endif  // CORESCAPE_RUNTIME_CHECKPOINT_CHECKPOINT_H_
