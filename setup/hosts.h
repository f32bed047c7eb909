// The MCP hosts tmcra-mcp-setup knows, and where each keeps its servers and hooks
// (docs/setup.md lists them for users).
//
//   host            user scope                                      --project DIR
//   claude-desktop  ~/.config/Claude/claude_desktop_config.json     (none)
//                   macOS: ~/Library/Application Support/Claude/...
//   claude-code     ~/.claude.json (top-level mcpServers)           DIR/.mcp.json
//   codex           $CODEX_HOME/config.toml, else ~/.codex/...      DIR/.codex/config.toml
//   cursor          ~/.cursor/mcp.json                              DIR/.cursor/mcp.json
//   gemini-cli      ~/.gemini/settings.json (key mcpServers)        DIR/.gemini/settings.json
//                   $GEMINI_CLI_HOME replaces ~ when set
//   vscode          ~/.config/Code/User/mcp.json                    DIR/.vscode/mcp.json
//                   macOS: ~/Library/Application Support/Code/User/mcp.json
//
// A host counts as present on the machine when its own directory exists (~/.config/Claude,
// ~/.claude.json or ~/.claude, the Codex home, ~/.cursor, ~/.gemini, ~/.config/Code/User), or
// when its program is on PATH (`claude`, `codex`, `cursor`, `gemini`, `code`: installed but
// never run).
//
// Hooks (claude-code, codex and gemini-cli):
//   claude-code     ~/.claude/settings.json, key "hooks"            DIR/.claude/settings.json
//   codex           $CODEX_HOME/hooks.json, else ~/.codex/...        DIR/.codex/hooks.json
//   gemini-cli      ~/.gemini/settings.json, key "hooks"            DIR/.gemini/settings.json
//                   (the file of its servers; $GEMINI_CLI_HOME replaces ~ when set)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "setup/config_edit.h"

namespace tmcra::setup {

// What the paths depend on (injected so tests never touch the real $HOME).
struct HostEnvironment {
  std::string home;
  std::optional<std::string> xdg_config_home;
  std::optional<std::string> codex_home;
  std::optional<std::string> gemini_cli_home;  // $GEMINI_CLI_HOME: Gemini CLI's ~, for .gemini
  std::string path;                            // $PATH
  bool macos = false;
};

struct HostTarget {
  std::string host;   // "claude-code"
  std::string label;  // "Claude Code (user)"
  std::string path;   // the config file
  ConfigFormat format = ConfigFormat::kJsonMcpServers;
  bool typed = false;    // its entries carry "type": "stdio"
  bool present = false;  // the host's directory exists, or its program is on PATH
};

// Where a host with hooks keeps them.
struct HooksTarget {
  std::string host;   // "codex"
  std::string label;  // "Codex (user) hooks"
  std::string path;   // settings.json or hooks.json
};

// The host names, in the order they are listed and installed.
const std::vector<std::string>& HostNames();

// Where `host` keeps its servers: user scope, or the project `project_dir` (absolute).
// Errors: an unknown host, a host without project scope.
Result<HostTarget> ResolveHost(std::string_view host, const HostEnvironment& env,
                               const std::optional<std::string>& project_dir);

// Where `host` keeps its hooks. Errors: a host without hooks (only claude-code, codex and
// gemini-cli have them).
Result<HooksTarget> ResolveHooks(std::string_view host, const HostEnvironment& env,
                                 const std::optional<std::string>& project_dir);

// The absolute path of the executable file `name` in the directories of `path_var` ($PATH;
// empty entries and relative directories are skipped).
std::optional<std::string> FindOnPath(std::string_view name, std::string_view path_var);

}  // namespace tmcra::setup
