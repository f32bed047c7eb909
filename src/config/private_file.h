// Reading the files that configure memory: the device config file, the local identity file
// (both may hold a credential) and the local binding file (selects which identity is used).
//
// As OpenSSH does for private keys (docs/reliability.md §4.3, test row S2), a file is read
// only when nobody else could have read or changed it:
//   * the last path component is opened with O_NOFOLLOW (a symbolic link is refused) and must be
//     a regular file owned by this uid;
//   * kSecret files must have no group or other permission bits at all (0600, 0400);
//     kIntegrity files (no secret inside) must only not be writable by group or others (0644 is
//     fine);
//   * the directory holding the file must be owned by this uid or root and not be writable by
//     group or others unless it is sticky (/tmp): DirOpenToOthers with StickyDirs::kAccepted
//     (base/private_dirs.h), since these files are only read, never created here.
// Errors name the path and, for permissions, the octal mode; they never contain file content.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"

namespace tmcra::config {

enum class FileSecrecy { kSecret, kIntegrity };

// The file's bytes, std::nullopt when it (or its directory) does not exist, or an Error
// (kInvalidArgument, not retryable) when it is refused or cannot be read. Files over 1 MiB are
// refused.
Result<std::optional<std::string>> ReadPrivateFile(const std::string& path, FileSecrecy secrecy);

}  // namespace tmcra::config
