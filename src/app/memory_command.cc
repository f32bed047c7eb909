#include "src/app/memory_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "base/clock.h"
#include "base/identifiers.h"
#include "base/json_reader.h"
#include "base/utf8.h"
#include "src/app/app_wiring.h"
#include "src/app/retention.h"

namespace tmcra::app {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxQueryBytes = 4096;
constexpr size_t kImportChunk = 500;

constexpr const char* kUsage =
    "Usage: tmcra-mcp memory COMMAND [options] [--json]\n"
    "  stats                              what each scope holds, and the outbox\n"
    "  search QUERY [--scope S] [--explain]  the recall the model gets, why each item ranked,\n"
    "                                     and (--explain) the other words it searched\n"
    "  last-recall                        what the last prompt was given\n"
    "  export [--scope S] [--format jsonl|markdown] [--output FILE]\n"
    "  import FILE [--scope S]            restore an export (importing twice stores once)\n"
    "  forget (--turn ID | --session ID | --scope S | --before DATE | --match PHRASE)...\n"
    "         [--dry-run]                 delete for good; selectors combine\n"
    "  retention [--max-age D] [--max-bytes N] [--off]\n"
    "                                     keep memory within an age and a size\n"
    "See docs/memory-commands.md.\n";

// The command line after the command's name: options with values, flags and positionals.
struct Args {
  std::map<std::string, std::string> options;
  std::set<std::string> flags;
  std::vector<std::string> positionals;
  std::optional<std::string> Get(const std::string& name) const {
    auto it = options.find(name);
    return it == options.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
};

Result<Args> ParseArgs(const std::vector<std::string_view>& args, size_t from,
                       const std::set<std::string>& with_value,
                       const std::set<std::string>& flags) {
  Args out;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string arg(args[i]);
    if (arg.rfind("--", 0) != 0) {
      out.positionals.push_back(arg);
      continue;
    }
    const std::string name = arg.substr(2);
    if (flags.count(name) > 0) {
      out.flags.insert(name);
    } else if (with_value.count(name) > 0) {
      if (i + 1 >= args.size()) return Error::Invalid(arg + " needs a value");
      out.options[name] = std::string(args[++i]);
    } else {
      return Error::Invalid("unknown option " + arg);
    }
  }
  return out;
}

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

// A progress line on stderr while stderr is a terminal.
void Progress(const std::string& what, size_t done, size_t total) {
  if (isatty(2) == 0) return;
  std::fprintf(stderr, "\r%s %zu/%zu", what.c_str(), done, total);
  if (done >= total) std::fputc('\n', stderr);
}

struct Context {
  App app;
  bool json_output = false;
  queue::Outbox* outbox = nullptr;  // null when it cannot be opened
};

Result<Context> OpenContext(bool json_output) {
  AppOptions options;
  options.background_delivery = false;
  TMCRA_ASSIGN_OR_RETURN(App app, BuildApp(options));
  Context context{std::move(app), json_output, nullptr};
  if (auto outbox = context.app.delivery->outbox()) context.outbox = *outbox;
  return context;
}

// The scopes a command works on: the one named (which must exist), else every scope.
Result<std::vector<std::string>> ScopesOf(App& app, const std::optional<std::string>& named) {
  TMCRA_ASSIGN_OR_RETURN(const json stats, app.memory->ScopeStats());
  std::vector<std::string> out;
  for (const json& s : stats["scopes"]) out.push_back(s["scope_name"].get<std::string>());
  if (!named) return out;
  if (std::find(out.begin(), out.end(), *named) == out.end()) {
    return Error::Invalid("unknown scope '" + *named + "' (tmcra-mcp memory stats lists them)");
  }
  return std::vector<std::string>{*named};
}

std::string Pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string TextOr(const json& value, const std::string& fallback) {
  return value.is_string() ? value.get<std::string>() : fallback;
}

Status Stats(Context& c) {
  TMCRA_ASSIGN_OR_RETURN(json stats, c.app.memory->ScopeStats());
  std::map<std::string, queue::ScopeCounts> outbox;
  if (c.outbox != nullptr) {
    TMCRA_ASSIGN_OR_RETURN(outbox, c.outbox->CountsByScope());
  }
  for (json& s : stats["scopes"]) {
    const auto counts = outbox[s["scope_name"].get<std::string>()];
    s["outbox_pending"] = counts.pending;
    s["outbox_dead_letters"] = counts.dead_letter;
  }
  if (!c.app.settings.remote()) stats["data_dir_bytes"] = DirectoryBytes(c.app.settings.data_dir);
  if (c.json_output) {
    Print(stats.dump(2) + "\n");
    return Ok();
  }
  std::string out = Pad("scope", 24) + Pad("sessions", 10) + Pad("messages", 10) +
                    Pad("bytes", 12) + Pad("oldest", 22) + Pad("newest", 22) + Pad("redacted", 10) +
                    Pad("pending", 9) + "dead\n";
  for (const json& s : stats["scopes"]) {
    out += Pad(s["scope_name"].get<std::string>(), 24) + Pad(s["sessions"].dump(), 10) +
           Pad(s["messages"].dump(), 10) + Pad(s["bytes"].dump(), 12) +
           Pad(TextOr(s["oldest"], "-"), 22) + Pad(TextOr(s["newest"], "-"), 22) +
           Pad(s["redactions"].dump(), 10) + Pad(s["outbox_pending"].dump(), 9) +
           s["outbox_dead_letters"].dump() + "\n";
  }
  if (stats["scopes"].empty()) out += "(no memory stored yet)\n";
  if (stats.contains("data_dir_bytes")) {
    out += "data directory: " + c.app.settings.data_dir + " (" + stats["data_dir_bytes"].dump() +
           " bytes on disk)\n";
  }
  if (stats.value("erase_pending", false)) {
    out +=
        "erase pending: a forget's deleted text is still in the files (another process holds "
        "a reader); it is retried\n";
  }
  Print(out);
  return Ok();
}

// The query's words found in `text` (case-insensitive), the reason a hit ranked.
json MatchedWords(const std::string& query, const std::string& text) {
  const auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string haystack = lower(text);
  json words = json::array();
  std::string word;
  for (size_t i = 0; i <= query.size(); ++i) {
    const char ch = i < query.size() ? query[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(ch)) || (ch & 0x80) != 0) {
      word.push_back(ch);
      continue;
    }
    if (word.size() > 1 && haystack.find(lower(word)) != std::string::npos) words.push_back(word);
    word.clear();
  }
  return words;
}

