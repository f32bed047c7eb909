// MemoryApiSender over the real embedded memory: a batch and a single submission of the same
// item are the same write (a replay by key, never a conflict), a batch with an invalid item is
// refused whole, and background-style batch delivery writes every message exactly once. Job
// polls go in batches too: each job validated as alone, one by one where the memory has no
// batch endpoint.
#include "src/tools/outbox_sender.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
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
  item.messages = json::array({{{"message_id", "u-" + key},
                                {"role", "user"},
                                {"content", "question " + key},
                                {"timestamp", "2026-11-30T00:00:00Z"},
                                {"metadata", {{"actor_role", "user"}}}},
                               {{"message_id", "a-" + key},
                                {"role", "assistant"},
                                {"content", "answer " + key},
                                {"timestamp", "2026-11-30T00:00:01Z"},
                                {"metadata", {{"actor_role", "assistant"}}}}});
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

// The embedded memory, with GetJobs scripted (a memory without the batch endpoint, one that
// fails, one that answers another job) and GetJob counted.
class ScriptedJobs final : public tmcra::api::MemoryApi {
 public:
  explicit ScriptedJobs(tmcra::api::MemoryApi& inner) : inner_(inner) {}
  using Jobs = tmcra::Result<std::vector<tmcra::Result<json>>>;
  std::function<Jobs(const std::vector<std::string>&)> get_jobs;  // unset: the inner memory's
  std::vector<size_t> batch_sizes;
  int single_gets = 0;

  tmcra::Result<json> Recall(std::string_view scope, const json& body,
                             const tmcra::api::RecallOptions& options) override {
    return inner_.Recall(scope, body, options);
  }
  tmcra::Result<json> Ingest(std::string_view scope, const json& body,
                             const tmcra::api::IngestOptions& options) override {
    return inner_.Ingest(scope, body, options);
  }
  tmcra::Result<json> IngestBatch(std::string_view scope, const json& body,
                                  const tmcra::api::IngestOptions& options) override {
    return inner_.IngestBatch(scope, body, options);
  }
  std::function<tmcra::Result<json>(std::string_view)> get_job;  // unset: the inner memory's
  tmcra::Result<json> GetJob(std::string_view job_id) override {
    ++single_gets;
    return get_job ? get_job(job_id) : inner_.GetJob(job_id);
  }
  Jobs GetJobs(const std::vector<std::string>& job_ids) override {
    batch_sizes.push_back(job_ids.size());
    return get_jobs ? get_jobs(job_ids) : inner_.GetJobs(job_ids);
  }
  tmcra::Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                               int limit) override {
    return inner_.Evidence(scope, memory_id, limit);
  }
  tmcra::Result<json> Feedback(std::string_view scope, const json& body,
                               const tmcra::api::FeedbackOptions& options) override {
    return inner_.Feedback(scope, body, options);
  }
  json Describe() const override { return inner_.Describe(); }
  tmcra::Result<json> Stats() override { return inner_.Stats(); }

 private:
  tmcra::api::MemoryApi& inner_;
};

}  // namespace

