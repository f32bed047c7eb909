// tmcra-mcp-setup: registers tmcra-mcp with the MCP hosts on this machine (docs/setup.md).
// It edits host config files only, backing each up first; it never takes or writes a key.

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/version.h"
#include "setup/config_file.h"
#include "setup/hosts.h"
#include "setup/setup.h"
#include "setup/tmcra_mcp_setup_help.h"

namespace {

namespace setup = tmcra::setup;

constexpr auto kStatusCodexTimeout = std::chrono::seconds(5);
constexpr auto kTrustCodexTimeout = std::chrono::seconds(20);

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
  bool no_hooks = false;
  bool observe_tools = false;
  bool trust_codex_hooks = false;
  bool statusline = false;
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

void Print(const std::string& label, const setup::HostReport& r) {
  std::printf("%s: %s\n", label.c_str(), r.message.c_str());
  if (!r.backup_path.empty()) std::printf("    backup: %s\n", r.backup_path.c_str());
  if (!r.snippet.empty()) std::printf("    add this by hand:\n%s", r.snippet.c_str());
}

// The names of the variables set in this process's environment.
std::vector<std::string> SetVariableNames() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos && eq > 0) names.emplace_back(entry.substr(0, eq));
  }
  return names;
}

// The directory whose hooks Codex is asked about: the project, else the current one.
std::string CodexCwd(const Options& opt, const setup::HostEnvironment& env) {
  if (opt.project) return *opt.project;
  auto cwd = Absolute(".");
  return cwd.value_or(env.home);
}

struct Tally {
  int failed = 0;
  bool changed = false;
  void Add(const setup::HostReport& r) {
    if (!r.ok) ++failed;
    changed = changed || r.changed;
  }
};

// Codex: asks codex app-server for our hooks' hashes and records them in config.toml.
void TrustCodex(const Options& opt, const setup::HostTarget& t, const setup::HooksTarget& hooks,
                const setup::HostEnvironment& env, Tally& tally) {
  const std::string label = t.label + " trust";
  if (opt.dry_run) {
    std::printf("%s: Codex would be asked for the hooks' hashes, to record them in %s\n",
                label.c_str(), t.path.c_str());
    return;
  }
  setup::HostReport report;
  const auto codex = setup::FindOnPath("codex", env.path);
  if (!codex) {
    report.message =
        "codex is not on PATH, so the hooks could not be trusted; trust them with "
        "/hooks in Codex";
  } else {
    auto listed =
        setup::ListCodexHooks(*codex, CodexCwd(opt, env), kTrustCodexTimeout, tmcra::kVersion);
    if (!listed) {
      report.message = "could not ask Codex (" + listed.error().message +
                       "); trust the hooks with /hooks in Codex";
    } else {
      report =
          setup::TrustCodexHooks(t, hooks, *listed, opt.dry_run, std::chrono::system_clock::now());
    }
  }
  Print(label, report);
  tally.Add(report);
  if (report.ok) {
    std::printf("    Codex runs the tmcra-mcp hooks: memory is automatic in new Codex sessions.\n");
  }
}

// Says which variables Gemini CLI's entry passes as "$NAME" references (setup::EntryFor).
void PrintGeminiReferences(const setup::ServerEntry& entry) {
  if (entry.env_if_absent.empty()) return;
  std::string list;
  for (const auto& [name, value] : entry.env_if_absent) list += (list.empty() ? "" : ", ") + name;
  std::printf(
      "    variables Gemini CLI passes on, as $NAME references it fills from its environment\n"
      "    (it withholds those named like secrets otherwise): %s\n",
      list.c_str());
}

