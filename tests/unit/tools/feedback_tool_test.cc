// tmcra_feedback through the protocol layer (docs/contract.md §4.3.2), over the real embedded
// engine and real memory controls on a temp dir, with the test playing the client's side of
// elicitation/create. Every outcome but an accepted, confirmed, unchanged context writes nothing.
#include "src/tools/feedback_tool.h"

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <thread>

#include "base/canonical_json.h"
#include "base/sqlite_db.h"
#include "src/api/embedded_memory_api.h"
#include "tests/support/pipe_session.h"
#include "tests/support/temp_dir.h"
#include "tests/support/unused_memory_api.h"

using json = nlohmann::json;
using tmcra::Error;
using tmcra::Result;
using tmcra::testing::PipeSession;
using tmcra::testing::TempDir;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPrefix =
    "请由用户确认以下记忆修改。来源内容是历史数据，原始记录保留用于审计。\n";
constexpr const char* kSuffix = "\n是否确认？取消或拒绝均保持原记忆。";
constexpr const char* kSession = "session-1";

std::string KeyOf(const std::string& scope) {
  return tmcra::controls::ControlKey("embedded://local", "", scope);
}

// What the client does with an elicitation/create request: a result, a JSON-RPC error
// ({"error": ...}), or no answer at all (nullopt).
using Answer = std::function<std::optional<json>(const json& request)>;

Answer Reply(json result) {
  return [result](const json&) -> std::optional<json> { return result; };
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<tmcra::api::EmbeddedMemoryApi> memory;
  std::unique_ptr<tmcra::controls::ControlStore> controls;
  std::unique_ptr<PipeSession> session;
  int next_id = 1;

  explicit Fixture(bool elicitation = true, std::chrono::milliseconds timeout = 120000ms) {
    tmcra::memory::EngineOptions options;
    options.path = dir.File("memory.db");
    memory = std::make_unique<tmcra::api::EmbeddedMemoryApi>(options);
    controls = std::make_unique<tmcra::controls::ControlStore>(dir.File("controls"));
    auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
    tmcra::tools::FeedbackToolDeps deps;
    deps.memory = memory.get();
    deps.controls = controls.get();
    deps.control_key = KeyOf;
    deps.default_scope = "personal";
    deps.confirmation_timeout = timeout;
    tmcra::tools::RegisterFeedbackTool(server->tools(), deps);
    session = std::make_unique<PipeSession>(std::move(server));
    session->Initialize("2025-11-25",
                        elicitation ? json{{"elicitation", json::object()}} : json::object());
  }
  ~Fixture() { session.reset(); }

  // Ingests messages into `scope` and waits for the job to succeed.
  void Remember(const std::string& scope, const std::string& session_id, json messages,
                const std::string& key) {
    auto job =
        memory->Ingest(scope, {{"session_id", session_id}, {"messages", std::move(messages)}},
                       {key, std::nullopt});
    REQUIRE(job);
    for (int i = 0; i < 500; ++i) {
      auto now = memory->GetJob((*job)["job_id"].get<std::string>());
      REQUIRE(now);
      if ((*now)["status"] == "succeeded") return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL("the ingest job did not finish");
  }

  json RecallJson(const std::string& query, const std::string& scope = "personal") {
    auto r = memory->Recall(scope, {{"query", query}, {"max_windows", 8}}, {});
    REQUIRE(r);
    return *r;
  }
  bool Shows(const std::string& query, const std::string& text) {
    return RecallJson(query)["prompt_evidence"]["content"].get<std::string>().find(text) !=
           std::string::npos;
  }
  std::string IdOf(const std::string& query, const std::string& text) {
    const json r = RecallJson(query);
    for (const auto& w : r["evidence"]["windows"]) {
      for (const auto& rec : w["records"]) {
        if (rec["text"] == text) return rec["memory_id"].get<std::string>();
      }
    }
    FAIL("no record with text " << text);
    return {};
  }

  // Rows in the feedback table: what was written.
  int64_t FeedbackRows() {
    tmcra::db::Database::Options options;
    options.path = dir.File("memory.db");
    auto db = tmcra::db::Database::Open(options);
    REQUIRE(db);
    auto st = (*db)->Prepare("SELECT COUNT(*) FROM feedback");
    if (!st) return 0;  // the store was never opened by a feedback-aware engine
    auto row = st->Step();
    REQUIRE(row);
    return st->Int(0);
  }

  // Calls tmcra_feedback, answering each elicitation/create with `answer`; returns the call's
  // result. `requests` collects the elicitation requests seen; `on_request` runs first.
  json Call(const json& args, const Answer& answer, std::vector<json>* requests = nullptr,
            const std::function<void()>& on_request = nullptr) {
    const int id = next_id++;
    session->Send({{"jsonrpc", "2.0"},
                   {"id", id},
                   {"method", "tools/call"},
                   {"params", {{"name", "tmcra_feedback"}, {"arguments", args}}}});
    for (;;) {
      json message = session->Read(10s);
      REQUIRE_FALSE(message.is_null());
      if (message.contains("method")) {
        if (message["method"] != "elicitation/create") continue;  // e.g. our cancellation
        if (requests != nullptr) requests->push_back(message);
        if (on_request) on_request();
        auto reply = answer(message);
        if (!reply) continue;
        json out{{"jsonrpc", "2.0"}, {"id", message["id"]}};
        if (reply->contains("error")) {
          out["error"] = (*reply)["error"];
        } else {
          out["result"] = *reply;
        }
        session->Send(out);
        continue;
      }
      if (message.contains("id") && message["id"] == id) return message["result"];
    }
  }
};

json Args(const std::string& action, const std::vector<std::string>& ids, const std::string& key,
          json extra = json::object()) {
  json args{
      {"session_id", kSession}, {"memory_ids", ids}, {"action", action}, {"idempotency_key", key}};
  args.update(extra);
  return args;
}

const json kAccept = {{"action", "accept"}, {"content", {{"confirm", true}}}};

std::string Text(const json& result) { return result["content"][0]["text"].get<std::string>(); }

}  // namespace

