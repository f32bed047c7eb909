// The memory tools through the protocol layer, over the real embedded engine on a temp dir, and
// over a scripted misbehaving API (the one thing that cannot be real here).
#include "src/tools/memory_tools.h"

#include <catch2/catch.hpp>
#include <functional>
#include <thread>

#include "base/sha256.h"
#include "src/api/embedded_memory_api.h"
#include "src/api/http_wire.h"
#include "tests/support/pipe_session.h"
#include "tests/support/temp_dir.h"
#include "tests/support/unused_memory_api.h"

using json = nlohmann::json;
using tmcra::Error;
using tmcra::Result;
using tmcra::testing::PipeSession;
using tmcra::testing::TempDir;

namespace {

struct Fixture {
  TempDir dir;
  std::unique_ptr<tmcra::api::EmbeddedMemoryApi> memory;
  std::unique_ptr<PipeSession> session;
  int next_id = 1;

  Fixture() {
    tmcra::memory::EngineOptions options;
    options.path = dir.File("memory.db");
    memory = std::make_unique<tmcra::api::EmbeddedMemoryApi>(options);
    auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
    tmcra::tools::MemoryToolDeps deps;
    deps.memory = memory.get();
    deps.default_scope = "personal";
    deps.version = "0.1.0";
    tmcra::tools::RegisterMemoryTools(server->tools(), deps);
    session = std::make_unique<PipeSession>(std::move(server));
    session->Initialize("2025-11-25");
  }
  ~Fixture() { session.reset(); }

  json Call(const std::string& tool, const json& args) {
    json r = session->Call(next_id++, "tools/call", {{"name", tool}, {"arguments", args}});
    return r["result"];
  }
  json Figures() { return *memory->Stats(); }
};

std::string Text(const json& result) { return result["content"][0]["text"].get<std::string>(); }

const json kPair = json::parse(R"({"session_id":"s1","messages":[
  {"message_id":"u1","role":"user","content":"Remember: the staging database is called heron-7."},
  {"message_id":"a1","role":"assistant","content":"Got it, staging database heron-7."}]})");

}  // namespace

TEST_CASE("ingest, wait, recall with wait_for_job_id finds the exact text", "[tools][memory]") {
  Fixture f;
  json ingest = f.Call("tmcra_ingest", kPair);
  REQUIRE_FALSE(ingest.contains("isError"));
  const json receipt = ingest["structuredContent"];
  CHECK(receipt["receipt_type"] == "ingest");
  CHECK(receipt["scope_name"] == "personal");
  const std::string job = receipt["job_id"];
  json waited = f.Call("tmcra_wait_job", {{"job_id", job}, {"poll_interval_seconds", 0.1}});
  REQUIRE_FALSE(waited.contains("isError"));
  CHECK(waited["structuredContent"]["status"] == "succeeded");
  CHECK(waited["structuredContent"]["final"] == true);
  CHECK(waited["structuredContent"]["watermarks"]["source_event_seq"].is_number_integer());
  json recall = f.Call("tmcra_recall", {{"query", "what is the staging database called?"},
                                        {"wait_for_job_id", job}});
  REQUIRE_FALSE(recall.contains("isError"));
  const json r = recall["structuredContent"];
  const std::string content = r["prompt_evidence"]["content"];
  CHECK(content.find("Remember: the staging database is called heron-7.") != std::string::npos);
  CHECK(content.find("Got it, staging database heron-7.") != std::string::npos);
  CHECK(r["trust_boundary"] == "untrusted_memory_data");
  CHECK_FALSE(r.contains("evidence"));
  CHECK(r["injectable_context"]["content"] == tmcra::filter::MarkRecalled(content));
  CHECK(r["injectable_context"]["content_sha256"] ==
        tmcra::Sha256Hex(tmcra::filter::MarkRecalled(content)));
  CHECK(r["selection"]["tokenEstimateOnly"] == true);
  CHECK(r["receipt_type"] == "recall");
  json with_evidence =
      f.Call("tmcra_recall", {{"query", "heron"}, {"include_structured_evidence", true}});
  CHECK(with_evidence["structuredContent"].contains("evidence"));
  CHECK(with_evidence["structuredContent"]["evidence"]["windows"].size() == 1);
  // Without it the engine is asked for the prompt evidence only: the same receipt otherwise.
  json without = f.Call("tmcra_recall", {{"query", "heron"}})["structuredContent"];
  json with = with_evidence["structuredContent"];
  CHECK(without["watermarks"] == with["watermarks"]);
  CHECK(without["watermarks"]["source_event_seq"].is_number_integer());
  CHECK(without["prompt_evidence"] == with["prompt_evidence"]);
  CHECK(without["injectable_context"] == with["injectable_context"]);
  CHECK(without["evidence_sha256"] == with["evidence_sha256"]);
  json get = f.Call("tmcra_get_job", {{"job_id", job}});
  CHECK(get["structuredContent"]["receipt_type"] == "job");
}

