// The outbox against a real SQLite file: every transition and error path of the state machine
// (docs/contract.md §3.3-§3.4), compatibility with TMCRA's schema, claims and the lease.
#include "queue/outbox.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "base/sqlite_db.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::Errc;
using tmcra::queue::CommitRequest;
using tmcra::queue::Item;
using tmcra::queue::Outbox;
using tmcra::queue::PreparedTurn;
using tmcra::testing::TempDir;

namespace {

std::unique_ptr<Outbox> Open(const TempDir& dir) {
  auto ob = Outbox::Open(dir.File("q/outbox.sqlite3"));
  REQUIRE(ob);
  return std::move(*ob);
}

Item NewItem(const std::string& key, const std::string& text = "hello") {
  Item item;
  item.scope_name = "p";
  item.session_id = "s";
  item.messages = json::array({{{"message_id", "m"},
                                {"role", "user"},
                                {"content", text},
                                {"timestamp", "2026-07-15T00:00:00Z"}}});
  item.consistency = "eventual";
  item.slow_policy = "auto";
  item.idempotency_key = key;
  item.metadata = {{"integration", "mcp"}};
  return item;
}

PreparedTurn Turn(const std::string& id) {
  PreparedTurn t;
  t.turn_id = id;
  t.scope_name = "p";
  t.session_id = "s";
  t.user_message_id = "u-" + id;
  t.user_content = "question " + id;
  t.user_timestamp = "2026-07-15T00:00:00Z";
  t.recall_receipt = {{"query_id", "q"}};
  return t;
}

CommitRequest Commit(const std::string& turn, const std::string& key) {
  CommitRequest c;
  c.turn_id = turn;
  c.messages = json::array({{{"message_id", "u"}, {"role", "user"}, {"content", "q"}},
                            {{"message_id", "a"}, {"role", "assistant"}, {"content", "a"}}});
  c.consistency = "read_your_writes";
  c.slow_policy = "auto";
  c.idempotency_key = key;
  c.metadata = json::object();
  return c;
}

}  // namespace

TEST_CASE("enqueue is idempotent by key and refuses a different payload", "[queue]") {
  TempDir dir;
  auto ob = Open(dir);
  auto a = ob->Enqueue(NewItem("key-00000001"));
  REQUIRE(a);
  CHECK(a->rfind("mcp-item-", 0) == 0);
  CHECK(a->size() == 9 + 32);
  auto again = ob->Enqueue(NewItem("key-00000001"));
  REQUIRE(again);
  CHECK(*again == *a);
  auto other = ob->Enqueue(NewItem("key-00000001", "different"));
  REQUIRE_FALSE(other);
  CHECK(other.error().code == Errc::kConflict);
  auto item = ob->Get(*a);
  REQUIRE(item);
  CHECK(item->state == "pending");
  CHECK(item->attempts == 0);
  CHECK(item->messages[0]["content"] == "hello");
  CHECK(item->created_at.size() == 32);  // 2026-11-30T01:02:03.456789+00:00
  CHECK(item->created_at.substr(26) == "+00:00");
  auto counts = ob->GetCounts();
  REQUIRE(counts);
  CHECK(counts->pending == 1);
  CHECK(counts->oldest_pending_seconds.has_value());
}

