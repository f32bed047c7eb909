// MemoryApiSender over the real embedded memory: a batch and a single submission of the same
// item are the same write (a replay by key, never a conflict), a batch with an invalid item is
// refused whole, and background-style batch delivery writes every message exactly once.
#include "src/tools/outbox_sender.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "queue/delivery.h"
#include "src/api/embedded_memory_api.h"
#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using namespace std::chrono_literals;
using tmcra::Errc;
using tmcra::queue::Item;
using tmcra::testing::TempDir;

namespace {

Item TurnItem(const std::string& key, const std::string& scope = "p",
              std::optional<std::string> agent = std::nullopt) {
  Item item;
  item.scope_name = scope;
  item.session_id = "s-" + key;
  item.messages = json::array(
      {{{"message_id", "u-" + key}, {"role", "user"}, {"content", "question " + key},
        {"timestamp", "2026-11-30T00:00:00Z"}, {"metadata", {{"actor_role", "user"}}}},
       {{"message_id", "a-" + key}, {"role", "assistant"}, {"content", "answer " + key},
        {"timestamp", "2026-11-30T00:00:01Z"}, {"metadata", {{"actor_role", "assistant"}}}}});
  item.consistency = "eventual";
  item.slow_policy = "auto";
  item.idempotency_key = key;
  item.metadata = {{"integration", "mcp"}, {"integration_version", "test"}};
  item.agent_id = std::move(agent);
  return item;
}

std::unique_ptr<tmcra::api::EmbeddedMemoryApi> Memory(const TempDir& dir) {
  tmcra::memory::EngineOptions options;
  options.path = dir.File("memory.db");
  return std::make_unique<tmcra::api::EmbeddedMemoryApi>(std::move(options));
}

std::string JobId(const json& receipt) { return receipt["jobs"][0]["job_id"]; }

}  // namespace

TEST_CASE("a batch item and the same item sent alone are one write", "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  tmcra::tools::MemoryApiSender sender(*memory);
  for (const std::optional<std::string>& agent : {std::optional<std::string>(),
                                                  std::optional<std::string>("agent-7")}) {
    INFO("agent " << agent.value_or("none"));
    const std::string tag = agent ? "agent" : "plain";
    const std::vector<Item> items = {TurnItem("key-" + tag + "-batch-1", "p", agent),
                                     TurnItem("key-" + tag + "-batch-2", "p", agent),
                                     TurnItem("key-" + tag + "-batch-3", "p", agent)};
    // Batch first, then one of them alone (a reconcile after a crash before the mark).
    auto batch = sender.SubmitBatch(items);
    REQUIRE(batch);
    REQUIRE(batch->size() == 3);
    for (const auto& r : *batch) REQUIRE(r);
    auto alone = sender.Submit(items[1]);
    REQUIRE(alone);
    CHECK(JobId(*alone) == JobId(*(*batch)[1]));
    CHECK((*alone)["jobs"][0]["idempotent_replay"] == true);
    // Alone first, then in a batch.
    const Item first = TurnItem("key-" + tag + "-alone-1", "p", agent);
    auto single = sender.Submit(first);
    REQUIRE(single);
    auto again = sender.SubmitBatch({first, TurnItem("key-" + tag + "-alone-2", "p", agent)});
    REQUIRE(again);
    REQUIRE((*again)[0]);
    CHECK(JobId(*(*again)[0]) == JobId(*single));
    CHECK((*(*again)[0])["jobs"][0]["idempotent_replay"] == true);
    // Each receipt is what a single submission gives.
    CHECK((*(*again)[1])["scope_name"] == "p");
    CHECK((*(*again)[1])["schema_version"] == (*single)["schema_version"]);
  }
}

TEST_CASE("a batch with an invalid item is refused whole, and so are mixed scopes",
          "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  tmcra::tools::MemoryApiSender sender(*memory);
  Item bad = TurnItem("key-bad-00001");
  bad.messages[0]["role"] = "robot";
  auto refused = sender.SubmitBatch({TurnItem("key-good-0001"), bad});
  REQUIRE_FALSE(refused);
  CHECK_FALSE(refused.error().retryable);
  CHECK(refused.error().http_status == 422);
  CHECK(refused.error().message.find("items.1") != std::string::npos);
  // Nothing of it was stored: the good item is new when sent alone.
  auto good = sender.Submit(TurnItem("key-good-0001"));
  REQUIRE(good);
  CHECK((*good)["jobs"][0]["idempotent_replay"] == false);

  auto mixed = sender.SubmitBatch({TurnItem("key-mixed-001", "p"), TurnItem("key-mixed-002", "q")});
  REQUIRE_FALSE(mixed);
  CHECK_FALSE(mixed.error().retryable);
}

TEST_CASE("batch delivery to the embedded memory writes every message once and a bad item "
          "dead-letters alone", "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  tmcra::tools::MemoryApiSender sender(*memory);
  tmcra::queue::DeliveryOptions options;
  options.path = dir.File("outbox.sqlite3");
  options.owner = "pid-" + std::to_string(getpid()) + "-sender-test";
  tmcra::queue::DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 130; ++i) ids.push_back(*ob.Enqueue(TurnItem("key-many-" + std::to_string(i))));
  Item bad = TurnItem("key-bad-in-batch");
  bad.messages[1]["content"] = "   ";  // blank after trimming: refused by validation
  const std::string bad_id = *ob.Enqueue(bad);
  ids.push_back(bad_id);
  for (int round = 0; round < 200 && ob.GetCounts()->succeeded < 130; ++round) {
    REQUIRE(service.DeliverBatch(ids));
    std::this_thread::sleep_for(10ms);
  }
  auto counts = ob.GetCounts();
  CHECK(counts->succeeded == 130);
  CHECK(counts->dead_letter == 1);
  CHECK(ob.Get(bad_id)->state == "dead_letter");
  CHECK(ob.Get(bad_id)->last_error->find("validation_error") != std::string::npos);
  auto stats = memory->Stats();
  REQUIRE(stats);
  CHECK((*stats)["records"] == 260);
}
