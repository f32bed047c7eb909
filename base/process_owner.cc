#include "base/process_owner.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "base/ids.h"

namespace tmcra {

std::string NewProcessOwnerId() {
  std::string hex;
  for (char c : UuidV4()) {
    if (c != '-') hex.push_back(c);
  }
  return "pid-" + std::to_string(getpid()) + "-" + hex.substr(0, 12);
}

bool ProcessOwnerIsDead(const std::string& owner) {
  if (owner.rfind("pid-", 0) != 0) return false;
  const long pid = std::strtol(owner.c_str() + 4, nullptr, 10);
  if (pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace tmcra