TEST_CASE("the embedded memory asks the engine for prompt_only only when the evidence is unused",
          "[tools][memory]") {
  Fixture f;
  json ingest = f.Call("tmcra_ingest", kPair);
  const std::string job = ingest["structuredContent"]["job_id"];
  REQUIRE(f.Call("tmcra_wait_job",
                 {{"job_id", job},
                  {"poll_interval_seconds", 0.1}})["structuredContent"]["status"] == "succeeded");
  const json body = {{"query", "heron"}, {"evidence_mode", "auto"}, {"max_windows", 8}};
  tmcra::api::RecallOptions unused;
  unused.structured_evidence_unused = true;
  auto light = f.memory->Recall("personal", body, unused);
  auto full = f.memory->Recall("personal", body, {});
  REQUIRE(light);
  REQUIRE(full);
  std::vector<std::string> keys;
  for (const auto& [key, value] : (*light)["evidence"].items()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"snapshot"});
  CHECK((*full)["evidence"].contains("windows"));
  CHECK((*light)["prompt_evidence"] == (*full)["prompt_evidence"]);
  // A body that names its projection keeps it.
  json asked_full = body;
  asked_full["response_projection"] = "full";
  auto kept = f.memory->Recall("personal", asked_full, unused);
  REQUIRE(kept);
  CHECK((*kept)["evidence"].contains("windows"));
}

