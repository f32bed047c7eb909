// Recall of other word forms and related words (memory/stems.h, memory/synonyms.h,
// memory/expansion.h): stems, language detection, WordNet's table, the stem index's back-fill
// and prune, and the refusal of a newer schema.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "base/sqlite_db.h"
#include "memory/engine.h"
#include "memory/stems.h"
#include "memory/synonyms.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::Engine;
using tmcra::memory::EngineOptions;
using tmcra::memory::IngestContext;
using tmcra::testing::TempDir;

namespace {

std::unique_ptr<Engine> OpenWith(const std::string& path, const std::string& language = "auto",
                                 bool synonyms = true, bool worker = false) {
  EngineOptions options;
  options.path = path;
  options.start_worker = worker;
  options.stem_language = language;
  options.synonyms = synonyms;
  options.idle_poll_ms = 50;
  auto engine = Engine::Open(options);
  INFO((engine ? std::string("ok") : engine.error().message));
  REQUIRE(engine);
  return std::move(*engine);
}

void Say(Engine& e, const std::string& session, const std::string& text, int n) {
  IngestContext c;
  c.idempotency_key = "ingest-key-" + session + "-" + std::to_string(n);
  json messages =
      json::array({{{"message_id", "m" + std::to_string(n)},
                    {"role", "user"},
                    {"content", text},
                    {"timestamp", "2026-01-0" + std::to_string(1 + n % 9) + "T00:00:00Z"}}});
  REQUIRE(e.Ingest("s", {{"session_id", session}, {"messages", messages}}, c));
  REQUIRE(e.RunPendingJobs());
}

json Ask(Engine& e, const std::string& query) {
  auto r = e.Recall("s", {{"query", query}, {"debug", true}});
  REQUIRE(r);
  return *r;
}

// The text of the first window's first hit, or "".
std::string FirstHit(const json& answer) {
  for (const auto& w : answer["evidence"]["windows"]) {
    for (const auto& r : w["records"]) {
      if (r["hit"] == true) return r["text"].get<std::string>();
    }
  }
  return "";
}

bool Finds(const json& answer, const std::string& text) {
  for (const auto& w : answer["evidence"]["windows"]) {
    for (const auto& r : w["records"]) {
      if (r["text"] == text) return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("Snowball stems and the stop-word language detection", "[memory][stems]") {
  using tmcra::memory::DetectLanguage;
  using tmcra::memory::Stem;
  CHECK(Stem("english", "deployments") == "deploy");
  CHECK(Stem("english", "deployed") == "deploy");
  CHECK(Stem("german", "bereitstellungen") == Stem("german", "bereitstellung"));
  CHECK(Stem("english", "12345").empty());  // digits: names, not words
  CHECK(Stem("english", "sha256s").empty());
  CHECK(Stem("english", "東京都").empty());       // CJK: the CJK index serves it
  CHECK(Stem("klingon", "deployments").empty());  // no such stemmer
  CHECK(DetectLanguage({"die", "bereitstellung", "ist", "nicht", "fertig"}, "english") == "german");
  CHECK(DetectLanguage({"the", "deployment", "is", "ready"}, "german") == "english");
  CHECK(DetectLanguage({"zebra", "quantum"}, "english") == "english");  // fallback
  CHECK(tmcra::memory::IsStemLanguage("auto"));
  CHECK(tmcra::memory::IsStemLanguage("french"));
  CHECK_FALSE(tmcra::memory::IsStemLanguage("klingon"));
}

TEST_CASE("WordNet's table gives synonyms, derived forms and base forms", "[memory][synonyms]") {
  using tmcra::memory::RelatedWords;
  CHECK(tmcra::memory::RelatedWordsTableSize() > 40000);
  const auto has = [](const std::vector<std::string>& words, const std::string& w) {
    return std::find(words.begin(), words.end(), w) != words.end();
  };
  CHECK(has(RelatedWords("physician"), "doctor"));
  CHECK(has(RelatedWords("prescribe"), "prescription"));
  CHECK(has(RelatedWords("automobile"), "car"));
  CHECK(has(RelatedWords("deployments"), "deployment"));  // a base form, by detachment
  CHECK(RelatedWords("physician", 3).size() <= 3);
  CHECK(RelatedWords("qzxv").empty());
}

TEST_CASE("a recall finds other forms of a word, exact words ranked first", "[memory][stems]") {
  TempDir dir;
  auto e = OpenWith(dir.File("m.db"));
  Say(*e, "a", "The deployment of the billing API failed on Tuesday", 1);
  Say(*e, "b", "Unrelated note about lunch", 2);
  const json answer = Ask(*e, "which deployments broke?");
  CHECK(Finds(answer, "The deployment of the billing API failed on Tuesday"));
  CHECK(answer["debug"]["expansions"].size() >= 1);
  bool stem_signal = false;
  for (const auto& [id, signals] : answer["debug"]["signals"].items()) {
    for (const auto& s : signals) stem_signal = stem_signal || s == "stem";
  }
  CHECK(stem_signal);

  Say(*e, "c", "rotate the deploy keys", 3);
  Say(*e, "d", "rotate the deployed keys", 4);
  CHECK(FirstHit(Ask(*e, "deployed keys")) == "rotate the deployed keys");
  CHECK(FirstHit(Ask(*e, "deploy keys")) == "rotate the deploy keys");
}

TEST_CASE("a recall finds a synonym, and not with synonyms off", "[memory][synonyms]") {
  TempDir dir;
  {
    auto e = OpenWith(dir.File("m.db"));
    Say(*e, "a", "The doctor's prescription was amoxicillin", 1);
    Say(*e, "b", "The build broke on main", 2);
    CHECK(Finds(Ask(*e, "what did the physician prescribe?"),
                "The doctor's prescription was amoxicillin"));
  }
  auto off = OpenWith(dir.File("m.db"), "auto", /*synonyms=*/false);
  CHECK_FALSE(Finds(Ask(*off, "what did the physician prescribe?"),
                    "The doctor's prescription was amoxicillin"));
  auto none = OpenWith(dir.File("m.db"), "none");
  CHECK(Ask(*none, "deployments")["debug"]["expansions"].empty());
}

TEST_CASE("records stored without stems are back-filled by the worker", "[memory][stems]") {
  TempDir dir;
  {
    auto e = OpenWith(dir.File("m.db"), "none");
    Say(*e, "a", "We migrated the invoices table", 1);
    CHECK(e->Stats()->stem_index_backlog == 0);  // stemming off: nothing to say
  }
  auto e = OpenWith(dir.File("m.db"), "auto", true, /*worker=*/true);
  for (int i = 0; i < 200; ++i) {
    auto stats = e->Stats();
    if (stats && stats->stem_index_backlog == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(e->Stats()->stem_index_backlog == 0);
  CHECK(Finds(Ask(*e, "invoice migrations"), "We migrated the invoices table"));
}

TEST_CASE("a forget takes the forms only its records held out of the stem index",
          "[memory][stems]") {
  TempDir dir;
  auto e = OpenWith(dir.File("m.db"));
  Say(*e, "a", "the zebrafications were deployed", 1);
  Say(*e, "b", "the build was deployed", 2);
  auto forgot = e->Forget("s", {{"session_id", "a"}});
  REQUIRE(forgot);
  auto db = tmcra::db::Database::Open({dir.File("m.db")});
  REQUIRE(db);
  CHECK(*(*db)->QueryInt("SELECT count(*) FROM word_stems WHERE word = 'zebrafications'") == 0);
  CHECK(*(*db)->QueryInt("SELECT count(*) FROM word_stems WHERE word = 'deployed'") == 1);
  CHECK(*(*db)->QueryInt("SELECT count(*) FROM word_stems WHERE word = 'build'") ==
        0);  // its own stem
  // A form written again after the forget is filed again (the known forms were reset).
  Say(*e, "c", "more zebrafications", 3);
  CHECK(*(*db)->QueryInt("SELECT count(*) FROM word_stems WHERE word = 'zebrafications'") == 1);
}

TEST_CASE("a store of a newer schema is refused, naming the version to run", "[memory][schema]") {
  TempDir dir;
  { OpenWith(dir.File("m.db")); }
  {
    auto db = tmcra::db::Database::Open({dir.File("m.db")});
    REQUIRE(db);
    REQUIRE(
        (*db)->Exec("INSERT INTO schema_info(name, value) VALUES('schema_99_written_by', "
                    "'9.9.9'); PRAGMA user_version=99"));
  }
  EngineOptions options;
  options.path = dir.File("m.db");
  options.start_worker = false;
  auto refused = Engine::Open(options);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("9.9.9 or newer") != std::string::npos);
  auto db = tmcra::db::Database::Open({dir.File("m.db")});
  CHECK(*(*db)->QueryInt("PRAGMA user_version") == 99);  // unchanged
  options.stem_language = "klingon";
  auto bad = Engine::Open(options);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("klingon") != std::string::npos);
}
