// Asking Codex which hooks it sees, and whether it trusts them: `codex app-server` speaks
// JSON-RPC, one message a line on stdio. ListCodexHooks starts it, sends `initialize`
// {"clientInfo": {"name": "tmcra-mcp-setup", "version": ...}}, the notification `initialized`
// and `hooks/list` {"cwds": [cwd]}, reads lines until the answer to hooks/list, then closes its
// stdin and ends it (SIGTERM to its process group, SIGKILL after a second). It runs with our
// environment (so the same CODEX_HOME), its stderr discarded. Nothing is written to any file.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace tmcra::setup {

struct CodexHook {
  std::string key;         // "<hooks file>:<event_snake_case>:<group>:<handler>"
  std::string event_name;  // as Codex spells it: "userPromptSubmit"
  std::string command;
  std::string source_path;   // the file that defines it
  std::string current_hash;  // "sha256:<hex>", what trusting it records
  std::string trust_status;  // "untrusted", "trusted", "modified" (Codex runs only "trusted")
};

// The hooks Codex sees for `cwd`. Errors: Codex cannot be started, answers with an error, or
// gives no answer within `timeout`.
Result<std::vector<CodexHook>> ListCodexHooks(const std::string& codex_binary,
                                              const std::string& cwd,
                                              std::chrono::milliseconds timeout,
                                              std::string_view client_version);

// The hooks of `hooks` that Codex reads from the file `path` (compared after resolving links).
std::vector<CodexHook> HooksFromFile(const std::vector<CodexHook>& hooks, const std::string& path);

}  // namespace tmcra::setup
