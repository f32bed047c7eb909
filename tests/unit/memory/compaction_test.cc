// Index compaction (memory/compaction.h): the structure record is read right, the rule decides
// as documented, compaction leaves one segment and the same answers, a reader's snapshot is
// untouched by it, and the worker compacts by itself once it has no job.
#include "memory/compaction.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memory/engine.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::CompactionDue;
using tmcra::memory::Engine;
using tmcra::memory::IndexShape;
using tmcra::testing::TempDir;

namespace {

std::unique_ptr<Engine> Open(const std::string& path, bool worker, int quiet_ms = 500) {
  tmcra::memory::EngineOptions options;
  options.path = path;
  options.start_worker = worker;
  options.idle_poll_ms = 50;
  options.compaction_quiet_ms = quiet_ms;
  auto engine = Engine::Open(options);
  REQUIRE(engine);
  return std::move(*engine);
}

// One ingest job per call, run at once when `run`: each job's transaction adds a segment of a
// few pages (12 messages of 300 words drawn from 5,000). Returns the job id.
std::string IngestSession(Engine& engine, int n, bool run) {
  std::mt19937 rng(static_cast<unsigned>(n));
  json messages = json::array();
  for (int m = 0; m < 12; ++m) {
    std::string text = "session " + std::to_string(n) + " talks about port " +
                       std::to_string(1000 + n * 12 + m) +
                       (n % 3 ? " and the cluster" : " and a database");
    for (int w = 0; w < 300; ++w) text += " w" + std::to_string(rng() % 5000);
    messages.push_back({{"message_id", "m" + std::to_string(m)},
                        {"role", m % 2 ? "assistant" : "user"},
                        {"content", text},
                        {"timestamp", "2026-07-15T00:00:00Z"}});
  }
  tmcra::memory::IngestContext context;
  context.idempotency_key = "compaction-test-" + std::to_string(n);
  auto job = engine.Ingest("a", {{"session_id", "s" + std::to_string(n)}, {"messages", messages}},
                           context);
  REQUIRE(job);
  if (run) REQUIRE(engine.RunPendingJobs());
  return (*job)["job_id"].get<std::string>();
}

IndexShape Shape(const std::string& path) {
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  auto shape = tmcra::memory::ReadIndexShape(**db, "records_fts");
  REQUIRE(shape);
  return *shape;
}

// At least 40 sessions, each its own job, and more until a full rewrite is due.
void IngestUntilDue(Engine& engine, const std::string& path) {
  for (int n = 0; n < 40 || !CompactionDue(Shape(path)); ++n) {
    REQUIRE(n < 200);
    IngestSession(engine, n, true);
  }
}

// Polls `done` for up to 20 s.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Whether every job of `jobs` has succeeded.
bool Succeeded(Engine& engine, const std::vector<std::string>& jobs) {
  for (const auto& job : jobs) {
    auto view = engine.GetJob(job);
    REQUIRE(view);
    if ((*view)["status"] != "succeeded") return false;
  }
  return true;
}

// Whether recalling `query` shows a window of `session`.
bool Shows(Engine& engine, const std::string& query, const std::string& session) {
  auto answer = engine.Recall("a", {{"query", query}, {"max_windows", 8}});
  REQUIRE(answer);
  bool found = false;
  for (const auto& w : (*answer)["evidence"]["windows"])
    found = found || w["session_id"] == session;
  return found;
}

// The recall answer without its random query id.
json Answer(Engine& engine, const std::string& query) {
  auto r = engine.Recall("a", {{"query", query}, {"max_windows", 8}});
  REQUIRE(r);
  json answer = *r;
  answer.erase("query_id");
  return answer;
}

IndexShape Made(int segments, int64_t pages, int64_t largest, int levels = 4,
                bool merging = false) {
  IndexShape shape;
  shape.segments = segments;
  shape.levels = levels;
  shape.pages = pages;
  shape.largest_pages = largest;
  shape.merging = merging;
  return shape;
}

}  // namespace

