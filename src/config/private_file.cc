#include "src/config/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/private_dirs.h"

namespace tmcra::config {

namespace {

constexpr off_t kMaxFileBytes = 1 << 20;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Error Refuse(const std::string& path, const std::string& why) {
  return Error::Invalid("refusing " + path + ": " + why);
}

Error Unreadable(const std::string& path, int error_number) {
  return Error::Invalid("TMCRA config is unreadable: " + path + " (" + std::strerror(error_number) +
                        ")");
}

// Why openat failed with `error_number` (not ENOENT): a symbolic link is refused as such.
Error OpenFailure(const std::string& path, int dir_fd, const std::string& base, int error_number) {
  struct stat link {};
  if (error_number == ELOOP ||
      (fstatat(dir_fd, base.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode))) {
    return Refuse(path, "it is a symbolic link; point the setting at the file itself");
  }
  return Unreadable(path, error_number);
}

// Fills `st` for the open file `fd` and checks it is a regular file of ours that nobody else
// could have read (kSecret) or changed.
Status CheckFile(const std::string& path, int fd, FileSecrecy secrecy, struct stat& st) {
  const uid_t me = geteuid();
  if (fstat(fd, &st) != 0) return Unreadable(path, errno);
  if (!S_ISREG(st.st_mode)) return Refuse(path, "it is not a regular file");
  if (st.st_uid != me) {
    return Refuse(path, "it is owned by uid " + std::to_string(st.st_uid) +
                            ", not by this user (uid " + std::to_string(me) + ")");
  }
  if (secrecy == FileSecrecy::kSecret && (st.st_mode & 077) != 0) {
    return Refuse(path, "permissions " + OctalMode(st.st_mode) +
                            " are too open: it may hold a credential, so group and others must "
                            "have no access (run: chmod 600 " +
                            path + ")");
  }
  if (secrecy == FileSecrecy::kIntegrity && (st.st_mode & 022) != 0) {
    return Refuse(path, "permissions " + OctalMode(st.st_mode) +
                            " let group or others change it (run: chmod go-w " + path + ")");
  }
  return Ok();
}

// Checks that nobody else could swap the file in its directory `dir` (open as `dir_fd`).
Status CheckDirectory(const std::string& path, const std::string& dir, int dir_fd) {
  struct stat dir_st {};
  if (fstat(dir_fd, &dir_st) != 0) return Unreadable(path, errno);
  if (std::string why = DirOpenToOthers(dir, dir_st, StickyDirs::kAccepted); !why.empty()) {
    return Refuse(path, "its directory " + why);
  }
  return Ok();
}

// The bytes of the open file `fd` of `size` bytes (by fstat), refused over 1 MiB (checked again
// while reading, the file may grow).
Result<std::string> ReadAll(const std::string& path, int fd, off_t size) {
  if (size > kMaxFileBytes) {
    return Error::Invalid("TMCRA config is unreadable: " + path + " (larger than 1 MiB)");
  }
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unreadable(path, errno);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > static_cast<size_t>(kMaxFileBytes)) {
      return Error::Invalid("TMCRA config is unreadable: " + path + " (larger than 1 MiB)");
    }
  }
  return text;
}

}  // namespace

Result<std::optional<std::string>> ReadPrivateFile(const std::string& path, FileSecrecy secrecy) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    return Error::Invalid("TMCRA config is unreadable: " + path + " (not a file name)");
  }

  const Fd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return Unreadable(path, errno);
  }
  const Fd fd(openat(dir_fd.get(), base.c_str(),
                     O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    const int error_number = errno;
    if (error_number == ENOENT) return std::optional<std::string>();
    return OpenFailure(path, dir_fd.get(), base, error_number);
  }

  struct stat st {};
  TMCRA_RETURN_IF_ERROR(CheckFile(path, fd.get(), secrecy, st));
  TMCRA_RETURN_IF_ERROR(CheckDirectory(path, dir, dir_fd.get()));
  TMCRA_ASSIGN_OR_RETURN(std::string text, ReadAll(path, fd.get(), st.st_size));
  return std::optional<std::string>(std::move(text));
}

}  // namespace tmcra::config