TEST_CASE("every state transition and its bookkeeping", "[queue]") {
  TempDir dir;
  auto ob = Open(dir);
  const std::string id = *ob->Enqueue(NewItem("key-transitions"));
  REQUIRE(ob->RecordFailure(id, "transport_error: down", 1e12));
  auto failed = ob->Get(id);
  CHECK(failed->state == "pending");
  CHECK(failed->attempts == 1);
  CHECK(failed->last_error == std::string("transport_error: down"));
  CHECK(ob->Due(10)->empty());  // not due before next_attempt_at
  REQUIRE(ob->MarkSubmitted(id, {{"jobs", {{{"job_id", "j"}, {"status", "pending"}}}}}));
  CHECK(ob->Get(id)->state == "submitted");
  CHECK(ob->Due(10)->size() == 1);  // submitted items are always due (jobs to poll)
  REQUIRE(ob->MarkSucceeded(id, {{"jobs", {{{"job_id", "j"}, {"status", "succeeded"}}}}}));
  CHECK(ob->Get(id)->state == "succeeded");
  CHECK(ob->Due(10)->empty());
  auto replay_ok = ob->Replay(id);
  REQUIRE_FALSE(replay_ok);  // only dead letters replay
  CHECK(replay_ok.error().code == Errc::kConflict);

  const std::string dl = *ob->Enqueue(NewItem("key-deadletter"));
  REQUIRE(ob->MarkDeadLetter(dl, "validation_error (HTTP 422): bad", nullptr));
  auto dead = ob->Get(dl);
  CHECK(dead->state == "dead_letter");
  CHECK(dead->last_error == std::string("validation_error (HTTP 422): bad"));
  CHECK(dead->messages.size() == 1);  // content kept for replay
  REQUIRE(ob->Replay(dl));
  auto replayed = ob->Get(dl);
  CHECK(replayed->state == "pending");
  CHECK(replayed->attempts == 0);
  CHECK(replayed->idempotency_key == "key-deadletter");  // never re-minted

  const std::string gone = *ob->Enqueue(NewItem("key-discarded"));
  REQUIRE(ob->MarkDeadLetter(gone, "discarded_by_memory_mode", nullptr, /*erase_content=*/true));
  CHECK(ob->Get(gone)->messages.empty());
  CHECK_FALSE(ob->Replay(gone));  // nothing left to replay

  auto counts = ob->GetCounts();
  CHECK(counts->succeeded == 1);
  CHECK(counts->pending == 1);
  CHECK(counts->dead_letter == 1);
  CHECK(ob->Get("mcp-item-missing").error().code == Errc::kNotFound);
  CHECK(*ob->IntegrityOk());
}

TEST_CASE("due items: submitted ones, then pending ones that are due, each oldest first",
          "[queue]") {
  TempDir dir;
  auto ob = Open(dir);
  std::vector<std::string> ids;
  for (int i = 0; i < 9; ++i) ids.push_back(*ob->Enqueue(NewItem("key-due-" + std::to_string(i))));
  // 0, 2, 4, 6 submitted; 1 backing off; 3, 5, 7, 8 pending and due.
  for (size_t i : {6u, 0u, 4u, 2u}) {
    REQUIRE(ob->MarkSubmitted(ids[i], {{"jobs", {{{"job_id", "j"}, {"status", "pending"}}}}}));
  }
  REQUIRE(ob->RecordFailure(ids[1], "transport_error: down", 1e12));
  CHECK(*ob->Due(100) ==
        std::vector<std::string>{ids[0], ids[2], ids[4], ids[6], ids[3], ids[5], ids[7], ids[8]});
  // The limit holds for each list: a backlog's round always has both kinds.
  CHECK(*ob->Due(2) == std::vector<std::string>{ids[0], ids[2], ids[3], ids[5]});
}

TEST_CASE("prepared turns bind once, commit is atomic and idempotent", "[queue][lifecycle]") {
  TempDir dir;
  auto ob = Open(dir);
  REQUIRE(ob->PrepareTurn(Turn("t1")));
  REQUIRE(ob->PrepareTurn(Turn("t1")));  // identical: fine
  PreparedTurn changed = Turn("t1");
  changed.user_content = "another question";
  auto bound = ob->PrepareTurn(changed);
  REQUIRE_FALSE(bound);
  CHECK(bound.error().message == "turn_id is already bound to a different user turn");

  auto unknown = ob->CommitTurn(Commit("nope", "key-unknown-1"));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == Errc::kNotFound);

  auto item = ob->CommitTurn(Commit("t1", "key-commit-01"));
  REQUIRE(item);
  auto turn = ob->GetTurn("t1");
  CHECK((*turn)->state == "committed");
  CHECK((*turn)->item_id == *item);
  CHECK(ob->Get(*item)->recall_receipt == json{{"query_id", "q"}});
  auto again = ob->CommitTurn(Commit("t1", "key-commit-other"));  // a retry: same item
  REQUIRE(again);
  CHECK(*again == *item);
  CHECK(ob->GetCounts()->pending == 1);

  // A key already bound elsewhere: rolled back, the turn stays prepared, nothing is added.
  REQUIRE(ob->PrepareTurn(Turn("t2")));
  REQUIRE(ob->Enqueue(NewItem("key-taken-001")));
  auto clash = ob->CommitTurn(Commit("t2", "key-taken-001"));
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == Errc::kConflict);
  CHECK((*ob->GetTurn("t2"))->state == "prepared");
  CHECK(ob->GetCounts()->pending == 2);
  REQUIRE(ob->CommitTurn(Commit("t2", "key-free-0001")));  // the connection is usable after it
  CHECK(ob->GetCounts()->pending == 3);
}

