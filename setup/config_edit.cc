#include "setup/config_edit.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "setup/json_text.h"

namespace tmcra::setup {
namespace {

using ordered_json = nlohmann::ordered_json;

// [A-Za-z0-9_-]: the characters of a TOML bare key (ASCII only, whatever the locale).
bool IsBareKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// ---------------------------------------------------------------------------------------------
// JSON

const char* ContainerKey(ConfigFormat format) {
  return format == ConfigFormat::kJsonServers ? "servers" : "mcpServers";
}

Result<Edited> AddJson(std::string_view text, ConfigFormat format, const ServerEntry& entry) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  const ordered_json before = *doc;
  const char* key = ContainerKey(format);
  if (!doc->contains(key)) (*doc)[key] = ordered_json::object();
  ordered_json& servers = (*doc)[key];
  if (!servers.is_object()) {
    return Error::Invalid(std::string("has a \"") + key + "\" that is not an object");
  }
  const bool existed = servers.contains(entry.name);
  ordered_json& server = servers[entry.name];
  if (existed && !server.is_object()) {
    return Error::Invalid(std::string("has a \"") + key + "\".\"" + entry.name +
                          "\" that is not an object");
  }
  if (!existed) server = ordered_json::object();
  if (entry.typed) server["type"] = "stdio";
  server["command"] = entry.command;
  server["args"] = ordered_json::array();
  if (!entry.env.empty() || !entry.env_if_absent.empty()) {
    ordered_json& env = server["env"];
    if (env.is_null()) env = ordered_json::object();
    if (!env.is_object()) {
      return Error::Invalid(std::string("has a \"") + key + "\".\"" + entry.name +
                            "\".\"env\" that is not an object");
    }
    for (const auto& [name, value] : entry.env) env[name] = value;
    for (const auto& [name, value] : entry.env_if_absent) {
      if (!env.contains(name)) env[name] = value;
    }
  }
  if (*doc == before) return Edited{std::string(text), EditOutcome::kUnchanged};
  auto out = DumpJsonConfig(*doc, text);
  if (!out) return out.error();
  return Edited{std::move(*out), existed ? EditOutcome::kUpdated : EditOutcome::kAdded};
}

Result<Edited> RemoveJson(std::string_view text, ConfigFormat format, std::string_view name) {
  auto doc = ParseJsonConfig(text);
  if (!doc) return doc.error();
  const char* key = ContainerKey(format);
  auto servers = doc->find(key);
  if (servers == doc->end() || !servers->is_object() || !servers->contains(name)) {
    return Edited{std::string(text), EditOutcome::kAbsent};
  }
  servers->erase(servers->find(name));
  auto out = DumpJsonConfig(*doc, text);
  if (!out) return out.error();
  return Edited{std::move(*out), EditOutcome::kRemoved};
}

Result<Registration> FindJson(std::string_view text, ConfigFormat format, std::string_view name) {
  // Reading only: comments (JSONC) are fine here.
  ordered_json parsed = ordered_json::object();
  if (!IsBlankText(text)) {
    parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false,
                                 /*ignore_comments=*/true);
    if (parsed.is_discarded()) return ParseJsonConfig(text).error();
    if (!parsed.is_object()) return Error::Invalid("is not a JSON object at the top level");
  }
  const ordered_json* doc = &parsed;
  Registration reg;
  auto servers = doc->find(ContainerKey(format));
  if (servers == doc->end() || !servers->is_object()) return reg;
  auto server = servers->find(name);
  if (server == servers->end()) return reg;
  reg.present = true;
  if (server->is_object()) {
    auto command = server->find("command");
    if (command != server->end() && command->is_string()) reg.command = command->get<std::string>();
  }
  return reg;
}

