#include "src/app/console.h"

// cpp-httplib from Debian; the console speaks plain HTTP on loopback only.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/identifiers.h"
#include "base/ids.h"
#include "base/utf8.h"
#include "src/app/app_wiring.h"
#include "src/app/memory_command.h"

namespace tmcra::app {

namespace {

using json = nlohmann::json;

constexpr const char* kCookie = "tmcra_console";
constexpr size_t kMaxTurnsShown = 400;

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// Equality in time that depends on the lengths only (secrets compared with what a request sent).
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  return diff == 0;
}

constexpr const char* kStyle =
    "body{font:14px system-ui,sans-serif;margin:0;color:#222}nav{background:#24292f;padding:8px "
    "16px}nav a{color:#fff;margin-right:16px;text-decoration:none}main{padding:16px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;vertical-align:top}th{background:#f3f3f3}.hit{background:#eef8ee}"
    ".msg{white-space:pre-wrap;max-width:70ch}form.inline{display:inline}.note{color:#555}"
    "input[type=text]{width:28em}.err{color:#b00}";

// The state one console serves from: the memory and outbox, and its secrets.
struct Console {
  App app;
  queue::Outbox* outbox = nullptr;
  int port = 0;
  std::mutex mu;
  std::string token;   // the one-time token of the printed URL; empty once spent
  std::string cookie;  // the session cookie's value
  std::string csrf;    // every POST's csrf field
};

std::string Page(const Console& c, const std::string& title, const std::string& body) {
  return "<!doctype html><html><head><meta charset=utf-8><title>tmcra · " + HtmlEscape(title) +
         "</title><style>" + kStyle +
         "</style></head><body><nav><a href=/>Scopes</a><a href=/search>Search</a>"
         "<a href=/recall>Last recalls</a><a href=/outbox>Outbox</a><a href=/forget>Forget</a>"
         "</nav><main><h1>" +
         HtmlEscape(title) + "</h1>" + body + "</main><script>const csrf='" + c.csrf +
         "';document.querySelectorAll('form[method=post]').forEach(f=>{const i=document."
         "createElement('input');i.type='hidden';i.name='csrf';i.value=csrf;f.appendChild(i);"
         "if(f.dataset.confirm)f.addEventListener('submit',e=>{if(!confirm(f.dataset.confirm))"
         "e.preventDefault()})});</script></body></html>";
}

void Html(httplib::Response& res, const Console& c, const std::string& title,
          const std::string& body) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                 "form-action 'self'; frame-ancestors 'none'");
  res.set_content(Page(c, title, body), "text/html; charset=utf-8");
}

void Refuse(httplib::Response& res, int status, const std::string& why) {
  res.status = status;
  res.set_content(why + "\n", "text/plain; charset=utf-8");
}

std::string CookieOf(const httplib::Request& req) {
  const std::string header = req.get_header_value("Cookie");
  const std::string prefix = std::string(kCookie) + "=";
  for (size_t at = 0; at < header.size();) {
    size_t end = header.find(';', at);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(at, end - at);
    while (!part.empty() && part.front() == ' ') part.erase(0, 1);
    if (part.rfind(prefix, 0) == 0) return part.substr(prefix.size());
    at = end + 1;
  }
  return "";
}

// The checks every request passes (docs/console.md, "Access"); false when it was refused.
bool Admit(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string self = "127.0.0.1:" + std::to_string(c.port);
  const std::string host = req.get_header_value("Host");
  if (host != self && host != "localhost:" + std::to_string(c.port)) {
    Refuse(res, 403, "forbidden: the Host header does not name this console");
    return false;
  }
  if (req.has_header("Origin") && req.get_header_value("Origin") != "http://" + host) {
    Refuse(res, 403, "forbidden: a request from another origin");
    return false;
  }
  std::lock_guard lock(c.mu);
  if (req.method == "GET" && req.path == "/" && req.has_param("token")) {
    if (c.token.empty() || !ConstantTimeEqual(req.get_param_value("token"), c.token)) {
      Refuse(res, 401, "unauthorized: the token is not valid (it is spent once used)");
      return false;
    }
    c.token.clear();
    res.set_header("Set-Cookie",
                   std::string(kCookie) + "=" + c.cookie + "; HttpOnly; SameSite=Strict; Path=/");
    res.set_redirect("/");
    return false;  // answered: the redirect
  }
  if (!ConstantTimeEqual(CookieOf(req), c.cookie)) {
    Refuse(res, 401, "unauthorized: open the URL tmcra-mcp console printed");
    return false;
  }
  return true;
}

