#include "setup/hooks_edit.h"

#include <algorithm>
#include <utility>

#include "setup/json_text.h"

namespace tmcra::setup {
namespace {

using ordered_json = nlohmann::ordered_json;

struct EventTimeout {
  const char* event;
  int timeout;  // in the host's unit
};

// hooks-contract: the events and timeouts per host (SessionEnd and Interrupt short, since the
// hosts allow them little time; SubagentStart and PostCompact are not installed).
const std::vector<EventTimeout>& ClaudeCodeEvents() {
  static const std::vector<EventTimeout> events = {
      {"SessionStart", 10}, {"UserPromptSubmit", 10}, {"Stop", 10},     {"StopFailure", 10},
      {"SubagentStop", 10}, {"PreCompact", 10},       {"SessionEnd", 2}};
  return events;
}

const std::vector<EventTimeout>& CodexEvents() {
  static const std::vector<EventTimeout> events = {
      {"SessionStart", 10}, {"UserPromptSubmit", 10}, {"Stop", 10},    {"SubagentStop", 10},
      {"PreCompact", 10},   {"SessionEnd", 2},        {"Interrupt", 2}};
  return events;
}

// Gemini CLI, in milliseconds. PreCompress is not installed: it runs before every model call.
const std::vector<EventTimeout>& GeminiCliEvents() {
  static const std::vector<EventTimeout> events = {
      {"SessionStart", 10000}, {"BeforeAgent", 10000}, {"AfterAgent", 10000}, {"SessionEnd", 2000}};
  return events;
}

const std::vector<EventTimeout>& EventsOf(std::string_view host) {
  if (host == "codex") return CodexEvents();
  if (host == "gemini-cli") return GeminiCliEvents();
  return ClaudeCodeEvents();
}

// The tool event installed with --observe-tools.
EventTimeout ObserveEvent(std::string_view host) {
  return host == "gemini-cli" ? EventTimeout{"AfterTool", 10000} : EventTimeout{"PostToolUse", 10};
}

// Events whose handlers of ours AddHooks brings to the wanted set (it never touches ours
// elsewhere).
bool ManagedEvent(std::string_view event) {
  auto named = [&](const EventTimeout& e) { return event == e.event; };
  for (const char* host : {"claude-code", "codex", "gemini-cli"}) {
    const auto& events = EventsOf(host);
    if (event == ObserveEvent(host).event || std::any_of(events.begin(), events.end(), named)) {
      return true;
    }
  }
  return false;
}

// The first `count` words of a shell command line ('...', "..." and \ understood).
std::vector<std::string> ShellWords(std::string_view command, size_t count) {
  std::vector<std::string> words;
  size_t i = 0;
  while (words.size() < count) {
    while (i < command.size() && (command[i] == ' ' || command[i] == '\t')) ++i;
    if (i >= command.size()) break;
    std::string word;
    while (i < command.size() && command[i] != ' ' && command[i] != '\t') {
      const char c = command[i++];
      if (c == '\'') {
        while (i < command.size() && command[i] != '\'') word += command[i++];
        ++i;
      } else if (c == '"') {
        while (i < command.size() && command[i] != '"') {
          if (command[i] == '\\' && i + 1 < command.size()) ++i;
          word += command[i++];
        }
        ++i;
      } else if (c == '\\' && i < command.size()) {
        word += command[i++];
      } else {
        word += c;
      }
    }
    words.push_back(std::move(word));
  }
  return words;
}

bool IsOurHandler(const ordered_json& handler) {
  if (!handler.is_object()) return false;
  auto command = handler.find("command");
  return command != handler.end() && command->is_string() &&
         IsOurHookCommand(command->get_ref<const std::string&>());
}

ordered_json HandlerJson(const HookHandler& hook) {
  ordered_json handler = ordered_json::object();
  if (!hook.name.empty()) handler["name"] = hook.name;
  handler["type"] = "command";
  handler["command"] = hook.command;
  handler["timeout"] = hook.timeout;
  return handler;
}

// A new group holding `hook`, with its matcher when it has one.
ordered_json GroupJson(const HookHandler& hook) {
  ordered_json group = ordered_json::object();
  if (hook.matcher) group["matcher"] = *hook.matcher;
  group["hooks"] = ordered_json::array({HandlerJson(hook)});
  return group;
}

// The "hooks" object of a document: nullptr when absent; an error when it is not an object.
Result<ordered_json*> HooksObject(ordered_json& doc) {
  auto hooks = doc.find("hooks");
  if (hooks == doc.end()) return static_cast<ordered_json*>(nullptr);
  if (!hooks->is_object()) return Error::Invalid("has a \"hooks\" that is not an object");
  return &*hooks;
}

// A group's handler list, when the group has the shape {"hooks": [...]}.
ordered_json* GroupHandlers(ordered_json& group) {
  if (!group.is_object()) return nullptr;
  auto handlers = group.find("hooks");
  if (handlers == group.end() || !handlers->is_array()) return nullptr;
  return &*handlers;
}

// Erases our handlers of one event's list for which `drop` says so; then the groups that this
// emptied. Returns whether anything was erased.
template <class Drop>
bool EraseOurs(ordered_json& groups, Drop drop) {
  bool erased = false;
  for (size_t g = groups.size(); g-- > 0;) {
    ordered_json* handlers = GroupHandlers(groups[g]);
    if (handlers == nullptr) continue;
    bool erased_here = false;
    for (size_t h = handlers->size(); h-- > 0;) {
      if (IsOurHandler((*handlers)[h]) && drop((*handlers)[h])) {
        handlers->erase(h);
        erased_here = true;
      }
    }
    if (erased_here && handlers->empty()) groups.erase(g);
    erased = erased || erased_here;
  }
  return erased;
}

// Erases, in every event, our handlers `drop` picks; then what this emptied (an event's list,
// the "hooks" object).
template <class Drop>
Status EraseOursEverywhere(ordered_json& doc, Drop drop) {
  auto hooks = HooksObject(doc);
  if (!hooks) return hooks.error();
  if (*hooks == nullptr) return Ok();
  std::vector<std::string> emptied;
  for (const auto& item : (*hooks)->items()) {
    const std::string& event = item.key();
    ordered_json& groups = item.value();
    if (!groups.is_array()) continue;
    if (EraseOurs(groups, [&](const ordered_json& h) { return drop(event, h); }) &&
        groups.empty()) {
      emptied.push_back(event);
    }
  }
  for (const std::string& event : emptied) (*hooks)->erase(event);
  if (!emptied.empty() && (*hooks)->empty()) doc.erase("hooks");
  return Ok();
}

// Sets our handler of `hook.event` (the first of ours in its list) to `hook`, or appends a group
// with it. Later handlers of ours in the event are dropped (each would run the hook again).
Status PlaceHook(ordered_json& doc, const HookHandler& hook) {
  if (!doc.contains("hooks")) doc["hooks"] = ordered_json::object();
  auto hooks = HooksObject(doc);
  if (!hooks) return hooks.error();
  ordered_json& all = **hooks;
  if (!all.contains(hook.event)) all[hook.event] = ordered_json::array();
  ordered_json& groups = all[hook.event];
  if (!groups.is_array()) {
    return Error::Invalid("has a \"hooks\".\"" + hook.event + "\" that is not a list");
  }
  bool placed = false;
  for (ordered_json& group : groups) {
    ordered_json* handlers = GroupHandlers(group);
    if (handlers == nullptr) continue;
    for (ordered_json& handler : *handlers) {
      if (!placed && IsOurHandler(handler)) {
        if (!hook.name.empty()) handler["name"] = hook.name;
        handler["type"] = "command";
        handler["command"] = hook.command;
        handler["timeout"] = hook.timeout;
        placed = true;
      }
    }
  }
  if (!placed) {
    groups.push_back(GroupJson(hook));
    return Ok();
  }
  // EraseOurs visits from the end: all but the last visited (the first in the file) go.
  size_t ours = 0;
  for (ordered_json& group : groups) {
    if (ordered_json* handlers = GroupHandlers(group)) {
      ours += static_cast<size_t>(std::count_if(handlers->begin(), handlers->end(), IsOurHandler));
    }
  }
  EraseOurs(groups, [&](const ordered_json&) { return --ours > 0; });
  return Ok();
}

StatusLine StatusLineOf(const ordered_json& doc) {
  StatusLine line;
  auto found = doc.find("statusLine");
  if (found == doc.end()) return line;
  line.present = true;
  if (found->is_object()) {
    auto command = found->find("command");
    if (command != found->end() && command->is_string()) {
      line.command = command->get<std::string>();
      line.ours = IsOurHookCommand(line.command);
    }
  }
  return line;
}

}  // namespace

bool HostHasHooks(std::string_view host) {
  return host == "claude-code" || host == "codex" || host == "gemini-cli";
}

std::vector<HookHandler> OurHooks(std::string_view host, std::string_view binary,
                                  bool observe_tools) {
  std::vector<HookHandler> hooks;
  if (!HostHasHooks(host)) return hooks;
  const bool gemini = host == "gemini-cli";
  auto handler = [&](const EventTimeout& e) {
    HookHandler hook;
    hook.event = e.event;
    hook.command = ShellQuote(binary) + " hook " + e.event + " --host " + std::string(host);
    hook.timeout = e.timeout;
    if (gemini) {
      hook.command += " 2>/dev/null || true";
      hook.name = std::string("tmcra-") + e.event;
      hook.matcher = "*";
    }
    return hook;
  };
  for (const EventTimeout& e : EventsOf(host)) hooks.push_back(handler(e));
  if (observe_tools) hooks.push_back(handler(ObserveEvent(host)));
  return hooks;
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string StatusLineCommand(std::string_view binary) {
  return ShellQuote(binary) + " statusline";
}

bool IsOurHookCommand(std::string_view command) {
  const std::vector<std::string> words = ShellWords(command, 2);
  if (words.size() < 2 || (words[1] != "hook" && words[1] != "statusline")) return false;
  const std::string& program = words[0];
  const size_t slash = program.rfind('/');
  return program.substr(slash == std::string::npos ? 0 : slash + 1) == "tmcra-mcp";
}

Result<HooksEdited> AddHooks(std::string_view text, const std::vector<HookHandler>& hooks,
                             const std::optional<std::string>& statusline) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  const ordered_json before = *doc;
  auto unwanted = [&](const std::string& event, const ordered_json&) {
    return ManagedEvent(event) &&
           std::none_of(hooks.begin(), hooks.end(),
                        [&](const HookHandler& h) { return h.event == event; });
  };
  if (auto s = EraseOursEverywhere(*doc, unwanted); !s) return s.error();
  for (const HookHandler& hook : hooks) {
    if (auto s = PlaceHook(*doc, hook); !s) return s.error();
  }
  HooksEdited edited;
  if (statusline) {
    const StatusLine current = StatusLineOf(*doc);
    if (current.present && !current.ours) {
      edited.foreign_statusline = true;
    } else {
      (*doc)["statusLine"] = {{"type", "command"}, {"command", *statusline}};
    }
  }
  if (*doc == before) {
    edited.text = std::string(text);
    return edited;
  }
  auto out = DumpJsonConfig(*doc, text);
  if (!out) return out.error();
  edited.text = std::move(*out);
  edited.outcome = before.contains("hooks") ? EditOutcome::kUpdated : EditOutcome::kAdded;
  return edited;
}

Result<Edited> RemoveHooks(std::string_view text) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  const ordered_json before = *doc;
  if (auto s =
          EraseOursEverywhere(*doc, [](const std::string&, const ordered_json&) { return true; });
      !s) {
    return s.error();
  }
  if (StatusLineOf(*doc).ours) doc->erase("statusLine");
  if (*doc == before) return Edited{std::string(text), EditOutcome::kAbsent};
  auto out = DumpJsonConfig(*doc, text);
  if (!out) return out.error();
  return Edited{std::move(*out), EditOutcome::kRemoved};
}