// Registers tmcra-mcp with one host, and installs its hooks there when it has them.
void InstallOne(const Options& opt, const setup::HostTarget& t, const std::string& command,
                const std::vector<std::string>& env_vars, const setup::HostEnvironment& env,
                Tally& tally) {
  const auto now = std::chrono::system_clock::now();
  const bool hooks = setup::HostHasHooks(t.host) && !opt.no_hooks;
  const auto entry = setup::EntryFor(t, opt.name, command, env_vars, hooks);
  const setup::HostReport r = setup::Install(t, entry, opt.dry_run, now);
  Print(t.label, r);
  tally.Add(r);
  if (t.format == setup::ConfigFormat::kCodexToml) {
    std::string names;
    for (const auto& n : entry.env_vars) names += (names.empty() ? "" : ", ") + n;
    std::printf("    variables Codex passes on: %s\n",
                names.empty() ? "none (no TMCRA_* set when installing)" : names.c_str());
  }
  if (t.host == "gemini-cli" && (r.ok || !r.snippet.empty())) PrintGeminiReferences(entry);
  if (!hooks || !r.ok) return;
  auto target = setup::ResolveHooks(t.host, env, opt.project);
  if (!target) return;
  const std::optional<std::string> statusline =
      opt.statusline && t.host == "claude-code"
          ? std::optional<std::string>(setup::StatusLineCommand(command))
          : std::nullopt;
  const setup::HostReport h = setup::InstallHooks(
      *target, setup::OurHooks(t.host, command, opt.observe_tools), statusline, opt.dry_run, now);
  Print(target->label, h);
  tally.Add(h);
  if (!h.ok) return;
  if (t.host == "claude-code") {
    std::printf("    Claude Code runs them from its next session: memory is automatic there.\n");
  } else if (t.host == "gemini-cli") {
    std::printf(
        "    Gemini CLI runs them from its next session, in folders it trusts (its trust dialog;\n"
        "    headless: --skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true): memory is automatic "
        "there.\n");
  } else if (opt.trust_codex_hooks) {
    TrustCodex(opt, t, *target, env, tally);
  } else {
    std::printf(
        "    Codex skips hooks it has not trusted, without a word: memory is NOT automatic in\n"
        "    Codex until you trust them. Start codex, type /hooks and trust the tmcra-mcp\n"
        "    hooks (or run this install again with --trust-codex-hooks).\n");
  }
}

int Install(const Options& opt, const std::vector<setup::HostTarget>& targets,
            const std::string& command, const setup::HostEnvironment& env) {
  const auto env_vars = setup::VariablesToPass(SetVariableNames());
  Tally tally;
  for (const auto& t : targets) InstallOne(opt, t, command, env_vars, env, tally);
  if (opt.statusline && std::none_of(targets.begin(), targets.end(),
                                     [](const auto& t) { return t.host == "claude-code"; })) {
    std::printf("--statusline: Claude Code is not among the hosts; no status line set.\n");
  }
  if (tally.changed && !opt.dry_run) {
    std::printf("Restart or reload the host for the change to take effect.\n");
  }
  return tally.failed == 0 ? 0 : 1;
}

int Remove(const Options& opt, const std::vector<setup::HostTarget>& targets,
           const setup::HostEnvironment& env) {
  const auto now = std::chrono::system_clock::now();
  Tally tally;
  for (const auto& t : targets) {
    std::optional<setup::HooksTarget> hooks;
    std::vector<std::string> trust_keys;
    if (setup::HostHasHooks(t.host)) {
      if (auto h = setup::ResolveHooks(t.host, env, opt.project)) hooks = *h;
    }
    if (hooks && t.host == "codex") {
      auto keys = setup::OurTrustKeys(*hooks);
      if (keys) trust_keys = std::move(*keys);
    }
    const setup::HostReport r = setup::Remove(t, opt.name, opt.dry_run, now, trust_keys);
    Print(t.label, r);
    tally.Add(r);
    if (!hooks) continue;
    const setup::HostReport h = setup::RemoveHooks(*hooks, opt.dry_run, now);
    Print(hooks->label, h);
    tally.Add(h);
  }
  if (tally.changed && !opt.dry_run) {
    std::printf("Restart or reload the host for the change to take effect.\n");
  }
  return tally.failed == 0 ? 0 : 1;
}

// Our hooks in a host, with Codex's trust when codex is on PATH.
setup::HooksStatus HooksOf(const Options& opt, const setup::HostTarget& t,
                           const setup::HooksTarget& hooks, const std::string& command,
                           const setup::HostEnvironment& env) {
  setup::HooksStatus status =
      setup::InspectHooks(hooks, setup::OurHooks(t.host, command, /*observe_tools=*/false));
  if (t.host != "codex") return status;
  const bool any = std::any_of(status.events.begin(), status.events.end(),
                               [](const auto& e) { return e.installed; });
  if (!any) return status;
  bool disabled = false;
  if (auto config = setup::ReadConfigFile(t.path); config && config->exists) {
    disabled = setup::CodexHooksDisabled(config->text).value_or(false);
  }
  const auto codex = setup::FindOnPath("codex", env.path);
  tmcra::Result<std::vector<setup::CodexHook>> listed =
      tmcra::Error::NotFound("codex is not on PATH");
  if (codex && !disabled) {
    listed =
        setup::ListCodexHooks(*codex, CodexCwd(opt, env), kStatusCodexTimeout, tmcra::kVersion);
  }
  setup::AddCodexTrust(status, hooks, listed, disabled);
  return status;
}