std::string JsonSnippet(ConfigFormat format, const ServerEntry& entry) {
  ordered_json server = ordered_json::object();
  if (entry.typed) server["type"] = "stdio";
  server["command"] = entry.command;
  server["args"] = ordered_json::array();
  for (const auto& [name, value] : entry.env) server["env"][name] = value;
  for (const auto& [name, value] : entry.env_if_absent) server["env"][name] = value;
  ordered_json doc = {{ContainerKey(format), {{entry.name, server}}}};
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------------------------------------
// TOML (Codex)

std::string TomlString(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// A key as TOML writes it: bare when it can be, else a basic string.
std::string TomlKey(std::string_view key) {
  if (!key.empty() && std::all_of(key.begin(), key.end(), IsBareKeyChar)) return std::string(key);
  return TomlString(key);
}

using StringPairs = std::vector<std::pair<std::string, std::string>>;

// `{ A = "x", B = "y" }`.
std::string TomlInlineTable(const StringPairs& pairs) {
  std::string out = "{ ";
  for (size_t i = 0; i < pairs.size(); ++i) {
    out += (i > 0 ? ", " : "") + TomlKey(pairs[i].first) + " = " + TomlString(pairs[i].second);
  }
  return out + " }";
}

// One item a line, as a person would keep a long list.
std::string TomlStringArray(const std::vector<std::string>& items, const char* nl) {
  std::string out = "[";
  out += nl;
  for (const std::string& item : items) out += "  " + TomlString(item) + "," + nl;
  return out + "]";
}

Result<toml::table> ParseToml(std::string_view text) {
  try {
    return toml::parse(text, std::string_view("config.toml"));
  } catch (const toml::parse_error& e) {
    // The description names what was expected, never the text; the position is ours.
    return Error::Invalid("is not valid TOML (at line " + std::to_string(e.source().begin.line) +
                          ", column " + std::to_string(e.source().begin.column) + ")");
  }
}

// Byte offsets of the starts of lines (offsets[0] = 0 for line 1).
std::vector<size_t> LineStarts(std::string_view text) {
  std::vector<size_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') starts.push_back(i + 1);
  }
  return starts;
}

// The byte offset of a parser position (1-based line; 1-based column in code points).
std::optional<size_t> Offset(std::string_view text, const std::vector<size_t>& starts,
                             toml::source_position pos) {
  if (pos.line < 1 || pos.line > starts.size() || pos.column < 1) return std::nullopt;
  size_t at = starts[pos.line - 1];
  for (uint32_t col = 1; col < pos.column; ++col) {
    if (at >= text.size()) return std::nullopt;
    ++at;
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  }
  return at;
}

struct Splice {
  size_t from;
  size_t to;
  std::string with;
};

std::string Apply(std::string_view text, std::vector<Splice> splices) {
  std::sort(splices.begin(), splices.end(),
            [](const Splice& a, const Splice& b) { return a.from > b.from; });
  std::string out(text);
  for (const Splice& s : splices) out.replace(s.from, s.to - s.from, s.with);
  return out;
}

const char* LineEnding(std::string_view text) {
  return text.find("\r\n") != std::string_view::npos ? "\r\n" : "\n";
}

// The table `mcp_servers.<name>` of a parsed document: nullptr when absent; an error when
// `mcp_servers` or the entry is there but not a table.
Result<const toml::table*> CodexServer(const toml::table& doc, std::string_view name) {
  const toml::node* servers = doc.get("mcp_servers");
  if (servers == nullptr) return static_cast<const toml::table*>(nullptr);
  if (!servers->is_table()) return Error::Invalid("has an \"mcp_servers\" that is not a table");
  const toml::node* server = servers->as_table()->get(name);
  if (server == nullptr) return static_cast<const toml::table*>(nullptr);
  if (!server->is_table()) {
    return Error::Invalid("has an \"mcp_servers." + std::string(name) + "\" that is not a table");
  }
  return server->as_table();
}

// The expected document, parsed, must equal the edited one; otherwise the edit went somewhere
// else than meant (dotted keys, an inline table) and is refused.
Status CheckTomlEdit(const std::string& edited, const toml::table& expected) {
  auto parsed = ParseToml(edited);
  if (!parsed || *parsed != expected) {
    return Error::Invalid(
        "defines its mcp_servers in a way this tool does not edit (an inline table or dotted "
        "keys)");
  }
  return Ok();
}

// The splice replacing a value where the parser found it.
Result<Splice> ReplaceValue(std::string_view text, const std::vector<size_t>& starts,
                            const toml::node& node, std::string with) {
  const auto from = Offset(text, starts, node.source().begin);
  const auto to = Offset(text, starts, node.source().end);
  if (!from || !to || *to < *from) return Error::Invalid("could not be edited (positions)");
  return Splice{*from, *to, std::move(with)};
}

// The start of the line after a table's own header line (its `[...]`).
Result<size_t> AfterHeader(std::string_view text, const std::vector<size_t>& starts,
                           const toml::table& table) {
  const auto header = Offset(text, starts, table.source().begin);
  if (table.is_inline() || !header || *header >= text.size() || text[*header] != '[') {
    return Error::Invalid("has a table without its own header line (dotted keys)");
  }
  const size_t line = table.source().begin.line;
  return line < starts.size() ? starts[line] : text.size();
}

// Sets `env`'s variables in an existing server table: a new `env = {...}` line (into
// `inserted`), the inline table written again, or lines under `[mcp_servers.<name>.env]`.
Status EditTomlEnv(std::string_view text, const std::vector<size_t>& starts,
                   const toml::table& server, const StringPairs& env, const char* nl,
                   toml::table& expected_server, std::string& inserted,
                   std::vector<Splice>& splices) {
  if (env.empty()) return Ok();
  const toml::node* node = server.get("env");
  if (node != nullptr && !node->is_table()) return Error::Invalid("has an env that is not a table");
  toml::table expected = node != nullptr ? *node->as_table() : toml::table{};
  for (const auto& [name, value] : env) expected.insert_or_assign(name, value);
  if (node == nullptr) {
    inserted += "env = " + TomlInlineTable(env) + nl;
  } else if (expected != *node->as_table()) {
    const toml::table& current = *node->as_table();
    if (current.is_inline()) {
      StringPairs all;
      for (const auto& [name, value] : current) {
        auto text_value = value.value<std::string>();
        if (!text_value) return Error::Invalid("has an env value that is not a string");
        all.emplace_back(std::string(name.str()), *text_value);
      }
      for (const auto& pair : env) {
        auto same = std::find_if(all.begin(), all.end(),
                                 [&](const auto& p) { return p.first == pair.first; });
        if (same != all.end()) {
          same->second = pair.second;
        } else {
          all.push_back(pair);
        }
      }
      auto splice = ReplaceValue(text, starts, *node, TomlInlineTable(all));
      if (!splice) return splice.error();
      splices.push_back(std::move(*splice));
    } else {
      auto after = AfterHeader(text, starts, current);
      if (!after) return after.error();
      std::string lines;
      for (const auto& [name, value] : env) {
        if (const toml::node* old = current.get(name)) {
          auto splice = ReplaceValue(text, starts, *old, TomlString(value));
          if (!splice) return splice.error();
          splices.push_back(std::move(*splice));
        } else {
          lines += TomlKey(name) + " = " + TomlString(value) + nl;
        }
      }
      if (!lines.empty()) {
        if (*after == text.size() && !text.empty() && text.back() != '\n') lines = nl + lines;
        splices.push_back({*after, *after, lines});
      }
    }
  }
  expected_server.insert_or_assign("env", std::move(expected));
  return Ok();
}

// A new `[mcp_servers.<name>]` table for `entry`, appended to `text` after a blank line; its
// keys are also set in `exp`, the server's table of the expected document.
std::string AppendTomlServer(std::string_view text, const ServerEntry& entry, const char* nl,
                             toml::table& exp) {
  exp.insert_or_assign("command", entry.command);
  std::string block = "[mcp_servers." + entry.name + "]" + nl;
  block += "command = " + TomlString(entry.command) + nl;
  if (!entry.env_vars.empty()) {
    toml::array env_vars;
    for (const auto& v : entry.env_vars) env_vars.push_back(v);
    exp.insert_or_assign("env_vars", std::move(env_vars));
    block += "env_vars = " + TomlStringArray(entry.env_vars, nl) + nl;
  }
  if (entry.tool_timeout_sec > 0) {
    exp.insert_or_assign("tool_timeout_sec", static_cast<int64_t>(entry.tool_timeout_sec));
    block += "tool_timeout_sec = " + std::to_string(entry.tool_timeout_sec) + nl;
  }
  if (!entry.env.empty()) {
    toml::table env;
    for (const auto& [name, value] : entry.env) env.insert_or_assign(name, value);
    exp.insert_or_assign("env", std::move(env));
    block += "env = " + TomlInlineTable(entry.env) + nl;
  }
  std::string edited(text);
  if (!IsBlankText(edited)) {
    if (edited.back() != '\n') edited += nl;
    edited += nl;
  } else {
    edited.clear();
  }
  edited += block;
  return edited;
}

// Brings an existing server table's command, args, env_vars and tool_timeout_sec to `entry`:
// replaced values into `splices`, new lines under its header into `inserted`, and the keys
// into `exp`, the server's table of the expected document. env_vars and tool_timeout_sec the
// user already set are kept.
Status EditTomlKeys(std::string_view text, const std::vector<size_t>& starts,
                    const toml::table& table, const ServerEntry& entry, const char* nl,
                    toml::table& exp, std::string& inserted, std::vector<Splice>& splices) {
  if (const toml::node* command = table.get("command")) {
    if (command->value<std::string>() != entry.command) {
      TMCRA_ASSIGN_OR_RETURN(Splice splice,
                             ReplaceValue(text, starts, *command, TomlString(entry.command)));
      splices.push_back(std::move(splice));
    }
  } else {
    inserted += "command = " + TomlString(entry.command) + nl;
  }
  exp.insert_or_assign("command", entry.command);
  if (const toml::node* args = table.get("args")) {
    const toml::array* list = args->as_array();
    if (list == nullptr || !list->empty()) {
      TMCRA_ASSIGN_OR_RETURN(Splice splice, ReplaceValue(text, starts, *args, "[]"));
      splices.push_back(std::move(splice));
      exp.insert_or_assign("args", toml::array{});
    }
  }
  if (!table.contains("env_vars") && !entry.env_vars.empty()) {
    inserted += "env_vars = " + TomlStringArray(entry.env_vars, nl) + nl;
    toml::array env_vars;
    for (const auto& v : entry.env_vars) env_vars.push_back(v);
    exp.insert_or_assign("env_vars", std::move(env_vars));
  }
  if (!table.contains("tool_timeout_sec") && entry.tool_timeout_sec > 0) {
    inserted += "tool_timeout_sec = " + std::to_string(entry.tool_timeout_sec) + nl;
    exp.insert_or_assign("tool_timeout_sec", static_cast<int64_t>(entry.tool_timeout_sec));
  }
  return Ok();
}

// The splices that bring the existing server table `table` to `entry` (none when it already
// matches); its keys are also set in `exp`, the server's table of the expected document.
Result<std::vector<Splice>> UpdateTomlServer(std::string_view text, const toml::table& table,
                                             const ServerEntry& entry, const char* nl,
                                             toml::table& exp) {
  const std::vector<size_t> starts = LineStarts(text);
  // The table must have its own header line, `[mcp_servers.<name>]`.
  const auto header = Offset(text, starts, table.source().begin);
  if (table.is_inline() || !header || *header >= text.size() || text[*header] != '[') {
    return Error::Invalid("defines mcp_servers." + entry.name + " inline or with dotted keys");
  }
  std::vector<Splice> splices;
  std::string inserted;  // new lines under the header
  TMCRA_RETURN_IF_ERROR(EditTomlKeys(text, starts, table, entry, nl, exp, inserted, splices));
  TMCRA_RETURN_IF_ERROR(EditTomlEnv(text, starts, table, entry.env, nl, exp, inserted, splices));
  if (!inserted.empty()) {
    // Right after the header line.
    const size_t line = table.source().begin.line;
    size_t at = line < starts.size() ? starts[line] : text.size();
    std::string prefix;
    if (line >= starts.size() && (text.empty() || text.back() != '\n')) prefix = nl;
    splices.push_back({at, at, prefix + inserted});
  }
  return splices;
}

Result<Edited> AddToml(std::string_view text, const ServerEntry& entry) {
  TMCRA_ASSIGN_OR_RETURN(const toml::table doc, ParseToml(text));
  TMCRA_ASSIGN_OR_RETURN(const toml::table* server, CodexServer(doc, entry.name));
  const char* nl = LineEnding(text);

  // The document as it must read after the edit.
  toml::table expected = doc;
  if (!expected.contains("mcp_servers")) expected.insert("mcp_servers", toml::table{});
  toml::table& exp_servers = *expected["mcp_servers"].as_table();
  if (!exp_servers.contains(entry.name)) exp_servers.insert(entry.name, toml::table{});
  toml::table& exp = *exp_servers[entry.name].as_table();

  std::string edited;
  EditOutcome outcome;
  if (server == nullptr) {
    edited = AppendTomlServer(text, entry, nl, exp);
    outcome = EditOutcome::kAdded;
  } else {
    TMCRA_ASSIGN_OR_RETURN(std::vector<Splice> splices,
                           UpdateTomlServer(text, *server, entry, nl, exp));
    if (splices.empty()) return Edited{std::string(text), EditOutcome::kUnchanged};
    edited = Apply(text, std::move(splices));
    outcome = EditOutcome::kUpdated;
  }
  TMCRA_RETURN_IF_ERROR(CheckTomlEdit(edited, expected));
  return Edited{std::move(edited), outcome};
}

// The line of a table header `[a.b...]` (or `[[a.b]]`) at the start of a line, parsed into its
// dotted key; nullopt for any other line. Quoted keys are unquoted (basic strings without
// escapes, literal strings).
std::optional<std::vector<std::string>> HeaderKey(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i >= line.size() || line[i] != '[') return std::nullopt;
  ++i;
  if (i < line.size() && line[i] == '[') ++i;
  std::vector<std::string> key;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) return std::nullopt;
    std::string part;
    if (line[i] == '"' || line[i] == '\'') {
      const char q = line[i++];
      while (i < line.size() && line[i] != q) {
        if (q == '"' && line[i] == '\\') return std::nullopt;  // escapes: not ours to guess
        part += line[i++];
      }
      if (i >= line.size()) return std::nullopt;
      ++i;
    } else {
      while (i < line.size() && IsBareKeyChar(line[i])) part += line[i++];
      if (part.empty()) return std::nullopt;
    }
    key.push_back(std::move(part));
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '.') {
      ++i;
      continue;
    }
    if (i < line.size() && line[i] == ']') return key;
    return std::nullopt;
  }
}