TEST_CASE("accepting writes the feedback once and recall no longer shows the ignored record",
          "[tools][feedback]") {
  Fixture f;
  f.Remember("personal", "s1",
             {{{"message_id", "u1"},
               {"role", "user"},
               {"content", "the deploy host is \"osprey\"\nport 22"},
               {"timestamp", "2026-07-15T00:00:00Z"}}},
             "key-accept-1");
  const std::string id = f.IdOf("deploy host osprey", "the deploy host is \"osprey\"\nport 22");
  std::vector<json> requests;
  const json result =
      f.Call(Args("ignore", {id, id}, "logical-feedback-one"), Reply(kAccept), &requests);
  REQUIRE_FALSE(result.contains("isError"));
  const json view = result["structuredContent"];
  CHECK(view["feedback_id"].get<std::string>().rfind("fb_", 0) == 0);
  CHECK(view["action"] == "ignore");
  CHECK(view["rating"] == "incorrect");
  CHECK(view["effective"] == true);
  CHECK(view["scope_name"] == "personal");

  // The elicitation is TMCRA's: message, form, and the exact source, shown once per distinct id.
  REQUIRE(requests.size() == 1);
  const json params = requests[0]["params"];
  CHECK(params["mode"] == "form");
  CHECK(params["requestedSchema"] ==
        json::parse(R"({"type":"object","title":"FeedbackConfirmation","properties":{
          "confirm":{"type":"boolean","default":false,"title":"确认以上记忆修改"}}})"));
  const std::string expected_preview =
      R"({"scope": "personal", "sessionId": "session-1", "action": "ignore", "sources": [{"memory_id": ")" +
      id + R"(", "original": "the deploy host is \"osprey\"\nport 22"}]})";
  CHECK(params["message"] == std::string(kPrefix) + expected_preview + kSuffix);

  CHECK_FALSE(f.Shows("deploy host osprey", "osprey"));
  CHECK(f.FeedbackRows() == 1);

  // A retry with the same key is confirmed again but applied once: the same feedback.
  const json again = f.Call(Args("ignore", {id, id}, "logical-feedback-one"), Reply(kAccept));
  CHECK(again["structuredContent"]["feedback_id"] == view["feedback_id"]);
  CHECK(f.FeedbackRows() == 1);
}