nlohmann::ordered_json HooksJson(const setup::HooksTarget& target, const setup::HooksStatus& s) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const auto& e : s.events) {
    nlohmann::ordered_json row = {{"event", e.event},
                                  {"installed", e.installed},
                                  {"current", e.current},
                                  {"host_runs_it", e.runs}};
    if (!e.trust.empty()) row["codex_trust"] = e.trust;
    if (!e.todo.empty()) row["todo"] = e.todo;
    events.push_back(row);
  }
  nlohmann::ordered_json out = {{"path", target.path}, {"state", s.state}, {"events", events}};
  if (!s.detail.empty()) out["detail"] = s.detail;
  if (target.host == "claude-code") {
    out["statusline"] = !s.statusline.present ? "none" : s.statusline.ours ? "ours" : "not ours";
  }
  return out;
}

void PrintHooks(const setup::HooksTarget& target, const setup::HooksStatus& s) {
  if (s.state == "ok") {
    std::printf("    hooks in %s:\n", target.path.c_str());
  } else {
    std::printf("    hooks: %s\n",
                s.state == "unreadable" ? s.detail.c_str() : (target.path + ": no file").c_str());
  }
  for (const auto& e : s.events) {
    std::string line = "      " + e.event + ": " + (e.installed ? "installed" : "not installed");
    if (!e.trust.empty()) line += ", Codex: " + e.trust;
    line += ", runs: " + e.runs;
    if (!e.todo.empty()) line += " (" + e.todo + ")";
    std::printf("%s\n", line.c_str());
  }
  if (target.host == "claude-code" && s.statusline.present) {
    std::printf("      statusLine: %s\n", s.statusline.ours ? "tmcra-mcp's" : "the user's own");
  }
}

int Status(const Options& opt, const std::vector<setup::HostTarget>& targets,
           const std::string& command, const setup::HostEnvironment& env) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  if (!opt.json) {
    std::printf("tmcra-mcp: %s\n", command.empty() ? "(not found)" : command.c_str());
  }
  bool unreadable = false;
  for (const auto& t : targets) {
    const setup::HostStatus s = setup::Inspect(t, opt.name, command);
    unreadable = unreadable || s.state == "unreadable";
    std::optional<setup::HooksTarget> hooks;
    std::optional<setup::HooksStatus> hook_status;
    if (setup::HostHasHooks(t.host)) {
      if (auto h = setup::ResolveHooks(t.host, env, opt.project)) {
        hooks = *h;
        hook_status = HooksOf(opt, t, *hooks, command, env);
        unreadable = unreadable || hook_status->state == "unreadable";
      }
    }
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
      if (hook_status) row["hooks"] = HooksJson(*hooks, *hook_status);
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
    if (hook_status) PrintHooks(*hooks, *hook_status);
  }
  if (opt.json) {
    const auto text = out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", text.c_str());
  }
  return unreadable ? 1 : 0;
}

// A usage error's message when the arguments are wrong, std::nullopt when they are fine.
using UsageProblem = std::optional<std::string>;

// --version or --help (anywhere, e.g. `install --help`): what they print, and exit 0.
std::optional<int> VersionOrHelp(int argc, char** argv) {
  const std::string_view first = argv[1];
  if (first == "--version" || first == "-V") {
    std::printf("tmcra-mcp-setup %s\n", tmcra::kVersion);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(tmcra::help::kText, stdout);
      return 0;
    }
  }
  return std::nullopt;
}

// The options after the command (argv[2] on) into `opt`, each accepted only by the commands
// it is for.
UsageProblem ParseFlags(int argc, char** argv, Options& opt) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    const bool install = opt.command_name == "install";
    if (arg == "--dry-run" && opt.command_name != "status") {
      opt.dry_run = true;
    } else if (arg == "--no-hooks" && install) {
      opt.no_hooks = true;
    } else if (arg == "--observe-tools" && install) {
      opt.observe_tools = true;
    } else if (arg == "--trust-codex-hooks" && install) {
      opt.trust_codex_hooks = true;
    } else if (arg == "--statusline" && install) {
      opt.statusline = true;
    } else if (arg == "--json" && opt.command_name == "status") {
      opt.json = true;
    } else if (arg == "--host" || arg == "--project" || arg == "--name" ||
               (arg == "--command" && opt.command_name == "install")) {
      auto v = value();
      if (!v || v->empty()) return arg + " needs a value";
      if (arg == "--host") opt.hosts.push_back(*v);
      if (arg == "--project") opt.project = *v;
      if (arg == "--name") opt.name = *v;
      if (arg == "--command") opt.command = *v;
    } else {
      return "unknown option '" + arg + "' for " + opt.command_name;
    }
  }
  return std::nullopt;
}