TEST_CASE(
    "the compaction rules: a full rewrite when 1/8 beside the largest, small folds past "
    "16 segments, a merge in progress first",
    "[memory][compaction]") {
  using tmcra::memory::ChooseCompaction;
  using tmcra::memory::CompactionStep;
  using tmcra::memory::kMaxLevelsForFullMerge;
  using tmcra::memory::kMaxSegments;
  using tmcra::memory::kMinSmallPages;
  CHECK_FALSE(CompactionDue(Made(0, 0, 0)));
  CHECK_FALSE(CompactionDue(Made(1, 500, 500)));
  CHECK_FALSE(CompactionDue(Made(2, 2, 1)));                         // a young store: too little
  CHECK_FALSE(CompactionDue(Made(5, 10 + kMinSmallPages - 1, 10)));  // under the floor
  CHECK(CompactionDue(Made(5, 10 + kMinSmallPages, 10)));
  CHECK_FALSE(CompactionDue(Made(2, 1000 + 124, 1000)));  // under 1/8 beside the largest
  CHECK(CompactionDue(Made(2, 1000 + 125, 1000)));        // 1/8
  CHECK_FALSE(CompactionDue(Made(kMaxSegments + 1, 1000 + 8, 1000)));  // many, but small

  CHECK(ChooseCompaction(Made(1, 500, 500)) == CompactionStep::kNone);
  CHECK(ChooseCompaction(Made(3, 1000 + 20, 1000)) == CompactionStep::kNone);
  CHECK(ChooseCompaction(Made(2, 1000 + 125, 1000)) == CompactionStep::kFull);
  CHECK(ChooseCompaction(Made(kMaxSegments + 1, 1000 + 20, 1000)) == CompactionStep::kSmall);
  // A merge in progress is finished before anything else, whatever the sizes.
  CHECK(ChooseCompaction(Made(3, 1000 + 20, 1000, 4, true)) == CompactionStep::kContinue);
  CHECK(ChooseCompaction(Made(2, 1000 + 125, 1000, 4, true)) == CompactionStep::kContinue);
  // No full rewrite on a structure near FTS5's level limit (SQLite 3.40 adds two each time).
  CHECK(ChooseCompaction(Made(2, 1000 + 125, 1000, kMaxLevelsForFullMerge)) ==
        CompactionStep::kNone);
  CHECK(ChooseCompaction(Made(kMaxSegments + 1, 1000 + 125, 1000, kMaxLevelsForFullMerge)) ==
        CompactionStep::kSmall);
}

TEST_CASE("structure records parse in both layouts and refuse damage", "[memory][compaction]") {
  // Cookie, 2 levels, 3 segments, write counter 7; level 0: merging 0, 2 segments (ids 1, 2;
  // pages 1..4 and 1..1); level 1: 1 segment (id 3, pages 5..300, two-byte varint 300).
  const std::string v1(
      "\0\0\0\1"
      "\x02\x03\x07"
      "\x00\x02"
      "\x01\x01\x04"
      "\x02\x01\x01"
      "\x00\x01"
      "\x03\x05\x82\x2c",
      21);
  auto shape = tmcra::memory::ParseIndexShape(v1);
  REQUIRE(shape);
  CHECK(shape->segments == 3);
  CHECK(shape->pages == 4 + 1 + 296);
  CHECK(shape->largest_pages == 296);
  CHECK(shape->levels == 2);
  CHECK_FALSE(shape->merging);
  // The same with level 0's two segments the inputs of a merge in progress into level 1.
  std::string half_done = v1;
  half_done[7] = '\x02';
  shape = tmcra::memory::ParseIndexShape(half_done);
  REQUIRE(shape);
  CHECK(shape->merging);
  // The 3.44 layout: a marker after the cookie and five more fields per segment.
  const std::string v2(
      "\0\0\0\1"
      "\xff\x00\x00\x01"
      "\x01\x01\x07"
      "\x00\x01"
      "\x01\x01\x09"
      "\x00\x00\x00\x00\x05",
      21);
  shape = tmcra::memory::ParseIndexShape(v2);
  REQUIRE(shape);
  CHECK(shape->segments == 1);
  CHECK(shape->pages == 9);
  for (const std::string& record : {v1, v2}) {
    for (size_t cut = 0; cut < record.size(); ++cut) {
      INFO("cut at " << cut << " of " << record.size());
      CHECK_FALSE(tmcra::memory::ParseIndexShape(record.substr(0, cut)));
    }
  }
  std::string wrong_count = v1;
  wrong_count[5] = '\x04';  // says 4 segments, holds 3
  CHECK_FALSE(tmcra::memory::ParseIndexShape(wrong_count));
}