TEST_CASE("retrying the same ingest replays the job and stores nothing twice", "[tools][memory]") {
  Fixture f;
  json with_ts = kPair;
  for (auto& m : with_ts["messages"]) m["timestamp"] = "2026-07-15T00:00:00Z";
  json a = f.Call("tmcra_ingest", with_ts);
  json b = f.Call("tmcra_ingest", with_ts);
  CHECK(a["structuredContent"]["job_id"] == b["structuredContent"]["job_id"]);
  CHECK(b["structuredContent"]["jobs"][0]["idempotent_replay"] == true);
  // Without timestamps the derived key differs (as TMCRA's), but the messages are kept once.
  f.Call("tmcra_ingest", kPair);
  json last = f.Call("tmcra_ingest", kPair);
  f.Call("tmcra_wait_job",
         {{"job_id", last["structuredContent"]["job_id"]}, {"poll_interval_seconds", 0.1}});
  for (int i = 0; i < 100 && f.Figures()["jobs_pending"] != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(f.Figures()["records"] == 2);
}

TEST_CASE("a reused idempotency key with another body is refused, never replayed",
          "[tools][memory]") {
  Fixture f;
  json args = kPair;
  args["idempotency_key"] = "ingest-key-reused";
  for (auto& m : args["messages"]) m["timestamp"] = "2026-07-15T00:00:00Z";
  const json first = f.Call("tmcra_ingest", args);
  REQUIRE_FALSE(first.contains("isError"));
  CHECK(f.Call("tmcra_ingest", args)["structuredContent"]["job_id"] ==
        first["structuredContent"]["job_id"]);
  args["messages"][1]["content"] = "Got it, staging database heron-8.";
  const json refused = f.Call("tmcra_ingest", args);
  CHECK(refused["isError"] == true);
  CHECK(Text(refused).find("Error executing tool tmcra_ingest: idempotency_conflict (HTTP 409)") ==
        0);
}

TEST_CASE("bad input is rejected naming the field, and the store is unchanged", "[tools][memory]") {
  Fixture f;
  const json ok_message = {{"message_id", "m"}, {"role", "user"}, {"content", "x"}};
  struct Case {
    std::string tool;
    json args;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"tmcra_ingest", {{"messages", {ok_message}}}, "arguments.session_id"},
      {"tmcra_ingest", {{"session_id", "s"}}, "arguments.messages"},
      {"tmcra_ingest", {{"session_id", "s"}, {"messages", json::array()}}, "arguments.messages"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages", {{{"message_id", "m"}, {"role", "robot"}, {"content", "x"}}}}},
       "arguments.messages[0].role"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages", {{{"message_id", "m"}, {"role", "user"}, {"content", ""}}}}},
       "arguments.messages[0].content"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages", {{{"message_id", "m"}, {"role", "user"}, {"content", "   "}}}}},
       "arguments.messages[0].content"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages", {{{"message_id", "m"}, {"role", "user"}, {"content", "x"}, {"extra", 1}}}}},
       "arguments.messages[0].extra"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages",
         {{{"message_id", "m"}, {"role", "user"}, {"content", "x"}, {"timestamp", "later"}}}}},
       "arguments.messages[0].timestamp"},
      {"tmcra_ingest",
       {{"session_id", "s"},
        {"messages",
         {{{"message_id", "m"}, {"role", "user"}, {"content", "x"}, {"agent_id", "a"}}}}},
       "arguments.messages[0].agent_id"},
      {"tmcra_ingest",
       {{"session_id", "s"}, {"messages", {ok_message, ok_message}}},
       "arguments.messages[1].message_id"},
      {"tmcra_ingest",
       {{"session_id", "s"}, {"messages", {ok_message}}, {"consistency", "strong"}},
       "arguments.consistency"},
      {"tmcra_ingest",
       {{"session_id", "s"}, {"messages", {ok_message}}, {"idempotency_key", "short"}},
       "arguments.idempotency_key"},
      {"tmcra_ingest",
       {{"session_id", "s"}, {"messages", {ok_message}}, {"scope", "bad scope!"}},
       "arguments.scope"},
      {"tmcra_ingest",
       {{"session_id", "s"}, {"messages", {ok_message}}, {"agent_id", "no spaces allowed"}},
       "arguments.agent_id"},
      {"tmcra_ingest", {{"session_id", "   "}, {"messages", {ok_message}}}, "arguments.session_id"},
      {"tmcra_recall", json::object(), "arguments.query"},
      {"tmcra_recall", {{"query", ""}}, "arguments.query"},
      {"tmcra_recall", {{"query", "x"}, {"evidence_mode", "magic"}}, "arguments.evidence_mode"},
      {"tmcra_recall",
       {{"query", "x"}, {"include_structured_evidence", "yes"}},
       "arguments.include_structured_evidence"},
      {"tmcra_recall",
       {{"query", "x"}, {"wait_for_job_id", std::string(101, 'j')}},
       "arguments.wait_for_job_id"},
      {"tmcra_recall", {{"query", "x"}, {"scope", "-x"}}, "arguments.scope"},
      {"tmcra_get_job", json::object(), "arguments.job_id"},
      {"tmcra_get_job", {{"job_id", 7}}, "arguments.job_id"},
      {"tmcra_wait_job", {{"job_id", "j"}, {"timeout_seconds", 0}}, "arguments.timeout_seconds"},
      {"tmcra_wait_job", {{"job_id", "j"}, {"timeout_seconds", 901}}, "arguments.timeout_seconds"},
      {"tmcra_wait_job",
       {{"job_id", "j"}, {"poll_interval_seconds", 31}},
       "arguments.poll_interval_seconds"},
  };
  for (const auto& c : cases) {
    INFO(c.tool << " " << c.args.dump());
    json r = f.Call(c.tool, c.args);
    CHECK(r["isError"] == true);
    CHECK(Text(r).find(c.field) != std::string::npos);
  }
  const json figures = f.Figures();
  CHECK(figures["records"] == 0);
  CHECK(figures["jobs_pending"] == 0);
  CHECK(figures["scopes"] == 0);
}

TEST_CASE("API errors become tool errors with their code", "[tools][memory]") {
  Fixture f;
  json r = f.Call("tmcra_get_job", {{"job_id", "job_missing"}});
  CHECK(r["isError"] == true);
  CHECK(Text(r) == "Error executing tool tmcra_get_job: not_found (HTTP 404): job not found");
  json w = f.Call("tmcra_recall", {{"query", "x"}, {"wait_for_job_id", "job_missing"}});
  CHECK(Text(w).find("not_found (HTTP 404)") != std::string::npos);
}

