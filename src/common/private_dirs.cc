#include "src/common/private_dirs.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace tmcra {

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

}  // namespace tmcra
