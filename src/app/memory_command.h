// `tmcra-mcp memory COMMAND ...`: see, search, export, import and forget what memory holds, and
// set its retention (docs/memory-commands.md). The commands run on the memory the environment
// selects, through the same MemoryApi calls as the tools; a memory that does not offer a call
// (TMCRA's hosted service has no deletion or export) says so and nothing changes. Output is for
// a person unless --json is given; errors go to stderr with exit status 1 (2 for a usage error).
#pragma once

#include <string_view>
#include <vector>

namespace tmcra::app {

// `args`: what follows "memory" on the command line. Returns the exit status.
int RunMemoryCommand(const std::vector<std::string_view>& args);

}  // namespace tmcra::app
