// tmcra-mcp-setup's operations on one host: install (register tmcra-mcp, and for Claude Code,
// Codex and Gemini CLI its hooks), remove, and inspect (for `status`); Codex's trust of our
// hooks. Each returns a report the main prints; none throws. Every file is changed through
// config_file.h (backup first, atomic replacement), and with `dry_run` nothing is written.
// Gemini CLI keeps its servers and its hooks in one settings.json: the entry and the hooks are
// two edits of that file, each backed up.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "setup/codex_app_server.h"
#include "setup/config_edit.h"
#include "setup/hooks_edit.h"
#include "setup/hosts.h"

namespace tmcra::setup {

// The names Codex should pass on to tmcra-mcp, out of the names of the variables set in the
// installer's environment (`set_names`): every TMCRA_* except the TMCRA_HOOKS marker, and
// SSL_CERT_FILE, SSL_CERT_DIR, HTTPS_PROXY and NO_PROXY (libcurl's, for a remote memory), sorted.
// Codex gives a server only HOME, PATH and a few more; names that are unset would only show
// as "*****" in `codex mcp list`.
std::vector<std::string> VariablesToPass(const std::vector<std::string>& set_names);

// The entry for `target`: our name and command, "type": "stdio" where the host writes it,
// TMCRA_HOOKS=<host> in its env when `with_hooks` (setup installs the host's hooks), and for
// Codex `env_vars` (the given names; none when empty) and a tool timeout of 180 s
// (tmcra_wait_job waits 120 s by default, and tmcra_feedback up to 120 s for the user's answer;
// Codex's default is 60 s). Gemini CLI's entry has no timeout: its default is 10 minutes. Its
// env gets "NAME": "$NAME" for each of `env_vars` where it has no NAME yet (env_if_absent):
// Gemini withholds from its servers every variable named like a secret (TMCRA_API_KEY,
// SSL_CERT_FILE), and under GitHub Actions all but a few, but fills a "$NAME" of its settings
// from its whole environment when it loads them; the value itself is never written.
ServerEntry EntryFor(const HostTarget& target, std::string name, std::string command,
                     std::vector<std::string> env_vars, bool with_hooks);

struct HostReport {
  bool ok = false;
  bool changed = false;     // the file was (dry run: would be) changed
  std::string message;      // one line: what was done, or why not
  std::string backup_path;  // the copy of the file as it was, when it was changed
  std::string snippet;      // when the file could not be edited: the entry to add by hand
};

// Registers `entry` in the target's config file (creating it and its directories, 0600/0700,
// when missing). `dry_run` reads and checks everything but writes nothing.
HostReport Install(const HostTarget& target, const ServerEntry& entry, bool dry_run,
                   std::chrono::system_clock::time_point now);

// Removes the server `name` from the target's config file, backing it up first; for Codex also
// the `[hooks.state."<key>"]` tables of `trust_keys` (our hooks' trust).
HostReport Remove(const HostTarget& target, std::string_view name, bool dry_run,
                  std::chrono::system_clock::time_point now,
                  const std::vector<std::string>& trust_keys = {});

// Makes our hooks in the target's file exactly `hooks` (hooks_edit.h), and with `statusline`
// sets Claude Code's status line unless the user has one of their own (then the message says
// so and it is left).
HostReport InstallHooks(const HooksTarget& target, const std::vector<HookHandler>& hooks,
                        const std::optional<std::string>& statusline, bool dry_run,
                        std::chrono::system_clock::time_point now);

// Removes our hooks (and our status line). A file that holds nothing else afterwards (`{}`) is
// removed, backed up first, so install then remove leaves the machine as it was.
HostReport RemoveHooks(const HooksTarget& target, bool dry_run,
                       std::chrono::system_clock::time_point now);

// Codex's trust keys of our hooks in the target's hooks.json, as Codex names them
// ("<file>:<event_snake_case>:<group>:<handler>"), for the path as given and, when it differs,
// as its links resolve.
Result<std::vector<std::string>> OurTrustKeys(const HooksTarget& target);

// Records Codex's trust in our hooks of the target's hooks file: each of `listed` (what
// `codex app-server` reports) that comes from that file and runs tmcra-mcp gets
// `[hooks.state."<key>"] trusted_hash = "<currentHash>"` in `config`'s config.toml.
HostReport TrustCodexHooks(const HostTarget& config, const HooksTarget& hooks,
                           const std::vector<CodexHook>& listed, bool dry_run,
                           std::chrono::system_clock::time_point now);

struct HostStatus {
  std::string state;  // "registered", "not registered", "no config file", "unreadable"
  std::optional<std::string> command;  // the registered command
  bool command_is_ours = false;        // it is `our_command`
  bool command_runs = false;           // it is an executable file
  std::string detail;                  // why unreadable
};

HostStatus Inspect(const HostTarget& target, std::string_view name, std::string_view our_command);

struct HookState {
  std::string event;
  bool installed = false;  // a handler of ours is in the event
  bool current = false;    // with exactly our command and timeout
  std::string command;     // ours, as found
  std::string runs;        // whether the host will run it: "yes", "no", "unknown"
  std::string trust;       // Codex: "trusted", "untrusted", "modified", "not listed"; else empty
  std::string todo;        // what the user must do; empty when nothing
};

struct HooksStatus {
  std::string state;              // "ok", "no file", "unreadable"
  std::string detail;             // why unreadable
  std::vector<HookState> events;  // those of `wanted`, then any other event of ours found
  // The host turns hooks off (disableAllHooks, Gemini CLI's hooksConfig.enabled, [features]).
  bool disabled = false;
  std::vector<std::string> disabled_names;  // Gemini CLI's hooksConfig.disabled
  StatusLine statusline;                    // Claude Code's
};

// Our hooks in the target's file, per event, for the handlers `wanted` (what install writes).
// For Claude Code and Gemini CLI "runs" is "yes" for an installed hook unless the file turns
// hooks off (Gemini CLI: all of them, or that one by name); for Codex it is "unknown" until
// AddCodexTrust.
HooksStatus InspectHooks(const HooksTarget& target, const std::vector<HookHandler>& wanted);

// Codex's view, from `codex app-server` (`listed`, or why it could not be asked): each
// installed hook's trust, whether Codex will run it, and what to do; `hooks_disabled` when
// config.toml turns hooks off.
void AddCodexTrust(HooksStatus& status, const HooksTarget& target,
                   const Result<std::vector<CodexHook>>& listed, bool hooks_disabled);

// A path inside a build tree: a directory above it holds CMakeCache.txt, or it is under a
// `build` directory of a source checkout (beside CMakeLists.txt or .git). Hosts keep starting
// that path after `cmake --install` puts tmcra-mcp elsewhere.
bool InBuildTree(const std::string& path);

// A regular file this user may execute (a registered command, or the one to register).
bool IsExecutableFile(const std::string& path);

}  // namespace tmcra::setup
