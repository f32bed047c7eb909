#include "src/hooks/transcript.h"

#include <sys/stat.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "src/common/json_reader.h"

namespace tmcra::hooks {

namespace {

using json = nlohmann::json;

enum class Role { kNone, kUser, kAssistant };

struct Message {
  Role role = Role::kNone;
  std::string text;
};

// The text parts of a message's content: a string, or blocks {"type": "text"|"input_text"|
// "output_text", "text"}. A content holding a tool result is not something a person wrote.
std::string TextOf(const json& content, bool* tool_result) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (const auto& block : content) {
    if (!block.is_object()) continue;
    const std::string type = block.value("type", "");
    if (type == "tool_result" || type == "function_call_output") *tool_result = true;
    if ((type == "text" || type == "input_text" || type == "output_text") &&
        block.contains("text") && block["text"].is_string()) {
      if (!text.empty()) text += "\n";
      text += block["text"].get<std::string>();
    }
  }
  return text;
}

// Claude Code: {"type": "user"|"assistant", "message": {"role", "content"}}; meta lines
// (isMeta), sidechains (a subagent's own turns) and tool results are not turns.
Message ClaudeMessage(const json& line) {
  const std::string type = line.value("type", "");
  if ((type != "user" && type != "assistant") || !line.contains("message") ||
      !line["message"].is_object()) {
    return {};
  }
  if (line.value("isMeta", false) || line.value("isSidechain", false)) return {};
  bool tool_result = false;
  std::string text = TextOf(line["message"].value("content", json()), &tool_result);
  if (tool_result || text.empty()) return {};
  return {type == "user" ? Role::kUser : Role::kAssistant, std::move(text)};
}

// Codex: {"type": "event_msg", "payload": {"type": "user_message"|"agent_message",
// "message"}}; its response_item lines repeat these along with instructions and context.
Message CodexMessage(const json& line) {
  if (line.value("type", "") != "event_msg" || !line.contains("payload") ||
      !line["payload"].is_object()) {
    return {};
  }
  const json& payload = line["payload"];
  const std::string type = payload.value("type", "");
  if (!payload.contains("message") || !payload["message"].is_string()) return {};
  std::string text = payload["message"].get<std::string>();
  if (text.empty()) return {};
  if (type == "user_message") return {Role::kUser, std::move(text)};
  if (type == "agent_message") return {Role::kAssistant, std::move(text)};
  return {};
}

// Slash commands and the host's own notes in the user's place are not prompts.
bool IsCommandEcho(const std::string& text) {
  return text.rfind("<command-name>", 0) == 0 || text.rfind("<local-command", 0) == 0 ||
         text.rfind("Caveat: The messages below", 0) == 0;
}

}  // namespace

Result<std::vector<TranscriptTurn>> ReadTranscript(Host host, const std::string& path,
                                                   size_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error::NotFound("transcript: no such file");
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return Error::Invalid("transcript: larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::ifstream in(path);
  if (!in) return Error::Unavailable("transcript: cannot be opened");
  std::vector<TranscriptTurn> turns;
  std::string line;
  while (std::getline(in, line)) {
    json value;
    if (!ReadJsonStrict(line, value, /*max_depth=*/64).ok || !value.is_object()) continue;
    const Message m = host == Host::kCodex ? CodexMessage(value) : ClaudeMessage(value);
    if (m.role == Role::kUser && !IsCommandEcho(m.text)) {
      turns.push_back({m.text, ""});
    } else if (m.role == Role::kAssistant && !turns.empty()) {
      turns.back().assistant = m.text;  // the last answer text of the turn wins
    }
  }
  return turns;
}

}  // namespace tmcra::hooks
