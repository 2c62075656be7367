#include "runtime/data/corpus.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/base/atomic_file.h"

namespace corescape::data {
namespace {

using FileIdentity = std::pair<dev_t, ino_t>;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::StatusOr<bool> LooksBinary(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  char buffer[4096];
  ssize_t n;
  do {
    n = read(fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  absl::Status status = n < 0 ? ErrnoError("cannot read", path) : absl::OkStatus();
  close(fd);
  if (!status.ok()) return status;
  return std::memchr(buffer, '\0', static_cast<size_t>(n)) != nullptr;
}

struct WalkCounts {
  int binary = 0;
  int duplicate = 0;
};

absl::Status WalkDirectory(const std::string& directory, std::set<FileIdentity>& seen,
                           std::vector<std::string>& files, WalkCounts& skipped) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return ErrnoError("cannot list directory", directory);
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string path = absl::StrCat(directory, "/", name);
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      LOG(WARNING) << "skipping " << path << ": " << std::strerror(errno);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (absl::Status status = WalkDirectory(path, seen, files, skipped); !status.ok()) {
        return status;
      }
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    if (!seen.insert({st.st_dev, st.st_ino}).second) {
      VLOG(1) << "skipping " << path << ": same file as one already listed";
      ++skipped.duplicate;
      continue;
    }
    absl::StatusOr<bool> binary = LooksBinary(path);
    if (!binary.ok()) return binary.status();
    if (*binary) {
      VLOG(1) << "skipping binary file " << path;
      ++skipped.binary;
      continue;
    }
    files.push_back(std::move(path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& inputs) {
  std::set<FileIdentity> seen;
  std::vector<std::string> files;
  WalkCounts skipped;
  for (const std::string& input : inputs) {
    std::string path = input;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no such input ", input));
      return ErrnoError("cannot stat input", input);
    }
    if (S_ISDIR(st.st_mode)) {
      if (absl::Status status = WalkDirectory(path, seen, files, skipped); !status.ok()) {
        return status;
      }
    } else if (seen.insert({st.st_dev, st.st_ino}).second) {
      files.push_back(path);
    }
  }
  if (skipped.binary + skipped.duplicate > 0) {
    LOG(INFO) << "corpus: skipped " << skipped.binary << " binary file(s) and "
              << skipped.duplicate << " second path(s) to files already listed";
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no text files in the inputs (", inputs.size(), " given)"));
  }
  return files;
}

bool IsBlankDocument(absl::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

absl::Status ForEachDocument(const std::string& path, absl::string_view delimiter,
                             absl::FunctionRef<absl::Status(absl::string_view)> visit) {
  if (delimiter.empty()) {
    absl::StatusOr<std::string> text = ReadFileToString(path);
    if (!text.ok()) return text.status();
    if (IsBlankDocument(*text)) return absl::OkStatus();
    return visit(*text);
  }
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return ErrnoError("cannot open", path);
  std::string document;
  char* line = nullptr;
  size_t capacity = 0;
  absl::Status status;
  while (status.ok()) {
    errno = 0;
    ssize_t length = getline(&line, &capacity, file);
    if (length < 0) {
      if (errno != 0) status = ErrnoError("cannot read", path);
      break;
    }
    absl::string_view text(line, static_cast<size_t>(length));
    absl::string_view bare = text;
    if (!bare.empty() && bare.back() == '\n') bare.remove_suffix(1);
    if (!bare.empty() && bare.back() == '\r') bare.remove_suffix(1);
    if (bare == delimiter) {
      if (!IsBlankDocument(document)) status = visit(document);
      document.clear();
    } else {
      document.append(text.data(), text.size());
    }
  }
  std::free(line);
  std::fclose(file);
  if (status.ok() && !IsBlankDocument(document)) status = visit(document);
  return status;
}

}  // namespace corescape::data