// One turn has one answer: a commit of a committed turn is a replay only with the same messages
// (ids, roles and text; not timestamps, metadata or key), whatever state its item is in.
TEST_CASE("a committed turn refuses a different answer, pending or delivered",
          "[queue][lifecycle]") {
  TempDir dir;
  auto ob = Open(dir);
  const auto answer = [](const std::string& key, const std::string& id, const std::string& text) {
    CommitRequest c = Commit("t1", key);
    c.messages[1]["message_id"] = id;
    c.messages[1]["content"] = text;
    c.messages[1]["timestamp"] = key;  // a retry without a timestamp gets a new one
    return c;
  };
  REQUIRE(ob->PrepareTurn(Turn("t1")));
  auto first = ob->CommitTurn(answer("key-first-001", "a1", "the answer"));
  REQUIRE(first);
  const auto refused = [&](const CommitRequest& c) {
    auto r = ob->CommitTurn(c);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::kConflict);
    CHECK_FALSE(r.error().retryable);
    CHECK(r.error().message.find("turn t1") != std::string::npos);
    CHECK(r.error().message.find("\"a1\"") != std::string::npos);
    CHECK(r.error().message.find("a different assistant message") != std::string::npos);
  };
  for (const char* state : {"pending", "succeeded", "dead_letter"}) {
    INFO(state);
    if (std::string(state) == "succeeded") REQUIRE(ob->MarkSucceeded(*first, {{"jobs", {}}}));
    if (std::string(state) == "dead_letter") REQUIRE(ob->MarkDeadLetter(*first, "x", nullptr));
    refused(answer("key-other-001", "a2", "another answer"));
    refused(answer("key-other-002", "a1", "the answer, edited"));
    refused(answer("key-other-003", "a2", "the answer"));
    auto replay = ob->CommitTurn(answer("key-retry-" + std::string(state), "a1", "the answer"));
    REQUIRE(replay);
    CHECK(*replay == *first);
    CHECK(ob->Get(*first)->messages[1]["content"] == "the answer");
    const auto counts = ob->GetCounts();
    CHECK(counts->pending + counts->succeeded + counts->dead_letter == 1);
  }
  // Discarded by the memory mode: nothing is left to compare, and nothing was saved; the item
  // (dead_letter) is what any commit of the turn gets.
  REQUIRE(ob->MarkDeadLetter(*first, "discarded_by_memory_mode", nullptr, true));
  auto discarded = ob->CommitTurn(answer("key-other-004", "a2", "another answer"));
  REQUIRE(discarded);
  CHECK(*discarded == *first);
  CHECK(ob->Get(*first)->state == "dead_letter");
  CHECK(ob->Get(*first)->messages.empty());
}

TEST_CASE(
    "once a turn's write has succeeded, the outbox keeps none of the memory its recall "
    "injected",
    "[queue][lifecycle]") {
  TempDir dir;
  auto ob = Open(dir);
  PreparedTurn t = Turn("t1");
  t.recall_receipt = {{"query_id", "q-1"},
                      {"prompt_evidence", {{"content", "[Immutable source window 1 | x]\nold"}}},
                      {"_local_capture", {{"read", true}}}};
  REQUIRE(ob->PrepareTurn(t));
  auto item = ob->CommitTurn(Commit("t1", "key-prune-001"));
  REQUIRE(item);
  CHECK((*ob->GetTurn("t1"))->recall_receipt == t.recall_receipt);  // kept while not stored
  REQUIRE(ob->MarkSubmitted(*item, {{"jobs", json::array()}}));
  CHECK((*ob->GetTurn("t1"))->recall_receipt == t.recall_receipt);
  REQUIRE(ob->MarkSucceeded(*item, {{"jobs", json::array()}}));
  const json pruned{{"pruned", true}, {"query_id", "q-1"}};
  CHECK((*ob->GetTurn("t1"))->recall_receipt == pruned);
  CHECK(ob->Get(*item)->recall_receipt == pruned);
  // A replay of the commit still finds its item.
  auto again = ob->CommitTurn(Commit("t1", "key-prune-002"));
  REQUIRE(again);
  CHECK(*again == *item);
}

