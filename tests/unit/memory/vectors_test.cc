// Semantic recall in the engine (memory/vectors.h, memory/embedding.cc) with a deterministic
// embedder of the test's own: records embedded in the background, the vector signal finding a
// paraphrase no word shares, a failing or misbehaving service leaving recall lexical with
// nothing lost, a model change re-embedding without mixing, forget removing vectors, and the
// HNSW graph above its threshold.
#include "memory/vectors.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "base/sqlite_db.h"
#include "memory/engine.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::Error;
using tmcra::Result;
using tmcra::memory::Embedder;
using tmcra::memory::Engine;
using tmcra::memory::EngineOptions;
using tmcra::memory::IngestContext;
using tmcra::testing::TempDir;

namespace {

// Words of one meaning share a concept; a text's vector is the sum of its concepts' vectors.
std::string ConceptOf(std::string word) {
  static const std::map<std::string, std::string> kConcepts = {
      {"ship", "deploy"},      {"shipped", "deploy"}, {"deploying", "deploy"},
      {"rollout", "deploy"},   {"invoicing", "bill"}, {"billing", "bill"},
      {"physician", "doctor"}, {"doctor", "doctor"},  {"medic", "doctor"}};
  auto it = kConcepts.find(word);
  return it == kConcepts.end() ? word : it->second;
}

class FakeEmbedder final : public Embedder {
 public:
  enum class Mode { kOk, kDown, kNaN, kWrongDims, kWrongCount };
  FakeEmbedder(std::string model, size_t dims) : model_(std::move(model)), dims_(dims) {}
  const std::string& model() const override { return model_; }
  Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts,
                                                std::chrono::milliseconds,
                                                const std::atomic<bool>*) override {
    calls_.fetch_add(1);
    const Mode mode = mode_.load();
    if (mode == Mode::kDown) return Error::Unavailable("connection refused");
    for (const auto& t : texts) {
      if (t.find("refuse-me") != std::string::npos) {
        return Error::Invalid("the embeddings service answered HTTP 400: input too long");
      }
    }
    std::vector<std::vector<float>> out;
    for (const auto& t : texts)
      out.push_back(Vector(t, mode == Mode::kWrongDims ? dims_ + 1 : dims_));
    if (mode == Mode::kNaN) out.front()[0] = std::numeric_limits<float>::quiet_NaN();
    if (mode == Mode::kWrongCount) out.pop_back();
    return out;
  }
  std::atomic<Mode> mode_{Mode::kOk};
  std::atomic<int> calls_{0};

 private:
  std::vector<float> Vector(const std::string& text, size_t dims) const {
    std::vector<float> v(dims, 0.01f);
    std::string word;
    auto add = [&] {
      if (word.size() < 3) return word.clear();
      const size_t h = std::hash<std::string>{}(ConceptOf(word));
      for (size_t i = 0; i < dims; ++i) {
        v[i] += static_cast<float>(((h >> (i % 48)) ^ (h * (i + 7))) % 1000) / 1000.0f - 0.5f;
      }
      word.clear();
    };
    for (char c : text) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        add();
      }
    }
    add();
    return v;
  }
  std::string model_;
  size_t dims_;
};

std::unique_ptr<Engine> OpenWith(const std::string& path, std::shared_ptr<Embedder> embedder,
                                 size_t ann_threshold = 20000) {
  EngineOptions options;
  options.path = path;
  options.start_worker = false;
  options.stem_language = "none";  // the vector signal alone bridges the paraphrases below
  options.synonyms = false;
  options.idle_poll_ms = 20;
  options.embed_start_ms = 0;
  options.embedder = std::move(embedder);
  options.ann_threshold = ann_threshold;
  options.query_embed_timeout = std::chrono::milliseconds(500);
  auto engine = Engine::Open(options);
  REQUIRE(engine);
  return std::move(*engine);
}

void Say(Engine& e, const std::string& session, const std::string& text, int n) {
  IngestContext c;
  c.idempotency_key = "ingest-key-" + session + "-" + std::to_string(n);
  json messages = json::array({{{"message_id", "m" + std::to_string(n)},
                                {"role", "user"},
                                {"content", text},
                                {"timestamp", "2026-01-01T00:00:00Z"}}});
  auto ingested = e.Ingest("s", {{"session_id", session}, {"messages", messages}}, c);
  INFO((ingested ? std::string() : ingested.error().message));
  REQUIRE(ingested);
  REQUIRE(e.RunPendingJobs());
}

json Embeddings(Engine& e) {
  auto stats = e.Stats();
  REQUIRE(stats);
  REQUIRE(stats->embeddings);
  return stats->ToJson()["embeddings"];
}