// Whether the recall searched the vectors, and why not ("off" for a memory without them).
json VectorsOf(const json& debug) {
  if (!debug.is_object() || !debug.contains("vector") || !debug["vector"].is_object()) {
    return json{{"searched", false}, {"note", "off"}};
  }
  json out{{"searched", debug["vector"].value("searched", false)}};
  if (debug["vector"].contains("note")) out["note"] = debug["vector"]["note"];
  return out;
}

// The recall answer as search results: each window's records with their rank and reason.
json SearchResults(const std::string& scope, const std::string& query, const json& recall) {
  json results = json::array();
  const json windows = recall["evidence"].value("windows", json::array());
  for (const json& w : windows) {
    for (const json& r : w.value("records", json::array())) {
      const bool hit = r.value("hit", false);
      json item{{"window", w.value("window", 0)},
                {"window_score", w.value("score", 0.0)},
                {"memory_id", r.value("memory_id", "")},
                {"session_id", r.value("session_id", "")},
                {"role", r.value("role", "")},
                {"timestamp", r.value("timestamp", "")},
                {"hit", hit},
                {"text", r.value("text", "")}};
      if (hit) {
        item["score"] = r.value("score", 0.0);
        item["why"] = {{"matched", MatchedWords(query, r.value("text", ""))}};
        // Which signals found it (the engine's debug answer; a memory that gives none: absent).
        const json& debug = recall.contains("debug") ? recall["debug"] : json();
        if (debug.is_object() && debug.contains("signals") && debug["signals"].is_object()) {
          const json& signals = debug["signals"];
          if (auto it = signals.find(item["memory_id"].get<std::string>()); it != signals.end()) {
            item["why"]["signals"] = *it;
          }
          const json similarity =
              debug.value("vector", json::object()).value("similarity", json::object());
          if (auto it = similarity.find(item["memory_id"].get<std::string>());
              it != similarity.end()) {
            item["why"]["similarity"] = *it;
          }
        }
      } else {
        item["why"] = {{"neighbour", "shown beside a hit of its session window"}};
      }
      results.push_back(std::move(item));
    }
  }
  const json debug = recall.contains("debug") ? recall["debug"] : json();
  return json{
      {"scope_name", scope},
      {"query", query},
      {"expansions", debug.is_object() ? debug.value("expansions", json::array()) : json::array()},
      {"vectors", VectorsOf(debug)},
      {"route", recall.value("evidence_route", json::object())},
      {"results", std::move(results)},
      {"prompt_bytes", recall["prompt_evidence"].value("content", "").size()}};
}

