// memory/pg_store against the suite's real PostgreSQL: idempotency under concurrent accepts,
// job claims and lease takeover, and a change feed followed while two instances write.
#include "memory/pg_store.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "tests/support/pg_test_cluster.h"

using ResultOf = std::function<std::string(const tmcra::memory::SharedStore::Written&)>;
using tmcra::memory::PgStore;
using tmcra::testing::ScratchDatabase;

namespace {

std::unique_ptr<PgStore> OpenStore(const ScratchDatabase& db, size_t pool = 4) {
  auto store = PgStore::Open(db.Options(), pool);
  INFO((store ? std::string() : store.error().ToString()));
  REQUIRE(store);
  return std::move(*store);
}

PgStore::JobRow NewJob(const std::string& id, std::optional<std::string> key,
                       const std::string& scope = "team") {
  PgStore::JobRow job;
  job.job_id = id;
  job.tenant_id = "local";
  job.scope_name = scope;
  job.job_type = "ingest";
  job.idempotency_key = std::move(key);
  job.payload_sha256 = "sha-of-the-payload";
  job.payload_json = R"({"session_id":"s"})";
  job.created_at = 1000;
  return job;
}

// One job accepted alone: the row that won, and whether it is new.
tmcra::Result<PgStore::Accepted> AcceptOne(PgStore& store, const PgStore::JobRow& job) {
  auto accepted = store.AcceptJobs({job});
  if (!accepted) return accepted.error();
  if (accepted->conflict) return tmcra::Error::Conflict("another payload under the key");
  return accepted->accepted.front();
}

PgStore::NewRecord Message(const std::string& session, const std::string& message) {
  PgStore::NewRecord r;
  r.record_id = "rec_" + session + "_" + message;
  r.session_id = session;
  r.message_id = message;
  r.role = "user";
  r.content = "text of " + message;
  r.occurred_at = 1000;
  r.timestamp = "2026-12-05T00:00:00Z";
  r.metadata_json = "{}";
  return r;
}

}  // namespace

TEST_CASE("pg store: one idempotency key accepted by two instances at once is one job") {
  ScratchDatabase db("accept");
  auto a = OpenStore(db, 8);
  auto b = OpenStore(db, 8);
  for (int round = 0; round < 5; ++round) {
    const std::string key = "key-" + std::to_string(round);
    std::vector<std::thread> threads;
    std::vector<std::string> answered(16);
    std::atomic<int> created{0};
    for (int i = 0; i < 16; ++i) {
      threads.emplace_back([&, i] {
        PgStore& store = (i % 2 == 0) ? *a : *b;
        auto accepted = AcceptOne(store, NewJob("job_" + key + "_" + std::to_string(i), key));
        if (!accepted) return;
        if (accepted->created) ++created;
        answered[static_cast<size_t>(i)] = accepted->job.job_id;
      });
    }
    for (auto& t : threads) t.join();
    CHECK(created.load() == 1);
    for (const auto& id : answered) CHECK(id == answered[0]);
  }
  // Jobs without a key never collide.
  REQUIRE(AcceptOne(*a, NewJob("job_nokey_1", std::nullopt)));
  auto second = AcceptOne(*a, NewJob("job_nokey_2", std::nullopt));
  REQUIRE(second);
  CHECK(second->created);
}

