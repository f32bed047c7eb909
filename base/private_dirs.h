// Directories nobody else may change: creating them (the memory store's, the outbox's,
// tmcra-memd's data directory, the host config directories tmcra-mcp-setup creates) and the one
// rule every directory holding a file of ours is checked by.
//
// A directory is closed to others when it is owned by this user or root and neither group nor
// others may write in it. A sticky directory writable by all (/tmp) is accepted only where we
// read a file that must already exist (StickyDirs::kAccepted): others cannot remove or rename
// our files there, but they can create one before we do, so a directory we create files in
// must be closed outright (kRefused).
#pragma once

#include <sys/stat.h>

#include <string>

#include "base/result.h"

namespace tmcra {

// Creates `dir` and its missing parents with mode 0700 (existing ones are left as they are).
// Error: kPermissionDenied, naming the directory that could not be made.
[[nodiscard]] Status MakePrivateDirs(const std::string& dir);

enum class StickyDirs {
  kAccepted,  // a sticky directory writable by all is fine (files we only read: the config)
  kRefused,   // no group or other write at all (directories we create files in: our stores)
};

// Why someone other than this user or root could change the entries of the directory `dir`,
// whose stat is `st`: a phrase naming `dir` and its owner or mode, and what to do about it
// ("/srv/x (mode 0777) is writable by group or others (run: chmod go-w /srv/x)"); empty when
// the directory is closed to others.
std::string DirOpenToOthers(const std::string& dir, const struct stat& st, StickyDirs sticky);

// DirOpenToOthers for the directory at `dir` (a symbolic link is followed: the directory reached
// is the one checked). Error: kPermissionDenied, not retryable, when it is open to others
// ("refusing the directory ..."), is not a directory or cannot be examined.
[[nodiscard]] Status CheckDirClosedToOthers(const std::string& dir, StickyDirs sticky);

// The mode's permission bits as four octal digits ("0644", "1777").
std::string OctalMode(mode_t mode);

}  // namespace tmcra
