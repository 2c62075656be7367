#include "runtime/base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace corescape {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents, int mode) {
  std::string temp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                static_cast<mode_t>(mode));
  if (fd < 0) return ErrnoError("cannot create", temp);
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status status = ErrnoError("cannot write", temp);
      close(fd);
      unlink(temp.c_str());
      return status;
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status status = ErrnoError("cannot fsync", temp);
    close(fd);
    unlink(temp.c_str());
    return status;
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status status = ErrnoError("cannot rename onto", path);
    unlink(temp.c_str());
    return status;
  }
  // The rename itself is durable only once the directory is synced.
  SyncDirectory(DirectoryOf(path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
    return ErrnoError("cannot open", path);
  }
  std::string contents;
  char buffer[65536];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status status = ErrnoError("cannot read", path);
      close(fd);
      return status;
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", partial);
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace corescape