// One line on the vectors for --explain.
std::string VectorsText(const json& vectors) {
  if (vectors.value("searched", false)) return "  vectors: searched\n";
  return "  vectors: not searched (" + vectors.value("note", std::string("off")) + ")\n";
}

// The other words a search looked for, one line per query word.
std::string ExpansionsText(const json& expansions) {
  if (expansions.empty()) return "  also searched: nothing (no other forms or related words)\n";
  std::map<std::string, std::string> by_word;
  for (const json& e : expansions) {
    std::string& line = by_word[e.value("of", "")];
    line += (line.empty() ? "" : ", ") + e.value("form", "") + " (" + e.value("signal", "") + ")";
  }
  std::string out = "  also searched, with a lower weight:\n";
  for (const auto& [word, line] : by_word) out += "    for " + word + ": " + line + "\n";
  return out;
}

Status Search(Context& c, const Args& args) {
  if (args.positionals.size() != 1) return Error::Invalid("search takes one QUERY");
  const std::string scope = args.Get("scope").value_or(c.app.default_scope);
  if (scope.empty()) return Error::Invalid("--scope: this memory has no default scope");
  TMCRA_ASSIGN_OR_RETURN(const json results, SearchMemory(c.app, scope, args.positionals[0]));
  if (c.json_output) {
    Print(results.dump(2) + "\n");
    return Ok();
  }
  std::string out = "scope " + scope + ", route " +
                    TextOr(results["route"].value("selected", json()), "?") + "\n";
  for (const json& r : results["results"]) {
    out += "  [" + r["window"].dump() + "] " + (r["hit"].get<bool>() ? "hit " : "near") + " " +
           r["role"].get<std::string>() + " " + r["timestamp"].get<std::string>() + " " +
           r["memory_id"].get<std::string>() + "\n      " +
           TruncateCodePoints(r["text"].get<std::string>(), 100) + "\n      why: " +
           (r["hit"].get<bool>()
                ? "score " + r["score"].dump() + ", matched " + r["why"]["matched"].dump() +
                      (r["why"].contains("signals") ? ", found by " + r["why"]["signals"].dump()
                                                    : std::string())
                : std::string("neighbour of a hit in its session")) +
           "\n";
  }
  if (args.Has("explain")) {
    out += ExpansionsText(results["expansions"]) + VectorsText(results["vectors"]);
  }
  if (results["results"].empty()) out += "  (nothing recalled)\n";
  Print(out);
  return Ok();
}

Status LastRecall(Context& c) {
  json note = nullptr;
  if (c.outbox != nullptr) {
    TMCRA_ASSIGN_OR_RETURN(note, c.outbox->GetNote("last_recall"));
  }
  if (c.json_output) {
    Print(note.dump(2) + "\n");
    return Ok();
  }
  if (!note.is_object()) {
    Print("no recall recorded yet (a prompt's hook or tmcra_turn_prepare records one)\n");
    return Ok();
  }
  std::string out = "at " + note.value("at", "?") + " by " + note.value("by", "?") + ", session " +
                    note.value("session", "?") + "\n";
  out += "query: " + TruncateCodePoints(note.value("query", ""), 200) + "\n";
  out += "recalled " + note.value("recalled_blocks", json(0)).dump() + " blocks, gave " +
         note.value("given_blocks", json(0)).dump() + " (" + note.value("bytes", json(0)).dump() +
         " bytes of " + note.value("cap_bytes", json(0)).dump() + "), " +
         note.value("already_given", json(0)).dump() + " given before, " +
         note.value("left_out", json(0)).dump() + " left out for the budget\n";
  for (const json& id : note.value("given", json::array())) out += "  " + id.dump() + "\n";
  Print(out);
  return Ok();
}

// Markdown for people: one section per session, each message with its role and time.
std::string MarkdownLine(const json& line, std::string& session) {
  std::string out;
  if (line["type"] != "record") {
    return "- feedback " + line.value("action", "") + " on " + line["targets"].dump() + "\n";
  }
  if (line["session_id"] != session) {
    session = line["session_id"].get<std::string>();
    out += "\n## " + line["scope_name"].get<std::string>() + " / session " + session + "\n\n";
  }
  return out + "**" + line["role"].get<std::string>() + "** (" +
         line["timestamp"].get<std::string>() + ", " + line["memory_id"].get<std::string>() +
         "):\n\n" + line["content"].get<std::string>() + "\n\n";
}