TEST_CASE("pg store: two instances never claim the same job, and a lost lease is taken over") {
  ScratchDatabase db("claims");
  auto a = OpenStore(db);
  auto b = OpenStore(db);
  std::set<std::string> all;
  for (int i = 0; i < 60; ++i) {
    const std::string id = "job_" + std::to_string(i);
    REQUIRE(AcceptOne(*a, NewJob(id, "k" + std::to_string(i))));
    all.insert(id);
  }
  std::vector<std::string> by_a;
  std::vector<std::string> by_b;
  auto claimer = [](PgStore& store, const char* owner, std::vector<std::string>& out) {
    for (;;) {
      auto claimed = store.ClaimJobs(owner, 3, 60);
      REQUIRE(claimed);
      if (claimed->empty()) return;
      for (const auto& c : *claimed) out.push_back(c.job_id);
    }
  };
  std::thread ta([&] { claimer(*a, "instance-a", by_a); });
  std::thread tb([&] { claimer(*b, "instance-b", by_b); });
  ta.join();
  tb.join();
  std::set<std::string> seen;
  for (const auto& id : by_a) CHECK(seen.insert(id).second);
  for (const auto& id : by_b) CHECK(seen.insert(id).second);
  CHECK(seen == all);

  REQUIRE(AcceptOne(*a, NewJob("job_lease", "k-lease")));
  auto first = a->ClaimJobs("instance-a", 1, 0.5);
  REQUIRE(first);
  REQUIRE(first->size() == 1);
  auto early = b->ClaimJobs("instance-b", 1, 60);
  REQUIRE(early);
  CHECK(early->empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto taken = b->ClaimJobs("instance-b", 1, 60);
  REQUIRE(taken);
  REQUIRE(taken->size() == 1);
  CHECK(taken->front().job_id == "job_lease");
  auto late = a->FinishJob("instance-a", "job_lease", {Message("s", "m1")},
                           ResultOf([](const auto&) { return std::string("{}"); }));
  REQUIRE(late);
  CHECK_FALSE(late->written);
  auto done = b->FinishJob(
      "instance-b", "job_lease", {Message("s", "m1")},
      ResultOf([](const auto& w) { return R"({"n":)" + std::to_string(w.max_event_seq) + "}"; }));
  REQUIRE(done);
  CHECK(done->written);
  CHECK(done->records_written == 1);
  auto job = a->GetJob("job_lease");
  REQUIRE(job);
  REQUIRE(*job);
  CHECK((*job)->status == "succeeded");
  CHECK((*job)->attempts == 2);
  CHECK((*job)->result_json == R"({"n":)" + std::to_string(done->max_event_seq) + "}");
  CHECK_FALSE((*job)->payload_json);
}

TEST_CASE("pg store: a job claimed more than the most attempts is failed, not claimed") {
  ScratchDatabase db("attempts");
  auto store = OpenStore(db);
  REQUIRE(AcceptOne(*store, NewJob("job_x", "kx")));
  for (int i = 0; i < PgStore::kMaxJobClaims; ++i) {
    auto claimed = store->ClaimJobs("crashing", 1, 0);
    REQUIRE(claimed);
    REQUIRE(claimed->size() == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto last = store->ClaimJobs("crashing", 1, 0);
  REQUIRE(last);
  CHECK(last->empty());
  auto job = store->GetJob("job_x");
  REQUIRE(job);
  REQUIRE(*job);
  CHECK((*job)->status == "failed");
  CHECK((*job)->error_json->find("job_attempts_exhausted") != std::string::npos);
}

TEST_CASE("pg store: a message stored before keeps its one copy") {
  ScratchDatabase db("dedup");
  auto store = OpenStore(db);
  REQUIRE(AcceptOne(*store, NewJob("job_1", "k1")));
  REQUIRE(AcceptOne(*store, NewJob("job_2", "k2")));
  auto claimed = store->ClaimJobs("me", 2, 60);
  REQUIRE(claimed);
  REQUIRE(claimed->size() == 2);
  auto one = store->FinishJob("me", "job_1", {Message("s", "m1"), Message("s", "m2")},
                              ResultOf([](const auto&) { return std::string("{}"); }));
  REQUIRE(one);
  CHECK(one->records_written == 2);
  PgStore::NewRecord again = Message("s", "m2");
  again.record_id = "rec_other";
  auto two = store->FinishJob("me", "job_2", {again, Message("s", "m3")},
                              ResultOf([](const auto&) { return std::string("{}"); }));
  REQUIRE(two);
  CHECK(two->records_written == 1);
  CHECK(two->records_deduplicated == 1);
  auto feed = store->ChangesAfter(0, 100);
  REQUIRE(feed);
  REQUIRE(feed->changes.size() == 3);
  CHECK(feed->changes[0].seq == 1);
  CHECK(feed->changes[2].seq == 3);  // no gap for the duplicate
  CHECK(feed->through == 3);
  CHECK_FALSE(feed->more);
}

TEST_CASE(
    "pg store: a follower of the change feed misses nothing while two instances write and delete") {
  ScratchDatabase db("feed");
  auto a = OpenStore(db);
  auto b = OpenStore(db);
  auto follower_store = OpenStore(db, 2);
  constexpr int kJobs = 240;
  constexpr int kPerJob = 5;
  for (int i = 0; i < kJobs; ++i) {
    REQUIRE(AcceptOne(*a, NewJob("job_" + std::to_string(i), "k" + std::to_string(i))));
  }
  std::atomic<int> writers_left{2};
  std::atomic<bool> failed{false};
  auto writer = [&](PgStore& store, const std::string& owner) {
    for (;;) {
      auto claimed = store.ClaimJobs(owner, 2, 60);
      if (!claimed) {
        failed = true;
        break;
      }
      if (claimed->empty()) break;
      for (const auto& job : *claimed) {
        std::vector<PgStore::NewRecord> records;
        for (int m = 0; m < kPerJob; ++m) records.push_back(Message(job.job_id, std::to_string(m)));
        auto done = store.FinishJob(owner, job.job_id, records,
                                    ResultOf([](const auto&) { return std::string("{}"); }));
        if (!done || !done->written) failed = true;
      }
    }
    --writers_left;
  };
  std::set<int64_t> live;  // what the follower holds: written and not deleted
  int64_t held = 0;
  bool ordered = true;
  auto follow_once = [&]() {
    for (;;) {
      auto feed = follower_store->ChangesAfter(held, 37);
      REQUIRE(feed);
      for (const auto& change : feed->changes) {
        if (change.seq <= held) ordered = false;
        held = change.seq;
        if (change.kind == PgStore::ChangeKind::kRecordDeleted) {
          live.erase(change.event_seq);
        } else {
          live.insert(change.event_seq);
        }
      }
      held = std::max(held, feed->through);
      if (!feed->more) return;
    }
  };
  std::thread ta([&] { writer(*a, "instance-a"); });
  std::thread tb([&] { writer(*b, "instance-b"); });
  // A third party deletes some of what the follower has seen, numbered in the same feed.
  std::thread deleter([&] {
    for (int round = 0; writers_left.load() > 0; ++round) {
      PgStore::ForgetSelection selection;
      selection.session_id = "job_" + std::to_string((round * 7) % kJobs);
      selection.message_ids = std::vector<std::string>{"1", "3"};
      auto forgotten = b->Forget("team", selection);
      if (!forgotten) failed = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  while (writers_left.load() > 0) follow_once();
  ta.join();
  tb.join();
  deleter.join();
  follow_once();
  CHECK_FALSE(failed.load());
  CHECK(ordered);
  auto conn = tmcra::pg::Connection::Open(db.Options());
  REQUIRE(conn);
  auto rows = (*conn)->Exec("SELECT event_seq FROM mem_records ORDER BY event_seq");
  REQUIRE(rows);
  std::set<int64_t> stored;
  for (int i = 0; i < rows->size(); ++i) stored.insert(rows->Int(i, 0));
  CHECK(stored.size() < static_cast<size_t>(kJobs * kPerJob));  // the deleter deleted some
  CHECK(live == stored);
  auto count = (*conn)->Exec("SELECT sum(record_count) FROM mem_scopes");
  REQUIRE(count);
  CHECK(count->Int(0, 0) == static_cast<int64_t>(stored.size()));
}

TEST_CASE("pg store: a batch with a key known under another payload stores nothing") {
  ScratchDatabase db("conflict");
  auto store = OpenStore(db);
  REQUIRE(AcceptOne(*store, NewJob("job_known", "k-known")));
  PgStore::JobRow changed = NewJob("job_other", "k-known");
  changed.payload_sha256 = "another";
  auto batch = store->AcceptJobs({NewJob("job_new", "k-new"), changed});
  REQUIRE(batch);
  REQUIRE(batch->conflict);
  CHECK(*batch->conflict == 1);
  auto absent = store->GetJob("job_new");
  REQUIRE(absent);
  CHECK_FALSE(*absent);
}