// The text without the tables whose header key `ours` picks. A table is every line from its
// header to its last key or header before the next header that is not ours; comments and blank
// lines after that belong to what follows and stay. Where a table was cut out, one blank line is
// dropped if two would meet (at the end of the file: the one before it, which adding the table
// put there). No other line changes.
template <class Ours>
std::string DropTables(std::string_view text, Ours ours_key) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  auto ours = [&](size_t l) {
    auto key = HeaderKey(lines[l]);
    return key && ours_key(*key);
  };
  auto blank_or_comment = [](std::string_view line) {
    const size_t at = line.find_first_not_of(" \t\r\n");
    return at == std::string_view::npos || line[at] == '#';
  };
  const size_t n = lines.size();
  std::vector<bool> drop(n, false);
  for (size_t l = 0; l < n;) {
    if (!ours(l)) {
      ++l;
      continue;
    }
    size_t last = l;
    size_t k = l + 1;
    for (; k < n; ++k) {
      if (HeaderKey(lines[k])) {
        if (!ours(k)) break;
        last = k;
      } else if (!blank_or_comment(lines[k])) {
        last = k;
      }
    }
    for (size_t i = l; i <= last; ++i) drop[i] = true;
    const size_t after = last + 1;
    const bool blank_before = l > 0 && !drop[l - 1] && IsBlankText(lines[l - 1]);
    if (after == n) {
      if (blank_before) drop[l - 1] = true;
    } else if (IsBlankText(lines[after]) && (blank_before || l == 0)) {
      drop[after] = true;
    }
    l = k;
  }
  std::string tidy;
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) tidy += lines[i];
  }
  return tidy;
}

