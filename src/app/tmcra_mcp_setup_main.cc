// tmcra-mcp-setup: registers tmcra-mcp with the MCP hosts on this machine (docs/setup.md).
// It edits host config files only, backing each up first; it never takes or writes a key.

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "setup/hosts.h"
#include "setup/setup.h"
#include "src/common/version.h"

namespace {

namespace setup = tmcra::setup;

constexpr const char* kHelp =
    "Usage: tmcra-mcp-setup install [--host HOST]... [--project DIR] [--name NAME]\n"
    "                               [--command PATH] [--dry-run]\n"
    "       tmcra-mcp-setup remove  [--host HOST]... [--project DIR] [--name NAME] [--dry-run]\n"
    "       tmcra-mcp-setup status  [--host HOST]... [--project DIR] [--name NAME] [--json]\n"
    "       tmcra-mcp-setup --version | --help\n"
    "\n"
    "Registers tmcra-mcp with MCP hosts by editing their config files. Every file it changes\n"
    "is first copied to <file>.tmcra-backup-<time>; a file it cannot edit safely (comments in\n"
    "JSON, an inline TOML table) is left alone and the entry to add by hand is printed.\n"
    "\n"
    "Hosts: claude-code, claude-desktop, codex, cursor, vscode. Without --host, install and\n"
    "remove act on the hosts found on this machine, status lists them all.\n"
    "\n"
    "Options:\n"
    "  --host HOST     a host to act on (repeatable)\n"
    "  --project DIR   the project's config (.mcp.json, .codex/, .cursor/, .vscode/) instead\n"
    "                  of the user's; needs --host\n"
    "  --name NAME     the server's name in the host (default tmcra)\n"
    "  --command PATH  the tmcra-mcp to register (default: the one beside this program)\n"
    "  --dry-run       say what would change, change nothing\n"
    "  --json          status as JSON\n"
    "\n"
    "Restart or reload a host after installing. Credentials are not set here: see\n"
    "docs/configuration.md (TMCRA_API_KEY or the device config file).\n";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "tmcra-mcp-setup: %s (try --help)\n", message.c_str());
  return 2;
}

struct Options {
  std::string command_name;
  std::vector<std::string> hosts;
  std::optional<std::string> project;
  std::string name = "tmcra";
  std::optional<std::string> command;
  bool dry_run = false;
  bool json = false;
};

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return std::nullopt;
  return std::string(resolved);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The tmcra-mcp next to this program (both are installed, and built, in one directory).
std::optional<std::string> SiblingServer() {
  auto self = Absolute("/proc/self/exe");
  if (!self) return std::nullopt;
  const std::string candidate = self->substr(0, self->rfind('/') + 1) + "tmcra-mcp";
  if (!setup::IsExecutableFile(candidate)) return std::nullopt;
  return candidate;
}

