#include "runtime/checkpoint/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/base/crc32c.h"

namespace corescape::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr char kPrefix[] = "step-";
constexpr char kManifest[] = "manifest.json";

std::string StepDirectoryName(int64_t step) { return absl::StrFormat("%s%012d", kPrefix, step); }

void SyncDirectory(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

absl::Status WriteAndSync(const std::string& path, const std::string& contents) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool ok = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size() &&
                  std::fflush(file) == 0 && fsync(fileno(file)) == 0;
  std::fclose(file);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

bool IsValidBlobName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == kManifest) return false;
  for (char c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return name[0] != '.';
}

absl::StatusOr<Checkpoint> LoadVerified(const std::string& path) {
  auto manifest_text = ReadFileToString(path + "/" + kManifest);
  if (!manifest_text.ok()) return manifest_text.status();
  nlohmann::json manifest = nlohmann::json::parse(*manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest["step"].is_number_integer() ||
      !manifest["blobs"].is_object()) {
    return absl::DataLossError(absl::StrCat(path, "/", kManifest, ": malformed manifest"));
  }
  Checkpoint checkpoint;
  checkpoint.step = manifest["step"].get<int64_t>();
  for (auto it = manifest["blobs"].begin(); it != manifest["blobs"].end(); ++it) {
    const std::string name = it.key();
    if (!IsValidBlobName(name) || !it.value()["bytes"].is_number_unsigned() ||
        !it.value()["crc32c"].is_number_unsigned()) {
      return absl::DataLossError(absl::StrCat(path, ": bad manifest entry '", name, "'"));
    }
    auto contents = ReadFileToString(path + "/" + name);
    if (!contents.ok()) return contents.status();
    if (contents->size() != it.value()["bytes"].get<uint64_t>()) {
      return absl::DataLossError(absl::StrCat(path, "/", name, ": ", contents->size(),
                                              " bytes, manifest says ",
                                              it.value()["bytes"].get<uint64_t>()));
    }
    if (Crc32c(contents->data(), contents->size()) != it.value()["crc32c"].get<uint32_t>()) {
      return absl::DataLossError(absl::StrCat(path, "/", name, ": checksum mismatch"));
    }
    checkpoint.blobs[name] = *std::move(contents);
  }
  return checkpoint;
}

}  // namespace

std::vector<int64_t> ListCheckpointSteps(const std::string& directory) {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (absl::StartsWith(name, kPrefix) &&
        absl::SimpleAtoi(absl::StripPrefix(name, kPrefix), &step) && entry.is_directory()) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status WriteCheckpoint(const std::string& directory, const Checkpoint& checkpoint,
                             int keep) {
  if (checkpoint.step < 0) return absl::InvalidArgumentError("checkpoint step must be >= 0");
  if (absl::Status s = MakeDirectories(directory); !s.ok()) return s;
  const std::string final_path = directory + "/" + StepDirectoryName(checkpoint.step);
  const std::string temp_path =
      absl::StrCat(directory, "/.tmp-", StepDirectoryName(checkpoint.step), "-", getpid());
  std::error_code error;
  fs::remove_all(temp_path, error);
  if (mkdir(temp_path.c_str(), 0755) != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", temp_path, ": ", std::strerror(errno)));
  }
  nlohmann::json manifest = {{"step", checkpoint.step}, {"format", 1}, {"blobs", nlohmann::json::object()}};
  for (const auto& [name, contents] : checkpoint.blobs) {
    if (!IsValidBlobName(name)) {
      fs::remove_all(temp_path, error);
      return absl::InvalidArgumentError(absl::StrCat("bad checkpoint blob name '", name, "'"));
    }
    if (absl::Status s = WriteAndSync(temp_path + "/" + name, contents); !s.ok()) {
      fs::remove_all(temp_path, error);
      return s;
    }
    manifest["blobs"][name] = {{"bytes", contents.size()},
                               {"crc32c", Crc32c(contents.data(), contents.size())}};
  }
  // The manifest last: a directory without one is never taken for complete.
  if (absl::Status s = WriteAndSync(temp_path + "/" + kManifest, manifest.dump(2)); !s.ok()) {
    fs::remove_all(temp_path, error);
    return s;
  }
  SyncDirectory(temp_path);
  fs::remove_all(final_path, error);  // a rewrite of the same step replaces it
  if (rename(temp_path.c_str(), final_path.c_str()) != 0) {
    absl::Status status = absl::InternalError(
        absl::StrCat("cannot rename ", temp_path, " to ", final_path, ": ", std::strerror(errno)));
    fs::remove_all(temp_path, error);
    return status;
  }
  SyncDirectory(directory);
  if (keep > 0) {
    std::vector<int64_t> steps = ListCheckpointSteps(directory);
    for (size_t i = 0; i + keep < steps.size(); ++i) {
      fs::remove_all(directory + "/" + StepDirectoryName(steps[i]), error);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> LoadNewestCheckpoint(const std::string& directory, int64_t max_step) {
  std::vector<int64_t> steps = ListCheckpointSteps(directory);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it > max_step) continue;
    const std::string path = directory + "/" + StepDirectoryName(*it);
    auto checkpoint = LoadVerified(path);
    if (checkpoint.ok()) return checkpoint;
    LOG(WARNING) << "skipping checkpoint " << path << ": " << checkpoint.status();
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in ", directory,
                                          max_step < std::numeric_limits<int64_t>::max()
                                              ? absl::StrCat(" at or before step ", max_step)
                                              : ""));
}

}  // namespace corescape::checkpoint