TEST_CASE("compaction leaves nothing to do and the same answers, and spares a reader's snapshot",
          "[memory][compaction]") {
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  auto engine = Open(path, false);
  IngestUntilDue(*engine, path);
  const IndexShape before = Shape(path);
  REQUIRE(before.segments > 1);
  const json port = Answer(*engine, "which port did session 17 use");
  const json database = Answer(*engine, "the database");
  CHECK(port["evidence"]["windows"].size() > 0);

  // A reader in the middle of a read transaction keeps its snapshot through the compaction.
  auto reader = tmcra::db::Database::Open({path});
  REQUIRE(reader);
  auto tx = tmcra::db::Transaction::Deferred(**reader);
  REQUIRE(tx);
  const auto count = [&](tmcra::db::Database& db) {
    auto st = db.Prepare("SELECT count(*) FROM records_fts WHERE records_fts MATCH 'cluster'");
    REQUIRE(st);
    auto row = st->Step();
    REQUIRE(row);
    return st->Int(0);
  };
  const int64_t clusters = count(**reader);  // the snapshot starts here
  CHECK(clusters > 0);

  auto steps = engine->CompactIndexes();
  REQUIRE(steps);
  CHECK(*steps >= 1);
  const IndexShape after = Shape(path);
  INFO("segments " << before.segments << " -> " << after.segments);
  CHECK(tmcra::memory::ChooseCompaction(after) == tmcra::memory::CompactionStep::kNone);
  CHECK(after.segments < before.segments);
  CHECK(count(**reader) == clusters);
  CHECK(tmcra::memory::ReadIndexShape(**reader, "records_fts")->segments == before.segments);
  REQUIRE(tx->Commit());
  CHECK(count(**reader) == clusters);

  CHECK(Answer(*engine, "which port did session 17 use") == port);
  CHECK(Answer(*engine, "the database") == database);
  // Nothing more to do: no step.
  steps = engine->CompactIndexes();
  REQUIRE(steps);
  CHECK(*steps == 0);
  // FTS5 agrees the index is sound.
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  CHECK((*db)->Exec("INSERT INTO records_fts(records_fts) VALUES('integrity-check')"));
}

TEST_CASE("a full rewrite, step by step, leaves one segment", "[memory][compaction]") {
  using tmcra::memory::CompactionStep;
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  auto engine = Open(path, false);
  for (int n = 0; n < 40; ++n) IngestSession(*engine, n, true);
  const json port = Answer(*engine, "which port did session 17 use");
  REQUIRE(Shape(path).segments > 1);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  auto first = tmcra::memory::CompactStep(**db, "records_fts", CompactionStep::kFull, 8);
  REQUIRE(first);
  CHECK(*first);
  CHECK(Shape(path).merging);  // 8 pages do not finish it
  int steps = 1;
  for (;; ++steps) {
    REQUIRE(steps < 1000);
    auto more = tmcra::memory::CompactStep(**db, "records_fts", CompactionStep::kContinue, 8);
    REQUIRE(more);
    if (!*more) break;
  }
  INFO(steps << " steps");
  CHECK(Shape(path).segments == 1);
  CHECK_FALSE(Shape(path).merging);
  CHECK(Answer(*engine, "which port did session 17 use") == port);
  CHECK((*db)->Exec("INSERT INTO records_fts(records_fts) VALUES('integrity-check')"));
}