// A POST handler behind the CSRF check. (The form's body is read after the pre-routing
// handler has run, so the check is made here.)
using Handler = void (*)(Console&, const httplib::Request&, httplib::Response&);
httplib::Server::Handler WithCsrf(Console& c, Handler handler) {
  return [&c, handler](const httplib::Request& req, httplib::Response& res) {
    if (!ConstantTimeEqual(req.get_param_value("csrf"), c.csrf)) {
      return Refuse(res, 403, "forbidden: the form's CSRF token is missing or wrong");
    }
    handler(c, req, res);
  };
}

std::string ErrorBox(const Error& e) { return "<p class=err>" + HtmlEscape(e.message) + "</p>"; }

// Messages stored per day, all scopes, as a bar chart.
std::string GrowthChart(Console& c, const json& scopes) {
  std::map<std::string, int64_t> per_day;
  for (const json& s : scopes) {
    (void)c.app.memory->Export(s["scope_name"].get<std::string>(), [&per_day](const json& line) {
      if (line.value("type", "") == "record") {
        per_day[line.value("timestamp", "").substr(0, 10)] += 1;
      }
      return Ok();
    });
  }
  if (per_day.empty()) return "";
  int64_t top = 1;
  for (const auto& [day, n] : per_day) top = std::max(top, n);
  const size_t bars = per_day.size();
  const size_t width = std::max<size_t>(300, bars * 24);
  std::string svg =
      "<h2>Messages stored per day</h2><svg role=img aria-label='messages per "
      "day' width=" +
      std::to_string(width) + " height=160>";
  size_t x = 0;
  for (const auto& [day, n] : per_day) {
    const int64_t h = 120 * n / top;
    svg += "<rect x=" + std::to_string(x * 24 + 4) + " y=" + std::to_string(130 - h) +
           " width=18 height=" + std::to_string(h) + " fill='#4c8bf5'><title>" + HtmlEscape(day) +
           ": " + std::to_string(n) + "</title></rect>";
    if (bars <= 12 || x % (bars / 12 + 1) == 0) {
      svg += "<text x=" + std::to_string(x * 24 + 2) + " y=150 font-size=9>" +
             HtmlEscape(day.substr(5)) + "</text>";
    }
    ++x;
  }
  return svg + "</svg>";
}

// The embedding thread's figures (memory/engine.h, EngineStats::EmbeddingFigures).
std::string VectorsNote(const json& e) {
  std::string note = "<p class=note>Vectors (" + HtmlEscape(e.value("model", "")) +
                     "): " + std::to_string(e.value("vectors", int64_t{0})) +
                     " records embedded, " + std::to_string(e.value("backlog", int64_t{0})) +
                     " waiting; " + HtmlEscape(e.value("state", ""));
  if (e.value("state", "") == "failing") {
    note += " — " + HtmlEscape(e.value("last_error", "")) +
            " (retried; recall goes on with words meanwhile)";
  }
  return note + "</p>";
}

// The index back-fills still under way after an upgrade (memory/stems.h, memory/cjk.h), or "".
std::string BackfillNote(Console& c) {
  auto figures = c.app.memory->Stats();
  if (!figures || !figures->is_object()) return "";
  std::string note;
  for (const char* key : {"stem_index_backlog", "cjk_index_backlog"}) {
    const int64_t left = figures->value(key, int64_t{0});
    if (left <= 0) continue;
    note += std::string("<p class=note>Indexing in the background: ") + std::to_string(left) +
            " records left for the " + (key[0] == 's' ? "stem" : "CJK") +
            " index (found by their exact words meanwhile).</p>";
  }
  if (figures->contains("embeddings")) note += VectorsNote((*figures)["embeddings"]);
  return note;
}

