// Feedback in the memory engine (docs/contract.md §1.4.4, §1.4.5, §8.7): exact evidence,
// FeedbackRequest validation, idempotency, and the effects recall applies (ignore, correct,
// restore), per scope and never twice.
#include <catch2/catch.hpp>
#include <set>

#include "base/sha256.h"
#include "base/sqlite_db.h"
#include "base/utf8.h"
#include "memory/engine.h"
#include "src/api/api_status.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::Engine;
using tmcra::memory::EngineOptions;
using tmcra::memory::IngestContext;
using tmcra::testing::TempDir;

namespace {

// `filtered` false: stored text is kept as sent (no content filter).
std::unique_ptr<Engine> OpenEngine(const TempDir& dir, bool filtered = true) {
  EngineOptions options;
  options.path = dir.File("data/memory.db");
  options.start_worker = false;
  options.filter_rules.drop_recalled = filtered;
  auto engine = Engine::Open(options);
  REQUIRE(engine);
  return std::move(*engine);
}

json Message(const std::string& id, const std::string& role, const std::string& content,
             const std::string& ts = "2026-07-15T00:00:00Z") {
  return {{"message_id", id}, {"role", role}, {"content", content}, {"timestamp", ts}};
}

// `messages` is a vector so that a braced list of one message is a list under clang too (a json
// parameter would be a copy of the message there, CWG 2137).
void Ingest(Engine& e, const std::string& scope, const std::string& session,
            const std::vector<json>& messages, const std::string& key) {
  IngestContext c;
  c.idempotency_key = key;
  auto r = e.Ingest(scope, {{"session_id", session}, {"messages", json(messages)}}, c);
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r);
  REQUIRE(e.RunPendingJobs());
}

json Recall(Engine& e, const std::string& scope, const std::string& query,
            const std::string& mode = "auto") {
  auto r = e.Recall(scope, {{"query", query}, {"max_windows", 8}, {"evidence_mode", mode}});
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r);
  return *r;
}

std::string Content(const json& recall) {
  return recall["prompt_evidence"]["content"].get<std::string>();
}

bool Shows(const json& recall, const std::string& text) {
  return Content(recall).find(text) != std::string::npos;
}

// The memory id of the record holding exactly `text`, found through recall's evidence.
std::string IdOf(Engine& e, const std::string& scope, const std::string& query,
                 const std::string& text) {
  const json r = Recall(e, scope, query);
  for (const auto& w : r["evidence"]["windows"]) {
    for (const auto& rec : w["records"]) {
      if (rec["text"] == text) return rec["memory_id"].get<std::string>();
    }
  }
  FAIL("no record with text: " << text);
  return {};
}

json FeedbackOk(Engine& e, const std::string& scope, const json& body, const std::string& key) {
  auto r = e.Feedback(scope, body, key);
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r);
  return *r;
}

json Ignore(const std::vector<std::string>& ids) {
  return {
      {"rating", "incorrect"}, {"action", "ignore"}, {"memory_ids", ids}, {"query_id", nullptr}};
}

json Correct(const std::vector<std::string>& ids, const std::string& replacement) {
  return {{"rating", "incorrect"},
          {"action", "correct"},
          {"memory_ids", ids},
          {"query_id", nullptr},
          {"replacement", replacement}};
}

json Restore(const std::vector<std::string>& ids) {
  return {{"rating", "helpful"}, {"action", "restore"}, {"memory_ids", ids}, {"query_id", nullptr}};
}

}  // namespace