TEST_CASE("a database written by TMCRA's Python client opens and upgrades", "[queue][compat]") {
  TempDir dir;
  const std::string path = dir.File("python.sqlite3");
  {
    auto db = tmcra::db::Database::Open({path});
    REQUIRE(db);
    REQUIRE((*db)->Exec(R"sql(
      CREATE TABLE ingest_queue (item_id TEXT PRIMARY KEY, scope_name TEXT NOT NULL,
        session_id TEXT NOT NULL, messages_json TEXT NOT NULL, consistency TEXT NOT NULL,
        slow_policy TEXT NOT NULL, idempotency_key TEXT NOT NULL UNIQUE,
        metadata_json TEXT NOT NULL, agent_id TEXT, recall_receipt_json TEXT,
        state TEXT NOT NULL CHECK(state IN ('pending','submitted','succeeded','dead_letter')),
        attempts INTEGER NOT NULL DEFAULT 0, receipt_json TEXT, last_error TEXT,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
      CREATE INDEX idx_ingest_queue_recovery ON ingest_queue(state, updated_at);
      CREATE TABLE prepared_turns (turn_id TEXT PRIMARY KEY, scope_name TEXT NOT NULL,
        session_id TEXT NOT NULL, user_message_id TEXT NOT NULL, user_content TEXT NOT NULL,
        user_timestamp TEXT NOT NULL, recall_receipt_json TEXT NOT NULL,
        state TEXT NOT NULL CHECK(state IN ('prepared','committed')), item_id TEXT,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
      INSERT INTO ingest_queue VALUES('mcp-item-0123456789abcdef0123456789abcdef', 'personal',
        's', '[{"content":"from python","message_id":"m","role":"user","timestamp":"2026-07-15T00:00:00Z"}]',
        'eventual', 'auto', 'mcp-ingest-abc', '{"integration":"mcp"}', NULL, NULL, 'pending', 1,
        NULL, 'transport_error', '2026-07-15T00:00:00.000000+00:00',
        '2026-07-15T00:00:00.000000+00:00');
    )sql"));
  }
  auto ob = Outbox::Open(path);
  REQUIRE(ob);
  auto item = (*ob)->Get("mcp-item-0123456789abcdef0123456789abcdef");
  REQUIRE(item);
  CHECK(item->messages[0]["content"] == "from python");
  CHECK(item->attempts == 1);
  CHECK(item->next_attempt_at == 0);
  CHECK((*ob)->Due(10)->size() == 1);
  CHECK(*(*ob)->IntegrityOk());
}

TEST_CASE("claims keep one worker per item, a dead holder's claim is taken over", "[queue]") {
  TempDir dir;
  auto ob = Open(dir);
  const std::string id = *ob->Enqueue(NewItem("key-claims-01"));
  CHECK(*ob->Claim(id, "pid-1-a", 60));
  CHECK(*ob->Claim(id, "pid-1-a", 60));  // the holder may renew
  const std::string live = "pid-" + std::to_string(getppid()) + "-other";
  CHECK_FALSE(*ob->Claim(id, live, 60));  // pid 1 exists: its claim holds
  REQUIRE(ob->Release(id, "pid-1-a"));
  CHECK(*ob->Claim(id, live, 60));
  REQUIRE(ob->Release(id, live));

  // A holder that died keeps its claim only until anyone notices it is gone.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  const std::string dead = "pid-" + std::to_string(child) + "-dead";
  CHECK(*ob->Claim(id, dead, 60));
  CHECK(*ob->Claim(id, "pid-" + std::to_string(getpid()) + "-me", 60));

  // The delivery lease works the same way.
  CHECK(*ob->AcquireDeliveryLease(dead, 60));
  auto holder = ob->DeliveryLeaseHolder();
  REQUIRE(holder);
  CHECK((*holder)["holder"] == dead);
  CHECK(*ob->AcquireDeliveryLease("pid-" + std::to_string(getpid()) + "-me", 60));
  CHECK_FALSE(*ob->AcquireDeliveryLease(live, 60));
  REQUIRE(ob->ReleaseDeliveryLease("pid-" + std::to_string(getpid()) + "-me"));
  CHECK(*ob->AcquireDeliveryLease(live, 0.05));
  usleep(100000);
  CHECK(*ob->AcquireDeliveryLease("pid-1-x", 60));  // an expired lease is free
}

TEST_CASE("claims and outcomes for several items at once, each on its own terms",
          "[queue][batch]") {
  using tmcra::queue::Outcome;
  TempDir dir;
  auto ob = Open(dir);
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*ob->Enqueue(NewItem("key-each-" + std::to_string(i))));
  const std::string me = "pid-" + std::to_string(getpid()) + "-me";
  const std::string live = "pid-" + std::to_string(getppid()) + "-other";
  REQUIRE(*ob->Claim(ids[2], live, 60));  // held by a live process: not ours to take
  auto claimed =
      ob->ClaimEach({ids[0], ids[1], ids[2], "mcp-item-missing", ids[3], ids[4], ids[5]}, me, 60);
  REQUIRE(claimed);
  CHECK(*claimed == std::vector<bool>{true, true, false, false, true, true, true});
  CHECK_FALSE(*ob->Claim(ids[0], live, 60));  // really claimed

  const json submitted{{"jobs", {{{"job_id", "j0"}, {"status", "pending"}}}}};
  const json finished{{"jobs", {{{"job_id", "j1"}, {"status", "succeeded"}}}}};
  std::vector<Outcome> outcomes(6);
  outcomes[0] = {ids[0], Outcome::Kind::kMarkSubmitted, submitted, "", 0, false};
  outcomes[1] = {ids[1], Outcome::Kind::kMarkSucceeded, finished, "", 0, false};
  outcomes[2] = {ids[3], Outcome::Kind::kMarkDeadLetter, nullptr, "validation_error: bad", 0,
                 false};
  outcomes[3] = {ids[4], Outcome::Kind::kRetryLater, nullptr, "transport_error: down", 1e12, false};
  outcomes[4] = {ids[5], Outcome::Kind::kMarkDeadLetter, nullptr, "discarded_by_memory_mode", 0,
                 true};
  outcomes[5] = {ids[2], Outcome::Kind::kReleaseOnly, nullptr, "", 0, false};
  REQUIRE(ob->RecordEach(outcomes, me));
  CHECK(ob->Get(ids[0])->state == "submitted");
  CHECK(ob->Get(ids[0])->receipt == submitted);
  CHECK(ob->Get(ids[1])->state == "succeeded");
  CHECK(ob->Get(ids[3])->state == "dead_letter");
  CHECK(ob->Get(ids[3])->last_error == std::string("validation_error: bad"));
  CHECK(ob->Get(ids[3])->messages.size() == 1);
  auto retry = ob->Get(ids[4]);
  CHECK(retry->state == "pending");
  CHECK(retry->attempts == 1);
  CHECK(retry->next_attempt_at == 1e12);
  CHECK(ob->Get(ids[5])->messages.empty());
  // Every claim of ours is released; the other process's claim is untouched.
  for (size_t i : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}}) {
    CHECK(*ob->Claim(ids[i], live, 60));
  }
  CHECK_FALSE(*ob->Claim(ids[2], me, 60));
  // All or nothing: an outcome for an unknown item rolls every one of them back.
  REQUIRE(*ob->Claim(ids[2], live, 60));
  auto bad =
      ob->RecordEach({{ids[0], Outcome::Kind::kMarkSucceeded, finished, "", 0, false},
                      {"mcp-item-missing", Outcome::Kind::kMarkSucceeded, finished, "", 0, false}},
                     live);
  REQUIRE_FALSE(bad);
  CHECK(ob->Get(ids[0])->state == "submitted");
}