Status Export(Context& c, const Args& args) {
  const std::string format = args.Get("format").value_or("jsonl");
  if (format != "jsonl" && format != "markdown") {
    return Error::Invalid("--format: jsonl or markdown");
  }
  TMCRA_ASSIGN_OR_RETURN(const auto scopes, ScopesOf(c.app, args.Get("scope")));
  FILE* out = stdout;
  if (auto path = args.Get("output")) {
    const int fd = open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || (out = fdopen(fd, "w")) == nullptr) {
      return Error::Invalid(*path + ": cannot write: " + std::strerror(errno));
    }
  }
  const auto write = [out](const std::string& text) {
    return std::fwrite(text.data(), 1, text.size(), out) == text.size()
               ? Ok()
               : Status(Error::Internal("export: write failed"));
  };
  Status status = write(format == "jsonl" ? json{{"type", "tmcra-export"},
                                                 {"format", 1},
                                                 {"exported_at", FormatIsoUtc(NowSeconds())}}
                                                    .dump() +
                                                "\n"
                                          : "# tmcra memory export\n");
  std::string session;
  size_t done = 0;
  for (const std::string& scope : scopes) {
    if (!status) break;
    status = c.app.memory->Export(scope, [&](const json& line) {
      return write(format == "jsonl" ? line.dump() + "\n" : MarkdownLine(line, session));
    });
    Progress("exporting scopes", ++done, scopes.size());
  }
  if (out != stdout) std::fclose(out);
  return status;
}

Result<std::map<std::string, json>> ReadExport(const std::string& path,
                                               const std::optional<std::string>& scope) {
  std::ifstream in(path);
  if (!in) return Error::Invalid(path + ": cannot read");
  std::map<std::string, json> by_scope;
  std::string text;
  for (size_t number = 1; std::getline(in, text); ++number) {
    if (text.empty()) continue;
    json line = ParseJsonLenient(text);
    const std::string at = path + ":" + std::to_string(number);
    if (!line.is_object())
      return Error::Invalid(at + ": not a JSON object (is it a jsonl export?)");
    const auto text_of = [&line](const char* key) {
      auto it = line.find(key);
      return it != line.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (text_of("type") == "tmcra-export") continue;
    const std::string target = scope.value_or(text_of("scope_name"));
    if (!IsValidScope(target)) return Error::Invalid(at + ": scope_name is missing or invalid");
    by_scope[target].push_back(std::move(line));
  }
  return by_scope;
}

Status Import(Context& c, const Args& args) {
  if (args.positionals.size() != 1) return Error::Invalid("import takes one FILE");
  TMCRA_ASSIGN_OR_RETURN(auto by_scope, ReadExport(args.positionals[0], args.Get("scope")));
  json totals{
      {"records_added", 0}, {"records_present", 0}, {"feedback_added", 0}, {"feedback_present", 0}};
  size_t total = 0, done = 0;
  for (const auto& [scope, lines] : by_scope) total += lines.size();
  for (const auto& [scope, lines] : by_scope) {
    for (size_t from = 0; from < lines.size(); from += kImportChunk) {
      const size_t to = std::min(lines.size(), from + kImportChunk);
      json chunk(lines.begin() + static_cast<std::ptrdiff_t>(from),
                 lines.begin() + static_cast<std::ptrdiff_t>(to));
      TMCRA_ASSIGN_OR_RETURN(const json added, c.app.memory->Import(scope, chunk));
      for (auto& [key, value] : totals.items()) value = value.get<int64_t>() + added.value(key, 0);
      done += to - from;
      Progress("importing lines", done, total);
    }
  }
  Print(c.json_output ? totals.dump(2) + "\n"
                      : "imported " + totals["records_added"].dump() + " records and " +
                            totals["feedback_added"].dump() + " feedback (" +
                            totals["records_present"].dump() + " records and " +
                            totals["feedback_present"].dump() + " feedback already held)\n");
  return Ok();
}

// What a forget names, for the memory (a request body) and for the outbox.
struct ForgetRequest {
  json body = json::object();
  queue::ForgetSelection outbox;
  std::optional<std::string> scope;
};

Result<ForgetRequest> ForgetRequestOf(queue::Outbox* outbox, const ForgetArgs& args) {
  ForgetRequest r;
  r.scope = args.scope;
  if (auto turn = args.turn) {
    if (outbox == nullptr) return Error::Invalid("--turn: the outbox cannot be opened");
    auto found = outbox->TurnMessageIds(*turn);
    if (!found && found.error().code == Errc::kNotFound) {
      return Error::Invalid("--turn: " + found.error().message);
    }
    TMCRA_ASSIGN_OR_RETURN(const auto known, std::move(found));
    if (r.scope && *r.scope != known.scope) {
      return Error::Invalid("--turn: the turn is in scope '" + known.scope + "', not '" + *r.scope +
                            "'");
    }
    r.scope = known.scope;
    r.body["session_id"] = known.session_id;
    r.body["message_ids"] = known.message_ids;
    r.outbox.turn_id = *turn;
  }
  if (auto session = args.session) {
    r.body["session_id"] = *session;
    r.outbox.session_id = *session;
  }
  if (auto before = args.before) {
    const auto when = ParseIsoTimestamp(*before);
    if (!when) return Error::Invalid("--before: '" + *before + "' is not a date (YYYY-MM-DD)");
    r.body["before"] = FormatIsoUtc(*when);
    r.outbox.before = *when;
  }
  if (auto match = args.match) {
    if (match->empty() || match->size() > kMaxQueryBytes) {
      return Error::Invalid("--match: 1 to 4096 bytes");
    }
    r.body["match"] = *match;
    r.outbox.match = *match;
  }
  if (r.body.empty()) {
    if (!r.scope)
      return Error::Invalid("forget: name --turn, --session, --scope, --before or --match");
    r.body["all"] = true;
    r.outbox.all = true;
  }
  r.body["dry_run"] = args.dry_run;
  r.outbox.dry_run = args.dry_run;
  return r;
}

std::string ForgetText(const json& report) {
  const bool dry = report["dry_run"].get<bool>();
  std::string out = std::string(dry ? "would forget " : "forgot ") + report["records"].dump() +
                    " records, " + report["feedback"].dump() + " feedback, " +
                    report["outbox_items"].dump() + " outbox items (" +
                    report["outbox_pending"].dump() + " not yet delivered) and " +
                    report["turns"].dump() + " prepared turns\n";
  for (const json& p : report["preview"]) {
    out += "  " + p["scope_name"].get<std::string>() + " " + p["timestamp"].get<std::string>() +
           " " + p["role"].get<std::string>() + ": " + p["excerpt"].get<std::string>() + "\n";
  }
  if (!dry) {
    out += report["erase"] == "pending"
               ? "pending erase: another process is reading the memory files, so deleted text "
                 "stays in them until it lets go; it is retried (run the command again or wait)\n"
               : "erased: the deleted text is gone from the memory files\n";
  }
  return out;
}

}  // namespace

