// Editing a host's MCP config text: add, update, find or remove one server entry, touching
// nothing else. Pure functions from text to text; reading and writing files is config_file.h.
//
// JSON hosts (Claude Desktop, Claude Code, Cursor, Gemini CLI, VS Code) keep their servers in an
// object under "mcpServers" (VS Code: "servers"). The document is parsed strictly and written
// back in its own key order, with the indent its first indented line uses and its line endings,
// so only the entry changes in value (spelling such as 1e3 or \u00e9 may change). A file that
// could not come back with the same values (a repeated key, an integer beyond 64 bits) or that
// has comments (VS Code and Gemini CLI accept them) is refused rather than rewritten.
//
// Codex keeps them in TOML tables `[mcp_servers.<name>]` and refuses unknown keys. The TOML is
// edited as text, so comments and layout stay: values are replaced where the parser says they
// are, missing keys go right under the table's header, a new table goes at the end. Every
// edit is checked by parsing the result and comparing it with the original document changed
// by exactly that entry; if they differ (an inline `mcp_servers = {...}`, dotted keys) the
// edit is refused and the caller prints the entry to add by hand.
//
// Errors are Error::Invalid and never quote the file's content (a host config may hold other
// servers' tokens): they give a line and column.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace tmcra::setup {

enum class ConfigFormat {
  kJsonMcpServers,  // {"mcpServers": {name: {...}}}
  kJsonServers,     // VS Code: {"servers": {name: {...}}}
  kCodexToml,       // [mcp_servers.name]
};

// What we register: the server's name and the absolute path of tmcra-mcp.
struct ServerEntry {
  std::string name;
  std::string command;
  bool typed = false;  // JSON: also "type": "stdio" (Claude Code, VS Code)
  // Codex: names of environment variables it should pass on (it passes only a few otherwise).
  std::vector<std::string> env_vars;
  // Codex: tool_timeout_sec (its default of 60 s is shorter than tmcra_wait_job's).
  int tool_timeout_sec = 0;
  // Variables set in the entry's "env" (JSON) or `env` table (Codex), other variables there
  // kept: the TMCRA_HOOKS marker when setup installs hooks for the host.
  std::vector<std::pair<std::string, std::string>> env;
  // JSON: variables set in the entry's "env" only where it has no value of that name, so a
  // user's own value is kept (Gemini CLI's "$NAME" references).
  std::vector<std::pair<std::string, std::string>> env_if_absent;
};

enum class EditOutcome { kAdded, kUpdated, kUnchanged, kRemoved, kAbsent };

struct Edited {
  std::string text;
  EditOutcome outcome = EditOutcome::kUnchanged;
};

// Adds the entry, or makes an existing one start our command (JSON: "command", "args": [],
// "type", the variables of `env`, and those of `env_if_absent` it lacks; other keys and
// variables are kept. Codex: command, args when it has any, and `env`'s variables (an inline
// `env = {...}` is written again with the same keys and values, an `[mcp_servers.<name>.env]`
// table gets lines); env_vars and tool_timeout_sec only where the table has none, so a user's
// own choice stays).
Result<Edited> AddServer(std::string_view text, ConfigFormat format, const ServerEntry& entry);

// Removes the entry (Codex: its table and sub-tables, e.g. per-tool approval settings).
Result<Edited> RemoveServer(std::string_view text, ConfigFormat format, std::string_view name);

struct Registration {
  bool present = false;
  std::optional<std::string> command;  // when present and a string
};

// Whether the text registers `name`, and with which command.
Result<Registration> FindServer(std::string_view text, ConfigFormat format, std::string_view name);

// Codex's trust of one hook: `[hooks.state."<key>"]` with `trusted_hash = "<hash>"` in
// config.toml (the key and hash as `codex app-server`'s hooks/list gives them).
struct HookTrust {
  std::string key;
  std::string hash;
};

// Records each trust: a missing table goes at the end, an existing one gets the hash.
Result<Edited> SetHookTrust(std::string_view text, const std::vector<HookTrust>& trusts);

// Removes the `[hooks.state."<key>"]` tables of `keys` (as RemoveServer removes a table; a
// `hooks` table left empty by that goes too).
Result<Edited> RemoveHookTrust(std::string_view text, const std::vector<std::string>& keys);

// Whether config.toml turns Codex's hooks off (`[features] hooks = false`, or its older name
// `codex_hooks`).
Result<bool> CodexHooksDisabled(std::string_view text);

// The entry as a person would add it by hand (printed when an edit is refused).
std::string EntrySnippet(ConfigFormat format, const ServerEntry& entry);

// A valid server name: 1-64 of [A-Za-z0-9_-] (a TOML bare key, and Claude Code's tool prefix).
bool IsValidServerName(std::string_view name);

}  // namespace tmcra::setup