int Run(int argc, char** argv) {
  if (argc < 2) return UsageError("needs a command: install, remove or status");
  const std::string_view first = argv[1];
  if (first == "--version" || first == "-V") {
    std::printf("tmcra-mcp-setup %s\n", tmcra::kVersion);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {  // --help anywhere, e.g. `install --help`
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  }
  Options opt;
  opt.command_name = argv[1];
  if (opt.command_name != "install" && opt.command_name != "remove" &&
      opt.command_name != "status") {
    return UsageError("unknown command '" + opt.command_name + "'");
  }
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    if (arg == "--dry-run" && opt.command_name != "status") {
      opt.dry_run = true;
    } else if (arg == "--json" && opt.command_name == "status") {
      opt.json = true;
    } else if (arg == "--host" || arg == "--project" || arg == "--name" ||
               (arg == "--command" && opt.command_name == "install")) {
      auto v = value();
      if (!v || v->empty()) return UsageError(arg + " needs a value");
      if (arg == "--host") opt.hosts.push_back(*v);
      if (arg == "--project") opt.project = *v;
      if (arg == "--name") opt.name = *v;
      if (arg == "--command") opt.command = *v;
    } else {
      return UsageError("unknown option '" + arg + "' for " + opt.command_name);
    }
  }
  if (!setup::IsValidServerName(opt.name)) {
    return UsageError("--name must be 1-64 letters, digits, '_' or '-'");
  }
  if (opt.project) {
    auto dir = Absolute(*opt.project);
    if (!dir || !IsDirectory(*dir)) {
      return UsageError("--project " + *opt.project + " is not a directory");
    }
    opt.project = *dir;
    if (opt.hosts.empty() && opt.command_name != "status") {
      return UsageError("--project needs --host (which hosts' project files to write)");
    }
  }

  std::string command;
  if (opt.command) {
    auto abs = Absolute(*opt.command);
    if (!abs || !setup::IsExecutableFile(*abs)) {
      return UsageError("--command " + *opt.command + " is not an executable file");
    }
    command = *abs;
  } else if (auto sibling = SiblingServer()) {
    command = *sibling;
  } else if (opt.command_name == "install") {
    return UsageError("no tmcra-mcp beside this program; name it with --command PATH");
  }

  setup::HostEnvironment env;
  env.home = Env("HOME").value_or("");
  if (env.home.empty() || env.home.front() != '/') return UsageError("HOME is not set");
  env.xdg_config_home = Env("XDG_CONFIG_HOME");
  env.codex_home = Env("CODEX_HOME");
#ifdef __APPLE__
  env.macos = true;
#endif

  std::vector<setup::HostTarget> targets;
  const bool all = opt.hosts.empty();
  for (const std::string& host : all ? setup::HostNames() : opt.hosts) {
    if (all && opt.project && host == "claude-desktop") continue;
    auto target = setup::ResolveHost(host, env, opt.project);
    if (!target) return UsageError(target.error().message);
    if (all && opt.command_name != "status" && !target->present) continue;
    targets.push_back(*target);
  }

  if (opt.command_name == "status") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    if (!opt.json) {
      std::printf("tmcra-mcp: %s\n", command.empty() ? "(not found)" : command.c_str());
    }
    bool unreadable = false;
    for (const auto& t : targets) {
      const setup::HostStatus s = setup::Inspect(t, opt.name, command);
      unreadable = unreadable || s.state == "unreadable";
      if (opt.json) {
        nlohmann::ordered_json row = {{"host", t.host},
                                      {"label", t.label},
                                      {"path", t.path},
                                      {"host_present", t.present},
                                      {"state", s.state}};
        if (s.command) {
          row["command"] = *s.command;
          row["command_is_this_install"] = s.command_is_ours;
          row["command_runs"] = s.command_runs;
        }
        if (!s.detail.empty()) row["detail"] = s.detail;
        out.push_back(row);
        continue;
      }
      std::string line = t.label + ": " + s.state;
      if (s.state == "registered") {
        line += " as " + opt.name + " → " + s.command.value_or("(no command)");
        if (!s.command_runs) {
          line += " (not an executable file!)";
        } else if (!s.command_is_ours && !command.empty()) {
          line += " (another tmcra-mcp than this one)";
        }
      } else if (s.state == "no config file" && !t.present) {
        line += " (host not found)";
      }
      if (!s.detail.empty()) line += ": " + s.detail;
      std::printf("%s\n    %s\n", line.c_str(), t.path.c_str());
    }
    if (opt.json) {
      const auto text = out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
      std::printf("%s\n", text.c_str());
    }
    return unreadable ? 1 : 0;
  }

  if (targets.empty()) {
    std::fprintf(stderr,
                 "tmcra-mcp-setup: no MCP host found in %s; name one with --host "
                 "(claude-code, claude-desktop, codex, cursor, vscode)\n",
                 env.home.c_str());
    return 1;
  }
  const auto now = std::chrono::system_clock::now();
  int failed = 0;
  bool changed = false;
  for (const auto& t : targets) {
    const setup::HostReport r =
        opt.command_name == "install"
            ? setup::Install(t, setup::EntryFor(t, opt.name, command), opt.dry_run, now)
            : setup::Remove(t, opt.name, opt.dry_run, now);
    std::printf("%s: %s\n", t.label.c_str(), r.message.c_str());
    if (!r.backup_path.empty()) std::printf("    backup: %s\n", r.backup_path.c_str());
    if (!r.snippet.empty()) std::printf("    add this by hand:\n%s", r.snippet.c_str());
    if (!r.ok) ++failed;
    changed = changed || r.changed;
  }
  if (changed && !opt.dry_run) {
    std::printf("Restart or reload the host for the change to take effect.\n");
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmcra-mcp-setup: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tmcra-mcp-setup: internal error\n");
  }
  return 1;
}