TEST_CASE("the worker compacts once it has no job left", "[memory][compaction]") {
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  {
    auto engine = Open(path, false);
    IngestUntilDue(*engine, path);
  }
  const int initial = Shape(path).segments;
  auto engine = Open(path, true);  // looks at the indexes when it starts
  const auto settled = [&] {
    return tmcra::memory::ChooseCompaction(Shape(path)) == tmcra::memory::CompactionStep::kNone;
  };
  CHECK(WaitFor(settled));
  CHECK(Shape(path).segments < initial);
  // And again after jobs have made it due.
  std::vector<std::string> jobs;
  for (int n = 1000; n < 1040; ++n) jobs.push_back(IngestSession(*engine, n, false));
  CHECK(WaitFor([&] { return Succeeded(*engine, jobs); }));
  CHECK(WaitFor(settled));
  CHECK(Shows(*engine, "session 1039 port", "s1039"));
}

TEST_CASE("the worker waits for a pause in the jobs before it compacts", "[memory][compaction]") {
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  {
    auto engine = Open(path, false);
    IngestSession(*engine, 0, true);
    REQUIRE(engine->CompactIndexes());
  }
  REQUIRE(Shape(path).segments == 1);
  auto engine = Open(path, true, /*quiet_ms=*/60000);
  // Sessions one at a time (each job waited for) until there is compacting to do.
  IndexShape shape;
  for (int n = 1; n <= 100; ++n) {
    const std::string job = IngestSession(*engine, n, false);
    REQUIRE(WaitFor([&] { return Succeeded(*engine, {job}); }));
    shape = Shape(path);
    if (CompactionDue(shape)) break;
  }
  REQUIRE(CompactionDue(shape));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // six idle polls
  const IndexShape later = Shape(path);
  INFO("segments " << later.segments << ", pages " << later.pages);
  CHECK(later.segments == shape.segments);  // due, and left alone: the jobs ran just now
  CHECK(CompactionDue(later));
  auto steps = engine->CompactIndexes();
  REQUIRE(steps);
  CHECK(*steps > 0);
  CHECK(tmcra::memory::ChooseCompaction(Shape(path)) == tmcra::memory::CompactionStep::kNone);
}

TEST_CASE("one small write at a time: segments stay few and full rewrites rare",
          "[memory][compaction]") {
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  auto engine = Open(path, false);
  for (int n = 0; n < 30; ++n) IngestSession(*engine, n, true);
  REQUIRE(engine->CompactIndexes());
  const IndexShape start = Shape(path);
  REQUIRE(tmcra::memory::ChooseCompaction(start) == tmcra::memory::CompactionStep::kNone);
  int most = 0;
  for (int i = 0; i < 300; ++i) {
    // A chat turn: one short message, its own job and transaction, then the idle worker's turn.
    tmcra::memory::IngestContext context;
    context.idempotency_key = "compaction-note-" + std::to_string(i);
    json message{{"message_id", "m0"},
                 {"role", "user"},
                 {"content", "note " + std::to_string(i) + " about port " + std::to_string(i)},
                 {"timestamp", "2026-07-16T00:00:00Z"}};
    REQUIRE(engine->Ingest(
        "a", {{"session_id", "note" + std::to_string(i)}, {"messages", json::array({message})}},
        context));
    REQUIRE(engine->RunPendingJobs());
    REQUIRE(engine->CompactIndexes());
    most = std::max(most, Shape(path).segments);
  }
  const IndexShape end = Shape(path);
  INFO("most segments " << most << "; levels " << start.levels << " -> " << end.levels);
  CHECK(most <= tmcra::memory::kMaxSegments);
  // Each full rewrite adds two levels on SQLite 3.40: 300 turns of a few words are far from
  // 1/8 of the index, so none happened (the small folds add none).
  CHECK(end.levels <= start.levels + 2);
}

TEST_CASE("many rounds of writes and compaction: the structure record stays readable",
          "[memory][compaction]") {
  // SQLite 3.40 adds two (empty) levels to the structure at every full merge.
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  auto engine = Open(path, false);
  int n = 0;
  for (int round = 0; round < 40; ++round) {
    for (int k = 0; k < 3; ++k) IngestSession(*engine, n++, true);
    auto steps = engine->CompactIndexes();
    REQUIRE(steps);
    const IndexShape shape = Shape(path);
    INFO("round " << round);
    CHECK(shape.segments <= 1 + (CompactionDue(shape) ? 0 : 16));
    CHECK_FALSE(CompactionDue(shape));
  }
  CHECK(Shows(*engine, "which port did session 77 use", "s77"));
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  CHECK((*db)->Exec("INSERT INTO records_fts(records_fts) VALUES('integrity-check')"));
}

