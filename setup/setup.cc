#include "setup/setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "setup/config_file.h"

namespace tmcra::setup {
namespace {

// Besides TMCRA_*, the variables libcurl honours for a remote memory.
bool IsNetworkVariable(std::string_view name) {
  return name == "SSL_CERT_FILE" || name == "SSL_CERT_DIR" || name == "HTTPS_PROXY" ||
         name == "NO_PROXY";
}

bool IsEmptyObject(std::string_view text) {
  std::string compact;
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') compact += c;
  }
  return compact == "{}";
}

std::string Describe(EditOutcome outcome, const std::string& path, const std::string& name,
                     bool created, bool dry_run) {
  const std::string would = dry_run ? "would be " : "";
  switch (outcome) {
    case EditOutcome::kAdded:
      return name + " " + would + "registered in " + path +
             (created ? (dry_run ? " (a new file)" : " (created)") : "");
    case EditOutcome::kUpdated:
      return name + " " + would + "updated in " + path;
    case EditOutcome::kUnchanged:
      return name + " is already registered in " + path + "; nothing changed";
    case EditOutcome::kRemoved:
      return name + " " + would + "removed from " + path;
    case EditOutcome::kAbsent:
      return name + " is not registered in " + path + "; nothing changed";
  }
  return {};
}

// Describes an edit's outcome; `created` when the file did not exist.
using Describer = std::function<std::string(EditOutcome outcome, bool created)>;

// Reads `path`, edits its text, and (unless `dry_run`) writes the result back with a backup.
// With `delete_if_empty`, a removal that leaves `{}` removes the file instead.
template <class Edit>
HostReport Change(const std::string& path, bool dry_run, std::chrono::system_clock::time_point now,
                  Edit edit, std::string snippet, const Describer& describe,
                  bool delete_if_empty = false) {
  HostReport report;
  auto file = ReadConfigFile(path);
  if (!file) {
    report.message = file.error().message;
    return report;
  }
  auto edited = edit(file->text);
  if (!edited) {
    report.message = path + " " + edited.error().message +
                     (snippet.empty() ? "; nothing changed, change it by hand"
                                      : "; nothing changed, add the entry by hand");
    report.snippet = std::move(snippet);
    return report;
  }
  report.ok = true;
  const bool changes =
      edited->outcome != EditOutcome::kUnchanged && edited->outcome != EditOutcome::kAbsent;
  report.changed = changes;
  if (changes) {
    if (auto s = CheckReplaceable(*file); !s) {
      report.ok = false;
      report.changed = false;
      report.message = s.error().message + "; nothing changed";
      return report;
    }
  }
  const bool remove_file = delete_if_empty && edited->outcome == EditOutcome::kRemoved &&
                           file->real_path == file->path && IsEmptyObject(edited->text);
  if (changes && !dry_run) {
    auto written =
        remove_file ? DeleteConfigFile(*file, now) : WriteConfigFile(*file, edited->text, now);
    if (!written) {
      report.ok = false;
      report.message = written.error().message;
      return report;
    }
    report.backup_path = written->backup_path;
  }
  report.message = describe(edited->outcome, !file->exists);
  if (remove_file)
    report.message += dry_run ? " (the file would be removed: nothing else is in it)"
                              : " (the file is removed: nothing else was in it)";
  if (file->real_path != file->path && changes) {
    report.message += " (through its link, in " + file->real_path + ")";
  }
  return report;
}

Describer EntryDescriber(const std::string& path, const std::string& name, bool dry_run) {
  return [=](EditOutcome outcome, bool created) {
    return Describe(outcome, path, name, created, dry_run);
  };
}

// "would be " in a dry run.
std::string Would(bool dry_run) { return dry_run ? "would be " : ""; }

}  // namespace

