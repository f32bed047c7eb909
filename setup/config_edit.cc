#include "setup/config_edit.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace tmcra::setup {
namespace {

using ordered_json = nlohmann::ordered_json;

// [A-Za-z0-9_-]: the characters of a TOML bare key (ASCII only, whatever the locale).
bool IsBareKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool IsBlank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// "line L, column C" of a byte offset (1-based, columns in bytes).
std::string Where(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// ---------------------------------------------------------------------------------------------
// JSON

const char* ContainerKey(ConfigFormat format) {
  return format == ConfigFormat::kJsonServers ? "servers" : "mcpServers";
}

// What writing the parsed document back would lose, found before it is written: a key given
// twice (the parser keeps one of them) and an integer too large for 64 bits (it becomes a
// floating-point number). Such a file is refused rather than changed beyond our entry.
class LossCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos && problem.empty()) {
      problem = "has an integer too large to be written back exactly";
    }
    return true;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.empty() && !keys_.back().insert(k).second && problem.empty()) {
      problem = "has a key given twice in one object";
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.emplace_back();  // arrays have no keys; keeps the stack in step
    return true;
  }
  bool end_array() override {
    keys_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  std::vector<std::set<std::string>> keys_;
};

Result<ordered_json> ParseJsonConfig(std::string_view text) {
  if (IsBlank(text)) return ordered_json::object();
  ordered_json doc;
  try {
    doc = ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // The exception's own message quotes the text it read: only its position is used.
    const bool with_comments =
        !ordered_json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true)
             .is_discarded();
    if (with_comments) {
      return Error::Invalid("has comments, which rewriting it would drop");
    }
    return Error::Invalid("is not valid JSON (at " + Where(text, e.byte > 0 ? e.byte - 1 : 0) +
                          ")");
  }
  if (!doc.is_object()) return Error::Invalid("is not a JSON object at the top level");
  LossCheck check;
  nlohmann::json::sax_parse(text, &check);
  if (!check.problem.empty()) return Error::Invalid(check.problem);
  return doc;
}

// The indent of the first indented line (a tab, or that many spaces); 2 when there is none.
std::pair<int, char> DetectIndent(std::string_view text) {
  for (size_t i = text.find('\n'); i != std::string_view::npos; i = text.find('\n', i + 1)) {
    size_t j = i + 1;
    if (j < text.size() && text[j] == '\t') return {1, '\t'};
    while (j < text.size() && text[j] == ' ') ++j;
    if (j > i + 1 && j < text.size() && text[j] != '\n' && text[j] != '\r') {
      return {static_cast<int>(std::min<size_t>(j - i - 1, 8)), ' '};
    }
  }
  return {2, ' '};
}

