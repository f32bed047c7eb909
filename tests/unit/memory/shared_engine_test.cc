// The memory engine on a shared PostgreSQL store (EngineOptions::shared, memory/pg_store.h):
// several engines, each with its own index file, over one database of the suite's cluster.
// Parity with a SQLite store, read-your-writes across engines, idempotency across engines.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "memory/engine.h"
#include "memory/pg_store.h"
#include "tests/support/pg_test_cluster.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::Engine;
using tmcra::memory::EngineOptions;
using tmcra::memory::IngestContext;
using tmcra::memory::PgStore;
using tmcra::testing::ScratchDatabase;
using tmcra::testing::TempDir;

namespace {

// An engine whose jobs run only through RunPendingJobs: on the SQLite file `dir` holds, or, with
// `shared`, on the shared store with `dir` holding its index.
std::unique_ptr<Engine> OpenEngine(const TempDir& dir, std::shared_ptr<PgStore> shared) {
  EngineOptions options;
  options.path = dir.File("memory.db");
  options.start_worker = false;
  options.shared = std::move(shared);
  auto engine = Engine::Open(options);
  INFO((engine ? std::string() : engine.error().ToString()));
  REQUIRE(engine);
  return std::move(*engine);
}

std::shared_ptr<PgStore> OpenShared(const ScratchDatabase& db) {
  auto store = PgStore::Open(db.Options(), 4);
  INFO((store ? std::string() : store.error().ToString()));
  REQUIRE(store);
  return std::shared_ptr<PgStore>(std::move(*store));
}

json Message(const std::string& id, const std::string& role, const std::string& content,
             const std::string& ts) {
  return {{"message_id", id}, {"role", role}, {"content", content}, {"timestamp", ts}};
}

IngestContext Key(const std::string& key) {
  IngestContext c;
  c.idempotency_key = key;
  return c;
}

// Removes what differs between two stores by nature: ids made at random (jobs, queries) and
// times.
json WithoutIdsAndTimes(json value) {
  if (value.is_object()) {
    for (const char* key :
         {"job_id", "query_id", "created_at", "updated_at", "started_at", "finished_at",
          "heartbeat_at", "lease_expires_at", "status_url", "visible_after_job_id",
          "recall_wait_for_job_id", "index_job_id", "last_job_id"}) {
      value.erase(key);
    }
    for (auto& [k, v] : value.items()) v = WithoutIdsAndTimes(v);
  } else if (value.is_array()) {
    for (auto& v : value) v = WithoutIdsAndTimes(v);
  }
  return value;
}

// A corpus of sessions in English, German, code and Japanese.
std::vector<std::pair<std::string, json>> Corpus() {
  const std::vector<std::string> texts = {
      "We moved the deploy pipeline to GitHub Actions and pinned the runner image.",
      "The flaky test was a race in the retry loop; the fix waits for the lease.",
      "Die Datenbank läuft jetzt auf PostgreSQL 15 mit Streaming-Replikation.",
      "fn parse_config(path: &Path) -> Result<Config> { toml::from_str(&read(path)?) }",
      "デプロイの手順を見直して、ロールバックを自動化しました。",
      "Recall ranks with BM25 and fuses the word, trigram and CJK rankings.",
      "The outbox keeps every write until the server acknowledges its idempotency key.",
      "Ich habe die Tests für die Replikation geschrieben und sie laufen grün.",
      "Kubernetes rollout stalled because the readiness probe hit the wrong port.",
      "The cache invalidation bug came from reading sequence values out of commit order.",
  };
  std::vector<std::pair<std::string, json>> out;
  for (size_t i = 0; i < 24; ++i) {
    const std::string session = "session-" + std::to_string(i % 5);
    json messages = json::array();
    messages.push_back(Message("m" + std::to_string(i) + "-q", "user", texts[i % texts.size()],
                               "2026-11-0" + std::to_string(1 + i % 9) + "T10:00:00Z"));
    messages.push_back(Message("m" + std::to_string(i) + "-a", "assistant",
                               "Noted: " + texts[(i * 7 + 3) % texts.size()],
                               "2026-11-0" + std::to_string(1 + i % 9) + "T10:01:00Z"));
    out.emplace_back("corpus-key-" + std::to_string(i),
                     json{{"session_id", session}, {"messages", messages}});
  }
  return out;
}

}  // namespace