TEST_CASE("a batch item and the same item sent alone are one write", "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  tmcra::tools::MemoryApiSender sender(*memory);
  for (const std::optional<std::string>& agent :
       {std::optional<std::string>(), std::optional<std::string>("agent-7")}) {
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
  CHECK(refused.error().code == tmcra::Errc::kInvalidArgument);
  CHECK(refused.error().message.find("items.1") != std::string::npos);
  // Nothing of it was stored: the good item is new when sent alone.
  auto good = sender.Submit(TurnItem("key-good-0001"));
  REQUIRE(good);
  CHECK((*good)["jobs"][0]["idempotent_replay"] == false);

  auto mixed = sender.SubmitBatch({TurnItem("key-mixed-001", "p"), TurnItem("key-mixed-002", "q")});
  REQUIRE_FALSE(mixed);
  CHECK_FALSE(mixed.error().retryable);
}

TEST_CASE(
    "batch delivery to the embedded memory writes every message once and a bad item "
    "dead-letters alone",
    "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  tmcra::tools::MemoryApiSender sender(*memory);
  tmcra::queue::DeliveryOptions options;
  options.path = dir.File("outbox.sqlite3");
  options.owner = "pid-" + std::to_string(getpid()) + "-sender-test";
  tmcra::queue::DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 130; ++i)
    ids.push_back(*ob.Enqueue(TurnItem("key-many-" + std::to_string(i))));
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

TEST_CASE(
    "job polls in batches: each job validated as alone, one by one where the memory has "
    "no batch endpoint",
    "[tools][outbox][batch]") {
  TempDir dir;
  auto memory = Memory(dir);
  ScriptedJobs scripted(*memory);
  tmcra::tools::MemoryApiSender sender(scripted);
  std::vector<std::string> jobs;
  for (int i = 0; i < 130; ++i) {
    auto receipt = sender.Submit(TurnItem("key-polls-" + std::to_string(i)));
    REQUIRE(receipt);
    jobs.push_back(JobId(*receipt));
  }
  // Every job finished first, so that a job polled twice is the same job both times.
  for (int tries = 0; tries < 500; ++tries) {
    bool all = true;
    for (const auto& job : jobs) all = all && (*memory->GetJob(job))["status"] == "succeeded";
    if (all) break;
    std::this_thread::sleep_for(10ms);
  }
  std::vector<std::string> asked = jobs;
  asked.insert(asked.begin() + 5, "job_does_not_exist");

  SECTION("the memory's batches, 100 jobs at most each") {
    auto polled = sender.PollJobs(asked);
    REQUIRE(polled.size() == asked.size());
    CHECK(scripted.batch_sizes == std::vector<size_t>{100, 31});
    CHECK(scripted.single_gets == 0);
    for (size_t i = 0; i < asked.size(); ++i) {
      INFO(asked[i]);
      if (asked[i] == "job_does_not_exist") {
        REQUIRE_FALSE(polled[i]);
        CHECK(polled[i].error().code == tmcra::Errc::kNotFound);
        continue;
      }
      REQUIRE(polled[i]);
      auto alone = sender.PollJob(asked[i]);
      REQUIRE(alone);
      CHECK(*polled[i] == *alone);  // the receipt a single poll gives, byte for byte
      CHECK((*polled[i])["status"] == "succeeded");
    }
  }
  SECTION("no batch endpoint, or an answer not to be trusted: one by one") {
    for (const tmcra::Error& whole :
         {tmcra::Error{Errc::kNotFound, false, "the Memory API has no jobs/batch endpoint"},
          tmcra::Error::Protocol("a jobs batch answer that names another job")}) {
      INFO(whole.message);
      scripted.single_gets = 0;
      scripted.get_jobs = [&](const std::vector<std::string>&) -> ScriptedJobs::Jobs {
        return whole;
      };
      auto polled = sender.PollJobs(asked);
      REQUIRE(polled.size() == asked.size());
      CHECK(scripted.single_gets == static_cast<int>(asked.size()));
      CHECK_FALSE(polled[5]);
      for (size_t i = 0; i < asked.size(); ++i) CHECK((i == 5) != static_cast<bool>(polled[i]));
    }
  }
  SECTION("a retryable failure of the whole call is every job's, and asks nothing more") {
    scripted.get_jobs = [](const std::vector<std::string>&) -> ScriptedJobs::Jobs {
      return tmcra::Error::Api(tmcra::Errc::kUnavailable, "unavailable", "busy");
    };
    auto polled = sender.PollJobs(asked);
    REQUIRE(polled.size() == asked.size());
    CHECK(scripted.single_gets == 0);
    for (const auto& p : polled) {
      REQUIRE_FALSE(p);
      CHECK(p.error().retryable);
    }
  }
  SECTION("a job that is not the one asked for, or not a valid job, fails alone") {
    scripted.get_jobs = [&](const std::vector<std::string>& ids) -> ScriptedJobs::Jobs {
      auto real = memory->GetJobs(ids);
      REQUIRE(real);
      (*(*real)[1])["job_id"] = ids[0];  // the first job's id at the second place
      (*(*real)[2])["status"] = "exploded";
      (*real)[3] = json::array();
      return real;
    };
    auto polled = sender.PollJobs({jobs[0], jobs[1], jobs[2], jobs[3], jobs[4]});
    REQUIRE(polled.size() == 5);
    CHECK(polled[0]);
    for (size_t i : {1u, 2u, 3u}) {
      REQUIRE_FALSE(polled[i]);
      CHECK(polled[i].error().code == Errc::kProtocol);
    }
    CHECK(polled[4]);
    // A single poll is held to the same rule.
    scripted.get_job = [&](std::string_view) { return memory->GetJob(jobs[0]); };
    auto other = sender.PollJob(jobs[1]);
    REQUIRE_FALSE(other);
    CHECK(other.error().code == Errc::kProtocol);
    CHECK(sender.PollJob(jobs[0]));
  }
}