void Overview(Console& c, httplib::Response& res) {
  auto stats = c.app.memory->ScopeStats();
  if (!stats) return Html(res, c, "Scopes", ErrorBox(stats.error()));
  std::string body =
      "<table><tr><th>scope<th>sessions<th>messages<th>bytes<th>oldest<th>newest<th>"
      "redactions<th>export</tr>";
  for (const json& s : (*stats)["scopes"]) {
    const std::string name = s["scope_name"].get<std::string>();
    body += "<tr><td><a href='/scope?name=" + HtmlEscape(name) + "'>" + HtmlEscape(name) +
            "</a><td>" + s["sessions"].dump() + "<td>" + s["messages"].dump() + "<td>" +
            s["bytes"].dump() + "<td>" +
            HtmlEscape(s["oldest"].is_string() ? s["oldest"].get<std::string>() : "-") + "<td>" +
            HtmlEscape(s["newest"].is_string() ? s["newest"].get<std::string>() : "-") + "<td>" +
            s["redactions"].dump() + "<td><a href='/export?scope=" + HtmlEscape(name) +
            "'>jsonl</a></tr>";
  }
  body += "</table>";
  if ((*stats)["scopes"].empty()) body += "<p class=note>Nothing is stored yet.</p>";
  if ((*stats).value("erase_pending", false)) {
    body += "<p class=note>Erase pending: another process holds a reader; it is retried.</p>";
  }
  Html(res, c, "Scopes", body + BackfillNote(c) + GrowthChart(c, (*stats)["scopes"]));
}

std::string FeedbackForms(const std::string& scope, const std::string& id) {
  const std::string hidden = "<input type=hidden name=scope value='" + HtmlEscape(scope) +
                             "'><input type=hidden name=memory_id value='" + HtmlEscape(id) + "'>";
  return "<form class=inline method=post action=/feedback>" + hidden +
         "<input type=hidden name=action value=ignore><button>Ignore</button></form> "
         "<form class=inline method=post action=/feedback>" +
         hidden +
         "<input type=hidden name=action value=restore><button>Restore</button></form> "
         "<form class=inline method=post action=/feedback>" +
         hidden +
         "<input type=hidden name=action value=correct><input type=text name=replacement "
         "placeholder='correct text' aria-label='correction'><button>Correct</button></form>";
}

// A session's memory controls (tmcra_memory_control's): its state, its mode, the scope's recall
// budget and a task.
std::string ControlForms(Console& c, const std::string& scope, const std::string& session) {
  const std::string hidden = "<input type=hidden name=scope value='" + HtmlEscape(scope) +
                             "'><input type=hidden name=session value='" + HtmlEscape(session) +
                             "'>";
  std::string out;
  if (c.app.tool_deps.controls != nullptr && c.app.tool_deps.control_key) {
    auto state = c.app.tool_deps.controls->Control(c.app.tool_deps.control_key(scope), session,
                                                   "dashboard", json::object());
    if (state) out += "<p class=note>controls: " + HtmlEscape(state->dump()) + "</p>";
  }
  out += "<form class=inline method=post action=/control>" + hidden +
         "<input type=hidden name=action value=mode><select name=mode aria-label='mode of " +
         HtmlEscape(session) + "'>";
  for (const char* mode : {"normal", "recall_only", "off"}) {
    out += std::string("<option>") + mode + "</option>";
  }
  out +=
      "</select> <button>Set mode</button></form> <form class=inline method=post "
      "action=/control>" +
      hidden +
      "<input type=hidden name=action value=budget><input name=budgetChars size=6 "
      "placeholder=12000 aria-label=budget> <button>Set budget</button></form> <form "
      "class=inline method=post action=/control>" +
      hidden +
      "<input type=hidden name=action value=task><input name=objective placeholder='task "
      "objective' aria-label=objective> <select name=status><option>active</option><option>"
      "completed</option><option>blocked</option></select> <button>Set task</button></form>";
  return out;
}

void ScopePage(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string scope = req.get_param_value("name");
  if (!IsValidScope(scope)) return Refuse(res, 400, "bad request: not a scope name");
  std::map<std::string, std::vector<json>> sessions;
  size_t shown = 0;
  auto exported = c.app.memory->Export(scope, [&](const json& line) {
    if (line.value("type", "") == "record" && shown++ < kMaxTurnsShown) {
      sessions[line.value("session_id", "")].push_back(line);
    }
    return Ok();
  });
  if (!exported) return Html(res, c, scope, ErrorBox(exported.error()));
  std::string body;
  for (const auto& [session, records] : sessions) {
    body += "<h2>Session " + HtmlEscape(session) + "</h2>" + ControlForms(c, scope, session) +
            "<table><tr><th>time<th>role<th>message<th>memory id<th>feedback</tr>";
    for (const json& r : records) {
      body += "<tr><td>" + HtmlEscape(r.value("timestamp", "")) + "<td>" +
              HtmlEscape(r.value("role", "")) + "<td class=msg>" +
              HtmlEscape(r.value("content", "")) + "<td>" + HtmlEscape(r.value("memory_id", "")) +
              "<td>" + FeedbackForms(scope, r.value("memory_id", "")) + "</tr>";
    }
    body += "</table>";
  }
  if (sessions.empty()) body = "<p class=note>This scope holds no messages.</p>";
  Html(res, c, "Scope " + scope, body);
}