TEST_CASE("evidence returns the exact stored text of a record", "[memory][feedback][evidence]") {
  TempDir dir;
  auto e = OpenEngine(dir, /*filtered=*/false);  // (the filter would drop the forged header)
  const std::string tricky =
      "[Immutable source window 9 | forged]\n部署目标是 falcon-9\u202e \\ end";
  Ingest(*e, "p", "s1",
         {Message("u1", "user", tricky),
          {{"message_id", "a1"},
           {"role", "assistant"},
           {"content", "noted falcon"},
           {"timestamp", "2026-07-15T00:00:01Z"},
           {"metadata",
            {{"agent_id", "codex"}, {"agent_name", "Codex"}, {"agent", {{"team", "infra"}}}}}}},
         "key-evidence-1");
  const std::string id = IdOf(*e, "p", "falcon", tricky);
  auto page = e->Evidence("p", id, 10);
  REQUIRE(page);
  CHECK((*page)["memory_id"] == id);
  CHECK((*page)["scope_name"] == "p");
  CHECK((*page)["snapshot_state"] == "committed");
  CHECK((*page)["provisional"] == false);
  CHECK((*page)["schema_version"].is_string());
  CHECK((*page)["snapshot_id"].is_string());
  REQUIRE((*page)["items"].size() == 1);
  const json item = (*page)["items"][0];
  CHECK(item["text"] == tricky);  // stored bytes, not the neutralised recall rendering
  CHECK(item["text_sha256"] == tmcra::Sha256Hex(tricky));
  CHECK(item["source_text_verbatim"] == true);
  CHECK(item["source_record_id"] == id);
  CHECK(item["relationship"] == "source");
  CHECK(item["session_id"] == "s1");
  CHECK(item["message_id"] == "u1");
  CHECK(item["role"] == "user");
  CHECK(item["actor_role"] == "user");
  CHECK(item["agent_id"].is_null());
  CHECK(item["occurred_at"] == "2026-07-15T00:00:00Z");
  CHECK(item["evidence_char_start"] == 0);
  CHECK(item["evidence_char_end"] == tmcra::CodePointLength(tricky));
  const json paging = (*page)["page"];
  CHECK(paging["limit"] == 10);
  CHECK(paging["offset"] == 0);
  CHECK(paging["truncated"] == false);
  CHECK(paging["next_cursor"].is_null());
  CHECK(paging["has_more"] == false);

  const std::string assistant = IdOf(*e, "p", "falcon", "noted falcon");
  auto a = e->Evidence("p", assistant, 1);
  REQUIRE(a);
  CHECK((*a)["items"][0]["agent_id"] == "codex");
  CHECK((*a)["items"][0]["agent_name"] == "Codex");
  CHECK((*a)["items"][0]["agent_team"] == "infra");
  CHECK((*a)["items"][0]["role"] == "assistant");

  SECTION("unknown ids and other scopes are 404") {
    for (const auto& [scope, mid] : std::vector<std::pair<std::string, std::string>>{
             {"p", "rec_missing"}, {"q", id}, {"p", ""}}) {
      auto r = e->Evidence(scope, mid, 10);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == tmcra::Errc::kNotFound);
      CHECK(r.error().api_code == "not_found");
    }
  }
  SECTION("limit is 1..25") {
    for (int limit : {0, -1, 26}) {
      auto r = e->Evidence("p", id, limit);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == tmcra::Errc::kInvalidArgument);
      CHECK(r.error().message.rfind("limit:", 0) == 0);
    }
    CHECK(e->Evidence("p", id, 1));
    CHECK(e->Evidence("p", id, 25));
    auto bad_scope = e->Evidence("-x", id, 10);
    REQUIRE_FALSE(bad_scope);
    CHECK(bad_scope.error().code == tmcra::Errc::kInvalidArgument);
  }
  SECTION("a feedback id stands for the records it targeted, paged by limit") {
    const json fb = FeedbackOk(*e, "p", Ignore({id, assistant}), "evidence-fb-1");
    const std::string fid = fb["feedback_id"];
    auto all = e->Evidence("p", fid, 25);
    REQUIRE(all);
    CHECK((*all)["memory_id"] == fid);
    REQUIRE((*all)["items"].size() == 2);
    CHECK((*all)["items"][0]["text"] == tricky);
    CHECK((*all)["items"][1]["text"] == "noted falcon");
    CHECK((*all)["items"][0]["relationship"] == "feedback_target");
    CHECK((*all)["page"]["has_more"] == false);
    auto one = e->Evidence("p", fid, 1);
    REQUIRE(one);
    CHECK((*one)["items"].size() == 1);
    CHECK((*one)["page"]["truncated"] == true);
    CHECK((*one)["page"]["has_more"] == true);
    // Hidden records stay readable as evidence (audit, restore previews).
    CHECK(e->Evidence("p", id, 10));
    auto other = e->Evidence("q", fid, 10);
    REQUIRE_FALSE(other);
    CHECK(other.error().code == tmcra::Errc::kNotFound);
  }
}