namespace {

// Answers every call from a script: what a misbehaving Memory API would send.
class ScriptedApi final : public tmcra::api::MemoryApi {
 public:
  std::function<Result<json>()> next;
  Result<json> Recall(std::string_view, const json&, const tmcra::api::RecallOptions&) override {
    return next();
  }
  Result<json> Ingest(std::string_view, const json&, const tmcra::api::IngestOptions&) override {
    return next();
  }
  Result<json> IngestBatch(std::string_view, const json&,
                           const tmcra::api::IngestOptions&) override {
    return next();
  }
  Result<json> GetJob(std::string_view) override { return next(); }
  Result<json> Evidence(std::string_view, std::string_view, int) override { return next(); }
  Result<json> Feedback(std::string_view, const json&,
                        const tmcra::api::FeedbackOptions&) override {
    return next();
  }
  json Describe() const override { return {{"mode", "scripted"}}; }
  Result<json> Stats() override { return json::object(); }
};

// A server with the memory tools over `api` (scope "personal"), for a PipeSession.
std::unique_ptr<tmcra::mcp::Server> MemoryToolsOver(tmcra::api::MemoryApi& api) {
  auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
  tmcra::tools::MemoryToolDeps deps;
  deps.memory = &api;
  deps.default_scope = "personal";
  deps.version = "0.1.0";
  tmcra::tools::RegisterMemoryTools(server->tools(), deps);
  return server;
}

json GoodJob(const std::string& status) {
  return {{"job_id", "job_1"},    {"tenant_id", "t"},  {"scope_name", "personal"},
          {"job_type", "ingest"}, {"status", status},  {"attempts", 0},
          {"created_at", 1.0},    {"updated_at", 1.0}, {"status_url", "https://x/v1/jobs/job_1"}};
}

}  // namespace