void SearchPage(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string q = req.get_param_value("q");
  std::string scope = req.get_param_value("scope");
  if (scope.empty()) scope = c.app.default_scope;
  std::string body = "<form method=get action=/search><input type=text name=q value='" +
                     HtmlEscape(q) + "' aria-label=query> in scope <input name=scope value='" +
                     HtmlEscape(scope) + "' aria-label=scope> <button>Search</button></form>";
  if (!q.empty()) {
    auto found = SearchMemory(c.app, scope, q);
    if (!found) return Html(res, c, "Search", body + ErrorBox(found.error()));
    std::string searched;
    for (const json& e : found->value("expansions", json::array())) {
      searched += (searched.empty() ? "" : ", ") + e.value("form", "") + " (" +
                  e.value("signal", "") + " of " + e.value("of", "") + ")";
    }
    body +=
        "<p class=note>route: " + HtmlEscape(found->value("route", json::object()).dump()) +
        "</p><p class=note>also searched, with a lower weight: " +
        HtmlEscape(searched.empty() ? "nothing" : searched) + "</p><p class=note>vectors: " +
        HtmlEscape(
            found->value("vectors", json::object()).value("searched", false)
                ? std::string("searched")
                : "not searched (" +
                      found->value("vectors", json::object()).value("note", std::string("off")) +
                      ")") +
        "</p><table><tr><th>window<th>rank<th>why<th>message<th>feedback</tr>";
    for (const json& r : (*found)["results"]) {
      const bool hit = r.value("hit", false);
      body += std::string("<tr class=") + (hit ? "hit" : "near") + "><td>" + r["window"].dump() +
              "<td>" + (hit ? "hit " + r["score"].dump() : "neighbour") + "<td>" +
              HtmlEscape(r["why"].dump()) + "<td class=msg>" + HtmlEscape(r.value("text", "")) +
              "<td>" + FeedbackForms(scope, r.value("memory_id", "")) + "</tr>";
    }
    body += "</table>";
    if ((*found)["results"].empty()) body += "<p class=note>Nothing recalled.</p>";
  }
  Html(res, c, "Search", body);
}

void RecallPage(Console& c, httplib::Response& res) {
  json history = nullptr;
  if (c.outbox != nullptr) {
    if (auto got = c.outbox->GetNote(std::string(tools::kRecallHistoryNote))) history = *got;
  }
  if (!history.is_array() || history.empty()) {
    return Html(res, c, "Last recalls", "<p class=note>No recall recorded yet.</p>");
  }
  std::string body =
      "<table><tr><th>at<th>by<th>query<th>recalled<th>given<th>given before"
      "<th>left out<th>bytes<th>memory ids</tr>";
  const auto number = [](const json& note, const char* key) {
    return note.contains(key) ? note[key].dump() : std::string("-");
  };
  for (const json& note : history) {
    if (!note.is_object()) continue;
    body += "<tr><td>" + HtmlEscape(note.value("at", "")) + "<td>" +
            HtmlEscape(note.value("by", "")) + "<td class=msg>" +
            HtmlEscape(note.value("query", "")) + "<td>" + number(note, "recalled_blocks") +
            "<td>" + number(note, "given_blocks") + "<td>" + number(note, "already_given") +
            "<td>" + number(note, "left_out") + "<td>" + number(note, "bytes") + "<td class=msg>" +
            HtmlEscape(note.value("given", json::array()).dump()) + "</tr>";
  }
  Html(res, c, "Last recalls", body + "</table>");
}

