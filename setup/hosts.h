// The MCP hosts tmcra-mcp-setup knows, and where each keeps its servers
// (../shared/reference/mcp-protocol.md §2; docs/setup.md lists them for users).
//
//   host            user scope                                      --project DIR
//   claude-desktop  ~/.config/Claude/claude_desktop_config.json     (none)
//                   macOS: ~/Library/Application Support/Claude/...
//   claude-code     ~/.claude.json (top-level mcpServers)           DIR/.mcp.json
//   codex           $CODEX_HOME/config.toml, else ~/.codex/...      DIR/.codex/config.toml
//   cursor          ~/.cursor/mcp.json                              DIR/.cursor/mcp.json
//   vscode          ~/.config/Code/User/mcp.json                    DIR/.vscode/mcp.json
//                   macOS: ~/Library/Application Support/Code/User/mcp.json
//
// A host counts as present on the machine when its own directory exists (~/.config/Claude,
// ~/.claude.json or ~/.claude, the Codex home, ~/.cursor, ~/.config/Code/User).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "setup/config_edit.h"
#include "src/common/result.h"

namespace tmcra::setup {

// What the paths depend on (injected so tests never touch the real $HOME).
struct HostEnvironment {
  std::string home;
  std::optional<std::string> xdg_config_home;
  std::optional<std::string> codex_home;
  bool macos = false;
};

struct HostTarget {
  std::string host;   // "claude-code"
  std::string label;  // "Claude Code (user)"
  std::string path;   // the config file
  ConfigFormat format = ConfigFormat::kJsonMcpServers;
  bool typed = false;    // its entries carry "type": "stdio"
  bool present = false;  // the host's directory exists
};

// The host names, in the order they are listed and installed.
const std::vector<std::string>& HostNames();

// Where `host` keeps its servers: user scope, or the project `project_dir` (absolute).
// Errors: an unknown host, a host without project scope.
Result<HostTarget> ResolveHost(std::string_view host, const HostEnvironment& env,
                               const std::optional<std::string>& project_dir);

}  // namespace tmcra::setup
