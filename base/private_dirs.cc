#include "base/private_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tmcra {

namespace {

constexpr const char* kOwnDirectory = "use a directory of your own, made with mkdir -m 700";

std::string OwnerProblem(const std::string& dir, const struct stat& st) {
  return dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
         std::to_string(geteuid()) + ") or root (" + kOwnDirectory + ")";
}

std::string WritableProblem(const std::string& dir, const struct stat& st) {
  const std::string problem =
      dir + " (mode " + OctalMode(st.st_mode) + ") is writable by group or others";
  if ((st.st_mode & S_ISVTX) != 0) {
    return problem + ", and its sticky bit does not stop them creating files in it first (" +
           kOwnDirectory + ", not a shared one such as /tmp)";
  }
  if (st.st_uid == geteuid()) return problem + " (run: chmod go-w " + dir + ")";
  return problem + " (" + kOwnDirectory + ")";
}

Error Refused(const std::string& what) { return Error{Errc::kPermissionDenied, false, what}; }

}  // namespace

Status MakePrivateDirs(const std::string& dir) {
  if (dir.empty()) return Ok();
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return Error{Errc::kPermissionDenied, false,
                   "cannot create directory " + partial + ": " + std::strerror(errno)};
    }
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error{Errc::kPermissionDenied, false, "not a directory: " + dir};
  }
  return Ok();
}

std::string DirOpenToOthers(const std::string& dir, const struct stat& st, StickyDirs sticky) {
  if (st.st_uid != geteuid() && st.st_uid != 0) return OwnerProblem(dir, st);
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  const bool sticky_accepted = sticky == StickyDirs::kAccepted && (st.st_mode & S_ISVTX) != 0;
  if (others_write && !sticky_accepted) return WritableProblem(dir, st);
  return {};
}

Status CheckDirClosedToOthers(const std::string& dir, StickyDirs sticky) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    return Error{Errc::kPermissionDenied, false,
                 "cannot examine directory " + dir + ": " + std::strerror(errno)};
  }
  if (!S_ISDIR(st.st_mode)) return Refused("not a directory: " + dir);
  if (std::string why = DirOpenToOthers(dir, st, sticky); !why.empty()) {
    return Refused("refusing the directory " + why);
  }
  return Ok();
}

std::string OctalMode(mode_t mode) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace tmcra