TEST_CASE("a confirmed correction shows the replacement, is recalled, and is stored once on retry",
          "[tools][feedback]") {
  Fixture f;
  f.Remember("personal", "s1",
             {{{"message_id", "u1"},
               {"role", "user"},
               {"content", "old fact: the bucket is wren"},
               {"timestamp", "2026-07-15T00:00:00Z"}}},
             "key-correct-1");
  const std::string id = f.IdOf("bucket wren", "old fact: the bucket is wren");
  const int64_t records = (*f.memory->Stats())["records"];
  std::vector<json> requests;
  const json args =
      Args("correct", {id}, "logical-feedback-correct",
           {{"replacement", "corrected fact: the bucket is finch"}, {"query_id", "api_q1"}});
  const json result = f.Call(args, Reply(kAccept), &requests);
  REQUIRE_FALSE(result.contains("isError"));
  const json view = result["structuredContent"];
  CHECK(view["action"] == "correct");
  CHECK(view["correction_job_id"].is_string());
  CHECK(view["correction_index_status"].is_string());
  REQUIRE(requests.size() == 1);
  const std::string message = requests[0]["params"]["message"];
  CHECK(message.find("\"original\": \"old fact: the bucket is wren\"") != std::string::npos);
  CHECK(message.find("\"replacement\": \"corrected fact: the bucket is finch\"}") !=
        std::string::npos);

  const json retry = f.Call(args, Reply(kAccept));
  CHECK(retry["structuredContent"]["feedback_id"] == view["feedback_id"]);
  CHECK(retry["structuredContent"]["correction_job_id"] == view["correction_job_id"]);
  for (int i = 0; i < 500; ++i) {
    auto job = f.memory->GetJob(view["correction_job_id"].get<std::string>());
    REQUIRE(job);
    if ((*job)["status"] == "succeeded") break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK((*f.memory->Stats())["records"] == records + 1);
  CHECK(f.Shows("bucket", "corrected fact: the bucket is finch"));
  CHECK_FALSE(f.Shows("bucket", "old fact"));
  CHECK(f.FeedbackRows() == 1);

  // The same key with another correction is refused, never taken for a replay.
  json other = args;
  other["replacement"] = "corrected fact: the bucket is heron";
  const json refused = f.Call(other, Reply(kAccept));
  CHECK(refused.value("isError", false));
  CHECK(Text(refused).rfind("Error executing tool tmcra_feedback: idempotency_conflict (HTTP 409)",
                            0) == 0);
  CHECK(f.FeedbackRows() == 1);
  CHECK_FALSE(f.Shows("bucket", "heron"));
}

TEST_CASE(
    "decline, cancel, an unconfirmed accept, a bad answer, a timeout and a client without "
    "elicitation write nothing and say which",
    "[tools][feedback]") {
  const json remember = {{{"message_id", "u1"},
                          {"role", "user"},
                          {"content", "the pager rota starts monday"},
                          {"timestamp", "2026-07-15T00:00:00Z"}}};
  SECTION("answers") {
    Fixture f;
    f.Remember("personal", "s1", remember, "key-answers-1");
    const std::string id = f.IdOf("pager rota", "the pager rota starts monday");
    const std::vector<std::pair<json, std::string>> cases = {
        {{{"action", "decline"}}, "decline"},
        {{{"action", "cancel"}}, "cancel"},
        {{{"action", "accept"}, {"content", {{"confirm", false}}}}, "declined"},
        {{{"action", "accept"}, {"content", json::object()}}, "declined"},
        {{{"action", "accept"}, {"content", {{"confirm", "yes"}}}}, "confirmation_unavailable"},
        {{{"error", {{"code", -32601}, {"message", "no"}}}}, "confirmation_unavailable"},
        {{{"action", "maybe"}}, "confirmation_unavailable"},
    };
    for (const auto& [answer, status] : cases) {
      INFO(answer.dump());
      const json r = f.Call(Args("ignore", {id}, "logical-feedback-two"), Reply(answer));
      REQUIRE_FALSE(r.contains("isError"));
      const json out = r["structuredContent"];
      CHECK(out["applied"] == false);
      CHECK(out["status"] == status);
      CHECK(out["preview"]["sources"][0]["original"] == "the pager rota starts monday");
      CHECK(out["preview"]["action"] == "ignore");
    }
    CHECK(f.FeedbackRows() == 0);
    CHECK(f.Shows("pager rota", "the pager rota starts monday"));
  }
  SECTION("no answer within the timeout is confirmation_expired") {
    Fixture f(true, 300ms);
    f.Remember("personal", "s1", remember, "key-timeout-1");
    const std::string id = f.IdOf("pager rota", "the pager rota starts monday");
    const json r = f.Call(Args("ignore", {id}, "logical-feedback-three"),
                          [](const json&) -> std::optional<json> { return std::nullopt; });
    CHECK(r["structuredContent"]["applied"] == false);
    CHECK(r["structuredContent"]["status"] == "confirmation_expired");
    CHECK(r["structuredContent"]["preview"]["sessionId"] == kSession);
    CHECK(f.FeedbackRows() == 0);
  }
  SECTION("a client without elicitation is confirmation_unavailable, and never asked") {
    Fixture f(false);
    f.Remember("personal", "s1", remember, "key-unavailable-1");
    const std::string id = f.IdOf("pager rota", "the pager rota starts monday");
    std::vector<json> requests;
    const json r = f.Call(Args("ignore", {id}, "logical-feedback-four"), Reply(kAccept), &requests);
    CHECK(requests.empty());
    CHECK(r["structuredContent"]["status"] == "confirmation_unavailable");
    CHECK(r["structuredContent"]["preview"]["scope"] == "personal");
    CHECK(f.FeedbackRows() == 0);
    CHECK(f.Shows("pager rota", "the pager rota starts monday"));
  }
}

TEST_CASE("a call cancelled while waiting for confirmation writes nothing", "[tools][feedback]") {
  Fixture f;
  f.Remember("personal", "s1",
             {{{"message_id", "u1"},
               {"role", "user"},
               {"content", "the vpn realm is tern"},
               {"timestamp", "2026-07-15T00:00:00Z"}}},
             "key-cancel-1");
  const std::string id = f.IdOf("vpn realm", "the vpn realm is tern");
  f.session->Send({{"jsonrpc", "2.0"},
                   {"id", 77},
                   {"method", "tools/call"},
                   {"params",
                    {{"name", "tmcra_feedback"},
                     {"arguments", Args("ignore", {id}, "logical-feedback-cancel")}}}});
  json request = f.session->Read(10s);
  REQUIRE(request["method"] == "elicitation/create");
  f.session->Send(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 77}}}});
  // The server withdraws its elicitation; a late accept changes nothing.
  json withdrawn = f.session->Read(5s);
  CHECK(withdrawn["method"] == "notifications/cancelled");
  f.session->Send({{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", kAccept}});
  CHECK(f.session->Call(1000, "ping")["id"] == 1000);
  CHECK_FALSE(f.session->ReadLine(300ms).has_value());  // the cancelled call has no response
  CHECK(f.FeedbackRows() == 0);
  CHECK(f.Shows("vpn realm", "the vpn realm is tern"));
}

TEST_CASE("the session's policy gates the tool: skipped when off, context_changed after a switch",
          "[tools][feedback]") {
  Fixture f;
  f.Remember("personal", "s1",
             {{{"message_id", "u1"},
               {"role", "user"},
               {"content", "the build cache lives on plover"},
               {"timestamp", "2026-07-15T00:00:00Z"}}},
             "key-policy-1");
  const std::string id = f.IdOf("build cache", "the build cache lives on plover");
  const std::string key = KeyOf("personal");

  SECTION("mode off: skipped, never asked") {
    REQUIRE(f.controls->Control(key, kSession, "mode", {{"mode", "off"}}));
    std::vector<json> requests;
    const json r = f.Call(Args("ignore", {id}, "logical-feedback-off"), Reply(kAccept), &requests);
    CHECK(r["structuredContent"] == json{{"skipped", true}, {"reason", "session_memory_disabled"}});
    CHECK(requests.empty());
  }
  SECTION("recall_only: skipped too (writes are off)") {
    REQUIRE(f.controls->Control(key, kSession, "mode", {{"mode", "recall_only"}}));
    const json r = f.Call(Args("ignore", {id}, "logical-feedback-ro"), Reply(kAccept));
    CHECK(r["structuredContent"]["skipped"] == true);
  }
  SECTION("a mode switch while the user decides: context_changed") {
    // Writes turned off; then off and back on (the generation moved: no backfill).
    for (bool back_to_normal : {false, true}) {
      INFO(back_to_normal);
      const json r =
          f.Call(Args("ignore", {id}, "logical-feedback-switch"), Reply(kAccept), nullptr, [&] {
            REQUIRE(f.controls->Control(key, kSession, "mode", {{"mode", "recall_only"}}));
            if (back_to_normal) {
              REQUIRE(f.controls->Control(key, kSession, "mode", {{"mode", "normal"}}));
            }
          });
      CHECK(r["structuredContent"] == json{{"applied", false}, {"status", "context_changed"}});
      REQUIRE(f.controls->Control(key, kSession, "mode", {{"mode", "normal"}}));
    }
  }
  CHECK(f.FeedbackRows() == 0);
  CHECK(f.Shows("build cache", "the build cache lives on plover"));
}

TEST_CASE("sources that are not exact, previews too large and bad arguments write nothing",
          "[tools][feedback]") {
  Fixture f;
  f.Remember("personal", "s1",
             {{{"message_id", "u1"},
               {"role", "user"},
               {"content", "the log bucket is dunlin"},
               {"timestamp", "2026-07-15T00:00:00Z"}},
              {{"message_id", "u2"},
               {"role", "user"},
               {"content", "huge " + std::string(32000, 'h')},
               {"timestamp", "2026-07-15T00:00:01Z"}}},
             "key-exact-1");
  const std::string id = f.IdOf("log bucket dunlin", "the log bucket is dunlin");
  std::vector<json> requests;

  const json unknown =
      f.Call(Args("ignore", {id, "rec_unknown"}, "logical-feedback-x"), Reply(kAccept), &requests);
  CHECK(unknown["structuredContent"] == json{{"applied", false}, {"status", "needs_exact_source"}});

  const std::string huge = f.IdOf("huge", "huge " + std::string(32000, 'h'));
  const json large =
      f.Call(Args("ignore", {huge}, "logical-feedback-y"), Reply(kAccept), &requests);
  CHECK(large["structuredContent"] == json{{"applied", false}, {"status", "preview_too_large"}});

  // Other scopes' records are not exact sources here.
  const json other = f.Call(Args("ignore", {id}, "logical-feedback-z", {{"scope", "elsewhere"}}),
                            Reply(kAccept), &requests);
  CHECK(other["structuredContent"]["status"] == "needs_exact_source");

  const std::string key = KeyOf("personal");
  const struct {
    json args;
    std::string message;
  } bad[] = {
      {Args("ignore", {}, "logical-feedback-b"),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("ignore", {"  "}, "logical-feedback-b"),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("ignore", {std::string(201, 'r')}, "logical-feedback-b"),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("ignore", std::vector<std::string>(101, id), "logical-feedback-b"),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("ignore", {id}, "short"),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("ignore", {id}, std::string(201, 'k')),
       "Exact memory IDs and an 8..200 character idempotency key are required"},
      {Args("correct", {id}, "logical-feedback-b"), "Correction text must be 1..4000 characters"},
      {Args("correct", {id}, "logical-feedback-b", {{"replacement", "   "}}),
       "Correction text must be 1..4000 characters"},
      {Args("correct", {id}, "logical-feedback-b", {{"replacement", std::string(4001, 'x')}}),
       "Correction text must be 1..4000 characters"},
  };
  int n = 0;
  for (const auto& c : bad) {
    INFO(c.args.dump().substr(0, 200));
    // The turn is suppressed before validation: a capture taken before the call can no longer
    // write (a session without a prepared turn falls back to the legacy-capture veto).
    const std::string session = "validation-session-" + std::to_string(n++);
    json args = c.args;
    args["session_id"] = session;
    auto capture = f.controls->GetPolicy(key, session);
    REQUIRE(capture);
    auto before = f.controls->MayWrite(*capture);
    REQUIRE(before);
    REQUIRE(*before);
    const json r = f.Call(args, Reply(kAccept), &requests);
    CHECK(r["isError"] == true);
    CHECK(Text(r) == "Error executing tool tmcra_feedback: " + c.message);
    auto may = f.controls->MayWrite(*capture);
    REQUIRE(may);
    CHECK_FALSE(*may);
  }
  const json bad_action =
      f.Call(Args("delete", {id}, "logical-feedback-b"), Reply(kAccept), &requests);
  CHECK(bad_action["isError"] == true);
  CHECK(Text(bad_action).find("arguments.action") != std::string::npos);

  CHECK(requests.empty());
  CHECK(f.FeedbackRows() == 0);
}

namespace {

// Answers Evidence and Feedback from a script: what a misbehaving Memory API would send.
class ScriptedApi final : public tmcra::testing::UnusedMemoryApi {
 public:
  std::function<Result<json>(std::string_view id)> evidence;
  std::function<Result<json>()> feedback;
  int feedback_calls = 0;
  Result<json> Evidence(std::string_view, std::string_view id, int limit) override {
    last_limit = limit;  // checked by the test thread (Catch is not thread-safe)
    return evidence(id);
  }
  Result<json> Feedback(std::string_view, const json& body,
                        const tmcra::api::FeedbackOptions& options) override {
    ++feedback_calls;
    last_body = body;
    last_key = options.idempotency_key;
    return feedback();
  }
  json Describe() const override { return {{"mode", "scripted"}}; }
  Result<json> Stats() override { return json::object(); }
  json last_body;
  std::string last_key;
  int last_limit = 0;
};

json Page(const std::string& id, json page_extra = json::object()) {
  json page{{"limit", 25}, {"offset", 0}, {"truncated", false}, {"next_cursor", nullptr}};
  page.update(page_extra);
  return {{"memory_id", id},
          {"scope_name", "personal"},
          {"items", {{{"text", "part one"}}, {{"text", "part two"}}}},
          {"page", page}};
}

}  // namespace

TEST_CASE("the Memory API's answers are checked: inexact pages, errors and a bad FeedbackView",
          "[tools][feedback]") {
  TempDir dir;
  ScriptedApi api;
  tmcra::controls::ControlStore store(dir.File("controls"));
  auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
  tmcra::tools::FeedbackToolDeps deps;
  deps.memory = &api;
  deps.controls = &store;
  deps.control_key = KeyOf;
  deps.default_scope = "personal";
  tmcra::tools::RegisterFeedbackTool(server->tools(), deps);
  PipeSession s(std::move(server));
  s.Initialize("2025-11-25", {{"elicitation", json::object()}});
  int next = 1;
  const auto call = [&](const json& args) {
    const int id = next++;
    s.Send({{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params", {{"name", "tmcra_feedback"}, {"arguments", args}}}});
    for (;;) {
      json m = s.Read(10s);
      REQUIRE_FALSE(m.is_null());
      if (m.contains("method") && m["method"] == "elicitation/create") {
        s.Send({{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", kAccept}});
        continue;
      }
      if (m.contains("id") && m["id"] == id) return m["result"];
    }
  };
  const json args = Args("restore", {"fb_1", "rec_2", "fb_1"}, "logical-feedback-scripted",
                         {{"query_id", "api_q"}});

  for (const json& extra : {json{{"has_more", true}}, json{{"has_more", 1}},
                            json{{"truncated", true}}, json{{"next_cursor", "c2"}}}) {
    INFO(extra.dump());
    api.evidence = [&](std::string_view id) -> Result<json> {
      return Page(std::string(id), extra);
    };
    CHECK(call(args)["structuredContent"]["status"] == "needs_exact_source");
  }
  api.evidence = [](std::string_view) -> Result<json> { return Page("someone-else"); };
  CHECK(call(args)["structuredContent"]["status"] == "needs_exact_source");
  api.evidence = [](std::string_view id) -> Result<json> {
    json p = Page(std::string(id));
    p["items"] = json::array();
    return p;
  };
  CHECK(call(args)["structuredContent"]["status"] == "needs_exact_source");
  api.evidence = [](std::string_view) -> Result<json> {
    return Error::Api(tmcra::Errc::kUnavailable, "unavailable", "try later");
  };
  const json unavailable = call(args);
  CHECK(unavailable["isError"] == true);
  CHECK(Text(unavailable) ==
        "Error executing tool tmcra_feedback: unavailable (HTTP 503): try later");
  CHECK(api.feedback_calls == 0);

  // Exact pages (has_more false) and a good view: the body is TMCRA's, sent once.
  api.evidence = [](std::string_view id) -> Result<json> {
    return Page(std::string(id), {{"has_more", false}});
  };
  api.feedback = []() -> Result<json> {
    return json{{"feedback_id", "fb_new"}, {"effective", true}};
  };
  const json ok = call(args);
  CHECK(ok["structuredContent"] == json{{"feedback_id", "fb_new"}, {"effective", true}});
  CHECK(api.feedback_calls == 1);
  CHECK(api.last_key == "logical-feedback-scripted");
  CHECK(api.last_limit == 25);
  CHECK(api.last_body == json{{"rating", "helpful"},
                              {"action", "restore"},
                              {"memory_ids", {"fb_1", "rec_2", "fb_1"}},
                              {"query_id", "api_q"}});

  // The ids a host passes back into URL paths (a restore's memory id, a job to wait for) are
  // safe ids (receipts::IsSafeServerId), as a job receipt's job_id.
  for (const json& bad :
       {json::array(), json{{"effective", true}}, json{{"feedback_id", 5}},
        json{{"feedback_id", " "}}, json{{"feedback_id", "../../x"}}, json{{"feedback_id", "fb 1"}},
        json{{"feedback_id", "fb_1"}, {"correction_job_id", "../jobs/x"}},
        json{{"feedback_id", "fb_1"}, {"correction_job_id", 5}}}) {
    INFO(bad.dump());
    api.feedback = [bad]() -> Result<json> { return bad; };
    const json r = call(args);
    CHECK(r["isError"] == true);
    CHECK(Text(r).find("invalid_response_contract") != std::string::npos);
  }
  api.feedback = []() -> Result<json> {
    return json{{"feedback_id", "fb_2"}, {"correction_job_id", nullptr}};
  };
  CHECK(call(args)["structuredContent"]["feedback_id"] == "fb_2");
  api.feedback = []() -> Result<json> {
    return Error::Api(tmcra::Errc::kConflict, "idempotency_conflict", "different body");
  };
  CHECK(Text(call(args)) ==
        "Error executing tool tmcra_feedback: idempotency_conflict (HTTP 409): different body");
}

TEST_CASE("exact-source rule and the preview's JSON text", "[tools][feedback]") {
  using tmcra::tools::ExactEvidence;
  std::string text;
  const json good = Page("rec_1");
  CHECK(ExactEvidence(good, "rec_1", "personal", &text));
  CHECK(text == "part one\n\npart two");
  CHECK_FALSE(ExactEvidence(good, "rec_2", "personal", &text));
  CHECK_FALSE(ExactEvidence(good, "rec_1", "other", &text));
  CHECK_FALSE(ExactEvidence(Page("rec_1", {{"has_more", "yes"}}), "rec_1", "personal", &text));
  CHECK(ExactEvidence(Page("rec_1", {{"has_more", 0}}), "rec_1", "personal", &text));
  CHECK_FALSE(ExactEvidence(Page("rec_1", {{"truncated", true}}), "rec_1", "personal", &text));
  CHECK_FALSE(ExactEvidence(Page("rec_1", {{"next_cursor", "x"}}), "rec_1", "personal", &text));
  json no_text = good;
  no_text["items"][1] = {{"text", nullptr}};
  CHECK_FALSE(ExactEvidence(no_text, "rec_1", "personal", &text));
  json no_page = good;
  no_page.erase("page");
  CHECK(ExactEvidence(no_page, "rec_1", "personal", &text));
  CHECK_FALSE(ExactEvidence(json::array(), "rec_1", "personal", &text));

  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  v["z"] = "é \"q\" \\ \n\t\x01 \u2028";
  v["a"] = nlohmann::ordered_json::array({1, nullptr, true, 1.5});
  v["m"] = nlohmann::ordered_json::object();
  CHECK(
      tmcra::PythonJsonDumps(v) ==
      "{\"z\": \"é \\\"q\\\" \\\\ \\n\\t\\u0001 \u2028\", \"a\": [1, null, true, 1.5], \"m\": {}}");
}