TEST_CASE("delivery reads an item without its recall, keeping the captured policy",
          "[queue][batch]") {
  TempDir dir;
  auto ob = Open(dir);
  const json capture{{"session_id", "s"}, {"read", true}, {"write", false}};
  const json big(std::string(50000, 'x'));
  const std::vector<json> recalls = {
      nullptr,
      {{"query_id", "q"}, {"evidence", big}, {"_local_capture", capture}},
      {{"query_id", "q"}, {"evidence", big}},
      {{"query_id", "q"}, {"_local_capture", nullptr}},
      {{"query_id", "q"}, {"_local_capture", "text"}},
      json::array({1, 2}),
  };
  for (size_t i = 0; i < recalls.size(); ++i) {
    INFO(i);
    Item item = NewItem("key-delivery-view-" + std::to_string(i));
    item.recall_receipt = recalls[i];
    item.agent_id = "agent-" + std::to_string(i);
    const std::string id = *ob->Enqueue(item);
    auto whole = ob->Get(id);
    auto light = ob->GetForDelivery(id);
    REQUIRE(whole);
    REQUIRE(light);
    const bool has_capture =
        whole->recall_receipt.is_object() && whole->recall_receipt.contains("_local_capture");
    if (has_capture) {
      CHECK(light->recall_receipt ==
            json{{"_local_capture", whole->recall_receipt["_local_capture"]}});
    } else {
      CHECK(light->recall_receipt.is_null());
    }
    CHECK(light->messages == whole->messages);
    CHECK(light->metadata == whole->metadata);
    CHECK(light->agent_id == whole->agent_id);
    CHECK(light->idempotency_key == whole->idempotency_key);
    CHECK(light->state == whole->state);
    CHECK(light->created_at == whole->created_at);
  }
  CHECK(ob->GetForDelivery("mcp-item-missing").error().code == Errc::kNotFound);
}