// A table that only our header made (`[mcp_servers.x]` makes `mcp_servers`) is gone with the
// header, not empty: the expected document drops `path` when it is empty there and absent from
// the edited text.
void PruneImplicit(toml::table& expected, const std::string& tidy,
                   const std::vector<std::string>& path) {
  auto parsed = ParseToml(tidy);
  if (!parsed) return;
  for (size_t depth = path.size(); depth-- > 0;) {
    toml::table* parent = &expected;
    const toml::table* edited = &*parsed;
    for (size_t i = 0; i < depth && parent != nullptr; ++i) {
      parent = parent->get_as<toml::table>(path[i]);
      edited = edited != nullptr ? edited->get_as<toml::table>(path[i]) : nullptr;
    }
    if (parent == nullptr) continue;
    const toml::table* table = parent->get_as<toml::table>(path[depth]);
    const bool in_edited = edited != nullptr && edited->contains(path[depth]);
    if (table != nullptr && table->empty() && !in_edited) parent->erase(path[depth]);
  }
}

Result<Edited> RemoveToml(std::string_view text, std::string_view name) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto server = CodexServer(*doc, name);
  if (!server) return server.error();
  if (*server == nullptr) return Edited{std::string(text), EditOutcome::kAbsent};
  toml::table expected = *doc;
  expected["mcp_servers"].as_table()->erase(name);
  std::string tidy = DropTables(text, [&](const std::vector<std::string>& key) {
    return key.size() >= 2 && key[0] == "mcp_servers" && key[1] == name;
  });
  PruneImplicit(expected, tidy, {"mcp_servers"});
  if (auto s = CheckTomlEdit(tidy, expected); !s) return s.error();
  return Edited{std::move(tidy), EditOutcome::kRemoved};
}

