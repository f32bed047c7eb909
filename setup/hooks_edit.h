// Editing the hooks of Claude Code (settings.json, key "hooks"), Codex (hooks.json) and Gemini
// CLI (settings.json, key "hooks"): add, find and remove tmcra-mcp's own handlers, touching
// nothing else. Pure functions from text to text; the JSON is read and written back as
// json_text.h says.
//
// The hosts use one shape: {"hooks": {"<Event>": [{"hooks": [{"type": "command",
// "command": ..., "timeout": <seconds>}]}]}}. Gemini CLI's groups carry a "matcher" and its
// handlers a "name", and its timeouts are in milliseconds. A handler is ours when its command
// runs a file named `tmcra-mcp` with first argument `hook` or `statusline` (IsOurHookCommand).
// Every other group and handler is the user's and is never changed, moved or removed.
//
// Adding puts each missing handler in a group of its own at the end of its event's list; a
// handler of ours already in the event gets our command and timeout in place. Removing takes
// out our handlers, then a group, an event's list or the "hooks" object only when it became
// empty through that removal, so add then remove gives the original text back (json_text.h
// keeps indent, line endings and final newline).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "setup/config_edit.h"

namespace tmcra::setup {

struct HookHandler {
  std::string event;    // the host's event name: "Stop"
  std::string command;  // "'/abs/tmcra-mcp' hook Stop --host codex"
  int timeout = 10;     // in the host's unit: seconds; Gemini CLI's milliseconds
  // Gemini CLI's "name" ("tmcra-Stop"; its /hooks panel and hooksConfig.disabled use it); empty
  // for the other hosts, whose handlers have none.
  std::string name;
  // The "matcher" of the group a new handler goes in (Gemini CLI's "*": every source, reason
  // and tool); none for the other hosts.
  std::optional<std::string> matcher;
};

// Whether setup installs hooks for `host` (claude-code, codex and gemini-cli).
bool HostHasHooks(std::string_view host);

// The handlers for `host` running `binary` (docs/setup.md has the table): the events always
// installed, and PostToolUse (Gemini CLI: AfterTool) with `observe_tools`. Empty for a host
// without hooks. Gemini CLI's commands end in ` 2>/dev/null || true`: it blocks the turn on an
// exit status of 2 or more (127 when the binary is gone) and shows a hook's stderr when its
// stdout is empty.
std::vector<HookHandler> OurHooks(std::string_view host, std::string_view binary,
                                  bool observe_tools);

// `text` as one POSIX shell word ('...' with ' written '\'').
std::string ShellQuote(std::string_view text);

// The command of Claude Code's status line: "'<binary>' statusline".
std::string StatusLineCommand(std::string_view binary);

// Whether `command` runs a file named tmcra-mcp with first argument `hook` or `statusline`
// (shell quoting of the first two words understood; what follows them, such as Gemini CLI's
// redirection, does not matter).
bool IsOurHookCommand(std::string_view command);

struct HooksEdited {
  std::string text;
  EditOutcome outcome = EditOutcome::kUnchanged;
  // A "statusLine" that is not ours was there and was left alone.
  bool foreign_statusline = false;
};

// Makes our handlers exactly `hooks`: missing ones added, ours updated in place, ours in an
// event setup manages but `hooks` lacks (PostToolUse without --observe-tools) removed. With
// `statusline`, also "statusLine": {"type": "command", "command": <statusline>} unless a
// statusLine that is not ours exists.
Result<HooksEdited> AddHooks(std::string_view text, const std::vector<HookHandler>& hooks,
                             const std::optional<std::string>& statusline);

// Removes every handler of ours, and the statusLine when it is ours.
Result<Edited> RemoveHooks(std::string_view text);

struct FoundHook {
  std::string event;
  std::string command;
  int timeout = 0;   // in the host's unit; 0 when the handler has none
  std::string name;  // its "name", or empty
  size_t group = 0;  // its place: hooks[event][group].hooks[handler]
  size_t handler = 0;
};

// Our handlers in `text`, in file order.
Result<std::vector<FoundHook>> FindOurHooks(std::string_view text);

struct StatusLine {
  bool present = false;
  bool ours = false;
  std::string command;
};

Result<StatusLine> FindStatusLine(std::string_view text);

// Whether the file turns off every hook of its scope: Claude Code's "disableAllHooks": true,
// Gemini CLI's "hooksConfig": {"enabled": false}. Always false for another host.
Result<bool> AllHooksDisabled(std::string_view host, std::string_view text);

// Gemini CLI's "hooksConfig": {"disabled": [...]}: the names (or commands) of the handlers it
// does not run.
Result<std::vector<std::string>> DisabledHookNames(std::string_view text);

// Codex's name of an event in a hook's trust key: "UserPromptSubmit" -> "user_prompt_submit".
std::string SnakeCaseEvent(std::string_view event);

}  // namespace tmcra::setup
