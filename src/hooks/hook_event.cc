#include "src/hooks/hook_event.h"

#include <array>
#include <utility>

#include "base/json_reader.h"

namespace tmcra::hooks {

namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<Event, const char*>, 11> kEvents{{
    {Event::kSessionStart, "SessionStart"},
    {Event::kUserPromptSubmit, "UserPromptSubmit"},
    {Event::kStop, "Stop"},
    {Event::kStopFailure, "StopFailure"},
    {Event::kSubagentStart, "SubagentStart"},
    {Event::kSubagentStop, "SubagentStop"},
    {Event::kPreCompact, "PreCompact"},
    {Event::kPostCompact, "PostCompact"},
    {Event::kSessionEnd, "SessionEnd"},
    {Event::kInterrupt, "Interrupt"},
    {Event::kPostToolUse, "PostToolUse"},
}};

// A string field: absent or null gives "", another type is an error naming the field.
Status ReadString(const json& object, const char* key, std::string& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Ok();
  if (!it->is_string())
    return Error::Invalid(std::string("hook input.") + key + ": must be a string");
  out = it->get<std::string>();
  return Ok();
}

Status ReadBool(const json& object, const char* key, bool& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Ok();
  if (!it->is_boolean())
    return Error::Invalid(std::string("hook input.") + key + ": must be a boolean");
  out = it->get<bool>();
  return Ok();
}

// Claude Code's StopFailure names its error in one of a few fields, as text or an object.
std::string ErrorText(const json& object) {
  for (const char* key : {"error", "error_message", "reason"}) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_null()) return it->dump();
  }
  return "";
}

Status ReadFields(const json& object, HookInput& in) {
  const std::pair<const char*, std::string*> strings[] = {
      {"session_id", &in.session_id},
      {"cwd", &in.cwd},
      {"transcript_path", &in.transcript_path},
      {"prompt", &in.prompt},
      {"agent_id", &in.agent_id},
      {"agent_type", &in.agent_type},
      {"agent_transcript_path", &in.agent_transcript_path},
      {"source", &in.source},
      {"trigger", &in.trigger},
      {"reason", &in.reason},
      {"tool_name", &in.tool_name},
      {"tool_use_id", &in.tool_use_id},
      {in.host == Host::kCodex ? "turn_id" : "prompt_id", &in.host_turn_id},
  };
  for (const auto& [key, out] : strings) {
    if (auto s = ReadString(object, key, *out); !s) return s;
  }
  if (auto s = ReadBool(object, "stop_hook_active", in.stop_hook_active); !s) return s;
  auto last = object.find("last_assistant_message");
  if (last != object.end() && !last->is_null()) {
    if (!last->is_string()) {
      return Error::Invalid("hook input.last_assistant_message: must be a string");
    }
    in.last_assistant_message = last->get<std::string>();
  }
  if (auto it = object.find("tool_input"); it != object.end()) in.tool_input = *it;
  if (auto it = object.find("tool_response"); it != object.end()) in.tool_response = *it;
  in.error = ErrorText(object);
  return Ok();
}

std::string ReadProblem(const JsonReadResult& read) {
  if (read.duplicate_key) return "hook input: a key is given twice";
  if (read.too_deep) return "hook input: nested too deeply";
  return "hook input: not a JSON document in UTF-8";
}

}  // namespace

std::optional<Host> ParseHost(std::string_view name) {
  if (name == "claude-code") return Host::kClaudeCode;
  if (name == "codex") return Host::kCodex;
  return std::nullopt;
}

const char* HostName(Host host) { return host == Host::kCodex ? "codex" : "claude-code"; }

std::optional<Event> ParseEventName(std::string_view name) {
  for (const auto& [event, text] : kEvents) {
    if (name == text) return event;
  }
  return std::nullopt;
}

const char* EventName(Event event) {
  for (const auto& [e, text] : kEvents) {
    if (e == event) return text;
  }
  return "?";
}

Result<HookInput> ParseHookInput(Host host, Event event, std::string_view text) {
  json object;
  if (const JsonReadResult read = ReadJsonStrict(text, object, /*max_depth=*/64); !read.ok) {
    return Error::Invalid(ReadProblem(read));
  }
  if (!object.is_object()) return Error::Invalid("hook input: must be a JSON object");
  HookInput in;
  in.host = host;
  in.event = event;
  if (auto s = ReadFields(object, in); !s) return s.error();
  std::string named;
  if (auto s = ReadString(object, "hook_event_name", named); !s) return s.error();
  if (!named.empty() && named != EventName(event)) {
    return Error::Invalid("hook input.hook_event_name: is " + named + ", not " + EventName(event));
  }
  if (in.session_id.empty()) return Error::Invalid("hook input.session_id: missing");
  return in;
}

}  // namespace tmcra::hooks