TEST_CASE(
    "shared store: a turn ingested through one engine, run by another, is recalled through a "
    "third") {
  ScratchDatabase db("three_engines");
  auto shared = OpenShared(db);
  TempDir da, dbb, dc;
  auto a = OpenEngine(da, shared);
  auto b = OpenEngine(dbb, OpenShared(db));
  auto c = OpenEngine(dc, OpenShared(db));
  auto accepted =
      a->Ingest("team",
                json{{"session_id", "s1"},
                     {"messages",
                      {Message("m1", "user", "the zanzibar release train leaves on friday",
                               "2026-12-01T09:00:00Z")}}},
                Key("three-engines-1"));
  REQUIRE(accepted);
  const std::string job_id = (*accepted)["job_id"];
  CHECK((*accepted)["status"] == "pending");
  auto ran = b->RunPendingJobs();
  REQUIRE(ran);
  CHECK(*ran == 1);
  auto job = c->GetJob(job_id);
  REQUIRE(job);
  CHECK((*job)["status"] == "succeeded");
  auto recalled =
      c->Recall("team", json{{"query", "zanzibar release"}, {"wait_for_job_id", job_id}});
  INFO((recalled ? recalled->dump() : recalled.error().ToString()));
  REQUIRE(recalled);
  CHECK((*recalled)["prompt_evidence"]["content"].get<std::string>().find("zanzibar") !=
        std::string::npos);
  CHECK((*recalled)["index_job_id"] == job_id);
  // The engine that accepted it reads it too.
  auto again = a->Recall("team", json{{"query", "zanzibar"}});
  REQUIRE(again);
  CHECK(again->dump().find("zanzibar") != std::string::npos);
}

TEST_CASE("shared store: a recall waiting for a job not yet run says so, as on one file") {
  ScratchDatabase db("waiting");
  TempDir da;
  auto a = OpenEngine(da, OpenShared(db));
  auto accepted =
      a->Ingest("team",
                json{{"session_id", "s"},
                     {"messages", {Message("m", "user", "hello there", "2026-12-01T09:00:00Z")}}},
                Key("waiting-key-1"));
  REQUIRE(accepted);
  auto early =
      a->Recall("team", json{{"query", "hello"}, {"wait_for_job_id", (*accepted)["job_id"]}});
  REQUIRE_FALSE(early);
  CHECK(early.error().api_code == "write_not_committed");
  auto other = a->Recall("team", json{{"query", "hello"}, {"wait_for_job_id", "job_unknown"}});
  REQUIRE_FALSE(other);
  CHECK(other.error().api_code == "not_found");
}

TEST_CASE("shared store: one corpus gives the same recalls and receipts as a SQLite store") {
  ScratchDatabase db("parity");
  TempDir lite_dir, shared_dir;
  auto lite = OpenEngine(lite_dir, nullptr);
  auto shared = OpenEngine(shared_dir, OpenShared(db));
  for (const auto& [key, body] : Corpus()) {
    auto one = lite->Ingest("parity", body, Key(key));
    auto two = shared->Ingest("parity", body, Key(key));
    REQUIRE(one);
    REQUIRE(two);
    CHECK(WithoutIdsAndTimes(*one) == WithoutIdsAndTimes(*two));
    REQUIRE(lite->RunPendingJobs());
    REQUIRE(shared->RunPendingJobs());
    auto done_one = lite->GetJob((*one)["job_id"].get<std::string>());
    auto done_two = shared->GetJob((*two)["job_id"].get<std::string>());
    REQUIRE(done_one);
    REQUIRE(done_two);
    CHECK(WithoutIdsAndTimes(*done_one) == WithoutIdsAndTimes(*done_two));
  }
  // A batch whose items tie on every ranking: its records must be numbered in item order on both
  // stores, or equal scores would order differently.
  json items = json::array();
  for (int i = 0; i < 12; ++i) {
    items.push_back({{"session_id", "batch-" + std::to_string(i)},
                     {"idempotency_key", "parity-batch-item-" + std::to_string(i)},
                     {"messages",
                      {Message("b" + std::to_string(i), "user", "the deploy pipeline runner again",
                               "2026-11-20T10:00:00Z")}}});
  }
  auto batch_one = lite->IngestBatch("parity", json{{"items", items}}, Key("parity-batch"));
  auto batch_two = shared->IngestBatch("parity", json{{"items", items}}, Key("parity-batch"));
  REQUIRE(batch_one);
  REQUIRE(batch_two);
  CHECK(WithoutIdsAndTimes(*batch_one) == WithoutIdsAndTimes(*batch_two));
  REQUIRE(lite->RunPendingJobs());
  REQUIRE(shared->RunPendingJobs());
  // A replay is a replay on both.
  const auto corpus = Corpus();
  const auto& [key0, body0] = corpus.front();
  auto replay_one = lite->Ingest("parity", body0, Key(key0));
  auto replay_two = shared->Ingest("parity", body0, Key(key0));
  REQUIRE(replay_one);
  REQUIRE(replay_two);
  CHECK((*replay_two)["idempotent_replay"] == true);
  CHECK(WithoutIdsAndTimes(*replay_one) == WithoutIdsAndTimes(*replay_two));
  for (const char* query : {"deploy pipeline runner", "Replikation PostgreSQL", "parse_config toml",
                            "ロールバック", "race in the retry loop", "readiness probe port",
                            "sequence values commit order", "idempotency", "tests laufen"}) {
    for (const char* mode : {"raw", "compiled"}) {
      const json ask{{"query", query}, {"evidence_mode", mode}, {"debug", true}};
      auto one = lite->Recall("parity", ask);
      auto two = shared->Recall("parity", ask);
      INFO((one ? std::string() : one.error().ToString()));
      REQUIRE(one);
      REQUIRE(two);
      INFO(query << " " << mode);
      CHECK(WithoutIdsAndTimes(*one) == WithoutIdsAndTimes(*two));
      CHECK_FALSE((*two)["prompt_evidence"]["content"].get<std::string>().empty());
    }
  }
}