// `hooks.state` of a parsed config.toml: nullptr when absent; an error when not tables.
Result<const toml::table*> HookStates(const toml::table& doc) {
  const toml::node* hooks = doc.get("hooks");
  if (hooks == nullptr) return static_cast<const toml::table*>(nullptr);
  if (!hooks->is_table()) return Error::Invalid("has a \"hooks\" that is not a table");
  const toml::node* state = hooks->as_table()->get("state");
  if (state == nullptr) return static_cast<const toml::table*>(nullptr);
  if (!state->is_table()) return Error::Invalid("has a \"hooks.state\" that is not a table");
  return state->as_table();
}

Status CheckTrustEdit(const std::string& edited, const toml::table& expected) {
  auto parsed = ParseToml(edited);
  if (!parsed || *parsed != expected) {
    return Error::Invalid(
        "defines hooks.state in a way this tool does not edit (an inline table "
        "or dotted keys)");
  }
  return Ok();
}

Result<Edited> SetTrust(std::string_view text, const std::vector<HookTrust>& trusts) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto states = HookStates(*doc);
  if (!states) return states.error();
  const char* nl = LineEnding(text);
  const std::vector<size_t> starts = LineStarts(text);
  toml::table expected = *doc;
  if (!expected.contains("hooks")) expected.insert("hooks", toml::table{});
  toml::table& exp_hooks = *expected["hooks"].as_table();
  if (!exp_hooks.contains("state")) exp_hooks.insert("state", toml::table{});
  toml::table& exp_states = *exp_hooks["state"].as_table();
  std::vector<Splice> splices;
  std::string appended;
  for (const HookTrust& trust : trusts) {
    const toml::node* node = *states != nullptr ? (*states)->get(trust.key) : nullptr;
    if (node != nullptr && !node->is_table()) {
      return Error::Invalid("has a hooks.state entry that is not a table");
    }
    toml::table exp = node != nullptr ? *node->as_table() : toml::table{};
    exp.insert_or_assign("trusted_hash", trust.hash);
    exp_states.insert_or_assign(trust.key, std::move(exp));
    if (node == nullptr) {
      appended += std::string(nl) + "[hooks.state." + TomlString(trust.key) + "]" + nl +
                  "trusted_hash = " + TomlString(trust.hash) + nl;
      continue;
    }
    const toml::table& table = *node->as_table();
    if (const toml::node* hash = table.get("trusted_hash")) {
      if (hash->value<std::string>() == trust.hash) continue;
      auto splice = ReplaceValue(text, starts, *hash, TomlString(trust.hash));
      if (!splice) return splice.error();
      splices.push_back(std::move(*splice));
    } else {
      auto after = AfterHeader(text, starts, table);
      if (!after) return after.error();
      std::string line = "trusted_hash = " + TomlString(trust.hash) + nl;
      if (*after == text.size() && !text.empty() && text.back() != '\n') line = nl + line;
      splices.push_back({*after, *after, line});
    }
  }
  if (splices.empty() && appended.empty())
    return Edited{std::string(text), EditOutcome::kUnchanged};
  std::string edited = Apply(text, std::move(splices));
  if (!appended.empty()) {
    if (IsBlankText(edited)) {
      edited = appended.substr(std::string_view(nl).size());
    } else {
      if (edited.back() != '\n') edited += nl;
      edited += appended;
    }
  }
  if (auto s = CheckTrustEdit(edited, expected); !s) return s.error();
  return Edited{std::move(edited),
                *states != nullptr ? EditOutcome::kUpdated : EditOutcome::kAdded};
}

