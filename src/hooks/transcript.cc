#include "src/hooks/transcript.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_reader.h"

namespace tmcra::hooks {

namespace {

using json = nlohmann::json;

enum class Role { kNone, kUser, kCommand, kAssistant };

struct Message {
  Role role = Role::kNone;
  std::string text;
};

// A string member, or "" when it is missing or not a string (a host's odd line is skipped,
// never an exception).
std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool BoolField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

// The text parts of a message's content: a string, or blocks {"type": "text"|"input_text"|
// "output_text", "text"}. A content holding a tool result is not something a person wrote.
std::string TextOf(const json& content, bool* tool_result) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (const auto& block : content) {
    if (!block.is_object()) continue;
    const std::string type = StringField(block, "type");
    if (type == "tool_result" || type == "function_call_output") *tool_result = true;
    const std::string part = StringField(block, "text");
    if ((type == "text" || type == "input_text" || type == "output_text") && !part.empty()) {
      if (!text.empty()) text += "\n";
      text += part;
    }
  }
  return text;
}

// What the host writes in the user's place: command echoes, notes and notifications.
bool IsCommandEcho(const std::string& text) {
  return text.rfind("<command-name>", 0) == 0 || text.rfind("<command-message>", 0) == 0;
}
bool IsHostNote(const std::string& text) {
  for (const char* prefix : {"<local-command", "Caveat: The messages below", "[Request interrupted",
                             "<task-notification>", "<system-reminder>", "<bash-input>",
                             "<bash-stdout>", "<bash-stderr>"}) {
    if (text.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Claude Code: {"type": "user"|"assistant", "message": {"role", "content"}}. Meta lines, the
// compaction summary, lines shown only in the transcript, side chains (a subagent's turns, in
// the parent's file), tool results and host notes are not turns.
Message ClaudeMessage(const json& line, bool subagent) {
  const std::string type = StringField(line, "type");
  auto message = line.find("message");
  if ((type != "user" && type != "assistant") || message == line.end() || !message->is_object()) {
    return {};
  }
  if (BoolField(line, "isMeta") || BoolField(line, "isCompactSummary") ||
      BoolField(line, "isVisibleInTranscriptOnly") ||
      (!subagent && BoolField(line, "isSidechain"))) {
    return {};
  }
  bool tool_result = false;
  auto content = message->find("content");
  std::string text = content == message->end() ? std::string() : TextOf(*content, &tool_result);
  if (tool_result || text.empty()) return {};
  if (type == "assistant") return {Role::kAssistant, std::move(text)};
  if (IsCommandEcho(text)) return {Role::kCommand, ""};
  if (IsHostNote(text)) return {};
  return {Role::kUser, std::move(text)};
}

// Codex: {"type": "event_msg", "payload": {"type": "user_message"|"agent_message",
// "message"}}; its response_item lines repeat these along with instructions and context.
Message CodexMessage(const json& line) {
  auto payload = line.find("payload");
  if (StringField(line, "type") != "event_msg" || payload == line.end() || !payload->is_object()) {
    return {};
  }
  const std::string type = StringField(*payload, "type");
  std::string text = StringField(*payload, "message");
  if (text.empty()) return {};
  if (type == "user_message") return {Role::kUser, std::move(text)};
  if (type == "agent_message") return {Role::kAssistant, std::move(text)};
  return {};
}

// The text parts of a Gemini CLI message, as one string (the parts of one prompt are joined as
// Gemini CLI joins them for its hooks), without what the host adds: a part of session context,
// and a part's hook context (a part that was nothing else is left out; one with the prompt after
// SessionStart's context under -p keeps the prompt). A function response is a tool's result,
// not something a person wrote.
std::string GeminiText(const json& content, bool* tool_result) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) return text;
  for (const auto& part : content) {
    if (!part.is_object()) continue;
    if (part.contains("functionResponse")) *tool_result = true;
    const std::string piece = StringField(part, "text");
    if (piece.starts_with("<session_context>")) continue;
    text += GeminiTypedPrompt(piece);
  }
  return text;
}

// Gemini CLI: {"id", "type": "user"|"gemini"|"info"|"error"|"warning", "content",
// "displayContent"?}. A user message's content is what went to the model, its displayContent
// (when it differs) what the user typed.
Message GeminiMessage(const json& line) {
  const std::string type = StringField(line, "type");
  if (type != "user" && type != "gemini") return {};
  auto content = line.find(type == "user" ? "displayContent" : "content");
  if (content == line.end()) content = line.find("content");
  if (content == line.end()) return {};
  bool tool_result = false;
  std::string text = GeminiText(*content, &tool_result);
  if (type == "gemini") return text.empty() ? Message{} : Message{Role::kAssistant, text};
  text = GeminiTypedPrompt(text);
  if (tool_result || text.empty()) return {};
  if (text.front() == '/') return {Role::kCommand, ""};
  return {Role::kUser, std::move(text)};
}

// Adds one message to the turns: a prompt or command starts a turn; an answer is the turn's
// last (`join_answers`: added on a line of its own, as Gemini CLI's AfterAgent joins them).
void AddMessage(std::vector<TranscriptTurn>& turns, Message m, bool join_answers) {
  if (m.role == Role::kUser || m.role == Role::kCommand) {
    turns.push_back({std::move(m.text), ""});
  } else if (m.role == Role::kAssistant) {
    if (turns.empty()) turns.push_back({"", ""});
    std::string& answer = turns.back().assistant;
    answer = join_answers && !answer.empty() ? answer + "\n" + m.text : std::move(m.text);
  }
}

// A Gemini CLI session's messages as its own loader keeps them: in order by id, a message
// written again under its id (with its token counts, its tool calls' status) replacing the
// earlier copy where that stood.
class GeminiMessages {
 public:
  void Put(const json& message) {
    const std::string id = StringField(message, "id");
    if (id.empty()) return;  // not a message
    auto [at, added] = index_.emplace(id, messages_.size());
    if (added) {
      messages_.push_back({id, GeminiMessage(message)});
    } else {
      messages_[at->second].second = GeminiMessage(message);
    }
  }
  // {"$rewindTo": id}: that message and every later one are gone (all of them for an unknown id).
  void RewindTo(const std::string& id) {
    auto at = index_.find(id);
    const size_t keep = at == index_.end() ? 0 : at->second;
    for (size_t i = keep; i < messages_.size(); ++i) index_.erase(messages_[i].first);
    messages_.resize(keep);
  }
  void Clear() {
    messages_.clear();
    index_.clear();
  }
  std::vector<TranscriptTurn> Turns() const {
    std::vector<TranscriptTurn> turns;
    for (const auto& [id, m] : messages_) AddMessage(turns, m, /*join_answers=*/true);
    return turns;
  }

 private:
  std::vector<std::pair<std::string, Message>> messages_;
  std::map<std::string, size_t> index_;
};

// One line of a Gemini CLI transcript: a message, {"$rewindTo": id}, or {"$set": {"messages":
// [...]}}, which replaces every message before it (a resumed session's history).
void AddGeminiLine(GeminiMessages& messages, const json& line) {
  if (auto rewind = line.find("$rewindTo"); rewind != line.end() && rewind->is_string()) {
    messages.RewindTo(rewind->get<std::string>());
    return;
  }
  auto set = line.find("$set");
  if (set == line.end()) {
    messages.Put(line);
    return;
  }
  if (!set->is_object()) return;
  auto list = set->find("messages");
  if (list == set->end() || !list->is_array()) return;
  messages.Clear();
  for (const json& message : *list) {
    if (message.is_object()) messages.Put(message);
  }
}

}  // namespace

Result<std::vector<TranscriptTurn>> ReadTranscript(Host host, const std::string& path,
                                                   bool subagent, size_t max_bytes) {
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
  GeminiMessages gemini;
  std::string line;
  while (std::getline(in, line)) {
    json value;
    if (!ReadJsonStrict(line, value, /*max_depth=*/64).ok || !value.is_object()) continue;
    if (host == Host::kGeminiCli) {
      AddGeminiLine(gemini, value);
      continue;
    }
    AddMessage(turns, host == Host::kCodex ? CodexMessage(value) : ClaudeMessage(value, subagent),
               /*join_answers=*/false);
  }
  return host == Host::kGeminiCli ? gemini.Turns() : turns;
}

std::set<std::string> GivenMemoryIds(const std::string& path, size_t max_bytes) {
  std::set<std::string> ids;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return ids;
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  in.seekg(start);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) return ids;
  // What came before the last compaction is no longer in the model's context, nor what Gemini
  // CLI's list of messages held before it was last set anew.
  size_t from = 0;
  for (const char* marker : {"\"isCompactSummary\":true", "\"compact_boundary\"",
                             "\"type\":\"compacted\"", "{\"$set\":{\"messages\""}) {
    if (const size_t at = text.rfind(marker); at != std::string::npos) from = std::max(from, at);
  }
  constexpr std::string_view kField = "memory_id=";
  for (size_t at = text.find(kField, from); at != std::string::npos;
       at = text.find(kField, at + 1)) {
    size_t end = at + kField.size();
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) {
      ++end;
    }
    if (end > at + kField.size())
      ids.insert("memory:" + text.substr(at + kField.size(), end - at - kField.size()));
  }
  return ids;
}

}  // namespace tmcra::hooks
