// tmcra_bm25 against FTS5's own bm25(): the same score for every row of a real store, with the
// in-memory row facts and without them (FTS5's lookup); tmcra_rank against the same ranking in
// SQL; and a clear error on a bad argument.
#include "memory/bm25.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "memory/cjk.h"
#include "memory/engine.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::RowFacts;
using tmcra::testing::TempDir;

namespace {

const std::vector<std::string> kWords = {"alpha",   "bravo", "charlie", "delta", "echo",
                                         "foxtrot", "golf",  "hotel",   "india", "juliet",
                                         "kilo",    "lima",  "119",     "port",  "cluster"};

// A store of `sessions` x 10 messages of 1..40 words drawn unevenly from kWords.
std::string MakeStore(const TempDir& dir, int sessions) {
  tmcra::memory::EngineOptions options;
  options.path = dir.File("data/memory.db");
  options.start_worker = false;
  auto engine = tmcra::memory::Engine::Open(options);
  REQUIRE(engine);
  std::mt19937 rng(7);
  for (int s = 0; s < sessions; ++s) {
    json messages = json::array();
    for (int m = 0; m < 10; ++m) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 40);
      for (int w = 0; w < n; ++w) {
        // Skewed: low indexes are common, high ones rare.
        const size_t i = std::min(rng() % kWords.size(), rng() % kWords.size());
        text += (w ? " " : "") + kWords[i];
      }
      messages.push_back({{"message_id", "m" + std::to_string(m)},
                          {"role", m % 2 ? "assistant" : "user"},
                          {"content", text},
                          {"timestamp", "2026-07-15T00:00:00Z"}});
    }
    tmcra::memory::IngestContext context;
    context.idempotency_key = "bm25-test-" + std::to_string(s);
    REQUIRE((*engine)->Ingest(s % 3 ? "a" : "b",
                              {{"session_id", "s" + std::to_string(s)}, {"messages", messages}},
                              context));
  }
  REQUIRE((*engine)->RunPendingJobs());
  return options.path;
}

// Writes one more session of `texts` (user messages) into the store at `path`, as another
// process would, and runs its job.
void IngestMore(const std::string& path, const std::string& key, const std::string& session,
                const std::vector<std::string>& texts) {
  tmcra::memory::EngineOptions options;
  options.path = path;
  options.start_worker = false;
  auto engine = tmcra::memory::Engine::Open(options);
  REQUIRE(engine);
  tmcra::memory::IngestContext context;
  context.idempotency_key = key;
  json messages = json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    messages.push_back({{"message_id", "x" + std::to_string(i)},
                        {"role", "user"},
                        {"content", texts[i]},
                        {"timestamp", "2026-07-16T00:00:00Z"}});
  }
  REQUIRE((*engine)->Ingest("a", {{"session_id", session}, {"messages", messages}}, context));
  REQUIRE((*engine)->RunPendingJobs());
}

int64_t DocumentCount(tmcra::db::Database& db, const std::string& word) {
  if (word.find(' ') != std::string::npos) {  // a phrase: the rows that hold it
    auto st = db.Prepare("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?");
    REQUIRE(st);
    st->Bind(1, "\"" + word + "\"");
    auto row = st->Step();
    REQUIRE(row);
    return st->Int(0);
  }
  REQUIRE(
      db.Exec("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING "
              "fts5vocab(main, records_fts, 'row')"));
  auto st = db.Prepare("SELECT doc FROM temp.v WHERE term = ?");
  REQUIRE(st);
  st->Bind(1, word);
  auto row = st->Step();
  REQUIRE(row);
  return *row ? st->Int(0) : 0;
}

// `words` as recall's MATCH (quoted, OR-ed) and their document counts ("df1,df2,...").
std::pair<std::string, std::string> MatchAndCounts(tmcra::db::Database& db,
                                                   const std::vector<std::string>& words) {
  std::string match;
  std::string counts;
  for (const auto& w : words) {
    match += (match.empty() ? "\"" : " OR \"") + w + "\"";
    counts += (counts.empty() ? "" : ",") + std::to_string(DocumentCount(db, w));
  }
  return {match, counts};
}

// Every matching row's (rowid, bm25, tmcra_bm25) for `words` OR-ed.
void CompareScores(tmcra::db::Database& db, const std::vector<std::string>& words) {
  const auto [match, counts] = MatchAndCounts(db, words);
  auto st = db.Prepare(
      "SELECT rowid, bm25(records_fts), tmcra_bm25(records_fts, ?2) FROM records_fts "
      "WHERE records_fts MATCH ?1");
  REQUIRE(st);
  st->Bind(1, match).Bind(2, counts);
  int rows = 0;
  for (;;) {
    auto row = st->Step();
    REQUIRE(row);
    if (!*row) break;
    ++rows;
    const double theirs = st->Double(1);
    const double ours = st->Double(2);
    INFO("query " << match << " row " << st->Int(0));
    CHECK(std::fabs(theirs - ours) <= 1e-12 * std::max(1.0, std::fabs(theirs)));
  }
  CHECK(rows > 0);
}

}  // namespace