// Waits (up to 20 s) until `done` holds of the engine's embedding figures.
json WaitFor(Engine& e, const std::function<bool(const json&)>& done) {
  json figures;
  for (int i = 0; i < 400; ++i) {
    figures = Embeddings(e);
    if (done(figures)) return figures;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("embedding figures never reached the state: " << figures.dump());
  return figures;
}

json Ask(Engine& e, const std::string& query) {
  auto r = e.Recall("s", {{"query", query}, {"debug", true}});
  REQUIRE(r);
  return *r;
}

// The signals of the hit whose text is `text`, or null.
json SignalsOf(const json& answer, const std::string& text) {
  for (const auto& w : answer["evidence"]["windows"]) {
    for (const auto& r : w["records"]) {
      if (r["text"] == text && r["hit"] == true)
        return answer["debug"]["signals"][r["memory_id"].get<std::string>()];
    }
  }
  return nullptr;
}

int64_t CountVectors(const std::string& path, const std::string& where = "1") {
  auto db = tmcra::db::Database::Open({path});
  REQUIRE(db);
  auto n = (*db)->QueryInt("SELECT COUNT(*) FROM record_vectors WHERE " + where);
  REQUIRE(n);
  return *n;
}

const char* kFact = "We are deploying the billing API tonight";

void SayCorpus(Engine& e) {
  Say(e, "a", kFact, 1);
  Say(e, "b", "The physician prescribed rest and water", 2);
  Say(e, "c", "Lunch is at noon in the garden", 3);
}

}  // namespace

TEST_CASE("stored vectors: unit length, quantised, refusing NaN and zero", "[memory][vectors]") {
  using tmcra::memory::EncodeVector;
  auto a = EncodeVector({3.0f, 4.0f, 0.0f});
  REQUIRE(a);
  CHECK(tmcra::memory::StoredDimensions(*a) == 3);
  CHECK(std::fabs(tmcra::memory::StoredSimilarity(*a, *a) - 1.0f) < 0.02f);
  auto b = EncodeVector({-3.0f, -4.0f, 0.0f});
  REQUIRE(b);
  CHECK(tmcra::memory::StoredSimilarity(*a, *b) < -0.98f);
  CHECK_FALSE(EncodeVector({0.0f, 0.0f}));
  CHECK_FALSE(EncodeVector({1.0f, std::numeric_limits<float>::quiet_NaN()}));
  CHECK_FALSE(EncodeVector({1.0f, std::numeric_limits<float>::infinity()}));
  CHECK_FALSE(EncodeVector({}));
}

TEST_CASE("the vector signal alone finds a paraphrase that shares no word", "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto fake = std::make_shared<FakeEmbedder>("fake-a", 48);
  auto e = OpenWith(path, fake);
  SayCorpus(*e);
  const json figures = WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  CHECK(figures["vectors"] == 3);
  CHECK(figures["dimensions"] == 48);
  CHECK(figures["state"] == "ok");
  const json answer = Ask(*e, "ship invoicing");
  CHECK(answer["debug"]["vector"]["searched"] == true);
  CHECK(SignalsOf(answer, kFact) == json::array({"vector"}));
  // The garden has no similar text: below the similarity floor, it is not a hit.
  CHECK(SignalsOf(answer, "Lunch is at noon in the garden").is_null());
}

TEST_CASE(
    "an embeddings service that is down or misbehaves leaves recall lexical and loses "
    "nothing",
    "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto fake = std::make_shared<FakeEmbedder>("fake-a", 48);
  using Mode = FakeEmbedder::Mode;
  const Mode mode = GENERATE(Mode::kDown, Mode::kNaN, Mode::kWrongDims, Mode::kWrongCount);
  auto e = OpenWith(path, fake);
  Say(*e, "c", "Lunch is at noon in the garden", 3);  // the model's first vectors: 48 dimensions
  WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  fake->mode_ = mode;
  Say(*e, "a", kFact, 1);
  Say(*e, "b", "The physician prescribed rest and water", 2);
  const json failing = WaitFor(*e, [](const json& f) { return f["state"] == "failing"; });
  INFO(failing.dump());
  CHECK(failing["vectors"] == 1);
  CHECK(failing["backlog"] == 2);
  CHECK_FALSE(failing["last_error"].get<std::string>().empty());
  // Recall answers from the words: the deployment is found through "billing".
  const json answer = Ask(*e, "billing");
  CHECK(SignalsOf(answer, kFact) == json::array({"word"}));
  CHECK(answer["debug"]["vector"]["searched"] == false);
  CHECK_FALSE(answer["debug"]["vector"]["note"].get<std::string>().empty());
  CHECK(CountVectors(path) == 1);  // nothing unusable was stored
  // The service comes back: the backlog is embedded (after the backoff), nothing was lost.
  fake->mode_ = Mode::kOk;
  const json ok = WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  CHECK(ok["vectors"] == 3);
  CHECK(ok["state"] == "ok");
}

