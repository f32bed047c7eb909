// What a host hands a hook on stdin, read into one shape for both hosts (docs/hooks.md lists
// the fields each host sends for each event). Only the fields the hooks use are read; unknown
// fields are ignored, and a field of the wrong type is an error naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::hooks {

enum class Host { kClaudeCode, kCodex };

// "claude-code" or "codex"; nullopt for another name.
std::optional<Host> ParseHost(std::string_view name);
const char* HostName(Host host);

enum class Event {
  kSessionStart,
  kUserPromptSubmit,
  kStop,
  kStopFailure,
  kSubagentStart,
  kSubagentStop,
  kPreCompact,
  kPostCompact,
  kSessionEnd,
  kInterrupt,
  kPostToolUse,
};

// The host's event name ("UserPromptSubmit"); nullopt for an event the hooks do not know.
std::optional<Event> ParseEventName(std::string_view name);
const char* EventName(Event event);

struct HookInput {
  Host host = Host::kClaudeCode;
  Event event = Event::kSessionStart;
  std::string session_id;       // required by every event
  std::string cwd;              // may be empty
  std::string transcript_path;  // may be empty (Codex sends null before a transcript exists)
  // The host's id for the turn: Codex's turn_id, Claude Code's prompt_id; empty when not sent.
  std::string host_turn_id;
  std::string prompt;                                 // UserPromptSubmit
  std::optional<std::string> last_assistant_message;  // Stop, SubagentStop
  bool stop_hook_active = false;                      // Stop, SubagentStop
  std::string agent_id;                               // in a subagent's events
  std::string agent_type;
  std::string agent_transcript_path;  // SubagentStop
  std::string source;                 // SessionStart: startup, resume, clear, compact, fork
  std::string trigger;                // PreCompact: manual, auto
  std::string reason;                 // SessionEnd
  std::string tool_name;              // PostToolUse
  std::string tool_use_id;            // PostToolUse
  nlohmann::json tool_input;          // PostToolUse
  nlohmann::json tool_response;       // PostToolUse
  std::string error;                  // StopFailure: what the host says went wrong
};

// Reads a hook's stdin. Errors (kInvalid): not a JSON object, invalid UTF-8, a field of the
// wrong type, a missing session_id, or hook_event_name naming another event than `event`.
[[nodiscard]] Result<HookInput> ParseHookInput(Host host, Event event, std::string_view text);

}  // namespace tmcra::hooks