TEST_CASE(
    "shared store: one idempotency key sent to two engines at once is one job with one receipt") {
  ScratchDatabase db("same_key");
  TempDir da, dbb;
  auto a = OpenEngine(da, OpenShared(db));
  auto b = OpenEngine(dbb, OpenShared(db));
  const json body{
      {"session_id", "s"},
      {"messages", {Message("m1", "user", "only once please", "2026-12-01T09:00:00Z")}}};
  for (int round = 0; round < 5; ++round) {
    const std::string key = "same-key-round-" + std::to_string(round);
    tmcra::Result<json> first = tmcra::Error::Internal("unset");
    tmcra::Result<json> second = tmcra::Error::Internal("unset");
    std::thread ta([&] { first = a->Ingest("team", body, Key(key)); });
    std::thread tb([&] { second = b->Ingest("team", body, Key(key)); });
    ta.join();
    tb.join();
    REQUIRE(first);
    REQUIRE(second);
    CHECK((*first)["job_id"] == (*second)["job_id"]);
    CHECK((*first)["idempotent_replay"] != (*second)["idempotent_replay"]);
  }
  REQUIRE(a->RunPendingJobs());
  auto recalled = b->Recall("team", json{{"query", "only once"}});
  REQUIRE(recalled);
  CHECK(recalled->dump().find("only once please") != std::string::npos);
  auto stats = b->Stats();
  REQUIRE(stats);
  CHECK(stats->records == 1);
  CHECK(stats->jobs_pending == 0);
  auto changed =
      a->Ingest("team",
                json{{"session_id", "s"},
                     {"messages", {Message("m2", "user", "other", "2026-12-01T09:00:00Z")}}},
                Key("same-key-round-0"));
  REQUIRE_FALSE(changed);
  CHECK(changed.error().api_code == "idempotency_conflict");
}

TEST_CASE(
    "shared store: feedback, forget and import are refused as not implemented, naming the call") {
  ScratchDatabase db("refused");
  TempDir da;
  auto a = OpenEngine(da, OpenShared(db));
  auto feedback = a->Feedback("team", json{{"rating", "up"}}, "feedback-key-1");
  REQUIRE_FALSE(feedback);
  CHECK(feedback.error().code == tmcra::Errc::kUnimplemented);
  CHECK(feedback.error().message.find("feedback") != std::string::npos);
  auto forget = a->Forget("team", json{{"all", true}});
  REQUIRE_FALSE(forget);
  CHECK(forget.error().code == tmcra::Errc::kUnimplemented);
  auto import = a->Import("team", json::array());
  REQUIRE_FALSE(import);
  CHECK(import.error().code == tmcra::Errc::kUnimplemented);
  // PostgreSQL text cannot hold U+0000: refused as the request's fault, before it is accepted.
  auto nul = a->Ingest(
      "team",
      json{{"session_id", "s"},
           {"messages", {Message("m", "user", std::string("a\0b", 3), "2026-12-01T09:00:00Z")}}},
      Key("nul-key-0001"));
  REQUIRE_FALSE(nul);
  CHECK(nul.error().api_code == "validation_error");
  CHECK(nul.error().message.find("U+0000") != std::string::npos);
}