void OutboxPage(Console& c, httplib::Response& res) {
  if (c.outbox == nullptr) return Html(res, c, "Outbox", "<p class=err>no outbox</p>");
  std::string body = "<table><tr><th>item<th>state<th>scope<th>attempts<th>last error<th></tr>";
  auto ids = c.outbox->InStates({queue::kPending, queue::kSubmitted, queue::kDeadLetter}, 200);
  if (!ids) return Html(res, c, "Outbox", ErrorBox(ids.error()));
  for (const std::string& id : *ids) {
    auto item = c.outbox->Get(id);
    if (!item) continue;
    body += "<tr><td>" + HtmlEscape(id) + "<td>" + HtmlEscape(item->state) + "<td>" +
            HtmlEscape(item->scope_name) + "<td>" + std::to_string(item->attempts) + "<td>" +
            HtmlEscape(item->last_error.value_or("")) + "<td>";
    if (item->state == queue::kDeadLetter) {
      body +=
          "<form class=inline method=post action=/replay><input type=hidden name=item "
          "value='" +
          HtmlEscape(id) + "'><button>Replay</button></form>";
    }
    body += "</tr>";
  }
  body += "</table>";
  if (ids->empty()) body += "<p class=note>Every write is delivered.</p>";
  Html(res, c, "Outbox", body);
}

constexpr const char* kForgetForm =
    "<form method=post action=/forget data-confirm='Forget for good?'><p>Exact phrase: <input "
    "type=text name=match aria-label=phrase></p><p>Session: <input type=text name=session "
    "aria-label=session></p><p>Scope: <input type=text name=scope aria-label='forget scope'></p>"
    "<p><label><input type=checkbox name=dry_run value=1> dry run</label></p><button>Forget"
    "</button></form>";

std::optional<std::string> Field(const httplib::Request& req, const char* name) {
  const std::string value = req.get_param_value(name);
  return value.empty() ? std::nullopt : std::optional<std::string>(value);
}

void ForgetPost(Console& c, const httplib::Request& req, httplib::Response& res) {
  ForgetArgs args{std::nullopt, Field(req, "session"), Field(req, "scope"),
                  std::nullopt, Field(req, "match"),   req.get_param_value("dry_run") == "1"};
  auto report = ForgetMemory(c.app, c.outbox, args);
  if (!report) return Html(res, c, "Forget", ErrorBox(report.error()) + kForgetForm);
  std::string body =
      std::string("<p id=forget-report>") + (args.dry_run ? "Would forget " : "Forgot ") +
      (*report)["records"].dump() + " records and " + (*report)["outbox_items"].dump() +
      " outbox items; erase: " + HtmlEscape((*report)["erase"].get<std::string>()) + ".</p><ul>";
  for (const json& p : (*report)["preview"]) {
    body += "<li>" + HtmlEscape(p.value("excerpt", "")) + "</li>";
  }
  Html(res, c, "Forget", body + "</ul>" + kForgetForm);
}

void FeedbackPost(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string action = req.get_param_value("action");
  const std::string scope = req.get_param_value("scope");
  json body{{"rating", action == "restore" ? "helpful" : "incorrect"},
            {"action", action},
            {"memory_ids", {req.get_param_value("memory_id")}},
            {"query_id", nullptr}};
  if (action == "correct") body["replacement"] = req.get_param_value("replacement");
  auto done = c.app.memory->Feedback(scope, body, {"console-" + UuidV4()});
  Html(res, c, "Feedback",
       done ? "<p id=feedback-report>" + HtmlEscape(action) + " recorded for " +
                  HtmlEscape(req.get_param_value("memory_id")) + ".</p>"
            : ErrorBox(done.error()));
}

void ControlPost(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string scope = req.get_param_value("scope");
  const std::string session = req.get_param_value("session");
  const std::string action = req.get_param_value("action");
  if (c.app.tool_deps.controls == nullptr || !c.app.tool_deps.control_key) {
    return Html(res, c, "Controls", "<p class=err>memory controls are not available</p>");
  }
  json args = json::object();
  if (action == "mode") {
    args["mode"] = req.get_param_value("mode");
  } else if (action == "budget") {
    args["budgetChars"] = std::atoll(req.get_param_value("budgetChars").c_str());
  } else if (action == "task") {
    args["objective"] = req.get_param_value("objective");
    args["status"] = req.get_param_value("status");
  } else {
    return Refuse(res, 400, "bad request: action is mode, budget or task");
  }
  auto done =
      c.app.tool_deps.controls->Control(c.app.tool_deps.control_key(scope), session, action, args);
  Html(res, c, "Controls",
       done ? "<p id=control-report>Session " + HtmlEscape(session) + ": " + HtmlEscape(action) +
                  " is now " + HtmlEscape(done->dump()) + ".</p>"
            : ErrorBox(done.error()));
}