std::vector<std::string> VariablesToPass(const std::vector<std::string>& set_names) {
  std::vector<std::string> names;
  for (const std::string& name : set_names) {
    const bool tmcra = name.rfind("TMCRA_", 0) == 0 && name != "TMCRA_HOOKS";
    if (tmcra || IsNetworkVariable(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

ServerEntry EntryFor(const HostTarget& target, std::string name, std::string command,
                     std::vector<std::string> env_vars, bool with_hooks) {
  ServerEntry entry;
  entry.name = std::move(name);
  entry.command = std::move(command);
  entry.typed = target.typed;
  if (with_hooks && HostHasHooks(target.host)) entry.env = {{"TMCRA_HOOKS", target.host}};
  if (target.host == "gemini-cli") {
    for (const std::string& n : env_vars) entry.env_if_absent.emplace_back(n, "$" + n);
  }
  if (target.format == ConfigFormat::kCodexToml) {
    entry.env_vars = std::move(env_vars);
    entry.tool_timeout_sec = 180;
  }
  return entry;
}

HostReport Install(const HostTarget& target, const ServerEntry& entry, bool dry_run,
                   std::chrono::system_clock::time_point now) {
  return Change(
      target.path, dry_run, now,
      [&](const std::string& text) { return AddServer(text, target.format, entry); },
      EntrySnippet(target.format, entry), EntryDescriber(target.path, entry.name, dry_run));
}

HostReport Remove(const HostTarget& target, std::string_view name, bool dry_run,
                  std::chrono::system_clock::time_point now,
                  const std::vector<std::string>& trust_keys) {
  auto edit = [&](const std::string& text) -> Result<Edited> {
    auto removed = RemoveServer(text, target.format, name);
    if (!removed || trust_keys.empty() || target.format != ConfigFormat::kCodexToml) {
      return removed;
    }
    auto untrusted = RemoveHookTrust(removed->text, trust_keys);
    if (!untrusted) return untrusted.error();
    if (untrusted->outcome == EditOutcome::kRemoved) removed->outcome = EditOutcome::kRemoved;
    removed->text = std::move(untrusted->text);
    return removed;
  };
  return Change(target.path, dry_run, now, edit, "",
                EntryDescriber(target.path, std::string(name), dry_run));
}

HostReport InstallHooks(const HooksTarget& target, const std::vector<HookHandler>& hooks,
                        const std::optional<std::string>& statusline, bool dry_run,
                        std::chrono::system_clock::time_point now) {
  bool foreign_statusline = false;
  auto edit = [&](const std::string& text) -> Result<Edited> {
    auto edited = AddHooks(text, hooks, statusline);
    if (!edited) return edited.error();
    foreign_statusline = edited->foreign_statusline;
    return Edited{std::move(edited->text), edited->outcome};
  };
  auto describe = [&](EditOutcome outcome, bool created) {
    std::string what = std::to_string(hooks.size()) + " tmcra-mcp hooks";
    if (statusline && !foreign_statusline) what += " and the status line";
    std::string message;
    if (outcome == EditOutcome::kUnchanged) {
      message = what + " already in " + target.path + "; nothing changed";
    } else {
      message = what + " " + Would(dry_run) +
                (outcome == EditOutcome::kAdded ? "added to " : "set in ") + target.path +
                (created ? (dry_run ? " (a new file)" : " (created)") : "");
    }
    if (foreign_statusline) {
      message += "; it has a statusLine of its own, which stays (not tmcra-mcp's)";
    }
    return message;
  };
  return Change(target.path, dry_run, now, edit, "", describe);
}

HostReport RemoveHooks(const HooksTarget& target, bool dry_run,
                       std::chrono::system_clock::time_point now) {
  auto describe = [&](EditOutcome outcome, bool) {
    if (outcome == EditOutcome::kAbsent) {
      return "no tmcra-mcp hooks in " + target.path + "; nothing changed";
    }
    return "tmcra-mcp hooks " + Would(dry_run) + "removed from " + target.path;
  };
  return Change(
      target.path, dry_run, now, [](const std::string& text) { return RemoveHooks(text); }, "",
      describe, /*delete_if_empty=*/true);
}

Result<std::vector<std::string>> OurTrustKeys(const HooksTarget& target) {
  auto file = ReadConfigFile(target.path);
  if (!file) return file.error();
  std::vector<std::string> keys;
  if (!file->exists) return keys;
  auto found = FindOurHooks(file->text);
  if (!found) return Error::Invalid(target.path + " " + found.error().message);
  std::vector<std::string> paths = {target.path};
  if (file->real_path != target.path) paths.push_back(file->real_path);
  for (const FoundHook& hook : *found) {
    for (const std::string& path : paths) {
      keys.push_back(path + ":" + SnakeCaseEvent(hook.event) + ":" + std::to_string(hook.group) +
                     ":" + std::to_string(hook.handler));
    }
  }
  return keys;
}

HostReport TrustCodexHooks(const HostTarget& config, const HooksTarget& hooks,
                           const std::vector<CodexHook>& listed, bool dry_run,
                           std::chrono::system_clock::time_point now) {
  std::vector<HookTrust> trusts;
  for (const CodexHook& hook : HooksFromFile(listed, hooks.path)) {
    if (IsOurHookCommand(hook.command) && !hook.key.empty() && !hook.current_hash.empty()) {
      trusts.push_back({hook.key, hook.current_hash});
    }
  }
  if (trusts.empty()) {
    HostReport report;
    report.message = "Codex lists none of the tmcra-mcp hooks of " + hooks.path +
                     ", so none was trusted (are hooks turned off in " + config.path + "?)";
    return report;
  }
  auto describe = [&](EditOutcome outcome, bool created) {
    const std::string what =
        "Codex's trust in " + std::to_string(trusts.size()) + " tmcra-mcp hooks";
    if (outcome == EditOutcome::kUnchanged) {
      return what + " already recorded in " + config.path + "; nothing changed";
    }
    return what + " " + Would(dry_run) + "recorded in " + config.path +
           (created ? (dry_run ? " (a new file)" : " (created)") : "");
  };
  return Change(
      config.path, dry_run, now,
      [&](const std::string& text) { return SetHookTrust(text, trusts); }, "", describe);
}

namespace {

// Reads the hooks file into `status` (state, detail, disabled, statusline); returns our hooks
// in it, none when it is missing or unreadable.
std::vector<FoundHook> ReadHooksFile(const HooksTarget& target, HooksStatus& status) {
  auto file = ReadConfigFile(target.path);
  if (!file) {
    status.state = "unreadable";
    status.detail = file.error().message;
    return {};
  }
  if (!file->exists) {
    status.state = "no file";
    return {};
  }
  auto hooks = FindOurHooks(file->text);
  auto disabled = AllHooksDisabled(target.host, file->text);
  auto statusline = FindStatusLine(file->text);
  auto disabled_names = DisabledHookNames(file->text);
  if (!hooks || !disabled || !statusline || !disabled_names) {
    status.state = "unreadable";
    status.detail = target.path + " " +
                    (!hooks        ? hooks.error().message
                     : !disabled   ? disabled.error().message
                     : !statusline ? statusline.error().message
                                   : disabled_names.error().message);
    return {};
  }
  status.state = "ok";
  status.disabled = *disabled;
  status.statusline = *statusline;
  if (target.host == "gemini-cli") status.disabled_names = std::move(*disabled_names);
  return std::move(*hooks);
}

// The events wanted, in their order, then those of other hooks of ours found in the file.
std::vector<std::string> HookEvents(const std::vector<HookHandler>& wanted,
                                    const std::vector<FoundHook>& found) {
  std::vector<std::string> events;
  events.reserve(wanted.size() + found.size());
  for (const HookHandler& hook : wanted) events.push_back(hook.event);
  for (const FoundHook& hook : found) {
    if (std::find(events.begin(), events.end(), hook.event) == events.end()) {
      events.push_back(hook.event);
    }
  }
  return events;
}

// Whether the host runs our installed hook `ours`, and what to do when it does not: Claude
// Code and Gemini CLI run every hook of the file unless it turns them all off, or Gemini CLI's
// hooksConfig.disabled names this one (by its name, else its command). Codex is asked
// separately (AddCodexTrust).
void SetRuns(HookState& state, const FoundHook& ours, const HooksTarget& target,
             const HooksStatus& status) {
  if (target.host == "codex") {
    state.runs = "unknown";
    return;
  }
  const bool gemini = target.host == "gemini-cli";
  const std::string& id = ours.name.empty() ? ours.command : ours.name;
  const auto& off = status.disabled_names;
  if (status.disabled) {
    state.runs = "no";
    state.todo = gemini ? "set \"hooksConfig\": {\"enabled\": true} in " + target.path
                        : "remove \"disableAllHooks\": true from " + target.path;
  } else if (std::find(off.begin(), off.end(), id) != off.end()) {
    state.runs = "no";
    state.todo = "take \"" + id + "\" out of \"hooksConfig\".\"disabled\" in " + target.path;
  } else {
    state.runs = "yes";
  }
}

// Whether our hook for `event` is installed and current, whether the host runs it, and what to
// do about it.
HookState EventState(const std::string& event, const HooksTarget& target,
                     const std::vector<HookHandler>& wanted, const std::vector<FoundHook>& found,
                     const HooksStatus& status) {
  HookState state;
  state.event = event;
  auto ours = std::find_if(found.begin(), found.end(),
                           [&](const FoundHook& h) { return h.event == event; });
  auto want = std::find_if(wanted.begin(), wanted.end(),
                           [&](const HookHandler& h) { return h.event == event; });
  state.installed = ours != found.end();
  if (state.installed) {
    state.command = ours->command;
    state.current =
        want != wanted.end() && ours->command == want->command && ours->timeout == want->timeout;
  }
  if (!state.installed) {
    state.runs = "no";
    state.todo = "run tmcra-mcp-setup install --host " + target.host;
  } else {
    SetRuns(state, *ours, target, status);
  }
  if (state.installed && !state.current && state.todo.empty() && want != wanted.end()) {
    state.todo = "run tmcra-mcp-setup install --host " + target.host +
                 " (it runs another tmcra-mcp or timeout)";
  }
  return state;
}

}  // namespace

HooksStatus InspectHooks(const HooksTarget& target, const std::vector<HookHandler>& wanted) {
  HooksStatus status;
  const std::vector<FoundHook> found = ReadHooksFile(target, status);
  for (const std::string& event : HookEvents(wanted, found)) {
    status.events.push_back(EventState(event, target, wanted, found, status));
  }
  return status;
}

void AddCodexTrust(HooksStatus& status, const HooksTarget& target,
                   const Result<std::vector<CodexHook>>& listed, bool hooks_disabled) {
  status.disabled = hooks_disabled;
  const std::string trust_todo =
      "trust it: type /hooks in Codex, or run tmcra-mcp-setup install --host codex "
      "--trust-codex-hooks";
  const std::vector<CodexHook> ours =
      listed ? HooksFromFile(*listed, target.path) : std::vector<CodexHook>{};
  for (HookState& state : status.events) {
    if (!state.installed) continue;
    if (hooks_disabled) {
      state.runs = "no";
      state.todo = "hooks are turned off in Codex's config.toml ([features] hooks = false)";
      continue;
    }
    if (!listed) {
      state.runs = "unknown";
      if (state.todo.empty()) state.todo = "could not ask Codex: " + listed.error().message;
      continue;
    }
    std::string event = state.event;
    if (!event.empty()) event[0] = static_cast<char>(event[0] - 'A' + 'a');
    auto hook = std::find_if(ours.begin(), ours.end(), [&](const CodexHook& h) {
      return h.event_name == event && h.command == state.command;
    });
    if (hook == ours.end()) {
      state.trust = "not listed";
      state.runs = "no";
      if (state.todo.empty()) {
        state.todo = "Codex does not list it (for a project: is the project trusted in Codex?)";
      }
      continue;
    }
    state.trust = hook->trust_status;
    state.runs = hook->trust_status == "trusted" ? "yes" : "no";
    if (hook->trust_status != "trusted") state.todo = trust_todo;
  }
}

bool InBuildTree(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  while (!dir.empty()) {
    const size_t slash = dir.rfind('/');
    const std::string name = dir.substr(slash + 1);
    const std::string parent = slash == 0 ? "/" : dir.substr(0, slash);
    struct stat st;
    if (stat((dir + "/CMakeCache.txt").c_str(), &st) == 0) return true;
    if (name == "build" && (stat((parent + "/CMakeLists.txt").c_str(), &st) == 0 ||
                            stat((parent + "/.git").c_str(), &st) == 0)) {
      return true;
    }
    if (slash == 0 || slash == std::string::npos) break;
    dir = dir.substr(0, slash);
  }
  return false;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

HostStatus Inspect(const HostTarget& target, std::string_view name, std::string_view our_command) {
  HostStatus status;
  auto file = ReadConfigFile(target.path);
  if (!file) {
    status.state = "unreadable";
    status.detail = file.error().message;
    return status;
  }
  if (!file->exists) {
    status.state = "no config file";
    return status;
  }
  auto reg = FindServer(file->text, target.format, name);
  if (!reg) {
    status.state = "unreadable";
    status.detail = target.path + " " + reg.error().message;
    return status;
  }
  if (!reg->present) {
    status.state = "not registered";
    return status;
  }
  status.state = "registered";
  status.command = reg->command;
  if (reg->command) {
    status.command_is_ours = *reg->command == our_command;
    status.command_runs = IsExecutableFile(*reg->command);
  }
  return status;
}

}  // namespace tmcra::setup