Result<json> ForgetMemory(App& app, queue::Outbox* outbox, const ForgetArgs& args) {
  TMCRA_ASSIGN_OR_RETURN(ForgetRequest request, ForgetRequestOf(outbox, args));
  TMCRA_ASSIGN_OR_RETURN(const auto scopes, ScopesOf(app, request.scope));
  json report{{"dry_run", args.dry_run},  {"records", 0},        {"feedback", 0},
              {"outbox_items", 0},        {"outbox_pending", 0}, {"turns", 0},
              {"preview", json::array()}, {"erase", "none"}};
  size_t scopes_done = 0;
  const auto add = [&report](const char* key, int64_t n) {
    report[key] = report[key].get<int64_t>() + n;
  };
  for (const std::string& scope : scopes) {
    TMCRA_ASSIGN_OR_RETURN(const json done, app.memory->Forget(scope, request.body));
    add("records", done.value("records", int64_t{0}));
    add("feedback", done.value("feedback", int64_t{0}));
    for (const json& p : done["preview"]) report["preview"].push_back(p);
    if (done.value("erase", "none") != "none" && report["erase"] != "pending") {
      report["erase"] = done["erase"];
    }
    if (outbox != nullptr) {
      request.outbox.scope = scope;
      TMCRA_ASSIGN_OR_RETURN(const auto counts, outbox->Forget(request.outbox));
      add("outbox_items", counts.items);
      add("outbox_pending", counts.pending_items);
      add("turns", counts.turns);
      if (counts.erase == "pending") report["erase"] = "pending";
    }
    Progress("forgetting, scopes done", ++scopes_done, scopes.size());
  }
  return report;
}

