// The engine's maintenance calls (memory/engine.h, memory/admin.cc): per-scope figures, forget
// with its erase, export and import.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "memory/engine.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using tmcra::memory::Engine;
using tmcra::memory::EngineOptions;
using tmcra::memory::IngestContext;
using tmcra::testing::TempDir;

namespace {

std::unique_ptr<Engine> OpenAt(const std::string& path) {
  EngineOptions options;
  options.path = path;
  options.start_worker = false;
  auto engine = Engine::Open(options);
  REQUIRE(engine);
  return std::move(*engine);
}

json Message(const std::string& id, const std::string& role, const std::string& content,
             const std::string& ts) {
  return {{"message_id", id}, {"role", role}, {"content", content}, {"timestamp", ts}};
}

void Ingest(Engine& e, const std::string& scope, const std::string& session,
            const std::vector<json>& messages, const std::string& key) {
  IngestContext c;
  c.idempotency_key = key;
  auto r = e.Ingest(scope, {{"session_id", session}, {"messages", json(messages)}}, c);
  INFO((r ? std::string("ok") : r.error().message));
  REQUIRE(r);
  REQUIRE(e.RunPendingJobs());
}

std::string PromptText(Engine& e, const std::string& scope, const std::string& query) {
  auto r = e.Recall(scope, {{"query", query}, {"max_windows", 8}});
  REQUIRE(r);
  return (*r)["prompt_evidence"]["content"].get<std::string>();
}

// Whether any file under `dir` holds `needle`.
bool AnyFileHolds(const std::string& dir, const std::string& needle) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.find(needle) != std::string::npos) return true;
  }
  return false;
}

void Seed(Engine& e) {
  Ingest(
      e, "proj", "s1",
      {Message("m1", "user", "the deploy key is kept in vault zebrafinch", "2026-01-01T00:00:00Z"),
       Message("m2", "assistant", "noted: vault zebrafinch holds the key", "2026-01-01T00:00:05Z")},
      "key-seed-0001");
  Ingest(
      e, "proj", "s2",
      {Message("m3", "user", "we chose postgres for the billing service", "2026-03-01T00:00:00Z")},
      "key-seed-0002");
  Ingest(e, "other", "s9",
         {Message("m9", "user", "unrelated scope mentions zebrafinch too", "2026-02-01T00:00:00Z")},
         "key-seed-0003");
}

}  // namespace

TEST_CASE("ScopeStats counts each scope's sessions, messages, bytes and times") {
  TempDir dir;
  auto e = OpenAt(dir.File("memory.db"));
  Seed(*e);
  auto stats = e->ScopeStats();
  REQUIRE(stats);
  const json& scopes = (*stats)["scopes"];
  REQUIRE(scopes.size() == 2);
  CHECK(scopes[1]["scope_name"] == "proj");
  CHECK(scopes[1]["messages"] == 3);
  CHECK(scopes[1]["sessions"] == 2);
  CHECK(scopes[1]["oldest"] == "2026-01-01T00:00:00Z");
  CHECK(scopes[1]["newest"] == "2026-03-01T00:00:00Z");
  CHECK(scopes[1]["bytes"].get<int64_t>() > 80);
  CHECK((*stats)["erase_pending"] == false);
}

TEST_CASE("Forget by phrase removes the records from recall and the bytes from every file") {
  TempDir dir;
  const std::string path = dir.File("data/memory.db");
  {
    auto e = OpenAt(path);
    Seed(*e);
    REQUIRE(PromptText(*e, "proj", "zebrafinch").find("zebrafinch") != std::string::npos);

    auto preview = e->Forget("proj", {{"match", "zebrafinch"}, {"dry_run", true}});
    REQUIRE(preview);
    CHECK((*preview)["records"] == 2);
    CHECK((*preview)["preview"].size() == 2);
    CHECK((*preview)["erase"] == "none");
    CHECK(PromptText(*e, "proj", "zebrafinch").find("zebrafinch") != std::string::npos);

    auto done = e->Forget("proj", {{"match", "zebrafinch"}});
    REQUIRE(done);
    CHECK((*done)["records"] == 2);
    CHECK((*done)["erase"] == "done");
    CHECK(PromptText(*e, "proj", "zebrafinch").find("zebrafinch") == std::string::npos);
    // The other scope keeps its own copy; the rest of the scope stays.
    CHECK(PromptText(*e, "other", "zebrafinch").find("zebrafinch") != std::string::npos);
    CHECK(PromptText(*e, "proj", "postgres").find("billing") != std::string::npos);
    auto other = e->Forget("other", {{"all", true}});
    REQUIRE(other);
    CHECK((*other)["records"] == 1);
  }
  CHECK_FALSE(AnyFileHolds(dir.File("data"), "zebrafinch"));
  CHECK(AnyFileHolds(dir.File("data"), "billing"));
}