Result<Edited> RemoveTrust(std::string_view text, const std::vector<std::string>& keys) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto states = HookStates(*doc);
  if (!states) return states.error();
  toml::table expected = *doc;
  bool any = false;
  for (const std::string& key : keys) {
    if (*states == nullptr || !(*states)->contains(key)) continue;
    expected["hooks"]["state"].as_table()->erase(key);
    any = true;
  }
  if (!any) return Edited{std::string(text), EditOutcome::kAbsent};
  std::string tidy = DropTables(text, [&](const std::vector<std::string>& key) {
    return key.size() == 3 && key[0] == "hooks" && key[1] == "state" &&
           std::find(keys.begin(), keys.end(), key[2]) != keys.end();
  });
  PruneImplicit(expected, tidy, {"hooks", "state"});
  if (auto s = CheckTrustEdit(tidy, expected); !s) return s.error();
  return Edited{std::move(tidy), EditOutcome::kRemoved};
}

Result<Registration> FindToml(std::string_view text, std::string_view name) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto server = CodexServer(*doc, name);
  if (!server) return server.error();
  Registration reg;
  if (*server == nullptr) return reg;
  reg.present = true;
  if (auto command = (*server)->get_as<std::string>("command")) reg.command = command->get();
  return reg;
}

std::string TomlSnippet(const ServerEntry& entry) {
  std::string out =
      "[mcp_servers." + entry.name + "]\ncommand = " + TomlString(entry.command) + "\n";
  if (!entry.env_vars.empty()) out += "env_vars = " + TomlStringArray(entry.env_vars, "\n") + "\n";
  if (entry.tool_timeout_sec > 0) {
    out += "tool_timeout_sec = " + std::to_string(entry.tool_timeout_sec) + "\n";
  }
  if (!entry.env.empty()) out += "env = " + TomlInlineTable(entry.env) + "\n";
  return out;
}

}  // namespace