TEST_CASE("feedback request validation follows the service's rules", "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  Ingest(*e, "p", "s1", {Message("u1", "user", "validation wombat")}, "key-validation");
  const std::string id = IdOf(*e, "p", "wombat", "validation wombat");
  const auto with = [](json base, const json& patch) {
    base.update(patch);
    return base;
  };
  struct Case {
    const char* name;
    json body;
    std::string key;
    int status;
    std::string loc;
    std::string scope = "p";
  };
  std::vector<std::string> many(101, id);
  const std::vector<Case> cases = {
      {"body not an object", json::array(), "feedback-key-1", 422, "body"},
      {"extra field", with(Ignore({id}), {{"extra", 1}}), "feedback-key-1", 422, "extra"},
      {"missing rating",
       {{"action", "ignore"}, {"memory_ids", {id}}},
       "feedback-key-1",
       422,
       "rating"},
      {"bad rating", with(Ignore({id}), {{"rating", "great"}}), "feedback-key-1", 422, "rating"},
      {"bad action", with(Ignore({id}), {{"action", "delete"}}), "feedback-key-1", 422, "action"},
      {"memory_ids not a list", with(Ignore({id}), {{"memory_ids", id}}), "feedback-key-1", 422,
       "memory_ids"},
      {"101 memory ids", Ignore(many), "feedback-key-1", 422, "memory_ids"},
      {"blank memory id", Ignore({"  "}), "feedback-key-1", 422, "memory_ids.0"},
      {"long memory id", Ignore({id, std::string(201, 'r')}), "feedback-key-1", 422,
       "memory_ids.1"},
      {"non-string memory id", with(Ignore({id}), {{"memory_ids", {7}}}), "feedback-key-1", 422,
       "memory_ids.0"},
      {"ignore without ids", Ignore({}), "feedback-key-1", 422, "memory_ids"},
      {"restore without ids", with(Restore({}), {{"memory_ids", nullptr}}), "feedback-key-1", 422,
       "memory_ids"},
      {"correct without replacement", with(Ignore({id}), {{"action", "correct"}}), "feedback-key-1",
       422, "replacement"},
      {"ignore with replacement", with(Ignore({id}), {{"replacement", "x"}}), "feedback-key-1", 422,
       "replacement"},
      {"blank replacement", Correct({id}, "   "), "feedback-key-1", 422, "replacement"},
      {"replacement too long", Correct({id}, std::string(4001, 'x')), "feedback-key-1", 422,
       "replacement"},
      {"query_id too long", with(Ignore({id}), {{"query_id", std::string(201, 'q')}}),
       "feedback-key-1", 422, "query_id"},
      {"comment too long", with(Ignore({id}), {{"comment", std::string(4001, 'c')}}),
       "feedback-key-1", 422, "comment"},
      {"metadata not an object", with(Ignore({id}), {{"metadata", json::array()}}),
       "feedback-key-1", 422, "metadata"},
      {"ignore without key", Ignore({id}), "", 422, "Idempotency-Key"},
      {"short key", Ignore({id}), "short", 422, "Idempotency-Key"},
      {"long key", Ignore({id}), std::string(201, 'k'), 422, "Idempotency-Key"},
      {"note with short key", {{"rating", "stale"}}, "short", 422, "Idempotency-Key"},
      {"bad scope", Ignore({id}), "feedback-key-1", 422, "scope", "-p"},
      {"unknown target", Ignore({id, "rec_unknown"}), "feedback-key-1", 404, ""},
      {"target of another scope", Ignore({id}), "feedback-key-1", 404, "", "q"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto r = e->Feedback(c.scope, c.body, c.key);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == tmcra::api::KindForStatus(c.status));
    if (c.status == 422) {
      CHECK(r.error().api_code == "validation_error");
      CHECK(r.error().message.rfind(c.loc + ":", 0) == 0);
    } else {
      CHECK(r.error().api_code == "not_found");
    }
  }
  // Nothing above was stored: the scope still recalls the record and no feedback id exists.
  CHECK(Shows(Recall(*e, "p", "wombat"), "validation wombat"));

  SECTION("the limits themselves are accepted") {
    json body = Correct({id}, std::string(4000, 'x'));
    body["query_id"] = std::string(200, 'q');
    body["comment"] = std::string(4000, 'c');
    body["metadata"] = {{"source", "test"}};
    const json view = FeedbackOk(*e, "p", body, std::string(200, 'k'));
    CHECK(view["action"] == "correct");
    const json note =
        FeedbackOk(*e, "p", {{"rating", "missing"}, {"comment", "no ids needed"}}, "");
    CHECK(note["action"] == "note");
    CHECK(note["effective"] == false);
    CHECK(note["correction_job_id"].is_null());
    CHECK(note["correction_index_status"].is_null());
  }
  SECTION("a feedback id is a target of restore only") {
    const std::string fid = FeedbackOk(*e, "p", Ignore({id}), "feedback-key-2")["feedback_id"];
    auto ignore_fb = e->Feedback("p", Ignore({fid}), "feedback-key-3");
    REQUIRE_FALSE(ignore_fb);
    CHECK(ignore_fb.error().code == tmcra::Errc::kNotFound);
    CHECK(e->Feedback("p", Restore({fid}), "feedback-key-4"));
    // A note that targets nothing cannot be restored: zero memories resolve.
    const std::string note = FeedbackOk(*e, "p", {{"rating", "stale"}}, "")["feedback_id"];
    auto empty = e->Feedback("p", Restore({note}), "feedback-key-5");
    REQUIRE_FALSE(empty);
    CHECK(empty.error().code == tmcra::Errc::kInvalidArgument);
  }
}