Result<std::vector<FoundHook>> FindOurHooks(std::string_view text) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  auto hooks = HooksObject(*doc);
  if (!hooks) return hooks.error();
  std::vector<FoundHook> found;
  if (*hooks == nullptr) return found;
  for (auto& [event, groups] : (*hooks)->items()) {
    if (!groups.is_array()) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      ordered_json* handlers = GroupHandlers(groups[g]);
      if (handlers == nullptr) continue;
      for (size_t h = 0; h < handlers->size(); ++h) {
        const ordered_json& handler = (*handlers)[h];
        if (!IsOurHandler(handler)) continue;
        FoundHook hook{event, handler["command"].get<std::string>(), 0, "", g, h};
        auto timeout = handler.find("timeout");
        if (timeout != handler.end() && timeout->is_number_integer()) {
          hook.timeout = timeout->get<int>();
        }
        auto name = handler.find("name");
        if (name != handler.end() && name->is_string()) hook.name = name->get<std::string>();
        found.push_back(std::move(hook));
      }
    }
  }
  return found;
}

Result<StatusLine> FindStatusLine(std::string_view text) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  return StatusLineOf(*doc);
}

Result<bool> AllHooksDisabled(std::string_view host, std::string_view text) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  if (host == "claude-code") {
    auto flag = doc->find("disableAllHooks");
    return flag != doc->end() && flag->is_boolean() && flag->get<bool>();
  }
  if (host != "gemini-cli") return false;
  auto config = doc->find("hooksConfig");
  if (config == doc->end() || !config->is_object()) return false;
  auto enabled = config->find("enabled");
  return enabled != config->end() && enabled->is_boolean() && !enabled->get<bool>();
}

Result<std::vector<std::string>> DisabledHookNames(std::string_view text) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  std::vector<std::string> names;
  auto config = doc->find("hooksConfig");
  if (config == doc->end() || !config->is_object()) return names;
  auto disabled = config->find("disabled");
  if (disabled == config->end() || !disabled->is_array()) return names;
  for (const auto& name : *disabled) {
    if (name.is_string()) names.push_back(name.get<std::string>());
  }
  return names;
}

std::string SnakeCaseEvent(std::string_view event) {
  std::string out;
  for (const char c : event) {
    if (c >= 'A' && c <= 'Z') {
      if (!out.empty()) out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tmcra::setup