Result<json> SearchMemory(App& app, const std::string& scope, const std::string& query) {
  if (query.empty() || query.size() > kMaxQueryBytes || !IsValidUtf8(query)) {
    return Error::Invalid("QUERY: 1 to 4096 bytes of UTF-8 text");
  }
  if (!IsValidScope(scope)) return Error::Invalid("scope: '" + scope + "' is not a scope name");
  TMCRA_ASSIGN_OR_RETURN(
      const json recall,
      app.memory->Recall(scope, {{"query", query}, {"max_windows", 8}, {"debug", true}},
                         api::RecallOptions{}));
  return SearchResults(scope, query, recall);
}

namespace {

Status Forget(Context& c, const Args& args) {
  ForgetArgs forget{args.Get("turn"),   args.Get("session"), args.Get("scope"),
                    args.Get("before"), args.Get("match"),   args.Has("dry-run")};
  TMCRA_ASSIGN_OR_RETURN(const json report, ForgetMemory(c.app, c.outbox, forget));
  Print(c.json_output ? report.dump(2) + "\n" : ForgetText(report));
  return Ok();
}

Status Retention(Context& c, const Args& args) {
  if (c.app.settings.remote()) {
    return Error::Invalid(
        "retention keeps the embedded memory in bounds; a remote memory's "
        "operator sets its own");
  }
  const std::string& dir = c.app.settings.data_dir;
  TMCRA_ASSIGN_OR_RETURN(RetentionPolicy policy, LoadRetention(dir));
  const bool change = args.Has("off") || args.Get("max-age") || args.Get("max-bytes");
  if (args.Has("off")) policy = RetentionPolicy{};
  if (auto age = args.Get("max-age")) {
    TMCRA_ASSIGN_OR_RETURN(policy.max_age_seconds, ParseDuration(*age, "--max-age"));
  }
  if (auto bytes = args.Get("max-bytes")) {
    TMCRA_ASSIGN_OR_RETURN(policy.max_bytes, ParseByteSize(*bytes, "--max-bytes"));
  }
  json report{{"policy", policy.ToJson()}};
  if (change) TMCRA_RETURN_IF_ERROR(SaveRetention(dir, policy));
  if (change && !policy.empty()) {
    TMCRA_ASSIGN_OR_RETURN(report["applied"], ApplyRetention(policy, *c.app.memory, c.outbox, dir));
  }
  if (c.json_output) {
    Print(report.dump(2) + "\n");
    return Ok();
  }
  std::string out = policy.empty() ? "retention: off (memory is kept until forgotten)\n"
                                   : "retention: " + report["policy"].dump() + "\n";
  if (report.contains("applied")) out += "applied now: " + report["applied"].dump() + "\n";
  Print(out);
  return Ok();
}

Status Dispatch(const std::string& command, const std::vector<std::string_view>& argv) {
  static const std::set<std::string> kValued{"scope",  "format", "output",  "turn",     "session",
                                             "before", "match",  "max-age", "max-bytes"};
  TMCRA_ASSIGN_OR_RETURN(const Args args,
                         ParseArgs(argv, 1, kValued, {"json", "dry-run", "off", "explain"}));
  if (command != "search" && command != "import" && !args.positionals.empty()) {
    return Error::Invalid(command + ": unexpected argument '" + args.positionals[0] + "'");
  }
  TMCRA_ASSIGN_OR_RETURN(Context c, OpenContext(args.Has("json")));
  if (command == "stats") return Stats(c);
  if (command == "search") return Search(c, args);
  if (command == "last-recall") return LastRecall(c);
  if (command == "export") return Export(c, args);
  if (command == "import") return Import(c, args);
  if (command == "forget") return Forget(c, args);
  return Retention(c, args);
}

}  // namespace

int RunMemoryCommand(const std::vector<std::string_view>& args) {
  static const std::set<std::string> kCommands{"stats",  "search", "last-recall", "export",
                                               "import", "forget", "retention"};
  if (args.empty() || args[0] == "--help" || args[0] == "-h" ||
      kCommands.count(std::string(args[0])) == 0) {
    std::fputs(kUsage, args.empty() || args[0].rfind("-h", 0) != 0 ? stderr : stdout);
    return args.empty() || kCommands.count(std::string(args[0])) == 0 ? 2 : 0;
  }
  try {
    const Status done = Dispatch(std::string(args[0]), args);
    if (done) return 0;
    std::fprintf(stderr, "tmcra-mcp memory %s: %s\n", std::string(args[0]).c_str(),
                 done.error().message.c_str());
    return done.error().code == Errc::kInvalidArgument && done.error().api_code.empty() ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmcra-mcp memory: %s\n", e.what());
    return 1;
  }
}

}  // namespace tmcra::app