// Options that do not go together, the server name, and --project, made absolute.
UsageProblem CheckOptions(Options& opt) {
  if (opt.no_hooks && (opt.observe_tools || opt.trust_codex_hooks || opt.statusline)) {
    return "--no-hooks excludes --observe-tools, --trust-codex-hooks and --statusline";
  }
  auto named = [&](const char* host) {
    return std::find(opt.hosts.begin(), opt.hosts.end(), host) != opt.hosts.end();
  };
  if (opt.statusline && !opt.hosts.empty() && !named("claude-code")) {
    return "--statusline is for Claude Code: add --host claude-code";
  }
  if (opt.trust_codex_hooks && !opt.hosts.empty() && !named("codex")) {
    return "--trust-codex-hooks is for Codex: add --host codex";
  }
  if (!setup::IsValidServerName(opt.name)) {
    return "--name must be 1-64 letters, digits, '_' or '-'";
  }
  if (opt.project) {
    auto dir = Absolute(*opt.project);
    if (!dir || !IsDirectory(*dir)) {
      return "--project " + *opt.project + " is not a directory";
    }
    opt.project = *dir;
    if (opt.hosts.empty() && opt.command_name != "status") {
      return "--project needs --host (which hosts' project files to write)";
    }
  }
  return std::nullopt;
}

// The tmcra-mcp to register: --command, else the one beside this program; `command` stays
// empty when there is none and the command is not install.
UsageProblem ResolveCommand(const Options& opt, std::string& command) {
  if (opt.command) {
    auto abs = Absolute(*opt.command);
    if (!abs || !setup::IsExecutableFile(*abs)) {
      return "--command " + *opt.command + " is not an executable file";
    }
    command = *abs;
  } else if (auto sibling = SiblingServer()) {
    command = *sibling;
  } else if (opt.command_name == "install") {
    return "no tmcra-mcp beside this program; name it with --command PATH";
  }
  return std::nullopt;
}

// The hosts' view of this process's environment; its home is checked by the caller.
setup::HostEnvironment ProcessHostEnvironment() {
  setup::HostEnvironment env;
  env.home = Env("HOME").value_or("");
  env.xdg_config_home = Env("XDG_CONFIG_HOME");
  env.codex_home = Env("CODEX_HOME");
  env.gemini_cli_home = Env("GEMINI_CLI_HOME");
  env.path = Env("PATH").value_or("");
#ifdef __APPLE__
  env.macos = true;
#endif
  return env;
}

// The hosts to act on: those named, else every host (for install and remove only those found
// on this machine, and never Claude Desktop for a project).
UsageProblem ResolveTargets(const Options& opt, const setup::HostEnvironment& env,
                            std::vector<setup::HostTarget>& targets) {
  const bool all = opt.hosts.empty();
  for (const std::string& host : all ? setup::HostNames() : opt.hosts) {
    if (all && opt.project && host == "claude-desktop") continue;
    auto target = setup::ResolveHost(host, env, opt.project);
    if (!target) return target.error().message;
    if (all && opt.command_name != "status" && !target->present) continue;
    targets.push_back(*target);
  }
  return std::nullopt;
}

void WarnIfInBuildTree(const std::string& command) {
  if (!setup::InBuildTree(command)) return;
  std::fprintf(stderr,
               "tmcra-mcp-setup: warning: %s is in a build tree; the hosts will keep "
               "starting it from there, also after `cmake --install` (register the "
               "installed one: run the installed tmcra-mcp-setup, or --command PATH)\n",
               command.c_str());
}

int Run(int argc, char** argv) {
  if (argc < 2) return UsageError("needs a command: install, remove or status");
  if (const auto exit_code = VersionOrHelp(argc, argv)) return *exit_code;
  Options opt;
  opt.command_name = argv[1];
  if (opt.command_name != "install" && opt.command_name != "remove" &&
      opt.command_name != "status") {
    return UsageError("unknown command '" + opt.command_name + "'");
  }
  if (auto problem = ParseFlags(argc, argv, opt)) return UsageError(*problem);
  if (auto problem = CheckOptions(opt)) return UsageError(*problem);
  std::string command;
  if (auto problem = ResolveCommand(opt, command)) return UsageError(*problem);
  const setup::HostEnvironment env = ProcessHostEnvironment();
  if (env.home.empty() || env.home.front() != '/') return UsageError("HOME is not set");
  std::vector<setup::HostTarget> targets;
  if (auto problem = ResolveTargets(opt, env, targets)) return UsageError(*problem);

  if (opt.command_name == "status") return Status(opt, targets, command, env);
  if (targets.empty()) {
    std::fprintf(stderr,
                 "tmcra-mcp-setup: no MCP host found in %s or on PATH; name one with --host "
                 "(claude-code, claude-desktop, codex, cursor, gemini-cli, vscode)\n",
                 env.home.c_str());
    return 1;
  }
  if (opt.command_name == "install") {
    WarnIfInBuildTree(command);
    return Install(opt, targets, command, env);
  }
  return Remove(opt, targets, env);
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
