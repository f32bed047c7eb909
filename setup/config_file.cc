#include "setup/config_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/private_dirs.h"

namespace tmcra::setup {
namespace {

Error SystemError(const std::string& what, const std::string& path, int err = errno) {
  return Error::Invalid(what + " " + path + ": " + std::strerror(err));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::chrono::nanoseconds MTime(const struct stat& st) {
  return std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Ok();
}

// Writes a new file (O_EXCL) with `data`, mode `mode`, fsynced.
Status WriteNewFile(const std::string& path, const std::string& data, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return SystemError("cannot create", path);
  Status s = WriteAll(fd, data, path);
  if (s && fchmod(fd, mode) != 0) s = SystemError("cannot set the mode of", path);
  if (s && fsync(fd) != 0) s = SystemError("cannot sync", path);
  if (close(fd) != 0 && s) s = SystemError("cannot close", path);
  if (!s) unlink(path.c_str());
  return s;
}

std::string BackupName(const std::string& path, std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  return path + ".tmcra-backup-" + stamp;
}

// Sets file.real_path to the file the symbolic link `path` names, when it is one; false when
// nothing is at `path` (or a directory on the way is missing).
Result<bool> FollowLink(const std::string& path, ConfigFile& file) {
  struct stat lst;
  if (lstat(path.c_str(), &lst) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return SystemError("cannot look at", path);
  }
  if (S_ISLNK(lst.st_mode)) {
    char resolved[PATH_MAX];
    if (realpath(path.c_str(), resolved) == nullptr) {
      return SystemError("cannot follow the symbolic link", path);
    }
    file.real_path = resolved;
  }
  return true;
}

// The bytes of the open file `fd`, which must be a regular file of at most kMaxConfigBytes
// (checked again while reading: it may grow); fills `st`. The caller closes `fd`.
Result<std::string> ReadOpenFile(int fd, const std::string& path, struct stat& st) {
  if (fstat(fd, &st) != 0) return SystemError("cannot look at", path);
  if (!S_ISREG(st.st_mode)) return Error::Invalid(path + " is not a regular file");
  if (st.st_size > kMaxConfigBytes) return Error::Invalid(path + " is larger than 64 MiB");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (true) {
    if (done == text.size()) text.resize(text.size() + 4096);
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("cannot read", path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
    if (done > static_cast<size_t>(kMaxConfigBytes)) {
      return Error::Invalid(path + " is larger than 64 MiB");
    }
  }
  text.resize(done);
  return text;
}

}  // namespace

Result<ConfigFile> ReadConfigFile(const std::string& path) {
  ConfigFile file;
  file.path = path;
  file.real_path = path;
  TMCRA_ASSIGN_OR_RETURN(const bool present, FollowLink(path, file));
  if (!present) return file;
  const int fd = open(file.real_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return SystemError("cannot open", path);
  struct stat st;
  auto text = ReadOpenFile(fd, path, st);
  close(fd);
  if (!text) return text.error();
  file.exists = true;
  file.text = std::move(*text);
  file.mode = st.st_mode & 07777;
  file.inode = st.st_ino;
  file.size = st.st_size;
  file.links = st.st_nlink;
  file.owner = st.st_uid;
  file.mtime = MTime(st);
  return file;
}

Status CheckReplaceable(const ConfigFile& file) {
  if (!file.exists) return Ok();
  if (file.links > 1) {
    return Error::Invalid(file.path + " has other hard links, which replacing it would separate");
  }
  if (file.owner != geteuid()) {
    return Error::Invalid(file.path + " belongs to another user; run as that user");
  }
  if ((file.mode & S_IWUSR) == 0) return Error::Invalid(file.path + " is read-only");
  return Ok();
}

namespace {

// Whether the file is no longer what `before` read (the host rewrote it meanwhile).
bool ChangedSince(const ConfigFile& before) {
  struct stat st;
  const bool exists_now = stat(before.real_path.c_str(), &st) == 0;
  return before.exists ? !exists_now || st.st_ino != before.inode || st.st_size != before.size ||
                             MTime(st) != before.mtime
                       : exists_now;
}

Error Conflict(const ConfigFile& before) {
  return Error::Conflict(before.path +
                         " changed while it was being edited; nothing was "
                         "replaced, run the command again");
}

// Copies the bytes `before` read to a new backup file beside it; returns its path.
Result<std::string> Backup(const ConfigFile& before, std::chrono::system_clock::time_point now) {
  std::string backup = BackupName(before.real_path, now);
  for (int n = 2; access(backup.c_str(), F_OK) == 0; ++n) {
    backup = BackupName(before.real_path, now) + "-" + std::to_string(n);
  }
  if (auto s = WriteNewFile(backup, before.text, 0600); !s) return s.error();
  return backup;
}

}  // namespace

Result<WriteResult> DeleteConfigFile(const ConfigFile& before,
                                     std::chrono::system_clock::time_point now) {
  if (!before.exists) return WriteResult{};
  if (before.real_path != before.path) {
    return Error::Invalid(before.path + " is a symbolic link; it is not removed");
  }
  if (auto s = CheckReplaceable(before); !s) return s.error();
  if (ChangedSince(before)) return Conflict(before);
  auto backup = Backup(before, now);
  if (!backup) return backup.error();
  if (ChangedSince(before)) {
    unlink(backup->c_str());
    return Conflict(before);
  }
  if (unlink(before.real_path.c_str()) != 0) {
    const int err = errno;
    unlink(backup->c_str());
    return SystemError("cannot remove", before.real_path, err);
  }
  return WriteResult{*backup};
}

Result<WriteResult> WriteConfigFile(const ConfigFile& before, const std::string& text,
                                    std::chrono::system_clock::time_point now) {
  if (auto s = CheckReplaceable(before); !s) return s.error();
  const std::string& path = before.real_path;
  const std::string dir = DirName(path);
  // The host may have rewritten the file since we read it: then ours would undo its change.
  auto changed = [&]() { return ChangedSince(before); };
  const auto conflict = [&]() { return Conflict(before); };
  if (changed()) return conflict();
  if (auto s = MakePrivateDirs(dir); !s) return s.error();

  WriteResult result;
  if (before.exists) {
    auto backup = Backup(before, now);
    if (!backup) return backup.error();
    result.backup_path = *backup;
  }

  const std::string temp = dir + "/." + path.substr(dir.size() + (dir == "/" ? 0 : 1)) +
                           ".tmcra-tmp-" + std::to_string(getpid());
  unlink(temp.c_str());  // a leftover of a killed run of ours
  if (auto s = WriteNewFile(temp, text, before.exists ? before.mode : 0600); !s) {
    if (!result.backup_path.empty()) unlink(result.backup_path.c_str());
    return s.error();
  }

  if (changed()) {
    unlink(temp.c_str());
    if (!result.backup_path.empty()) unlink(result.backup_path.c_str());
    return conflict();
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(temp.c_str());
    return SystemError("cannot replace", path, err);
  }
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return result;
}

}  // namespace tmcra::setup
