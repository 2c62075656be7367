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

#include "absl/strings/escaping.h"
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
  const std::string manifest_path = path + "/" + kManifest;
  auto manifest_text = ReadFileToString(manifest_path);
  if (!manifest_text.ok()) return manifest_text.status();
  absl::StatusOr<CheckpointManifest> manifest = ParseCheckpointManifest(*manifest_text,
                                                                        manifest_path);
  if (!manifest.ok()) return manifest.status();
  Checkpoint checkpoint;
  checkpoint.step = manifest->step;
  for (const auto& [name, blob] : manifest->blobs) {
    auto contents = ReadFileToString(path + "/" + name);
    if (!contents.ok()) return contents.status();
    if (contents->size() != blob.bytes) {
      return absl::DataLossError(absl::StrCat(path, "/", name, ": ", contents->size(),
                                              " bytes, manifest says ", blob.bytes));
    }
    if (Crc32c(contents->data(), contents->size()) != blob.crc32c) {
      return absl::DataLossError(absl::StrCat(path, "/", name, ": checksum mismatch"));
    }
    checkpoint.blobs[name] = *std::move(contents);
  }
  return checkpoint;
}

}  // namespace

std::string CheckpointManifestToJson(const CheckpointManifest& manifest) {
  nlohmann::json json = {
      {"step", manifest.step}, {"format", kCheckpointFormat}, {"blobs", nlohmann::json::object()}};
  for (const auto& [name, blob] : manifest.blobs) {
    json["blobs"][name] = {{"bytes", blob.bytes}, {"crc32c", blob.crc32c}};
  }
  return json.dump(2);
}

absl::StatusOr<CheckpointManifest> ParseCheckpointManifest(absl::string_view text,
                                                           const std::string& source) {
  auto malformed = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(source, ": malformed manifest: ", why));
  };
  // Parsed without exceptions and read only through find()/is_*(): a value
  // of the wrong JSON type is an error here, never a throw.
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return malformed("not a JSON object");
  const auto step = json.find("step");
  if (step == json.end() || !step->is_number_integer() || step->get<int64_t>() < 0) {
    return malformed("\"step\" must be an integer >= 0");
  }
  const auto blobs = json.find("blobs");
  if (blobs == json.end() || !blobs->is_object()) return malformed("\"blobs\" must be an object");
  if (blobs->size() > kMaxCheckpointBlobs) {
    return malformed(absl::StrCat(blobs->size(), " blobs, at most ", kMaxCheckpointBlobs));
  }
  CheckpointManifest manifest{.step = step->get<int64_t>()};
  for (auto it = blobs->begin(); it != blobs->end(); ++it) {
    const std::string& name = it.key();
    const std::string what = absl::StrCat("blob '", absl::CHexEscape(name.substr(0, 64)), "'");
    if (!IsValidBlobName(name)) return malformed(absl::StrCat(what, ": not a valid blob name"));
    if (!it->is_object()) return malformed(absl::StrCat(what, ": must be an object"));
    const auto bytes = it->find("bytes");
    const auto crc = it->find("crc32c");
    if (bytes == it->end() || !bytes->is_number_unsigned() ||
        bytes->get<uint64_t>() > kMaxCheckpointBlobBytes) {
      return malformed(absl::StrCat(what, ": \"bytes\" must be an integer in [0, ",
                                    kMaxCheckpointBlobBytes, "]"));
    }
    if (crc == it->end() || !crc->is_number_unsigned() ||
        crc->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return malformed(absl::StrCat(what, ": \"crc32c\" must be a 32-bit unsigned integer"));
    }
    manifest.blobs[name] = {.bytes = bytes->get<uint64_t>(),
                            .crc32c = static_cast<uint32_t>(crc->get<uint64_t>())};
  }
  return manifest;
}

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
  CheckpointManifest manifest{.step = checkpoint.step};
  for (const auto& [name, contents] : checkpoint.blobs) {
    if (!IsValidBlobName(name)) {
      fs::remove_all(temp_path, error);
      return absl::InvalidArgumentError(absl::StrCat("bad checkpoint blob name '", name, "'"));
    }
    if (absl::Status s = WriteAndSync(temp_path + "/" + name, contents); !s.ok()) {
      fs::remove_all(temp_path, error);
      return s;
    }
    manifest.blobs[name] = {.bytes = contents.size(),
                            .crc32c = Crc32c(contents.data(), contents.size())};
  }
  // The manifest last: a directory without one is never taken for complete.
  if (absl::Status s = WriteAndSync(temp_path + "/" + kManifest,
                                    CheckpointManifestToJson(manifest));
      !s.ok()) {
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