TEST_CASE("tmcra_bm25 scores every row as FTS5's bm25 does", "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 60);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts lengths;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &lengths));

  const std::vector<std::vector<std::string>> queries = {
      {"alpha"},
      {"lima"},
      {"119", "port"},
      {"cluster", "alpha", "kilo"},
      {"juliet", "india", "hotel", "golf", "foxtrot", "echo", "delta"},
      // Two-word phrases: occurrences are counted per phrase match, as bm25() counts them.
      {"alpha bravo", "kilo"},
      {"alpha alpha", "charlie delta"}};
  SECTION("with FTS5's own length lookup (nothing read into memory yet)") {
    CHECK(lengths.highest() == 0);
    for (const auto& q : queries) CompareScores(**db, q);
  }
  SECTION("with the in-memory lengths") {
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    REQUIRE(lengths.CatchUp(**db));
    CHECK(lengths.highest() == 600);
    CHECK(lengths.Get(1)->length > 0);
    CHECK_FALSE(lengths.Get(601));
    CHECK(lengths.ScopeId("a"));
    CHECK(lengths.ScopeId("b"));
    CHECK_FALSE(lengths.ScopeId("c"));
    // Each row's session, as a hash.
    auto sessions = (*db)->Prepare("SELECT event_seq, session_id FROM records");
    REQUIRE(sessions);
    int rows = 0;
    for (;;) {
      auto row = sessions->Step();
      REQUIRE(row);
      if (!*row) break;
      ++rows;
      CHECK(lengths.SessionHash(sessions->Int(0)) == RowFacts::HashSession(sessions->Text(1)));
    }
    CHECK(rows == 600);
    CHECK_FALSE(lengths.SessionHash(601));
    CHECK_FALSE(lengths.SessionHash(0));
    CHECK(RowFacts::HashSession("s1") != RowFacts::HashSession("s2"));
    for (const auto& q : queries) CompareScores(**db, q);
  }
}

namespace {

// tmcra_rank's list for `words` OR-ed within `scope`, or nullopt when it returned NULL.
// With `postings`, the words' postings come from (or go into) its cache.
std::optional<std::vector<tmcra::memory::RankedRow>> Rank(
    tmcra::db::Database& db, const std::vector<std::string>& words, int64_t scope_id, int64_t limit,
    tmcra::memory::RankPostings* postings = nullptr) {
  const auto [match, counts] = MatchAndCounts(db, words);
  auto st = db.Prepare(std::string("SELECT tmcra_rank(records_fts, ?2, ?3, ?4, ?5") +
                       (postings != nullptr ? ", ?6" : "") +
                       ") FROM records_fts WHERE records_fts MATCH ?1 LIMIT 1");
  REQUIRE(st);
  std::vector<tmcra::memory::RankedRow> rows;
  st->Bind(1, match)
      .Bind(2, counts)
      .Bind(3, scope_id)
      .Bind(4, limit)
      .BindPointer(5, &rows, tmcra::memory::kRankedRowsPointer);
  if (postings != nullptr) st->BindPointer(6, postings, tmcra::memory::kRankPostingsPointer);
  auto row = st->Step();
  REQUIRE(row);
  REQUIRE(*row);
  if (st->IsNull(0)) return std::nullopt;
  CHECK(st->Int(0) == static_cast<int64_t>(rows.size()));
  return rows;
}

// The same ranking in SQL: every matching row of `scope` scored by tmcra_bm25, best first,
// equal scores newest first.
std::vector<tmcra::memory::RankedRow> RankInSql(tmcra::db::Database& db,
                                                const std::vector<std::string>& words,
                                                const std::string& scope, int64_t limit) {
  const auto [match, counts] = MatchAndCounts(db, words);
  auto st = db.Prepare(
      "SELECT f.rowid, tmcra_bm25(records_fts, ?2) AS score FROM records_fts f "
      "JOIN records r ON r.event_seq = f.rowid WHERE records_fts MATCH ?1 AND r.scope_name = ?3 "
      "ORDER BY score, f.rowid DESC LIMIT ?4");
  REQUIRE(st);
  st->Bind(1, match).Bind(2, counts).Bind(3, scope).Bind(4, limit);
  std::vector<tmcra::memory::RankedRow> out;
  for (;;) {
    auto row = st->Step();
    REQUIRE(row);
    if (!*row) return out;
    out.push_back({st->Int(0), st->Double(1)});
  }
}

}  // namespace

TEST_CASE("tmcra_rank ranks a scope as SQL does with tmcra_bm25, to the last bit",
          "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 60);
  // Ties: rows with the same words and length score the same; the newest must win a place.
  IngestMore(path, "bm25-test-ties", "ties", std::vector<std::string>(100, "tango tango uniform"));
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts facts;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &facts));
  SECTION("a matching row RowFacts does not hold: NULL, so the caller ranks in SQL") {
    CHECK_FALSE(Rank(**db, {"kilo"}, 0, 10));
  }
  SECTION("every scope, query and limit") {
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    REQUIRE(facts.CatchUp(**db));
    const std::vector<std::vector<std::string>> queries = {
        {"alpha"},
        {"lima"},
        {"119", "port"},
        {"cluster", "alpha", "kilo"},
        {"juliet", "india", "hotel", "golf", "foxtrot", "echo", "delta"},
        {"alpha bravo", "kilo"},
        {"alpha alpha", "charlie delta"},
        {"tango"},
        {"uniform", "kilo"},
        {"nothing-here", "kilo"}};
    int compared = 0;
    // "a" holds two thirds of the generated rows and all the ties, "b" one third.
    for (const std::string scope : {"a", "b"}) {
      for (const auto& words : queries) {
        for (const int64_t limit : {1, 5, 64, 100000}) {
          INFO("scope " << scope << " first word " << words[0] << " limit " << limit);
          auto ours = Rank(**db, words, *facts.ScopeId(scope), limit);
          REQUIRE(ours);
          const auto sql = RankInSql(**db, words, scope, limit);
          REQUIRE(ours->size() == sql.size());
          for (size_t i = 0; i < sql.size(); ++i) {
            CHECK(ours->at(i).rowid == sql[i].rowid);
            CHECK(ours->at(i).score == sql[i].score);  // bit for bit
            CHECK(ours->at(i).score < 0);
          }
          compared += static_cast<int>(sql.size());
        }
      }
    }
    CHECK(compared > 1000);
    // The 100 tied rows are 601..700; the five newest win the five places.
    auto ties = Rank(**db, {"tango"}, *facts.ScopeId("a"), 5);
    REQUIRE(ties);
    REQUIRE(ties->size() == 5);
    for (size_t i = 0; i < 5; ++i) CHECK(ties->at(i).rowid == 700 - static_cast<int64_t>(i));
    // A scope with no matching row: nothing; no such scope id: nothing.
    CHECK(Rank(**db, {"tango"}, *facts.ScopeId("b"), 5)->empty());
    CHECK(Rank(**db, {"alpha"}, 99, 5)->empty());
  }
}

