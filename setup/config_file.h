// Reading and replacing a host's config file without ever leaving it half-written or losing
// what was there:
//   * a symbolic link is followed and its target edited in place (dotfile managers keep the
//     link);
//   * before an existing file is changed, its bytes are copied to
//     `<file>.tmcra-backup-<UTC time>` (0600, never overwriting an earlier backup);
//   * the new text goes to a temporary file in the same directory, is fsynced, takes the old
//     file's permission bits (0600 for a new file) and is renamed over it, and the directory is
//     fsynced;
//   * if the file changed since our read (the host rewrote it), nothing is replaced and the
//     error says to run again. This is checked before the backup and again just before the
//     rename, which narrows the window but cannot close it: POSIX has no compare-and-rename;
//   * a file with other hard links, owned by another user, or without its owner's write
//     permission is refused (replacing it would split the links, change its owner, or ignore
//     the user's "read-only");
//   * directories we create are 0700.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "base/result.h"

namespace tmcra::setup {

struct ConfigFile {
  std::string path;       // as the host names it
  std::string real_path;  // the file edited: `path`, or the target of its symbolic link
  bool exists = false;
  std::string text;
  // What it was when read, to notice a concurrent change.
  mode_t mode = 0600;
  ino_t inode = 0;
  off_t size = 0;
  nlink_t links = 1;
  uid_t owner = 0;
  std::chrono::nanoseconds mtime{0};
};

// Files over 64 MiB are refused (~/.claude.json grows with a user's projects, never that far).
inline constexpr off_t kMaxConfigBytes = 64 << 20;

// The file (exists = false when it, or its directory, is missing). Refused: anything but a
// regular file (after following links), a file over kMaxConfigBytes, an unreadable one.
Result<ConfigFile> ReadConfigFile(const std::string& path);

// Whether WriteConfigFile would replace `file` (the hard-link, owner and read-only rules above;
// always fine for a file that does not exist yet).
Status CheckReplaceable(const ConfigFile& file);

struct WriteResult {
  std::string backup_path;  // empty when the file was created
};

// Replaces `before` (as ReadConfigFile gave it) with `text`, as described above; `now` names
// the backup.
Result<WriteResult> WriteConfigFile(const ConfigFile& before, const std::string& text,
                                    std::chrono::system_clock::time_point now);

// Removes `before` with the same checks as WriteConfigFile, after copying it to a backup the
// same way. A symbolic link is refused (removing its target would leave it dangling).
Result<WriteResult> DeleteConfigFile(const ConfigFile& before,
                                     std::chrono::system_clock::time_point now);

}  // namespace tmcra::setup
