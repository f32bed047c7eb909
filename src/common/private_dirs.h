// Creating directories nobody else may enter: the memory store's, the outbox's, tmcra-memd's
// data directory, and the host config directories tmcra-mcp-setup creates.
#pragma once

#include <string>

#include "src/common/result.h"

namespace tmcra {

// Creates `dir` and its missing parents with mode 0700 (existing ones are left as they are).
// Error: kPermissionDenied, naming the directory that could not be made.
[[nodiscard]] Status MakePrivateDirs(const std::string& dir);

}  // namespace tmcra