namespace {

int64_t Highest(tmcra::db::Database& db) {
  auto st = db.Prepare("SELECT max(event_seq) FROM records");
  REQUIRE(st);
  REQUIRE(*st->Step());
  return st->Int(0);
}

// tmcra_rank with the cache and without, for every query and both scopes: the same rows and
// scores. Returns how many rows were compared.
int CompareCached(tmcra::db::Database& db, RowFacts& facts, tmcra::memory::PostingsCache& cache,
                  const std::vector<std::vector<std::string>>& queries) {
  const int64_t highest = Highest(db);
  int compared = 0;
  for (const std::string scope : {"a", "b"}) {
    for (const auto& words : queries) {
      INFO("scope " << scope << " first word " << words[0] << " snapshot " << highest);
      tmcra::memory::RankPostings postings{&cache, &words, highest};
      auto cached = Rank(db, words, *facts.ScopeId(scope), 64, &postings);
      auto plain = Rank(db, words, *facts.ScopeId(scope), 64);
      REQUIRE(cached);
      REQUIRE(plain);
      REQUIRE(cached->size() == plain->size());
      for (size_t i = 0; i < plain->size(); ++i) {
        CHECK(cached->at(i).rowid == plain->at(i).rowid);
        CHECK(cached->at(i).score == plain->at(i).score);
      }
      compared += static_cast<int>(plain->size());
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("tmcra_rank with cached postings ranks as without them in newer and older snapshots",
          "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 60);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts facts;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &facts));
  tmcra::memory::PostingsCache cache(64 << 20);
  const std::vector<std::vector<std::string>> queries = {{"alpha"},
                                                         {"kilo"},
                                                         {"119", "port"},
                                                         {"cluster", "alpha", "kilo"},
                                                         {"alpha bravo", "kilo"},
                                                         {"lima", "golf", "juliet"}};
  {
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    REQUIRE(facts.CatchUp(**db));
    CHECK(CompareCached(**db, facts, cache, queries) > 100);  // walked and remembered
    const auto walked = cache.stats();
    CHECK(walked.words == 9);  // each phrase once: "alpha" and "kilo" recur
    CHECK(walked.misses == 9);
    CHECK(CompareCached(**db, facts, cache, queries) > 100);  // every phrase from the cache
    CHECK(cache.stats().misses == walked.misses);
    CHECK(cache.stats().hits > walked.hits);
    REQUIRE(tx->Commit());
  }
  // A reader whose snapshot stays at row 600 while rows 601..603 are written.
  auto old_db = tmcra::db::Database::Open({path});
  REQUIRE(old_db);
  REQUIRE(tmcra::memory::RegisterBm25(**old_db, &facts));
  auto old_tx = tmcra::db::Transaction::Deferred(**old_db);
  REQUIRE(old_tx);
  REQUIRE(Highest(**old_db) == 600);
  IngestMore(path, "bm25-test-cached", "late",
             {"kilo kilo alpha bravo", "kilo kilo alpha bravo", "kilo kilo alpha bravo"});
  {
    // The newer snapshot gets the rows written since (two of the words are in them): walked
    // again, or caught up with the rows since. Either way it ranks them as the walk does.
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    REQUIRE(facts.CatchUp(**db));
    REQUIRE(Highest(**db) == 603);
    const auto before = cache.stats();
    SECTION("more rows added than held: left to the walk") {
      const std::vector<std::string> word{"kilo"};
      const int64_t held = static_cast<int64_t>(cache.Find("kilo", 600)->rows.size());
      REQUIRE(cache.CatchUp(**db, word, {2 * held + 1}, 603));
      CHECK(cache.stats().caught_up == 0);
      REQUIRE(cache.CatchUp(**db, word, {held + 2}, 603));  // a count that does not match
      CHECK(cache.stats().caught_up == 0);
      REQUIRE(cache.CatchUp(**db, word, {held + 3}, 603));  // the three rows since
      CHECK(cache.stats().caught_up == 1);
      CHECK(cache.Find("kilo", 603)->rows.size() == static_cast<size_t>(held + 3));
      // No row since: brought up to the snapshot without a search.
      const std::vector<std::string> lima{"lima"};
      const int64_t lima_held = static_cast<int64_t>(cache.Find("lima", 600)->rows.size());
      REQUIRE(cache.CatchUp(**db, lima, {lima_held}, 603));
      CHECK(cache.stats().caught_up == 2);
      CHECK(cache.Find("lima", 603)->rows.size() == static_cast<size_t>(lima_held));
    }
    SECTION("walked again") {
      CHECK(CompareCached(**db, facts, cache, queries) > 100);
      CHECK(cache.stats().misses == before.misses + 9);
    }
    SECTION("caught up with the rows written since") {
      std::vector<std::string> all;
      for (const auto& q : queries) all.insert(all.end(), q.begin(), q.end());
      REQUIRE(cache.CatchUp(**db, all, {}, 603));
      CHECK(cache.stats().caught_up == 9);
      CHECK(cache.Find("kilo", 603)->rows.back() == 603);         // the new rows added,
      CHECK(cache.Find("alpha bravo", 603)->rows.back() == 603);  // to a phrase's as well
      CHECK(CompareCached(**db, facts, cache, queries) > 100);
      CHECK(cache.stats().misses == before.misses);  // none walked again
      REQUIRE(cache.CatchUp(**db, all, {}, 603));    // nothing older is held now
      CHECK(cache.stats().caught_up == 9);
    }
    const std::vector<std::string> kilo{"kilo"};
    tmcra::memory::RankPostings postings{&cache, &kilo, 603};
    auto ranked = Rank(**db, kilo, *facts.ScopeId("a"), 3, &postings);
    REQUIRE(ranked);
    REQUIRE(ranked->size() == 3);
    CHECK(ranked->at(0).rowid == 603);  // the short new rows rank first, newest first
    REQUIRE(tx->Commit());
  }
  // The older snapshot uses the newer postings up to its own newest row.
  const auto before = cache.stats();
  CHECK(CompareCached(**old_db, facts, cache, queries) > 100);
  CHECK(cache.stats().misses == before.misses);
  REQUIRE(old_tx->Commit());

  SECTION("postings larger than the cache are walked every time and never kept") {
    tmcra::memory::PostingsCache tiny(256);
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    CHECK(CompareCached(**db, facts, tiny, {{"alpha"}}) > 0);
    CHECK(CompareCached(**db, facts, tiny, {{"alpha"}}) > 0);
    CHECK(tiny.stats().words == 0);
    CHECK(tiny.stats().hits == 0);
  }
  SECTION("postings that name too few words for the phrases: an error naming tmcra_rank") {
    auto tx = tmcra::db::Transaction::Deferred(**db);
    REQUIRE(tx);
    const std::vector<std::string> one{"alpha"};
    tmcra::memory::RankPostings postings{&cache, &one, 603};
    auto st = db.value()->Prepare(
        "SELECT tmcra_rank(records_fts, ?2, ?3, ?4, ?5, ?6) FROM records_fts WHERE records_fts "
        "MATCH ?1 LIMIT 1");
    REQUIRE(st);
    std::vector<tmcra::memory::RankedRow> rows;
    const auto [match, counts] = MatchAndCounts(**db, {"alpha", "kilo"});
    st->Bind(1, match)
        .Bind(2, counts)
        .Bind(3, int64_t{0})
        .Bind(4, int64_t{5})
        .BindPointer(5, &rows, tmcra::memory::kRankedRowsPointer)
        .BindPointer(6, &postings, tmcra::memory::kRankPostingsPointer);
    auto row = st->Step();
    REQUIRE_FALSE(row);
    CHECK(row.error().message.find("tmcra_rank") != std::string::npos);
  }
}

TEST_CASE("PostingsCache keeps the newest postings of a word within its size", "[memory][bm25]") {
  using Postings = tmcra::memory::PostingsCache::Postings;
  const auto make = [](int64_t as_of, size_t rows) {
    auto p = std::make_shared<Postings>();
    for (size_t i = 0; i < rows; ++i) {
      p->rows.push_back(static_cast<int64_t>(i + 1));
      p->counts.push_back(1);
    }
    p->as_of = as_of;
    return p;
  };
  tmcra::memory::PostingsCache cache(4096);
  CHECK(cache.Find("w", 10) == nullptr);
  cache.Put("w", make(10, 5));
  CHECK(cache.Find("w", 10)->as_of == 10);
  CHECK(cache.Find("w", 7)->as_of == 10);  // an older snapshot cuts it
  CHECK(cache.Find("w", 11) == nullptr);   // a newer one walks again
  cache.Put("w", make(8, 5));              // older than held: kept as it was
  CHECK(cache.Find("w", 10)->as_of == 10);
  cache.Put("w", make(12, 6));
  CHECK(cache.Find("w", 12)->rows.size() == 6);
  CHECK(cache.stats().words == 1);
  cache.Put("big", make(12, 1000));  // 12 kB: more than the whole cache, not kept
  CHECK(cache.Find("big", 12) == nullptr);
  cache.Put("x", make(12, 200));  // about 3 kB: fits
  cache.Put("y", make(12, 200));  // would pass 4096 bytes: both others go, least recent first
  CHECK(cache.Find("w", 12) == nullptr);
  CHECK(cache.Find("x", 12) == nullptr);
  CHECK(cache.Find("y", 12) != nullptr);
  CHECK(cache.stats().words == 1);
  CHECK(cache.stats().bytes <= 4096);

  // Room for three entries of one size: a fourth drops the one found or put least recently.
  tmcra::memory::PostingsCache probe(1 << 20);
  probe.Put("a", make(1, 100));
  const size_t one = probe.stats().bytes;
  tmcra::memory::PostingsCache lru(3 * one);
  for (const char* w : {"a", "b", "c"}) lru.Put(w, make(1, 100));
  CHECK(lru.stats().words == 3);
  CHECK(lru.Find("a", 1) != nullptr);  // "a" is now the most recent, "b" the least
  lru.Put("d", make(1, 100));
  CHECK(lru.Find("b", 1) == nullptr);
  for (const char* w : {"a", "c", "d"}) CHECK(lru.Find(w, 1) != nullptr);
  CHECK(lru.stats().bytes == 3 * one);
  // Postings a reader still holds outlive their entry.
  auto held = lru.Find("a", 1);
  lru.Put("a", make(2, 150));  // newer, and larger: drops others to fit
  CHECK(held->rows.size() == 100);
  REQUIRE(lru.Find("a", 2) != nullptr);
  CHECK(lru.Find("a", 2)->rows.size() == 150);
}

TEST_CASE("PostingsCache serves readers and writers on many threads at once", "[memory][bm25]") {
  using Postings = tmcra::memory::PostingsCache::Postings;
  tmcra::memory::PostingsCache cache(16 << 10);  // a few entries: drops all the time
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 3000; ++i) {
        const std::string word = "w" + std::to_string(rng() % 12);
        const int64_t as_of = 1 + static_cast<int64_t>(rng() % 50);
        if (rng() % 2 == 0) {
          auto p = std::make_shared<Postings>();
          p->as_of = as_of;
          for (int64_t r = 1; r <= as_of * 4; ++r) {
            p->rows.push_back(r);
            p->counts.push_back(static_cast<uint32_t>(r % 3 + 1));
          }
          cache.Put(word, std::move(p));
        } else if (auto found = cache.Find(word, as_of)) {
          if (found->as_of < as_of || found->rows.size() != static_cast<size_t>(found->as_of * 4) ||
              found->rows.size() != found->counts.size()) {
            ++wrong;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  const auto stats = cache.stats();
  CHECK(stats.bytes <= size_t{16} << 10);
  CHECK(stats.hits + stats.misses > 0);
}

TEST_CASE("tmcra_rank ranks the CJK index with its own lengths, as FTS5's bm25 does",
          "[memory][bm25][cjk]") {
  TempDir dir;
  tmcra::memory::EngineOptions options;
  options.path = dir.File("data/memory.db");
  options.start_worker = false;
  {
    auto engine = tmcra::memory::Engine::Open(options);
    REQUIRE(engine);
    // Runs of a few kanji between English words: a row's length in the CJK index differs from
    // its length in the word index, and some rows have no CJK text at all.
    const std::vector<std::string> kanji = {"東", "京", "大", "阪", "会", "議"};
    std::mt19937 rng(11);
    for (int s = 0; s < 40; ++s) {
      json messages = json::array();
      for (int m = 0; m < 10; ++m) {
        std::string text;
        const int runs = static_cast<int>(rng() % 4);  // 0: English only
        for (int r = 0; r < runs; ++r) {
          text += "word" + std::to_string(rng() % 5) + " ";
          const int n = 1 + static_cast<int>(rng() % 12);
          for (int k = 0; k < n; ++k) text += kanji[std::min(rng() % 6, rng() % 6)];
          text += " ";
        }
        text += "tail" + std::to_string(rng() % 3);
        messages.push_back({{"message_id", "m" + std::to_string(m)},
                            {"role", "user"},
                            {"content", text},
                            {"timestamp", "2026-07-15T00:00:00Z"}});
      }
      tmcra::memory::IngestContext context;
      context.idempotency_key = "bm25-cjk-" + std::to_string(s);
      REQUIRE((*engine)->Ingest(s % 3 ? "a" : "b",
                                {{"session_id", "s" + std::to_string(s)}, {"messages", messages}},
                                context));
    }
    REQUIRE((*engine)->RunPendingJobs());
  }
  auto db = tmcra::db::Database::Open({options.path});
  REQUIRE(db);
  RowFacts facts;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &facts));
  REQUIRE((*db)->Exec("CREATE VIRTUAL TABLE temp.cv USING fts5vocab(main, records_cjk, 'row')"));
  auto tx = tmcra::db::Transaction::Deferred(**db);
  REQUIRE(tx);
  REQUIRE(facts.CatchUp(**db));
  // Each row's CJK length is the index's own; rows without CJK text have 0.
  {
    auto st = (*db)->Prepare(
        "SELECT r.event_seq, (SELECT count(*) FROM records_cjk_docsize d WHERE d.id = r.event_seq) "
        "FROM records r");
    REQUIRE(st);
    int with = 0;
    for (;;) {
      auto row = st->Step();
      REQUIRE(row);
      if (!*row) break;
      const int64_t seq = st->Int(0);
      if (st->Int(1) == 0) {
        CHECK(facts.CjkLength(seq) == 0u);
        continue;
      }
      ++with;
      const auto cjk = tmcra::memory::CjkIndexText([&] {
        auto c = (*db)->Prepare("SELECT content FROM records WHERE event_seq = ?");
        c->Bind(1, seq);
        REQUIRE(*c->Step());
        return c->Text(0);
      }());
      const auto tokens = static_cast<uint32_t>(std::count(cjk.begin(), cjk.end(), ' ') + 1);
      CHECK(facts.CjkLength(seq) == tokens);
    }
    CHECK(with > 100);
    CHECK_FALSE(facts.CjkLength(401));
  }
  const auto counts_of = [&](const std::vector<std::string>& grams) {
    std::pair<std::string, std::string> out;
    for (const auto& g : grams) {
      auto st = (*db)->Prepare("SELECT doc FROM temp.cv WHERE term = ?");
      st->Bind(1, g);
      auto row = st->Step();
      REQUIRE(row);
      out.first += (out.first.empty() ? "\"" : " OR \"") + g + "\"";
      out.second += (out.second.empty() ? "" : ",") + std::to_string(*row ? st->Int(0) : 0);
    }
    return out;
  };
  // Lone characters are searched as prefixes ("東"*), with counts from WordCounts::GetPrefix:
  // a record holding several tokens that start with the character counts once.
  int64_t highest = 0;
  {
    auto st = (*db)->Prepare("SELECT max(event_seq) FROM records");
    REQUIRE(*st->Step());
    highest = st->Int(0);
  }
  tmcra::memory::WordCounts prefix_counts("records_cjk");
  const auto prefix_counts_of = [&](const std::vector<std::string>& stems) {
    std::pair<std::string, std::string> out;
    for (const auto& stem : stems) {
      auto df = prefix_counts.GetPrefix(**db, stem, highest);
      REQUIRE(df);
      out.first += (out.first.empty() ? "\"" : " OR \"") + stem + "\"*";
      out.second += (out.second.empty() ? "" : ",") + std::to_string(*df);
    }
    return out;
  };
  {
    // The count of "東"*, against the records' own text.
    int64_t holding = 0;
    auto st = (*db)->Prepare("SELECT content FROM records");
    for (;;) {
      auto row = st->Step();
      REQUIRE(row);
      if (!*row) break;
      const std::string text = " " + tmcra::memory::CjkIndexText(st->Text(0));
      holding += text.find(" 東") != std::string::npos ? 1 : 0;
    }
    CHECK(holding > 50);
    CHECK(prefix_counts_of({"東"}).second == std::to_string(holding));
    CHECK(prefix_counts_of({"東"}).second == std::to_string(holding));  // remembered
  }
  std::vector<std::pair<std::string, std::string>> queries;
  for (const std::vector<std::string>& grams : {std::vector<std::string>{"東京"},
                                                {"大阪", "会議"},
                                                {"東京", "京大", "議"},
                                                {"阪会", "議東"}}) {
    queries.push_back(counts_of(grams));
  }
  for (const std::vector<std::string>& stems :
       {std::vector<std::string>{"東"}, {"大", "議"}, {"京", "阪", "会", "議"}}) {
    queries.push_back(prefix_counts_of(stems));
  }
  int compared = 0;
  for (const auto& [match, counts] : queries) {
    for (const std::string scope : {"a", "b"}) {
      for (const int64_t limit : {3, 64, 100000}) {
        INFO(match << " scope " << scope << " limit " << limit);
        auto rank = (*db)->Prepare(
            "SELECT tmcra_rank(records_cjk, ?2, ?3, ?4, ?5, 'cjk') FROM records_cjk WHERE "
            "records_cjk MATCH ?1 LIMIT 1");
        REQUIRE(rank);
        std::vector<tmcra::memory::RankedRow> ours;
        rank->Bind(1, match)
            .Bind(2, counts)
            .Bind(3, static_cast<int64_t>(*facts.ScopeId(scope)))
            .Bind(4, limit)
            .BindPointer(5, &ours, tmcra::memory::kRankedRowsPointer);
        REQUIRE(*rank->Step());
        REQUIRE_FALSE(rank->IsNull(0));
        auto sql = (*db)->Prepare(
            "SELECT c.rowid, tmcra_sized_bm25(records_cjk, ?2) AS score, bm25(records_cjk) "
            "FROM records_cjk c JOIN records r ON r.event_seq = c.rowid WHERE records_cjk "
            "MATCH ?1 AND r.scope_name = ?3 ORDER BY score, c.rowid DESC LIMIT ?4");
        REQUIRE(sql);
        sql->Bind(1, match).Bind(2, counts).Bind(3, scope).Bind(4, limit);
        size_t i = 0;
        for (;; ++i) {
          auto row = sql->Step();
          REQUIRE(row);
          if (!*row) break;
          REQUIRE(i < ours.size());
          CHECK(ours[i].rowid == sql->Int(0));
          CHECK(ours[i].score == sql->Double(1));  // bit for bit
          const double theirs = sql->Double(2);
          CHECK(std::fabs(theirs - ours[i].score) <= 1e-12 * std::max(1.0, std::fabs(theirs)));
        }
        CHECK(i == ours.size());
        compared += static_cast<int>(i);
      }
    }
  }
  CHECK(compared > 800);
  // Only 'cjk' may follow the pointer.
  auto bad = (*db)->Prepare(
      "SELECT tmcra_rank(records_cjk, '1', 0, 5, NULL, 'words') FROM records_cjk WHERE "
      "records_cjk MATCH '\"東京\"' LIMIT 1");
  REQUIRE(bad);
  auto row = bad->Step();
  REQUIRE_FALSE(row);
  CHECK(row.error().message.find("tmcra_rank") != std::string::npos);
}

TEST_CASE("RowFacts reads the CJK lengths the index's back-fill adds to rows it holds",
          "[memory][bm25][cjk]") {
  TempDir dir;
  tmcra::memory::EngineOptions options;
  options.path = dir.File("data/memory.db");
  options.start_worker = false;
  const auto ingest = [&](const std::string& key, const std::string& text) {
    auto engine = tmcra::memory::Engine::Open(options);
    REQUIRE(engine);
    tmcra::memory::IngestContext context;
    context.idempotency_key = key;
    REQUIRE((*engine)->Ingest("a",
                              {{"session_id", key},
                               {"messages",
                                {{{"message_id", "m"},
                                  {"role", "user"},
                                  {"content", text},
                                  {"timestamp", "2026-07-15T00:00:00Z"}}}}},
                              context));
    REQUIRE((*engine)->RunPendingJobs());  // the jobs, then the back-fill
  };
  ingest("bm25-cjk-fill-1", "東京で会議");
  auto db = tmcra::db::Database::Open({options.path});
  REQUIRE(db);
  RowFacts facts;
  REQUIRE(facts.CatchUp(**db));
  CHECK(facts.CjkLength(1) == 5u);  // 東京 京で で会 会議 議
  // A record an earlier build writes: no CJK row, read so by RowFacts.
  REQUIRE((*db)->Exec(
      "INSERT INTO records(record_id, scope_name, session_id, message_id, role, content, "
      "occurred_at, timestamp, metadata_json, job_id) VALUES('rec_old', 'a', 'old', 'm', 'user', "
      "'旧版の記録', 1784073600, '2026-07-15T00:00:00Z', '{}', 'job_old');"
      "INSERT INTO records_fts(rowid, content) VALUES(2, '旧版の記録');"));
  REQUIRE(facts.CatchUp(**db));
  CHECK(facts.highest() == 2);
  CHECK(facts.CjkLength(2) == 0u);
  ingest("bm25-cjk-fill-3", "大阪");  // its job, and the back-fill of record 2
  // Before RowFacts reads it again: a matching row without a known length, so tmcra_rank
  // gives NULL (the caller ranks in SQL) instead of scoring it with length 0.
  REQUIRE(tmcra::memory::RegisterBm25(**db, &facts));
  {
    auto rank = (*db)->Prepare(
        "SELECT tmcra_rank(records_cjk, '1', ?1, 10, ?2, 'cjk') FROM records_cjk WHERE "
        "records_cjk MATCH '\"記録\"' LIMIT 1");
    REQUIRE(rank);
    std::vector<tmcra::memory::RankedRow> rows;
    rank->Bind(1, static_cast<int64_t>(*facts.ScopeId("a")))
        .BindPointer(2, &rows, tmcra::memory::kRankedRowsPointer);
    REQUIRE(*rank->Step());
    CHECK(rank->IsNull(0));
  }
  REQUIRE(facts.CatchUp(**db));
  CHECK(facts.CjkLength(2) == 5u);  // 旧版 版の の記 記録 録
  CHECK(facts.CjkLength(3) == 2u);
  CHECK(facts.CjkLength(1) == 5u);
}

TEST_CASE("CJK counts are not remembered while the index's back-fill has records left",
          "[memory][bm25][cjk]") {
  TempDir dir;
  tmcra::memory::EngineOptions options;
  options.path = dir.File("data/memory.db");
  options.start_worker = false;
  {
    auto engine = tmcra::memory::Engine::Open(options);
    REQUIRE(engine);
    tmcra::memory::IngestContext context;
    context.idempotency_key = "bm25-cjk-count-1";
    REQUIRE((*engine)->Ingest("a",
                              {{"session_id", "s1"},
                               {"messages",
                                {{{"message_id", "m"},
                                  {"role", "user"},
                                  {"content", "東京で会議"},
                                  {"timestamp", "2026-07-15T00:00:00Z"}}}}},
                              context));
    REQUIRE((*engine)->RunPendingJobs());
  }
  auto db = tmcra::db::Database::Open({options.path});
  REQUIRE(db);
  REQUIRE(
      (*db)->Exec("CREATE VIRTUAL TABLE temp.records_cjk_vocab USING "
                  "fts5vocab(main, records_cjk, 'row')"));
  // Record 2, written as an earlier build does: no CJK row yet, the watermark below it.
  REQUIRE((*db)->Exec(
      "INSERT INTO records(record_id, scope_name, session_id, message_id, role, content, "
      "occurred_at, timestamp, metadata_json, job_id) VALUES('rec_old', 'a', 'old', 'm', 'user', "
      "'東京タワー', 1784073600, '2026-07-15T00:00:00Z', '{}', 'job_old');"
      "INSERT INTO records_fts(rowid, content) VALUES(2, '東京タワー');"));
  tmcra::memory::WordCounts counts("records_cjk");
  auto before = counts.Get(**db, "東京", 2, /*settled=*/false);
  REQUIRE(before);
  CHECK(**before == 1);
  {
    auto engine = tmcra::memory::Engine::Open(options);
    REQUIRE(engine);
    REQUIRE((*engine)->RunPendingJobs());  // the back-fill adds record 2
  }
  auto after = counts.Get(**db, "東京", 2, /*settled=*/true);
  REQUIRE(after);
  CHECK(**after == 2);  // not the 1 an unsettled count would have left remembered
  auto again = counts.Get(**db, "東京", 2, /*settled=*/true);
  REQUIRE(again);
  CHECK(**again == 2);
}

TEST_CASE("tmcra_rank refuses bad arguments, naming itself", "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 2);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts facts;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &facts));
  std::vector<tmcra::memory::RankedRow> rows;
  struct Case {
    const char* counts;
    int64_t limit;
    bool bind;
    int args;
  };
  for (const Case c : {Case{"1", 5, true, 3},       // too few arguments
                       Case{"1", 5, false, 4},      // no vector bound
                       Case{"1", -1, true, 4},      // a negative limit
                       Case{"x", 5, true, 4},       // a bad document count
                       Case{"1,2", 5, true, 4}}) {  // two counts for one phrase
    INFO(c.counts << " limit " << c.limit << " bound " << c.bind << " args " << c.args);
    auto st = db.value()->Prepare(std::string("SELECT tmcra_rank(records_fts, ?2, ?3") +
                                  (c.args == 4 ? ", ?4, ?5" : "") +
                                  ") FROM records_fts WHERE records_fts MATCH ?1 LIMIT 1");
    REQUIRE(st);
    st->Bind(1, "\"alpha\"").Bind(2, c.counts).Bind(3, int64_t{0});
    if (c.args == 4) {
      st->Bind(4, c.limit);
      if (c.bind) {
        st->BindPointer(5, &rows, tmcra::memory::kRankedRowsPointer);
      } else {
        st->BindNull(5);
      }
    }
    auto row = st->Step();
    REQUIRE_FALSE(row);
    CHECK(row.error().message.find("tmcra_rank") != std::string::npos);
  }
}

TEST_CASE("RowFacts catches up with rows written after it was filled", "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 5);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts lengths;
  REQUIRE(lengths.CatchUp(*db.value()));
  CHECK(lengths.highest() == 50);
  IngestMore(path, "bm25-test-late", "late", {"one two three"});
  REQUIRE(lengths.CatchUp(**db));
  CHECK(lengths.highest() == 51);
  CHECK(lengths.Get(51)->length == 3);
  CHECK(lengths.Get(51)->scope == *lengths.ScopeId("a"));
  // Each row's time, as stored (recall orders equal scores by it without reading the row).
  auto times = db.value()->Prepare("SELECT event_seq, occurred_at FROM records");
  REQUIRE(times);
  int rows = 0;
  for (;;) {
    auto row = times->Step();
    REQUIRE(row);
    if (!*row) break;
    ++rows;
    INFO("row " << times->Int(0));
    CHECK(lengths.OccurredAt(times->Int(0)) == times->Double(1));
  }
  CHECK(rows == 51);
  CHECK(lengths.OccurredAt(51) > lengths.OccurredAt(50));  // a later day
  CHECK_FALSE(lengths.OccurredAt(52));
  CHECK_FALSE(lengths.OccurredAt(0));
}

TEST_CASE("tmcra_bm25 refuses document counts that do not fit the query", "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 2);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  RowFacts lengths;
  REQUIRE(tmcra::memory::RegisterBm25(**db, &lengths));
  for (const char* counts : {"3", "3,x", "", "-1,2"}) {
    auto st = db.value()->Prepare(
        "SELECT tmcra_bm25(records_fts, ?2) FROM records_fts WHERE records_fts MATCH ?1");
    REQUIRE(st);
    st->Bind(1, "\"alpha\" OR \"bravo\"").Bind(2, counts);
    auto row = st->Step();
    INFO(counts);
    REQUIRE_FALSE(row);
    CHECK(row.error().message.find("tmcra_bm25") != std::string::npos);
  }
}

TEST_CASE("WordCounts gives the exact count for the caller's snapshot, newer or older",
          "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 10);
  const auto open = [&] {
    auto db = tmcra::db::Database::Open({path});
    REQUIRE(db);
    REQUIRE(
        db.value()->Exec("CREATE VIRTUAL TABLE temp.records_fts_vocab USING "
                         "fts5vocab(main, records_fts, 'row')"));
    return std::move(*db);
  };
  auto db = open();
  tmcra::memory::WordCounts counts;
  const int64_t before = DocumentCount(*db, "kilo");
  auto first = counts.Get(*db, "kilo", 100);
  REQUIRE(first);
  REQUIRE(*first);
  CHECK(**first == before);
  auto missing = counts.Get(*db, "nosuchword", 100);
  REQUIRE(missing);
  CHECK_FALSE(*missing);
  // A prefix ("kil"*) the same way; its count comes from the doclists, not the vocabulary.
  const auto prefix_documents = [](tmcra::db::Database& d) {
    auto st = d.Prepare("SELECT count(*) FROM records_fts WHERE records_fts MATCH '\"kil\"*'");
    REQUIRE(st);
    REQUIRE(*st->Step());
    return st->Int(0);
  };
  const int64_t prefix_before = prefix_documents(*db);
  auto first_prefix = counts.GetPrefix(*db, "kil", 100);
  REQUIRE(first_prefix);
  CHECK(*first_prefix == prefix_before);
  auto no_prefix = counts.GetPrefix(*db, "nosuchprefix", 100);
  REQUIRE(no_prefix);
  CHECK(*no_prefix == 0);

  // A reader whose snapshot stays at row 100 while rows 101..103 are written.
  auto old_db = open();
  auto old_tx = tmcra::db::Transaction::Deferred(*old_db);
  REQUIRE(old_tx);
  CHECK(DocumentCount(*old_db, "kilo") == before);  // the snapshot starts here
  IngestMore(path, "bm25-test-more", "more",
             {"kilo kilo and more", "kilo kilo and more", "kilo kilo and more"});
  const int64_t after = DocumentCount(*db, "kilo");
  CHECK(after == before + 3);
  auto newer = counts.Get(*db, "kilo", 103);  // remembered 100, corrected by rows 101..103
  REQUIRE(newer);
  CHECK(**newer == after);
  // Remembered at 103 now; the older snapshot cannot see 101..103 and must get its own count.
  auto older = counts.Get(*old_db, "kilo", 100);
  REQUIRE(older);
  CHECK(**older == before);
  REQUIRE(old_tx->Commit());
  auto again = counts.Get(*db, "kilo", 103);  // the older answer did not replace the newer one
  REQUIRE(again);
  CHECK(**again == after);

  const int64_t prefix_after = prefix_documents(*db);
  CHECK(prefix_after == prefix_before + 3);
  auto newer_prefix = counts.GetPrefix(*db, "kil", 103);  // remembered 100, plus 101..103
  REQUIRE(newer_prefix);
  CHECK(*newer_prefix == prefix_after);
  // A caller whose snapshot's highest record is 100 (as the reader above had): rows up to it
  // only, counted afresh, and not remembered over the newer count.
  auto older_prefix = counts.GetPrefix(*db, "kil", 100);
  REQUIRE(older_prefix);
  CHECK(*older_prefix == prefix_before);
  auto prefix_again = counts.GetPrefix(*db, "kil", 103);  // still the newer count
  REQUIRE(prefix_again);
  CHECK(*prefix_again == prefix_after);
}

TEST_CASE("WordCounts remembers a word the vocabulary lacks for that snapshot only",
          "[memory][bm25]") {
  TempDir dir;
  const std::string path = MakeStore(dir, 10);
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  REQUIRE(
      db.value()->Exec("CREATE VIRTUAL TABLE temp.records_fts_vocab USING "
                       "fts5vocab(main, records_fts, 'row')"));
  tmcra::memory::WordCounts counts;
  auto missing = counts.Get(**db, "zulu", 100);
  REQUIRE(missing);
  CHECK_FALSE(*missing);
  // Asked again for the same snapshot, it answers without the vocabulary: a connection that
  // has none gives the same answer instead of an error.
  auto bare = tmcra::db::Database::Open({path});
  REQUIRE(bare);
  auto remembered = counts.Get(**bare, "zulu", 100);
  REQUIRE(remembered);
  CHECK_FALSE(*remembered);
  CHECK_FALSE(counts.Get(**bare, "kilo", 100));  // a word never asked needs the vocabulary
  // A newer snapshot holding it is counted from the vocabulary again.
  IngestMore(path, "bm25-test-zulu", "zulu", {"zulu zulu", "no such word", "zulu once"});
  auto found = counts.Get(**db, "zulu", 103);
  REQUIRE(found);
  REQUIRE(*found);
  CHECK(**found == 2);
  CHECK(**found == DocumentCount(**db, "zulu"));
}