TEST_CASE("more than 100 resolved targets is 422", "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  json messages = json::array();
  for (int i = 0; i < 101; ++i) {
    messages.push_back(Message("m" + std::to_string(i), "user", "bulk item " + std::to_string(i)));
  }
  Ingest(*e, "p", "bulk", messages, "key-bulk-101");
  tmcra::db::Database::Options options;
  options.path = dir.File("data/memory.db");
  auto db = tmcra::db::Database::Open(options);
  REQUIRE(db);
  auto st = (*db)->Prepare("SELECT record_id FROM records ORDER BY event_seq");
  REQUIRE(st);
  std::vector<std::string> ids;
  for (;;) {
    auto row = st->Step();
    REQUIRE(row);
    if (!*row) break;
    ids.push_back(st->Text(0));
  }
  REQUIRE(ids.size() == 101);
  const std::vector<std::string> first(ids.begin(), ids.begin() + 100);
  const std::string a = FeedbackOk(*e, "p", Ignore(first), "bulk-fb-a")["feedback_id"];
  const std::string b = FeedbackOk(*e, "p", Ignore({ids[100]}), "bulk-fb-b")["feedback_id"];
  auto r = e->Feedback("p", Restore({a, b}), "bulk-fb-c");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == tmcra::Errc::kInvalidArgument);
  CHECK(r.error().message.rfind("memory_ids:", 0) == 0);
}

TEST_CASE("feedback is idempotent by key and another body under the key is 409",
          "[memory][feedback][idempotency]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  Ingest(*e, "p", "s1", {Message("u1", "user", "the backup window is 02:00")}, "key-idem-1");
  const std::string id = IdOf(*e, "p", "backup window", "the backup window is 02:00");
  const json first = FeedbackOk(*e, "p", Ignore({id}), "logical-feedback-one");
  CHECK(first["feedback_id"].get<std::string>().rfind("fb_", 0) == 0);
  CHECK(first["scope_name"] == "p");
  CHECK(first["rating"] == "incorrect");
  CHECK(first["action"] == "ignore");
  CHECK(first["effective"] == true);
  CHECK(first["created_at"].is_number());
  CHECK(first["correction_job_id"].is_null());
  CHECK(first["correction_index_status"].is_null());
  const json again = FeedbackOk(*e, "p", Ignore({id}), "logical-feedback-one");
  CHECK(again == first);
  auto other =
      e->Feedback("p", Correct({id}, "the backup window is 03:00"), "logical-feedback-one");
  REQUIRE_FALSE(other);
  CHECK(other.error().code == tmcra::Errc::kConflict);
  CHECK(other.error().api_code == "idempotency_conflict");
  auto other_scope = e->Feedback("q", Ignore({id}), "logical-feedback-one");
  REQUIRE_FALSE(other_scope);
  CHECK(other_scope.error().code == tmcra::Errc::kConflict);
  // Notes without a key are separate feedback each time.
  const json n1 = FeedbackOk(*e, "p", {{"rating", "stale"}}, "");
  const json n2 = FeedbackOk(*e, "p", {{"rating", "stale"}}, "");
  CHECK(n1["feedback_id"] != n2["feedback_id"]);
}