TEST_CASE("Forget selects by session, message ids and date, all of them at once") {
  TempDir dir;
  auto e = OpenAt(dir.File("memory.db"));
  Seed(*e);
  auto r = e->Forget("proj", {{"session_id", "s1"}, {"message_ids", {"m2"}}, {"dry_run", true}});
  REQUIRE(r);
  CHECK((*r)["records"] == 1);
  r = e->Forget("proj", {{"before", "2026-02-01"}, {"dry_run", true}});
  REQUIRE(r);
  CHECK((*r)["records"] == 2);
  r = e->Forget("proj", {{"session_id", "s2"}});
  REQUIRE(r);
  CHECK((*r)["records"] == 1);
  CHECK(PromptText(*e, "proj", "postgres").find("billing") == std::string::npos);
}

TEST_CASE("Forget refuses bad selectors and changes nothing") {
  TempDir dir;
  auto e = OpenAt(dir.File("memory.db"));
  Seed(*e);
  for (const json& body :
       {json::object(), json{{"before", "last tuesday"}}, json{{"match", ""}},
        json{{"match", std::string(5000, 'x')}}, json{{"session", "s1"}},
        json{{"message_ids", json::array()}}, json{{"all", "yes"}}, json::array()}) {
    auto r = e->Forget("proj", body);
    INFO(body.dump());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == tmcra::Errc::kInvalidArgument);
  }
  CHECK_FALSE(e->Forget("no/such", {{"all", true}}));
  auto stats = e->ScopeStats();
  REQUIRE(stats);
  CHECK((*stats)["scopes"][1]["messages"] == 3);
}

TEST_CASE("ForgetOldest deletes oldest first until the bytes are covered") {
  TempDir dir;
  auto e = OpenAt(dir.File("memory.db"));
  Seed(*e);
  auto r = e->ForgetOldest(1);
  REQUIRE(r);
  CHECK((*r)["records"] == 1);
  CHECK((*r)["preview"][0]["excerpt"] == "the deploy key is kept in vault zebrafinch");
}

TEST_CASE("Export then import gives the same recall, and a second import adds nothing") {
  TempDir dir;
  auto source = OpenAt(dir.File("a/memory.db"));
  Seed(*source);
  json fb{{"rating", "incorrect"}, {"action", "ignore"}, {"query_id", nullptr}};
  auto recall = source->Recall("proj", {{"query", "postgres"}, {"max_windows", 8}});
  REQUIRE(recall);
  const std::string id =
      (*recall)["evidence"]["windows"][0]["records"][0]["memory_id"].get<std::string>();
  fb["memory_ids"] = {id};
  REQUIRE(source->Feedback("proj", fb, "fb-key-000001"));
  // A note that targets nothing is exported and imported too.
  REQUIRE(source->Feedback("proj", json{{"rating", "helpful"}, {"comment", "good"}}, ""));

  json lines = json::array();
  REQUIRE(source->Export("proj", [&lines](const json& line) {
    lines.push_back(line);
    return tmcra::Ok();
  }));
  REQUIRE(lines.size() == 5);
  CHECK(lines[3]["type"] == "feedback");
  CHECK(lines[4]["targets"] == json::array());

  auto target = OpenAt(dir.File("b/memory.db"));
  auto first = target->Import("proj", lines);
  REQUIRE(first);
  CHECK((*first)["records_added"] == 3);
  CHECK((*first)["feedback_added"] == 2);
  auto second = target->Import("proj", lines);
  REQUIRE(second);
  CHECK((*second)["records_added"] == 0);
  CHECK((*second)["records_present"] == 3);
  CHECK((*second)["feedback_present"] == 2);
  json ignore_without_target = lines[3];
  ignore_without_target["targets"] = json::array();
  auto untargeted = target->Import("proj", json::array({ignore_without_target}));
  REQUIRE_FALSE(untargeted);
  CHECK(untargeted.error().message.find("lines.0.targets") != std::string::npos);
  for (const char* query : {"zebrafinch", "postgres billing", "deploy key"}) {
    INFO(query);
    CHECK(PromptText(*target, "proj", query) == PromptText(*source, "proj", query));
  }
  json typeless = lines;
  typeless[0]["type"] = 7;
  auto no_type = target->Import("proj", typeless);
  REQUIRE_FALSE(no_type);
  CHECK(no_type.error().message.find("lines.0.type") != std::string::npos);
  json bad = lines;
  bad[1]["occurred_at"] = "yesterday";
  auto refused = target->Import("proj", bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("lines.1.occurred_at") != std::string::npos);
}