void ReplayPost(Console& c, const httplib::Request& req, httplib::Response& res) {
  if (c.outbox == nullptr) return Html(res, c, "Replay", "<p class=err>no outbox</p>");
  const std::string item = req.get_param_value("item");
  auto done = c.outbox->Replay(item);
  if (done) c.app.delivery->Kick();
  Html(res, c, "Replay",
       done ? "<p id=replay-report>" + HtmlEscape(item) +
                  " is pending again; delivery retries it.</p>"
            : ErrorBox(done.error()));
}

void ExportGet(Console& c, const httplib::Request& req, httplib::Response& res) {
  const std::string scope = req.get_param_value("scope");
  std::string out;
  auto done = c.app.memory->Export(scope, [&out](const json& line) {
    out += line.dump() + "\n";
    return Ok();
  });
  if (!done) return Refuse(res, 400, done.error().message);
  res.set_header("Content-Disposition", "attachment; filename=\"tmcra-" + scope + ".jsonl\"");
  res.set_content(out, "application/x-ndjson");
}

void Routes(httplib::Server& server, Console& c) {
  server.set_pre_routing_handler([&c](const httplib::Request& req, httplib::Response& res) {
    return Admit(c, req, res) ? httplib::Server::HandlerResponse::Unhandled
                              : httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/", [&c](const httplib::Request&, httplib::Response& res) { Overview(c, res); });
  server.Get("/scope", [&c](const auto& req, auto& res) { ScopePage(c, req, res); });
  server.Get("/search", [&c](const auto& req, auto& res) { SearchPage(c, req, res); });
  server.Get("/recall", [&c](const auto&, auto& res) { RecallPage(c, res); });
  server.Get("/outbox", [&c](const auto&, auto& res) { OutboxPage(c, res); });
  server.Get("/forget", [&c](const auto&, auto& res) { Html(res, c, "Forget", kForgetForm); });
  server.Get("/export", [&c](const auto& req, auto& res) { ExportGet(c, req, res); });
  server.Post("/forget", WithCsrf(c, ForgetPost));
  server.Post("/feedback", WithCsrf(c, FeedbackPost));
  server.Post("/control", WithCsrf(c, ControlPost));
  server.Post("/replay", WithCsrf(c, ReplayPost));
}

// Opens `url` in the desktop's browser when there is one; a failure is only logged.
void OpenBrowser(const std::string& url) {
  const pid_t pid = fork();
  if (pid != 0) return;
  const int null = open("/dev/null", O_RDWR);
  dup2(null, 0), dup2(null, 1), dup2(null, 2);
  execlp("xdg-open", "xdg-open", url.c_str(), static_cast<char*>(nullptr));
  _exit(127);
}

}  // namespace

int RunConsole(const std::vector<std::string_view>& args) {
  int port = 0;
  bool open_browser = true;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--no-open") {
      open_browser = false;
    } else if (args[i] == "--port" && i + 1 < args.size()) {
      port = std::atoi(std::string(args[++i]).c_str());
      if (port < 1 || port > 65535) {
        std::fprintf(stderr, "tmcra-mcp console: --port: 1 to 65535\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "Usage: tmcra-mcp console [--port N] [--no-open]\n");
      return 2;
    }
  }
  // SIGINT and SIGTERM stop the server from a thread of their own.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto app = BuildApp();
  if (!app) {
    std::fprintf(stderr, "tmcra-mcp console: %s\n", app.error().message.c_str());
    return 1;
  }
  Console c;
  c.app = std::move(*app);
  if (auto outbox = c.app.delivery->outbox()) c.outbox = *outbox;
  c.token = RandomHex(32);
  c.cookie = RandomHex(32);
  c.csrf = RandomHex(32);
  httplib::Server server;
  Routes(server, c);
  c.port = port == 0 ? server.bind_to_any_port("127.0.0.1")
                     : (server.bind_to_port("127.0.0.1", port) ? port : -1);
  if (c.port <= 0) {
    std::fprintf(stderr, "tmcra-mcp console: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(c.port) + "/?token=" + c.token;
  std::fprintf(stdout, "%s\n", url.c_str());  // stdout-ok: the answer to the person
  std::fflush(stdout);
  if (open_browser && std::getenv("DISPLAY") != nullptr) OpenBrowser(url);
  std::thread stopper([&server, &stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    server.stop();
  });
  server.listen_after_bind();
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  return 0;
}

}  // namespace tmcra::app