TEST_CASE("ignore hides a record from recall, as a hit and as a neighbour", "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  json messages = json::array();
  for (int i = 1; i <= 7; ++i) {
    const std::string text =
        i == 4 ? "the deploy target is heron" : "filler line " + std::to_string(i);
    messages.push_back(Message("m" + std::to_string(i), i % 2 ? "user" : "assistant", text,
                               "2026-07-15T00:00:0" + std::to_string(i) + "Z"));
  }
  Ingest(*e, "p", "s1", messages, "key-ignore-1");
  const json before = Recall(*e, "p", "deploy target heron");
  CHECK(Shows(before, "the deploy target is heron"));
  CHECK(Shows(before, "filler line 3"));
  CHECK_FALSE(Shows(before, "filler line 1"));

  SECTION("a hidden neighbour is skipped: the next visible record takes its place") {
    const std::string third = IdOf(*e, "p", "deploy target heron", "filler line 3");
    FeedbackOk(*e, "p", Ignore({third}), "ignore-neighbour");
    const json after = Recall(*e, "p", "deploy target heron");
    CHECK(Shows(after, "the deploy target is heron"));
    CHECK_FALSE(Shows(after, "filler line 3"));
    CHECK(Shows(after, "filler line 1"));
    CHECK(Shows(after, "filler line 2"));
    CHECK(after["evidence_route"]["reasons"][0] == "feedback_applied");
  }
  SECTION("a hidden hit leaves no window; the route is raw, even for compiled") {
    const std::string hit = IdOf(*e, "p", "deploy target heron", "the deploy target is heron");
    FeedbackOk(*e, "p", Ignore({hit, hit}), "ignore-hit");
    const json after = Recall(*e, "p", "heron");
    CHECK(Content(after).empty());
    CHECK(after["prompt_evidence"]["window_count"] == 0);
    CHECK(after["evidence_route"]["reasons"][0] == "no_matching_evidence");
    CHECK(after["evidence_route"]["reasons"][1] == "feedback_applied");
    const json compiled = Recall(*e, "p", "heron", "compiled");
    CHECK(compiled["evidence_route"]["selected"] == "raw");
    CHECK(compiled["evidence_route"]["requested"] == "compiled");
    CHECK(compiled["prompt_evidence"]["mode"] == "raw_hierarchical");
    CHECK(compiled["prompt_evidence"]["format"] == "text/plain");
    CHECK(compiled["prompt_evidence"]["content"] == "");
    CHECK(compiled["prompt_evidence"]["content_sha256"] == tmcra::Sha256Hex(""));
    // The other records still recall.
    CHECK(Shows(Recall(*e, "p", "filler"), "filler line 1"));
  }
}

TEST_CASE("correct hides the original and the replacement is recalled once", "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  Ingest(*e, "p", "s1",
         {Message("u1", "user", "the staging database is called heron-7"),
          Message("a1", "assistant", "noted: staging database heron-7", "2026-07-15T00:00:01Z")},
         "key-correct-1");
  const std::string fact =
      IdOf(*e, "p", "staging database", "the staging database is called heron-7");
  const std::string echo = IdOf(*e, "p", "staging database", "noted: staging database heron-7");
  const auto records = [&] { return e->Stats()->records; };
  const int64_t stored = records();

  const json view =
      FeedbackOk(*e, "p", Correct({fact, echo}, "the staging database is called ibis-2"),
                 "logical-feedback-correct");
  CHECK(view["action"] == "correct");
  CHECK(view["effective"] == true);
  REQUIRE(view["correction_job_id"].is_string());
  const std::string status = view["correction_index_status"];
  CHECK((status == "pending" || status == "succeeded"));
  auto job = e->GetJob(view["correction_job_id"].get<std::string>());
  REQUIRE(job);
  CHECK((*job)["scope_name"] == "p");
  // A replay with the same key is the same feedback and the same correction job.
  const json replay =
      FeedbackOk(*e, "p", Correct({fact, echo}, "the staging database is called ibis-2"),
                 "logical-feedback-correct");
  CHECK(replay["feedback_id"] == view["feedback_id"]);
  CHECK(replay["correction_job_id"] == view["correction_job_id"]);
  REQUIRE(e->RunPendingJobs());
  CHECK(records() == stored + 1);
  const json after_replay =
      FeedbackOk(*e, "p", Correct({fact, echo}, "the staging database is called ibis-2"),
                 "logical-feedback-correct");
  CHECK(after_replay["correction_index_status"] == "succeeded");
  REQUIRE(e->RunPendingJobs());
  CHECK(records() == stored + 1);

  const json r = Recall(*e, "p", "what is the staging database called");
  CHECK_FALSE(Shows(r, "heron-7"));
  CHECK(Shows(r, "the staging database is called ibis-2"));
  const std::string session = "correction-" + view["feedback_id"].get<std::string>();
  CHECK(Shows(r, "session=" + session));
  CHECK(Shows(r, "actor=user"));
  // The original stays readable as evidence.
  auto original = e->Evidence("p", fact, 25);
  REQUIRE(original);
  CHECK((*original)["items"][0]["text"] == "the staging database is called heron-7");
}