TEST_CASE("a process killed with SIGKILL in the middle of compacting loses and breaks nothing",
          "[memory][compaction][kill]") {
  TempDir dir;
  const std::string original = dir.File("original/memory.db");
  json answer;
  IndexShape before;
  {
    auto engine = Open(original, false);
    for (int n = 0; n < 60; ++n) IngestSession(*engine, n, true);
    answer = Answer(*engine, "which port did session 17 use");
    before = Shape(original);
  }
  REQUIRE(before.segments > 1);
  REQUIRE(CompactionDue(before));
  int midway = 0;
  int copies = 0;
  // Copies the store, starts an engine on the copy in a child, waits as `wait` says once the
  // engine is open, kills the child, and checks the copy.
  const auto kill_and_check = [&](const std::function<void(const std::string&)>& wait) {
    const std::string copy = dir.File("copy" + std::to_string(copies++) + "/memory.db");
    std::filesystem::create_directories(std::filesystem::path(copy).parent_path());
    for (const char* suffix : {"", "-wal"}) {
      if (std::filesystem::exists(original + suffix)) {
        std::filesystem::copy_file(original + suffix, copy + suffix);
      }
    }
    int opened[2];
    REQUIRE(pipe(opened) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(opened[0]);
      try {
        // The worker starts compacting as soon as the engine is open: 2 pages a step, so it
        // takes over a hundred steps.
        tmcra::memory::EngineOptions options;
        options.path = copy;
        options.compaction_step_pages = 2;
        auto engine = Engine::Open(options);
        (void)!write(opened[1], engine ? "y" : "n", 1);
        std::this_thread::sleep_for(std::chrono::seconds(30));
      } catch (...) {
      }
      _exit(2);
    }
    close(opened[1]);  // a child that dies before it writes ends the read with 0 bytes
    char c = 0;
    const ssize_t got = read(opened[0], &c, 1);
    close(opened[0]);
    wait(copy);
    kill(child, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(got == 1);
    REQUIRE(c == 'y');
    CHECK(WIFSIGNALED(status));

    const IndexShape after_kill = Shape(copy);
    if (after_kill.merging) ++midway;
    auto db = tmcra::db::Database::Open({copy});
    REQUIRE(db);
    CHECK((*db)->Exec("INSERT INTO records_fts(records_fts) VALUES('integrity-check')"));
    auto engine = Open(copy, false);
    CHECK(Answer(*engine, "which port did session 17 use") == answer);
    REQUIRE(engine->CompactIndexes());  // and it finishes where the killed one stopped
    CHECK(tmcra::memory::ChooseCompaction(Shape(copy)) == tmcra::memory::CompactionStep::kNone);
    CHECK(Answer(*engine, "which port did session 17 use") == answer);
  };
  // Killed at fixed times after the engine opened: before, during or after the compaction,
  // depending on the machine's speed and load.
  for (const int delay_ms : {0, 1, 2, 4, 8, 12, 16, 24, 32, 48}) {
    INFO("killed " << delay_ms << " ms after the engine opened");
    kill_and_check([delay_ms](const std::string&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    });
  }
  // And killed once a merge is seen under way (from another connection), a few steps into it:
  // on a loaded machine the fixed times can all fall before the worker's first step (the CI
  // run of session 13 under ASan: none of the ten left a merge half done).
  for (const int steps_seen : {1, 3}) {
    INFO("killed after a merge was seen under way " << steps_seen << " times");
    kill_and_check([steps_seen](const std::string& copy) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      int seen = 0;
      while (seen < steps_seen && std::chrono::steady_clock::now() < deadline) {
        if (Shape(copy).merging) ++seen;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  INFO("kills that left a compaction half done: " << midway);
  CHECK(midway >= 1);
}