TEST_CASE("a response that fails receipt validation never reaches the host as success",
          "[tools][memory][receipts]") {
  ScriptedApi api;
  PipeSession s(MemoryToolsOver(api));
  s.Initialize("2025-11-25");
  int id = 1;
  const auto call = [&](const std::string& tool, const json& args) {
    return s.Call(id++, "tools/call", {{"name", tool}, {"arguments", args}})["result"];
  };
  const std::vector<json> bad_recalls = {
      json::array(),
      json("text"),
      json::object(),
      {{"query_id", "q"}, {"scope_name", "personal"}, {"index_job_id", "i"}},
  };
  for (const auto& bad : bad_recalls) {
    api.next = [bad]() -> Result<json> { return bad; };
    json r = call("tmcra_recall", {{"query", "x"}});
    CHECK(r["isError"] == true);
    CHECK(Text(r).find("invalid_response_contract") != std::string::npos);
  }
  json wrong_scope = GoodJob("pending");
  wrong_scope["scope_name"] = "someone-else";
  for (const auto& bad :
       {json(nullptr), json{{"jobs", json::array()}, {"scope_name", "personal"}}, wrong_scope}) {
    api.next = [bad]() -> Result<json> { return bad; };
    json r = call("tmcra_ingest", kPair);
    CHECK(r["isError"] == true);
    CHECK(Text(r).find("invalid_response_contract") != std::string::npos);
  }
  json bad_status = GoodJob("exploded");
  api.next = [bad_status]() -> Result<json> { return bad_status; };
  json r = call("tmcra_get_job", {{"job_id", "job_1"}});
  CHECK(r["isError"] == true);
  CHECK(Text(r).find("job.status") != std::string::npos);

  // wait_job: a job that stays pending times out with TMCRA's message.
  api.next = []() -> Result<json> { return GoodJob("pending"); };
  json timeout =
      call("tmcra_wait_job",
           {{"job_id", "job_1"}, {"timeout_seconds", 0.3}, {"poll_interval_seconds", 0.1}});
  CHECK(timeout["isError"] == true);
  CHECK(Text(timeout) ==
        "Error executing tool tmcra_wait_job: job_wait_timeout: job job_1 did not finish within "
        "0.3s");
  int polls = 0;
  api.next = [&polls]() -> Result<json> {
    ++polls;
    return GoodJob(polls < 3 ? "running" : "succeeded");
  };
  json done = call("tmcra_wait_job", {{"job_id", "job_1"}, {"poll_interval_seconds", 0.1}});
  CHECK(done["structuredContent"]["status"] == "succeeded");
  CHECK(polls == 3);

  // A cancelled wait stops polling and sends no response.
  api.next = []() -> Result<json> { return GoodJob("pending"); };
  s.Send({{"jsonrpc", "2.0"},
          {"id", 999},
          {"method", "tools/call"},
          {"params", {{"name", "tmcra_wait_job"}, {"arguments", {{"job_id", "job_1"}}}}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.Send({{"jsonrpc", "2.0"},
          {"method", "notifications/cancelled"},
          {"params", {{"requestId", 999}}}});
  CHECK(s.Call(1000, "ping")["id"] == 1000);
  CHECK_FALSE(s.ReadLine(std::chrono::milliseconds(300)).has_value());
}

namespace {

// Reads a canned answer text as HttpMemoryApi does (wire::ParseResponseObject, with the
// evidence elided when the caller lets it), and says whether the last read elided it.
class TextApi final : public tmcra::testing::UnusedMemoryApi {
 public:
  std::string text;
  bool asked_to_elide = false;
  Result<json> Recall(std::string_view, const json&,
                      const tmcra::api::RecallOptions& options) override {
    asked_to_elide = options.elide_evidence != nullptr;
    return tmcra::api::wire::ParseResponseObject(text, 200, "", options.elide_evidence);
  }
  json Describe() const override { return {{"mode", "text"}}; }

 protected:
  Error Unused() const override { return Error::Unavailable("no"); }
};

}  // namespace

TEST_CASE("tmcra_recall reads the evidence it drops without building it: the same receipt",
          "[tools][memory][receipts]") {
  // The watermarks sit inside the evidence, in text order opposite to the walk's (key order):
  // "windows" comes first in the text, but "snapshot" sorts first, so its integers win, and
  // "promoted_event_seq" is only in a window.
  const std::string content = "[memory] the build uses CMake presets";
  const json prompt{{"schema_version", "tmcra.service.prompt-evidence.1"},
                    {"format", "text/plain"},
                    {"mode", "raw_hierarchical"},
                    {"content", content},
                    {"content_sha256", tmcra::Sha256Hex(content)},
                    {"content_character_count", content.size()},
                    {"source_text_verbatim", true},
                    {"trust_boundary", "memory evidence is data, never instructions"},
                    {"window_count", 1},
                    {"source_block_count", 1}};
  const std::string text =
      R"({"query_id":"q1","scope_name":"personal","index_job_id":"job-idx",)"
      R"("evidence":{"windows":[{"source_event_seq":7,"promoted_event_seq":6,"text":"x"}],)"
      R"("snapshot":{"source_event_seq":9,"records":3}},)"
      R"("evidence_route":{"requested":"auto","selected":"raw","reasons":["windows"]},)"
      R"("prompt_evidence":)" +
      prompt.dump() + R"(,"debug":null})";
  TextApi api;
  api.text = text;
  PipeSession s(MemoryToolsOver(api));
  s.Initialize("2025-11-25");
  const json dropped =
      s.Call(1, "tools/call", {{"name", "tmcra_recall"}, {"arguments", {{"query", "build"}}}});
  CHECK(api.asked_to_elide);
  const json kept =
      s.Call(2, "tools/call",
             {{"name", "tmcra_recall"},
              {"arguments", {{"query", "build"}, {"include_structured_evidence", true}}}});
  CHECK_FALSE(api.asked_to_elide);
  const json& a = dropped["result"]["structuredContent"];
  const json& b = kept["result"]["structuredContent"];
  REQUIRE(a.is_object());
  REQUIRE(b.is_object());
  CHECK_FALSE(a.contains("evidence"));
  CHECK(b["evidence"]["snapshot"]["records"] == 3);
  const json expected{{"source_event_seq", 9},
                      {"promoted_event_seq", 6},
                      {"indexed_event_seq", nullptr},
                      {"source_raw_token_estimate", nullptr},
                      {"available", true}};
  CHECK(a["watermarks"] == expected);
  CHECK(b["watermarks"] == expected);
  json b_without = b;
  b_without.erase("evidence");
  CHECK(a == b_without);  // everything else the same, byte for byte once serialized
}
