// The memory engine on a shared PostgreSQL store (EngineOptions::shared, memory/pg_store.h):
// several engines, each with its own index file, over one database of the suite's cluster.
// Parity with a SQLite store, read-your-writes across engines, idempotency across engines.
#include <atomic>
#include <catch2/catch.hpp>
#include <regex>
#include <thread>

#include "base/sha256.h"
#include "base/sqlite_db.h"
#include "memory/embedder.h"
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

// A deterministic embeddings service: a text's vector is made of its words' hashes; counts its
// calls.
class CountingEmbedder final : public tmcra::memory::Embedder {
 public:
  explicit CountingEmbedder(std::string model) : model_(std::move(model)) {}
  const std::string& model() const override { return model_; }
  tmcra::Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts,
                                                       std::chrono::milliseconds,
                                                       const std::atomic<bool>*) override {
    calls.fetch_add(1);
    std::vector<std::vector<float>> out;
    for (const std::string& text : texts) {
      std::vector<float> v(16, 0.01f);
      size_t word = 0;
      for (char c : text + " ") {
        if (c != ' ') {
          word = word * 31 + static_cast<unsigned char>(c);
          continue;
        }
        for (size_t i = 0; i < v.size(); ++i) {
          v[i] += static_cast<float>((word >> i) % 7) - 3.0f;
        }
        word = 0;
      }
      out.push_back(std::move(v));
    }
    return out;
  }
  std::atomic<int> calls{0};

 private:
  std::string model_;
};

// An engine with an embeddings service whose embedding thread starts at once.
std::unique_ptr<Engine> OpenEmbedding(const TempDir& dir, std::shared_ptr<PgStore> shared,
                                      std::shared_ptr<tmcra::memory::Embedder> embedder) {
  EngineOptions options;
  options.path = dir.File("memory.db");
  options.start_worker = false;
  options.shared = std::move(shared);
  options.embedder = std::move(embedder);
  options.embed_start_ms = 0;
  options.idle_poll_ms = 20;
  auto engine = Engine::Open(options);
  INFO((engine ? std::string() : engine.error().ToString()));
  REQUIRE(engine);
  return std::move(*engine);
}

