#include "src/hooks/hook_event.h"

#include <array>
#include <span>
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

// Gemini CLI's names of the events it has.
constexpr std::array<std::pair<Event, const char*>, 5> kGeminiEvents{{
    {Event::kSessionStart, "SessionStart"},
    {Event::kUserPromptSubmit, "BeforeAgent"},
    {Event::kStop, "AfterAgent"},
    {Event::kSessionEnd, "SessionEnd"},
    {Event::kPostToolUse, "AfterTool"},
}};

// What Gemini CLI's AfterAgent says when the turn had no model text.
constexpr std::string_view kGeminiNoResponse = "[no response text]";

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
  };
  for (const auto& [key, out] : strings) {
    if (auto s = ReadString(object, key, *out); !s) return s;
  }
  // Gemini CLI names no turn; it says when it fired the event.
  if (in.host == Host::kGeminiCli) {
    if (auto s = ReadString(object, "timestamp", in.timestamp); !s) return s;
  } else {
    const char* turn_key = in.host == Host::kCodex ? "turn_id" : "prompt_id";
    if (auto s = ReadString(object, turn_key, in.host_turn_id); !s) return s;
  }
  if (auto s = ReadBool(object, "stop_hook_active", in.stop_hook_active); !s) return s;
  const char* answer_key =
      in.host == Host::kGeminiCli ? "prompt_response" : "last_assistant_message";
  auto last = object.find(answer_key);
  if (last != object.end() && !last->is_null()) {
    if (!last->is_string()) {
      return Error::Invalid(std::string("hook input.") + answer_key + ": must be a string");
    }
    in.last_assistant_message = last->get<std::string>();
  }
  if (auto it = object.find("tool_input"); it != object.end()) in.tool_input = *it;
  if (auto it = object.find("tool_response"); it != object.end()) in.tool_response = *it;
  in.error = ErrorText(object);
  return Ok();
}

// Gemini CLI's input in the shape of the others': the prompt as typed, no placeholder answer,
// and of a tool's result the text the model got (the whole result when it failed).
void NormalizeGemini(HookInput& in) {
  in.prompt = GeminiTypedPrompt(in.prompt);
  if (in.last_assistant_message == kGeminiNoResponse) in.last_assistant_message.reset();
  if (in.tool_response.is_object() && in.tool_response.contains("llmContent")) {
    auto error = in.tool_response.find("error");
    if (error == in.tool_response.end() || error->is_null()) {
      nlohmann::json content = in.tool_response["llmContent"];
      in.tool_response = std::move(content);
    }
  }
}

using EventNames = std::span<const std::pair<Event, const char*>>;

EventNames EventsOf(Host host) {
  return host == Host::kGeminiCli ? EventNames(kGeminiEvents) : EventNames(kEvents);
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
  if (name == "gemini-cli") return Host::kGeminiCli;
  return std::nullopt;
}

const char* HostName(Host host) {
  switch (host) {
    case Host::kCodex:
      return "codex";
    case Host::kGeminiCli:
      return "gemini-cli";
    case Host::kClaudeCode:
      break;
  }
  return "claude-code";
}

std::optional<Event> ParseEventName(std::string_view name, Host host) {
  for (const auto& [event, text] : EventsOf(host)) {
    if (name == text) return event;
  }
  return std::nullopt;
}

const char* EventName(Event event, Host host) {
  for (const auto& [e, text] : EventsOf(host)) {
    if (e == event) return text;
  }
  return host == Host::kGeminiCli ? EventName(event) : "?";
}

std::string GeminiTypedPrompt(std::string_view prompt) {
  constexpr std::string_view kOpen = "<hook_context>";
  constexpr std::string_view kClose = "</hook_context>";
  constexpr std::string_view kReferenced = "\n--- Content from referenced files ---";
  constexpr std::string_view kEndOfContent = "\n--- End of content ---";
  // SessionStart's context under -p is one block, then a blank line and the prompt (or nothing).
  // Gemini CLI writes < and > of a hook's context as &lt; and &gt;: its first closing tag is the
  // block's end.
  if (prompt.starts_with(kOpen)) {
    const size_t close = prompt.find(kClose);
    const std::string_view rest =
        close == std::string_view::npos ? prompt : prompt.substr(close + kClose.size());
    if (rest.empty()) return "";
    if (rest.starts_with("\n\n")) prompt = rest.substr(2);
  }
  // An @path's files follow the prompt as one block that ends it (as Gemini CLI's own
  // stripReferenceContent takes them out for display).
  if (prompt.ends_with(kEndOfContent)) {
    prompt = prompt.substr(0, prompt.find(kReferenced));
  }
  return std::string(prompt);
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
  if (host == Host::kGeminiCli) NormalizeGemini(in);
  std::string named;
  if (auto s = ReadString(object, "hook_event_name", named); !s) return s.error();
  const std::string expected = EventName(event, host);
  if (!named.empty() && named != expected) {
    return Error::Invalid("hook input.hook_event_name: is " + named + ", not " + expected);
  }
  if (in.session_id.empty()) return Error::Invalid("hook input.session_id: missing");
  return in;
}

}  // namespace tmcra::hooks
