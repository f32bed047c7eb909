#include "setup/hosts.h"

#include <sys/stat.h>
#include <unistd.h>

namespace tmcra::setup {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ConfigHome(const HostEnvironment& env) {
  if (env.xdg_config_home && !env.xdg_config_home->empty() && env.xdg_config_home->front() == '/') {
    return *env.xdg_config_home;
  }
  return env.home + "/.config";
}

// Where desktop apps keep their settings: macOS Application Support, else the XDG config home.
std::string AppSupport(const HostEnvironment& env) {
  return env.macos ? env.home + "/Library/Application Support" : ConfigHome(env);
}

std::string CodexHome(const HostEnvironment& env) {
  return env.codex_home && !env.codex_home->empty() ? *env.codex_home : env.home + "/.codex";
}

// The directory Gemini CLI keeps its .gemini in: $GEMINI_CLI_HOME, else the home.
std::string GeminiCliHome(const HostEnvironment& env) {
  return env.gemini_cli_home && !env.gemini_cli_home->empty() ? *env.gemini_cli_home : env.home;
}

// A host that keeps its file `name` in one directory: `project_dir`/`project_sub` for a project,
// else `user_dir`. It is present when that directory exists (always, for a project).
void InDirectory(HostTarget& t, const std::optional<std::string>& project_dir,
                 const std::string& project_sub, const std::string& user_dir, const char* name) {
  const std::string dir = project_dir ? *project_dir + "/" + project_sub : user_dir;
  t.path = dir + "/" + name;
  t.present = project_dir.has_value() || Exists(dir);
}

// The program of each host that has one on PATH.
const char* HostProgram(std::string_view host) {
  if (host == "claude-code") return "claude";
  if (host == "codex") return "codex";
  if (host == "cursor") return "cursor";
  if (host == "gemini-cli") return "gemini";
  if (host == "vscode") return "code";
  return nullptr;
}

}  // namespace

std::optional<std::string> FindOnPath(std::string_view name, std::string_view path_var) {
  if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  size_t pos = 0;
  while (pos <= path_var.size()) {
    size_t end = path_var.find(':', pos);
    if (end == std::string_view::npos) end = path_var.size();
    const std::string_view dir = path_var.substr(pos, end - pos);
    if (!dir.empty() && dir.front() == '/') {
      const std::string candidate = std::string(dir) + "/" + std::string(name);
      struct stat st;
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    pos = end + 1;
  }
  return std::nullopt;
}

Result<HooksTarget> ResolveHooks(std::string_view host, const HostEnvironment& env,
                                 const std::optional<std::string>& project_dir) {
  HooksTarget t;
  t.host = std::string(host);
  const std::string scope = project_dir ? " (project " + *project_dir + ")" : " (user)";
  if (host == "claude-code") {
    t.label = "Claude Code" + scope + " hooks";
    t.path = (project_dir ? *project_dir : env.home) + "/.claude/settings.json";
  } else if (host == "codex") {
    t.label = "Codex" + scope + " hooks";
    t.path = (project_dir ? *project_dir + "/.codex" : CodexHome(env)) + "/hooks.json";
  } else if (host == "gemini-cli") {
    t.label = "Gemini CLI" + scope + " hooks";
    t.path = (project_dir ? *project_dir : GeminiCliHome(env)) + "/.gemini/settings.json";
  } else {
    return Error::Invalid(std::string(host) + " has no hooks");
  }
  return t;
}

const std::vector<std::string>& HostNames() {
  static const std::vector<std::string> names = {
      "claude-code", "claude-desktop", "codex", "cursor", "gemini-cli", "vscode",
  };
  return names;
}

Result<HostTarget> ResolveHost(std::string_view host, const HostEnvironment& env,
                               const std::optional<std::string>& project_dir) {
  HostTarget t;
  t.host = std::string(host);
  const bool project = project_dir.has_value();
  const std::string scope = project ? " (project " + *project_dir + ")" : " (user)";
  if (host == "claude-code") {
    t.label = "Claude Code" + scope;
    t.typed = true;
    if (project) {
      t.path = *project_dir + "/.mcp.json";
      t.present = true;
    } else {
      t.path = env.home + "/.claude.json";
      t.present = Exists(t.path) || Exists(env.home + "/.claude");
    }
  } else if (host == "claude-desktop") {
    if (project) return Error::Invalid("claude-desktop has no project configuration");
    t.label = "Claude Desktop";
    const std::string dir = AppSupport(env) + "/Claude";
    t.path = dir + "/claude_desktop_config.json";
    t.present = Exists(dir);
  } else if (host == "codex") {
    t.label = "Codex" + scope;
    t.format = ConfigFormat::kCodexToml;
    InDirectory(t, project_dir, ".codex", CodexHome(env), "config.toml");
  } else if (host == "cursor") {
    t.label = "Cursor" + scope;
    InDirectory(t, project_dir, ".cursor", env.home + "/.cursor", "mcp.json");
  } else if (host == "gemini-cli") {
    t.label = "Gemini CLI" + scope;
    InDirectory(t, project_dir, ".gemini", GeminiCliHome(env) + "/.gemini", "settings.json");
  } else if (host == "vscode") {
    t.label = "VS Code" + scope;
    t.format = ConfigFormat::kJsonServers;
    t.typed = true;
    if (project) {
      t.path = *project_dir + "/.vscode/mcp.json";
      t.present = true;
    } else {
      const std::string dir = AppSupport(env) + "/Code/User";
      t.path = dir + "/mcp.json";
      t.present = Exists(dir);
    }
  } else {
    return Error::Invalid(
        "unknown host '" + std::string(host) +
        "' (known: claude-code, claude-desktop, codex, cursor, gemini-cli, vscode)");
  }
  if (const char* program = HostProgram(host); program != nullptr && !project) {
    t.present = t.present || FindOnPath(program, env.path).has_value();
  }
  return t;
}

}  // namespace tmcra::setup
