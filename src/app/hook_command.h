// `tmcra-mcp hook EVENT [--host claude-code|codex|gemini-cli]` and `tmcra-mcp statusline`: the
// commands a host runs (docs/hooks.md). Both fail open: whatever goes wrong, they print nothing
// the host would misread, log one line to stderr, and exit 0. For Gemini CLI, which shows a
// hook's stderr to the user when its stdout is empty, the hook always prints exactly one JSON
// object: its context, else `{}` (also at the deadline and after a usage error).
#pragma once

#include <string_view>
#include <vector>

namespace tmcra::app {

// `args`: what follows "hook" on the command line. Returns the exit status: always 0, after a
// usage error too (the usage goes to stderr).
int RunHookCommand(const std::vector<std::string_view>& args);

// One line of memory state for Claude Code's status line: whether the memory answers, the
// writes still queued, dead letters, and what the newest prompt was given.
int RunStatusline();

}  // namespace tmcra::app