// Waits (up to 20 s) until the engine's index holds `count` vectors, reading the feed first.
void WaitForVectors(Engine& engine, int64_t count) {
  for (int i = 0; i < 400; ++i) {
    REQUIRE(engine.ScopeStats());  // brings the index up to date (and embeds no query)
    auto stats = engine.Stats();
    REQUIRE(stats);
    REQUIRE(stats->embeddings);
    if (stats->embeddings->vectors == count) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("the index never held " << count << " vectors");
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

TEST_CASE("shared store: text with U+0000 is refused as the request's fault") {
  ScratchDatabase db("refused");
  TempDir da;
  auto a = OpenEngine(da, OpenShared(db));
  // PostgreSQL text cannot hold U+0000: refused as the request's fault, before it is accepted.
  auto nul = a->Ingest(
      "team",
      json{{"session_id", "s"},
           {"messages", {Message("m", "user", std::string("a\0b", 3), "2026-12-01T09:00:00Z")}}},
      Key("nul-key-0001"));
  REQUIRE_FALSE(nul);
  CHECK(nul.error().api_code == "validation_error");
  CHECK(nul.error().message.find("U+0000") != std::string::npos);
  // A backslash followed by "u0000" is text like any other.
  auto literal = a->Ingest(
      "team",
      json{{"session_id", "s"},
           {"messages", {Message("m", "user", "printf(\"\\u0000\")", "2026-12-01T09:00:00Z")}}},
      Key("nul-key-0002"));
  INFO((literal ? std::string() : literal.error().ToString()));
  CHECK(literal);
}

namespace {

// A record's id as every store makes it (docs/memd.md, "PostgreSQL").
std::string RecordId(const std::string& scope, const std::string& session,
                     const std::string& message) {
  return "rec_" +
         tmcra::Sha256Hex(scope + std::string(1, '\0') + session + std::string(1, '\0') + message)
             .substr(0, 32);
}

// Feedback, forget and import through two stores that should agree: answers compared with the
// ids each store makes at random (feedback, and the correction records named after them)
// renamed in the order they appear, and the numbers of the feed (which also counts feedback on
// a shared store), job ids and times removed.
class TwoStores {
 public:
  TwoStores(Engine& lite, Engine& shared) : engines_{&lite, &shared} {}
  // Two more stores, with the names `names` learned (for an export of its stores imported).
  TwoStores(Engine& lite, Engine& shared, const TwoStores& names) : TwoStores(lite, shared) {
    names_[0] = names.names_[0];
    names_[1] = names.names_[1];
  }

  template <class Call>
  void Same(const char* what, const Call& call) {
    json answers[2];
    for (int i = 0; i < 2; ++i) {
      auto answer = call(*engines_[i]);
      INFO(what << (i == 0 ? " (SQLite)" : " (shared)") << ": "
                << (answer ? answer->dump() : answer.error().ToString()));
      REQUIRE(answer);
      answers[i] = Comparable(i, *answer);
    }
    INFO(what << ": " << json::diff(answers[0], answers[1]).dump());
    CHECK(answers[0] == answers[1]);
  }
  // The feedback a view names, with the correction record it makes, renamed alike for both.
  void Learn(int store, const json& view) {
    const std::string id = view["feedback_id"];
    const std::string name = "FB" + std::to_string(names_[store].size() / 2);
    names_[store].emplace_back(id, name);
    const std::string session = "correction-" + id;
    names_[store].emplace_back(RecordId(view["scope_name"].get<std::string>(), session, id),
                               "REC_" + name);
  }
  json Comparable(int store, const json& answer) const {
    // Times of now (a correction's) have fractions of seconds; the corpus's have none.
    std::string text = std::regex_replace(WithoutIdsAndTimes(Unnumbered(answer)).dump(),
                                          std::regex(R"(\d{4}-\d\d-\d\dT[\d:]+\.\d+Z)"), "NOW");
    for (const auto& [from, to] : names_[store]) {
      for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
        text.replace(at, from.size(), to);
      }
    }
    return json::parse(text);
  }

 private:
  static json Unnumbered(json value) {
    if (value.is_object()) {
      // A correction record is stamped with its feedback's time.
      // An engine that only reads erases what the feed deleted when its worker next runs.
      for (const char* key :
           {"event_seq", "seq", "snapshot_id", "last_event_seq", "correction_job_id", "occurred_at",
            "timestamp", "newest", "source_event_seq", "content_sha256", "erase_pending"}) {
        value.erase(key);
      }
      for (auto& [k, v] : value.items()) v = Unnumbered(v);
    } else if (value.is_array()) {
      for (auto& v : value) v = Unnumbered(v);
    }
    return value;
  }
  Engine* engines_[2];
  std::vector<std::pair<std::string, std::string>> names_[2];
};

json Exported(Engine& engine, const std::string& scope) {
  json lines = json::array();
  auto done = engine.Export(scope, [&lines](const json& line) {
    lines.push_back(line);
    return tmcra::Ok();
  });
  INFO((done ? std::string() : done.error().ToString()));
  REQUIRE(done);
  return lines;
}

}  // namespace

TEST_CASE(
    "shared store: feedback, forget, import and export do what they do on a SQLite store, seen "
    "from a second engine") {
  ScratchDatabase db("admin_parity");
  TempDir lite_dir, a_dir, b_dir;
  auto lite = OpenEngine(lite_dir, nullptr);
  auto a = OpenEngine(a_dir, OpenShared(db));
  auto b = OpenEngine(b_dir, OpenShared(db));
  TwoStores written(*lite, *a);  // writes through A
  TwoStores read(*lite, *b);     // reads through B
  for (const auto& [key, body] : Corpus()) {
    REQUIRE(lite->Ingest("team", body, Key(key)));
    REQUIRE(a->Ingest("team", body, Key(key)));
  }
  REQUIRE(lite->RunPendingJobs());
  REQUIRE(b->RunPendingJobs());
  // Record ids are the same in both stores; pick three from a recall.
  auto hits = lite->Recall("team", json{{"query", "deploy pipeline runner"}, {"debug", true}});
  REQUIRE(hits);
  const std::string records = hits->dump();
  std::vector<std::string> ids;
  for (size_t at = records.find("\"rec_"); at != std::string::npos && ids.size() < 3;
       at = records.find("\"rec_", at + 1)) {
    const std::string id = records.substr(at + 1, 36);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  REQUIRE(ids.size() == 3);

  const json ignore{{"rating", "incorrect"}, {"action", "ignore"}, {"memory_ids", {ids[0]}}};
  const json correct{{"rating", "stale"},
                     {"action", "correct"},
                     {"memory_ids", {ids[1]}},
                     {"replacement", "The deploy pipeline runs on the self-hosted runner now."}};
  const json note{{"rating", "helpful"}, {"comment", "deploy answers were good"}};
  int store = 0;
  for (Engine* engine : {lite.get(), a.get()}) {
    for (const auto& [body, key] : {std::pair{ignore, "fb-ignore-0001"},
                                    std::pair{correct, "fb-correct-001"}, std::pair{note, ""}}) {
      auto view = engine->Feedback("team", body, key);
      INFO((view ? view->dump() : view.error().ToString()));
      REQUIRE(view);
      written.Learn(store, *view);
      read.Learn(store, *view);
    }
    ++store;
  }
  written.Same("a replayed feedback",
               [&](Engine& e) { return e.Feedback("team", correct, "fb-correct-001"); });
  for (Engine* engine : {lite.get(), a.get(), b.get()}) {
    auto conflict = engine->Feedback("team", ignore, "fb-correct-001");
    REQUIRE_FALSE(conflict);
    CHECK(conflict.error().api_code == "idempotency_conflict");
    auto missing = engine->Feedback(
        "team", json{{"rating", "stale"}, {"action", "ignore"}, {"memory_ids", {"rec_none"}}},
        "fb-missing-001");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().api_code == "not_found");
  }
  REQUIRE(lite->RunPendingJobs());
  REQUIRE(b->RunPendingJobs());  // the correction's job, accepted with its feedback
  for (const char* query : {"deploy pipeline runner", "self-hosted runner", "race retry loop"}) {
    read.Same(query, [&](Engine& e) {
      return e.Recall("team", json{{"query", query}, {"debug", true}});
    });
  }
  read.Same("evidence of a feedback's targets",
            [&](Engine& e) { return e.Evidence("team", ids[0], 5); });
  read.Same("the scopes' figures", [](Engine& e) { return e.ScopeStats(); });
  read.Same("an export", [](Engine& e) -> tmcra::Result<json> { return Exported(e, "team"); });

  // Each store's export imported into a store of its kind made afresh, then again (all
  // present), and read there through another engine.
  ScratchDatabase copy_db("admin_parity_copy");
  TempDir lite_copy_dir, c_dir, d_dir;
  auto lite_copy = OpenEngine(lite_copy_dir, nullptr);
  auto c = OpenEngine(c_dir, OpenShared(copy_db));
  auto d = OpenEngine(d_dir, OpenShared(copy_db));
  const json exports[2] = {Exported(*lite, "team"), Exported(*b, "team")};
  TwoStores imported(*lite_copy, *c, written);
  TwoStores copy_read(*lite_copy, *d, written);
  for (int round = 0; round < 2; ++round) {
    imported.Same("an import", [&](Engine& e) {
      return e.Import("team", exports[&e == lite_copy.get() ? 0 : 1]);
    });
  }
  copy_read.Same("a recall in the copy", [](Engine& e) {
    return e.Recall("team", json{{"query", "deploy pipeline runner"}, {"debug", true}});
  });
  copy_read.Same("the copy's export",
                 [](Engine& e) -> tmcra::Result<json> { return Exported(e, "team"); });
  imported.Same("the copy forgotten", [](Engine& e) {
    return e.Forget("team", json{{"all", true}});
  });
  copy_read.Same("the copy's figures", [](Engine& e) { return e.ScopeStats(); });

  // Forget: a dry run, a session, a phrase (with the feedback quoting it), then everything.
  written.Same("a dry run", [](Engine& e) {
    return e.Forget("team", json{{"match", "deploy"}, {"dry_run", true}});
  });
  written.Same("a session forgotten", [](Engine& e) {
    return e.Forget("team", json{{"session_id", "session-1"}});
  });
  written.Same("a phrase forgotten", [](Engine& e) {
    return e.Forget("team", json{{"match", "self-hosted"}});
  });
  for (const char* query : {"deploy pipeline runner", "self-hosted runner", "Replikation"}) {
    read.Same(query, [&](Engine& e) {
      return e.Recall("team", json{{"query", query}, {"debug", true}});
    });
  }
  read.Same("the scopes' figures after forget", [](Engine& e) { return e.ScopeStats(); });
  read.Same("the export after forget",
            [](Engine& e) -> tmcra::Result<json> { return Exported(e, "team"); });
  written.Same("everything forgotten", [](Engine& e) {
    return e.Forget("team", json{{"all", true}});
  });
  read.Same("the scopes' figures at the end", [](Engine& e) { return e.ScopeStats(); });

  // Nothing of the forgotten text is left in PostgreSQL's tables.
  auto conn = tmcra::pg::Connection::Open(db.Options());
  REQUIRE(conn);
  auto left = (*conn)->Exec(
      "SELECT (SELECT count(*) FROM mem_records), (SELECT count(*) FROM mem_feedback), (SELECT "
      "count(*) FROM mem_feedback_targets), (SELECT count(*) FROM mem_jobs WHERE payload_json "
      "IS NOT NULL)");
  REQUIRE(left);
  for (int column = 0; column < 4; ++column) CHECK(left->Int(0, column) == 0);
}

TEST_CASE(
    "shared store: a record embedded through one instance gets its vector from the store on "
    "another, with no call to its embeddings service") {
  ScratchDatabase db("vectors");
  TempDir da, dbb, dc;
  auto service_a = std::make_shared<CountingEmbedder>("fake-embed");
  auto a = OpenEmbedding(da, OpenShared(db), service_a);
  for (const auto& [key, body] : Corpus()) REQUIRE(a->Ingest("team", body, Key(key)));
  REQUIRE(a->RunPendingJobs());
  WaitForVectors(*a, 48);
  CHECK(service_a->calls.load() > 0);

  auto service_b = std::make_shared<CountingEmbedder>("fake-embed");
  auto b = OpenEmbedding(dbb, OpenShared(db), service_b);
  WaitForVectors(*b, 48);
  CHECK(service_b->calls.load() == 0);
  // The same vectors: the same similarities in recall's debug output.
  for (const char* query : {"deploy pipeline runner", "Replikation PostgreSQL"}) {
    const json ask{{"query", query}, {"debug", true}};
    auto one = a->Recall("team", ask);
    auto two = b->Recall("team", ask);
    REQUIRE(one);
    REQUIRE(two);
    CHECK((*one)["debug"]["vector"] == (*two)["debug"]["vector"]);
    CHECK((*two)["debug"]["vector"]["searched"] == true);
  }
  // Another model's vectors are not taken: that instance embeds for itself.
  auto service_c = std::make_shared<CountingEmbedder>("other-embed");
  auto c = OpenEmbedding(dc, OpenShared(db), service_c);
  WaitForVectors(*c, 48);
  CHECK(service_c->calls.load() > 0);

  // A forgotten record's vectors leave the store with it.
  auto forgot = a->Forget("team", json{{"session_id", "session-1"}});
  REQUIRE(forgot);
  auto conn = tmcra::pg::Connection::Open(db.Options());
  REQUIRE(conn);
  auto left = (*conn)->Exec(
      "SELECT count(*) FROM mem_vectors v LEFT JOIN mem_records r USING (event_seq) WHERE "
      "r.event_seq IS NULL");
  REQUIRE(left);
  CHECK(left->Int(0, 0) == 0);
  auto kept = (*conn)->Exec("SELECT count(DISTINCT event_seq) FROM mem_vectors");
  REQUIRE(kept);
  CHECK(kept->Int(0, 0) == 48 - (*forgot)["records"].get<int64_t>());
  // A vector that names its record by another id (a number reused after a restore) is not taken.
  auto some = (*conn)->Exec(
      "SELECT event_seq FROM mem_records WHERE event_seq NOT IN (SELECT event_seq FROM "
      "mem_vectors WHERE model = 'third-embed') LIMIT 1");
  REQUIRE(some);
  REQUIRE(some->size() == 1);
  auto store = OpenShared(db);
  REQUIRE(
      store->AddVectors("third-embed", {{some->Int(0, 0), "rec_another", std::string(20, 'x')}}));
  auto none = (*conn)->Exec("SELECT count(*) FROM mem_vectors WHERE model = 'third-embed'");
  REQUIRE(none);
  CHECK(none->Int(0, 0) == 0);
}

TEST_CASE(
    "shared store: an index an older build kept reads the feed again from the start, and "
    "feedback on a record forgotten meanwhile is refused") {
  ScratchDatabase db("feed_format");
  auto store = OpenShared(db);
  TempDir da;
  std::string id;
  {
    auto a = OpenEngine(da, store);
    for (const auto& [key, body] : Corpus()) REQUIRE(a->Ingest("team", body, Key(key)));
    REQUIRE(a->RunPendingJobs());
    auto hits = a->Recall("team", json{{"query", "deploy pipeline runner"}});
    REQUIRE(hits);
    id = hits->dump().substr(hits->dump().find("\"rec_") + 1, 36);
    REQUIRE(a->Feedback("team",
                        json{{"rating", "stale"}, {"action", "ignore"}, {"memory_ids", {id}}},
                        "format-feedback-1"));
  }
  {
    // What an older build's index looks like: the feedback never applied, no format noted.
    auto file = tmcra::db::Database::Open({da.File("memory.db")});
    REQUIRE(file);
    REQUIRE(
        (*file)->Exec("DELETE FROM feedback_targets; DELETE FROM feedback; DELETE FROM "
                      "maintenance WHERE name = 'shared_feed_format'"));
  }
  auto a = OpenEngine(da, store);
  auto figures = a->ScopeStats();
  REQUIRE(figures);
  CHECK((*figures)["scopes"][0]["feedback"] == 1);
  CHECK((*figures)["scopes"][0]["messages"] == 48);

  // A target deleted after it was resolved is refused by the store, under its lock.
  PgStore::FeedbackRow late;
  late.feedback_id = "fb_late";
  late.tenant_id = "local";
  late.scope_name = "team";
  late.rating = "stale";
  late.action = "ignore";
  late.payload_sha256 = "x";
  late.request_json = "{}";
  late.targets = {id, "rec_gone"};
  auto refused = store->AddFeedback(late, std::nullopt);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == tmcra::Errc::kNotFound);
  CHECK(refused.error().message.find("rec_gone") != std::string::npos);
  CHECK(refused.error().message.find(id) == std::string::npos);
}