TEST_CASE("a delivery round's peek: what a batch and a poll need, no content", "[queue][batch]") {
  TempDir dir;
  auto ob = Open(dir);
  Item item = NewItem("key-peek-0001");
  item.messages.push_back(item.messages[0]);
  item.messages[1]["message_id"] = "m2";
  item.agent_id = "agent-1";
  const std::string id = *ob->Enqueue(item);
  auto pending = ob->PeekForDelivery(id);
  REQUIRE(pending);
  CHECK(pending->item_id == id);
  CHECK(pending->state == "pending");
  CHECK(pending->scope_name == "p");
  CHECK(pending->agent_id == "agent-1");
  CHECK(pending->message_count == 2);
  CHECK(pending->attempts == 0);
  CHECK(pending->next_attempt_at == 0);
  CHECK(pending->receipt.is_null());
  CHECK(pending->receipt_text.empty());
  CHECK(*ob->StateAndReceipt(id) == std::make_pair(std::string("pending"), std::string()));

  const json receipt = {{"status", "submitted"},
                        {"jobs", json::array({{{"job_id", "job-1"}, {"status", "pending"}}})}};
  REQUIRE(ob->MarkSubmitted(id, receipt));
  REQUIRE(ob->RecordFailure(id, "transport_error: reset", 12.5));
  auto submitted = ob->PeekForDelivery(id);
  REQUIRE(submitted);
  CHECK(submitted->state == "submitted");
  CHECK(submitted->receipt == receipt);
  CHECK(submitted->attempts == 1);
  CHECK(submitted->next_attempt_at == 12.5);
  CHECK(json::parse(submitted->receipt_text) == receipt);
  CHECK(ob->StateAndReceipt(id)->second == submitted->receipt_text);  // as stored, byte for byte

  // A receipt stored again with other content is other text; a finished item peeks as such.
  json progressed = receipt;
  progressed["jobs"][0]["status"] = "running";
  REQUIRE(ob->MarkSubmitted(id, progressed));
  CHECK(ob->StateAndReceipt(id)->second != submitted->receipt_text);
  REQUIRE(ob->MarkSucceeded(id, progressed));
  CHECK(ob->PeekForDelivery(id)->state == "succeeded");
  CHECK(ob->PeekForDelivery(id)->receipt.is_null());  // only a submitted item's is read
  CHECK(ob->StateAndReceipt(id)->first == "succeeded");

  CHECK(ob->PeekForDelivery("mcp-item-missing").error().code == Errc::kNotFound);
  CHECK(ob->StateAndReceipt("mcp-item-missing").error().code == Errc::kNotFound);
}

TEST_CASE("outbox files are private", "[queue][security]") {
  TempDir dir;
  auto ob = Open(dir);
  REQUIRE(ob->Enqueue(NewItem("key-private")));
  struct stat st {};
  REQUIRE(stat(dir.File("q").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(dir.File("q/outbox.sqlite3").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}
