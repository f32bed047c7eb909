// Owner ids for claims and leases shared by several processes through one SQLite file.
//
// An owner id is "pid-<pid>-<random>". Processes that share a local SQLite file share a host,
// so a holder whose pid no longer exists is dead, and what it held can be taken over at once
// instead of after its expiry. A reused pid only means waiting for the expiry.
#pragma once

#include <string>

namespace tmcra {

// A fresh owner id for this process.
std::string NewProcessOwnerId();

// True when `owner` names a process that no longer exists.
bool ProcessOwnerIsDead(const std::string& owner);

}  // namespace tmcra