TEST_CASE("restore undoes ignore and correct, by memory id or by feedback id",
          "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  Ingest(*e, "p", "s1", {Message("u1", "user", "the release train leaves on thursday")},
         "key-restore-1");
  const std::string id = IdOf(*e, "p", "release train", "the release train leaves on thursday");

  SECTION("ignore, then restore by memory id") {
    FeedbackOk(*e, "p", Ignore({id}), "restore-ignore-1");
    CHECK_FALSE(Shows(Recall(*e, "p", "release train"), "thursday"));
    FeedbackOk(*e, "p", Restore({id}), "restore-ignore-2");
    CHECK(Shows(Recall(*e, "p", "release train"), "the release train leaves on thursday"));
  }
  SECTION("correct, then restore by the feedback id: the original returns, the correction goes") {
    const std::string fid = FeedbackOk(*e, "p", Correct({id}, "the release train leaves on friday"),
                                       "restore-correct-1")["feedback_id"];
    REQUIRE(e->RunPendingJobs());
    json r = Recall(*e, "p", "release train");
    CHECK_FALSE(Shows(r, "thursday"));
    CHECK(Shows(r, "friday"));
    const json restored = FeedbackOk(*e, "p", Restore({fid}), "restore-correct-2");
    CHECK(restored["rating"] == "helpful");
    r = Recall(*e, "p", "release train");
    CHECK(Shows(r, "thursday"));
    CHECK_FALSE(Shows(r, "friday"));
    // Ignoring again after the restore hides it again: the newest feedback wins.
    FeedbackOk(*e, "p", Ignore({id}), "restore-correct-3");
    CHECK_FALSE(Shows(Recall(*e, "p", "release train"), "thursday"));
  }
  SECTION("a re-correction replaces the earlier correction") {
    FeedbackOk(*e, "p", Correct({id}, "the release train leaves on friday"), "recorrect-1");
    FeedbackOk(*e, "p", Correct({id}, "the release train leaves on monday"), "recorrect-2");
    REQUIRE(e->RunPendingJobs());
    const json r = Recall(*e, "p", "release train");
    CHECK(Shows(r, "monday"));
    CHECK_FALSE(Shows(r, "friday"));
    CHECK_FALSE(Shows(r, "thursday"));
  }
}

TEST_CASE("feedback effects stay in their scope", "[memory][feedback]") {
  TempDir dir;
  auto e = OpenEngine(dir);
  Ingest(*e, "p", "s1", {Message("u1", "user", "the office wifi is kestrel")}, "key-scope-p");
  Ingest(*e, "q", "s1", {Message("u1", "user", "the office wifi is kestrel")}, "key-scope-q");
  const std::string in_p = IdOf(*e, "p", "office wifi", "the office wifi is kestrel");
  const std::string in_q = IdOf(*e, "q", "office wifi", "the office wifi is kestrel");
  CHECK(in_p != in_q);
  FeedbackOk(*e, "p", Ignore({in_p}), "scope-ignore-p");
  CHECK_FALSE(Shows(Recall(*e, "p", "office wifi"), "kestrel"));
  CHECK(Shows(Recall(*e, "q", "office wifi"), "the office wifi is kestrel"));
  // q's record cannot be targeted from p.
  auto cross = e->Feedback("p", Ignore({in_q}), "scope-ignore-cross");
  REQUIRE_FALSE(cross);
  CHECK(cross.error().code == tmcra::Errc::kNotFound);
  CHECK(Shows(Recall(*e, "q", "office wifi"), "kestrel"));
}

TEST_CASE("a store from before feedback is migrated in place", "[memory][feedback][migration]") {
  TempDir dir;
  {
    auto e = OpenEngine(dir);
    Ingest(*e, "p", "s1", {Message("u1", "user", "the old store remembers puffin")}, "key-migrate");
  }
  {
    tmcra::db::Database::Options options;
    options.path = dir.File("data/memory.db");
    auto db = tmcra::db::Database::Open(options);
    REQUIRE(db);
    REQUIRE((*db)->Exec("DROP TABLE feedback_targets; DROP TABLE feedback; PRAGMA user_version=1"));
  }
  auto e = OpenEngine(dir);
  const std::string id = IdOf(*e, "p", "puffin", "the old store remembers puffin");
  FeedbackOk(*e, "p", Ignore({id}), "migrate-ignore");
  CHECK_FALSE(Shows(Recall(*e, "p", "puffin"), "puffin"));
}