TEST_CASE("a new model re-embeds every record and never mixes with the old one's vectors",
          "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  {
    auto e = OpenWith(path, std::make_shared<FakeEmbedder>("fake-a", 48));
    SayCorpus(*e);
    WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  }
  auto e = OpenWith(path, std::make_shared<FakeEmbedder>("fake-b", 32));
  // Before model b has vectors, recall searches none of model a's.
  const json figures = WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  CHECK(figures["model"] == "fake-b");
  CHECK(figures["dimensions"] == 32);
  CHECK(CountVectors(path,
                     "model_id = (SELECT model_id FROM embedding_models WHERE name = "
                     "'fake-a')") == 0);
  CHECK(CountVectors(path, "length(vector) = 4 + 32") == 3);
  CHECK(SignalsOf(Ask(*e, "ship invoicing"), kFact) == json::array({"vector"}));
}

TEST_CASE("forget removes the records' vectors from the store and from recall",
          "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto e = OpenWith(path, std::make_shared<FakeEmbedder>("fake-a", 48));
  SayCorpus(*e);
  WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  CHECK(SignalsOf(Ask(*e, "ship invoicing"), kFact) == json::array({"vector"}));
  auto forgot = e->Forget("s", {{"match", "billing API"}});
  REQUIRE(forgot);
  CHECK((*forgot)["records"] == 1);
  CHECK(CountVectors(path) == 2);
  CHECK(SignalsOf(Ask(*e, "ship invoicing"), kFact).is_null());
}

TEST_CASE("above its threshold a scope's vectors are searched through an HNSW graph",
          "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto e = OpenWith(path, std::make_shared<FakeEmbedder>("fake-a", 48), /*ann_threshold=*/40);
  SayCorpus(*e);
  for (int i = 0; i < 60; ++i) {
    Say(*e, "filler", "note number " + std::to_string(i) + " about weather tides and kites",
        10 + i);
  }
  WaitFor(*e, [](const json& f) { return f["backlog"] == 0; });
  CHECK(SignalsOf(Ask(*e, "ship invoicing"), kFact) == json::array({"vector"}));  // exact first
  const json figures = WaitFor(*e, [](const json& f) { return f["graphed"] == 63; });
  CHECK(figures["vectors"] == 63);
  CHECK(SignalsOf(Ask(*e, "ship invoicing"), kFact) == json::array({"vector"}));
}

TEST_CASE("a text the service refuses is passed over, and the rest of its batch is embedded",
          "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto e = OpenWith(path, std::make_shared<FakeEmbedder>("fake-a", 48));
  SayCorpus(*e);
  Say(*e, "d", "an endless paste refuse-me", 4);
  Say(*e, "e", "after the refused one", 5);
  const json figures = WaitFor(*e, [](const json& f) { return f["vectors"] == 4; });
  CHECK(figures["state"] == "ok");
  CHECK(figures["backlog"] == 1);  // the refused record, found by its words
  CHECK(CountVectors(path,
                     "event_seq = (SELECT event_seq FROM records WHERE content LIKE "
                     "'%refuse-me%')") == 0);
}

TEST_CASE("one process at a time embeds a store, and another takes over when it closes",
          "[memory][vectors]") {
  TempDir dir;
  const std::string path = dir.path() + "/m.db";
  auto first_fake = std::make_shared<FakeEmbedder>("fake-a", 48);
  auto second_fake = std::make_shared<FakeEmbedder>("fake-a", 48);
  auto first = OpenWith(path, first_fake);
  WaitFor(*first, [](const json& f) { return f["state"] == "ok"; });  // holds the lease
  auto second = OpenWith(path, second_fake);
  WaitFor(*second, [](const json& f) { return f["state"] == "elsewhere"; });
  SayCorpus(*second);
  WaitFor(*second, [](const json& f) { return f["backlog"] == 0; });
  CHECK(first_fake->calls_.load() > 0);
  CHECK(second_fake->calls_.load() == 0);  // the first process embedded for both
  first.reset();                           // gives the lease back
  Say(*second, "f", "a note after the first process ended", 6);
  WaitFor(*second, [](const json& f) { return f["backlog"] == 0 && f["state"] == "ok"; });
  CHECK(second_fake->calls_.load() > 0);
}