Result<std::string> DumpJsonConfig(const ordered_json& doc, std::string_view original) {
  const auto [width, ch] = DetectIndent(original);
  std::string out;
  try {
    out = doc.dump(width, ch, /*ensure_ascii=*/false, nlohmann::json::error_handler_t::strict);
  } catch (const std::exception&) {
    return Error::Invalid("could not be written back as JSON");
  }
  out += '\n';
  if (original.find("\r\n") != std::string_view::npos) {  // a CRLF file stays CRLF
    std::string crlf;
    crlf.reserve(out.size() + out.size() / 16);
    for (char c : out) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
    out = std::move(crlf);
  }
  return out;
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
  if (!IsBlank(text)) {
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

Result<Edited> AddToml(std::string_view text, const ServerEntry& entry) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto server = CodexServer(*doc, entry.name);
  if (!server) return server.error();
  const char* nl = LineEnding(text);

  toml::table expected = *doc;
  if (!expected.contains("mcp_servers")) expected.insert("mcp_servers", toml::table{});
  toml::table& exp_servers = *expected["mcp_servers"].as_table();
  if (!exp_servers.contains(entry.name)) exp_servers.insert(entry.name, toml::table{});
  toml::table& exp = *exp_servers[entry.name].as_table();
  toml::array env_vars;
  for (const auto& v : entry.env_vars) env_vars.push_back(v);

  std::string edited;
  EditOutcome outcome;
  if (*server == nullptr) {
    exp.insert_or_assign("command", entry.command);
    std::string block = "[mcp_servers." + entry.name + "]" + nl;
    block += "command = " + TomlString(entry.command) + nl;
    if (!entry.env_vars.empty()) {
      exp.insert_or_assign("env_vars", env_vars);
      block += "env_vars = " + TomlStringArray(entry.env_vars, nl) + nl;
    }
    if (entry.tool_timeout_sec > 0) {
      exp.insert_or_assign("tool_timeout_sec", static_cast<int64_t>(entry.tool_timeout_sec));
      block += "tool_timeout_sec = " + std::to_string(entry.tool_timeout_sec) + nl;
    }
    edited = std::string(text);
    if (!IsBlank(edited)) {
      if (edited.back() != '\n') edited += nl;
      edited += nl;
    } else {
      edited.clear();
    }
    edited += block;
    outcome = EditOutcome::kAdded;
  } else {
    const toml::table& table = **server;
    const std::vector<size_t> starts = LineStarts(text);
    // The table must have its own header line, `[mcp_servers.<name>]`.
    const auto header = Offset(text, starts, table.source().begin);
    if (table.is_inline() || !header || *header >= text.size() || text[*header] != '[') {
      return Error::Invalid("defines mcp_servers." + entry.name + " inline or with dotted keys");
    }
    std::vector<Splice> splices;
    std::string inserted;  // new lines under the header
    auto replace_value = [&](const toml::node& node, std::string with) -> Status {
      const auto from = Offset(text, starts, node.source().begin);
      const auto to = Offset(text, starts, node.source().end);
      if (!from || !to || *to < *from) return Error::Invalid("could not be edited (positions)");
      splices.push_back({*from, *to, std::move(with)});
      return Ok();
    };
    if (const toml::node* command = table.get("command")) {
      if (command->value<std::string>() != entry.command) {
        if (auto s = replace_value(*command, TomlString(entry.command)); !s) return s.error();
      }
    } else {
      inserted += "command = " + TomlString(entry.command) + nl;
    }
    exp.insert_or_assign("command", entry.command);
    if (const toml::node* args = table.get("args")) {
      const toml::array* list = args->as_array();
      if (list == nullptr || !list->empty()) {
        if (auto s = replace_value(*args, "[]"); !s) return s.error();
        exp.insert_or_assign("args", toml::array{});
      }
    }
    if (!table.contains("env_vars") && !entry.env_vars.empty()) {
      inserted += "env_vars = " + TomlStringArray(entry.env_vars, nl) + nl;
      exp.insert_or_assign("env_vars", env_vars);
    }
    if (!table.contains("tool_timeout_sec") && entry.tool_timeout_sec > 0) {
      inserted += "tool_timeout_sec = " + std::to_string(entry.tool_timeout_sec) + nl;
      exp.insert_or_assign("tool_timeout_sec", static_cast<int64_t>(entry.tool_timeout_sec));
    }
    if (!inserted.empty()) {
      // Right after the header line.
      const size_t line = table.source().begin.line;
      size_t at = line < starts.size() ? starts[line] : text.size();
      std::string prefix;
      if (line >= starts.size() && (text.empty() || text.back() != '\n')) prefix = nl;
      splices.push_back({at, at, prefix + inserted});
    }
    if (splices.empty()) return Edited{std::string(text), EditOutcome::kUnchanged};
    edited = Apply(text, std::move(splices));
    outcome = EditOutcome::kUpdated;
  }
  if (auto s = CheckTomlEdit(edited, expected); !s) return s.error();
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

Result<Edited> RemoveToml(std::string_view text, std::string_view name) {
  auto doc = ParseToml(text);
  if (!doc) return doc.error();
  auto server = CodexServer(*doc, name);
  if (!server) return server.error();
  if (*server == nullptr) return Edited{std::string(text), EditOutcome::kAbsent};
  toml::table expected = *doc;
  expected["mcp_servers"].as_table()->erase(name);

  // Our table is every line from a header of ours (`[mcp_servers.<name>]` or one of its
  // sub-tables) to its last key or header before the next header that is not ours; comments and
  // blank lines after that belong to what follows and stay. Where it was cut out, one blank
  // line is dropped if two would meet (at the end of the file: the one before it, which install
  // put there). No other line changes.
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  auto ours = [&](size_t l) {
    auto key = HeaderKey(lines[l]);
    return key && key->size() >= 2 && (*key)[0] == "mcp_servers" && (*key)[1] == name;
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
    const bool blank_before = l > 0 && !drop[l - 1] && IsBlank(lines[l - 1]);
    if (after == n) {
      if (blank_before) drop[l - 1] = true;
    } else if (IsBlank(lines[after]) && (blank_before || l == 0)) {
      drop[after] = true;
    }
    l = k;
  }
  std::string tidy;
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) tidy += lines[i];
  }
  // `[mcp_servers.<name>]` made `mcp_servers` itself: without our header (and no other server)
  // it is gone, not empty.
  if (expected["mcp_servers"].as_table()->empty()) {
    auto parsed = ParseToml(tidy);
    if (parsed && !parsed->contains("mcp_servers")) expected.erase("mcp_servers");
  }
  if (auto s = CheckTomlEdit(tidy, expected); !s) return s.error();
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

std::string EntrySnippet(ConfigFormat format, const ServerEntry& entry) {
  if (format == ConfigFormat::kCodexToml) return TomlSnippet(entry);
  return JsonSnippet(format, entry);
}

}  // namespace tmcra::setup
