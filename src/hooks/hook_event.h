// What a host hands a hook on stdin, read into one shape for every host (docs/hooks.md lists
// the fields each host sends for each event). Only the fields the hooks use are read; unknown
// fields are ignored, and a field of the wrong type is an error naming it.
//
// Gemini CLI names its events differently (BeforeAgent is UserPromptSubmit, AfterAgent is Stop,
// AfterTool is PostToolUse) and sends the prompt as it went to the model: its input is read
// into the same shape, the prompt cut back to what the user typed (GeminiTypedPrompt) and its
// `prompt_response` taken as the final answer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::hooks {

enum class Host { kClaudeCode, kCodex, kGeminiCli };

// "claude-code", "codex" or "gemini-cli"; nullopt for another name.
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

// The event `host` calls `name` ("UserPromptSubmit"; Gemini CLI's "BeforeAgent"); nullopt for
// an event the hooks do not know for that host. Gemini CLI's are SessionStart, BeforeAgent,
// AfterAgent, SessionEnd and AfterTool.
std::optional<Event> ParseEventName(std::string_view name, Host host = Host::kClaudeCode);
// The host's name of `event` (Claude Code's and Codex's for an event Gemini CLI does not have).
const char* EventName(Event event, Host host = Host::kClaudeCode);

// What the user typed, out of the prompt Gemini CLI hands BeforeAgent and AfterAgent: without
// the "<hook_context>...</hook_context>" block SessionStart hooks put before it under -p (only a
// whole block followed by a blank line and the prompt, or by nothing), and without the files an
// @path pulled in (only a block at its end, from "\n--- Content from referenced files ---" to
// "\n--- End of content ---").
std::string GeminiTypedPrompt(std::string_view prompt);

struct HookInput {
  Host host = Host::kClaudeCode;
  Event event = Event::kSessionStart;
  std::string session_id;       // required by every event
  std::string cwd;              // may be empty
  std::string transcript_path;  // may be empty (Codex sends null before a transcript exists)
  // The host's id for the turn: Codex's turn_id, Claude Code's prompt_id; empty when not sent.
  std::string host_turn_id;
  std::string prompt;  // UserPromptSubmit; Gemini CLI's AfterAgent too
  // Stop, SubagentStop; Gemini CLI's AfterAgent: its prompt_response (every model text of the
  // turn), none when it says "[no response text]".
  std::optional<std::string> last_assistant_message;
  bool stop_hook_active = false;  // Stop, SubagentStop
  std::string agent_id;           // in a subagent's events
  std::string agent_type;
  std::string agent_transcript_path;  // SubagentStop
  std::string source;                 // SessionStart: startup, resume, clear, compact, fork
  std::string trigger;                // PreCompact: manual, auto
  std::string reason;                 // SessionEnd
  std::string tool_name;              // PostToolUse
  std::string tool_use_id;            // PostToolUse
  nlohmann::json tool_input;          // PostToolUse
  nlohmann::json tool_response;       // PostToolUse (Gemini CLI: its llmContent, unless an error)
  std::string timestamp;              // Gemini CLI: when it fired the event
  std::string error;                  // StopFailure: what the host says went wrong
};

// Reads a hook's stdin. Errors (kInvalid): not a JSON object, invalid UTF-8, a field of the
// wrong type, a missing session_id, or hook_event_name naming another event than `event` (by
// the host's name for it).
[[nodiscard]] Result<HookInput> ParseHookInput(Host host, Event event, std::string_view text);

}  // namespace tmcra::hooks