bool IsValidServerName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), IsBareKeyChar);
}

Result<Edited> AddServer(std::string_view text, ConfigFormat format, const ServerEntry& entry) {
  if (!IsValidServerName(entry.name)) return Error::Invalid("invalid server name");
  if (format == ConfigFormat::kCodexToml) return AddToml(text, entry);
  return AddJson(text, format, entry);
}

Result<Edited> RemoveServer(std::string_view text, ConfigFormat format, std::string_view name) {
  if (!IsValidServerName(name)) return Error::Invalid("invalid server name");
  if (format == ConfigFormat::kCodexToml) return RemoveToml(text, name);
  return RemoveJson(text, format, name);
}

Result<Registration> FindServer(std::string_view text, ConfigFormat format, std::string_view name) {
  if (format == ConfigFormat::kCodexToml) return FindToml(text, name);
  return FindJson(text, format, name);
}

Result<Edited> SetHookTrust(std::string_view text, const std::vector<HookTrust>& trusts) {
  return SetTrust(text, trusts);
}

Result<Edited> RemoveHookTrust(std::string_view text, const std::vector<std::string>& keys) {
  return RemoveTrust(text, keys);
}

Result<bool> CodexHooksDisabled(std::string_view text) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  for (const char* flag : {"hooks", "codex_hooks"}) {
    if (doc->at_path(std::string("features.") + flag).value<bool>() == false) return true;
  }
  return false;
}

std::string EntrySnippet(ConfigFormat format, const ServerEntry& entry) {
  if (format == ConfigFormat::kCodexToml) return TomlSnippet(entry);
  return JsonSnippet(format, entry);
}

}  // namespace tmcra::setup
