// Delivery through a scripted Sender (a misbehaving memory cannot be made real here).
#include "queue/delivery.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "tests/support/temp_dir.h"

using json = nlohmann::json;
using namespace std::chrono_literals;
using tmcra::Error;
using tmcra::Result;
using tmcra::queue::DeliveryOptions;
using tmcra::queue::DeliveryService;
using tmcra::queue::Item;
using tmcra::testing::TempDir;

namespace {

class ScriptedSender final : public tmcra::queue::Sender {
 public:
  std::function<Result<json>(const Item&)> submit = [this](const Item& item) -> Result<json> {
    ++submits;
    return json{{"jobs", {{{"job_id", "job-" + item.idempotency_key}, {"status", "pending"}}}},
                {"status", "submitted"}};
  };
  std::function<Result<json>(const std::string&)> poll = [](const std::string& id) -> Result<json> {
    return json{{"job_id", id}, {"status", "succeeded"}};
  };
  std::atomic<int> submits{0};
  Result<json> Submit(const Item& item) override { return submit(item); }
  Result<json> PollJob(const std::string& job_id) override { return poll(job_id); }
};

Item NewItem(const std::string& key) {
  Item item;
  item.scope_name = "p";
  item.session_id = "s";
  item.messages = json::array({{{"message_id", key}, {"role", "user"}, {"content", "x"}}});
  item.consistency = "eventual";
  item.slow_policy = "auto";
  item.idempotency_key = key;
  return item;
}

DeliveryOptions Options(const TempDir& dir, const std::string& owner = "pid-1-test") {
  DeliveryOptions o;
  o.path = dir.File("outbox.sqlite3");
  o.owner = owner;
  o.base_backoff_seconds = 0.01;
  o.max_backoff_seconds = 0.05;
  o.idle_poll = 20ms;
  return o;
}

}  // namespace

TEST_CASE("a pending item is submitted, its jobs polled, and it succeeds", "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  DeliveryService service(Options(dir), sender, nullptr);
  const std::string id = *(*service.outbox())->Enqueue(NewItem("key-ok-00001"));
  auto item = service.DeliverItem(id, /*wait_terminal=*/true, 2s);
  REQUIRE(item);
  CHECK(item->state == "succeeded");
  CHECK(item->receipt["status"] == "succeeded");
  CHECK(item->receipt["final"] == true);
  CHECK(sender.submits == 1);
  // Delivering a finished item again does nothing.
  REQUIRE(service.DeliverItem(id, true, 1s));
  CHECK(sender.submits == 1);
}

TEST_CASE("without waiting, a submitted item stays submitted until polled", "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  int polls = 0;
  sender.poll = [&polls](const std::string& id) -> Result<json> {
    ++polls;
    return json{{"job_id", id}, {"status", polls < 3 ? "running" : "succeeded"}};
  };
  DeliveryService service(Options(dir), sender, nullptr);
  const std::string id = *(*service.outbox())->Enqueue(NewItem("key-slow-0001"));
  CHECK(service.DeliverItem(id, false, 0ms)->state == "submitted");
  CHECK(service.DeliverItem(id, true, 2s)->state == "succeeded");
  CHECK(polls == 3);
}

TEST_CASE("a retryable failure backs off and never re-mints the key", "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  std::vector<std::string> keys;
  sender.submit = [&](const Item& item) -> Result<json> {
    keys.push_back(item.idempotency_key);
    if (keys.size() < 3) return Error::Unavailable("transport_error: connection refused");
    return json{{"jobs", {{{"job_id", "j"}, {"status", "succeeded"}}}}};
  };
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  const std::string id = *ob.Enqueue(NewItem("key-retry-001"));
  auto first = service.DeliverItem(id, false, 0ms);
  CHECK(first->state == "pending");
  CHECK(first->attempts == 1);
  CHECK(first->next_attempt_at > 0);
  CHECK(first->last_error->find("connection refused") != std::string::npos);
  auto done = service.DeliverItem(id, true, 5s);  // waits out the backoff
  CHECK(done->state == "succeeded");
  CHECK(keys == std::vector<std::string>(3, "key-retry-001"));
}

TEST_CASE("a non-retryable failure or a bad receipt dead-letters only its item",
          "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  sender.submit = [](const Item& item) -> Result<json> {
    if (item.idempotency_key == "key-invalid-1") {
      return Error::Api(422, "validation_error", "messages.0.content: too long");
    }
    if (item.idempotency_key == "key-receipt-1") {
      return Error::Protocol("ingest.jobs: must be a non-empty array");
    }
    return json{{"jobs", {{{"job_id", "j"}, {"status", "failed"}}}}};
  };
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  const std::string a = *ob.Enqueue(NewItem("key-invalid-1"));
  const std::string b = *ob.Enqueue(NewItem("key-receipt-1"));
  const std::string c = *ob.Enqueue(NewItem("key-jobfail-1"));
  const std::string d = *ob.Enqueue(NewItem("key-fine-0001"));
  sender.submit = [old = sender.submit, d](const Item& item) -> Result<json> {
    if (item.item_id == d) return json{{"jobs", {{{"job_id", "j"}, {"status", "succeeded"}}}}};
    return old(item);
  };
  for (const auto& id : {a, b, c, d}) REQUIRE(service.DeliverItem(id, true, 1s));
  CHECK(ob.Get(a)->state == "dead_letter");
  CHECK(ob.Get(a)->last_error->find("validation_error") != std::string::npos);
  CHECK(ob.Get(b)->state == "dead_letter");
  CHECK(ob.Get(b)->last_error->find("ingest.jobs") != std::string::npos);
  CHECK(ob.Get(c)->state == "dead_letter");
  CHECK(ob.Get(c)->receipt["status"] == "failed");
  CHECK(ob.Get(d)->state == "succeeded");
}

TEST_CASE("the write gate discards an item whose capture no longer allows it",
          "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  DeliveryService service(Options(dir), sender, [](const Item&) { return false; });
  const std::string id = *(*service.outbox())->Enqueue(NewItem("key-gated-01"));
  auto item = service.DeliverItem(id, true, 1s);
  CHECK(item->state == "dead_letter");
  CHECK(item->last_error == std::string("discarded_by_memory_mode"));
  CHECK(item->messages.empty());
  CHECK(sender.submits == 0);
}

TEST_CASE("background delivery drains the outbox and one process holds the lease",
          "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender_a;
  ScriptedSender sender_b;
  DeliveryService a(Options(dir, "pid-" + std::to_string(getpid()) + "-a"), sender_a, nullptr);
  DeliveryService b(Options(dir, "pid-" + std::to_string(getpid()) + "-b"), sender_b, nullptr);
  auto& ob = **a.outbox();
  for (int i = 0; i < 20; ++i) REQUIRE(ob.Enqueue(NewItem("key-bg-" + std::to_string(i) + "-xx")));
  a.Start();
  b.Start();
  for (int i = 0; i < 300 && ob.GetCounts()->succeeded < 20; ++i) std::this_thread::sleep_for(10ms);
  CHECK(ob.GetCounts()->succeeded == 20);
  CHECK(sender_a.submits + sender_b.submits == 20);  // each item submitted once
  CHECK((a.holds_lease() != b.holds_lease()));
  a.Stop();
  b.Stop();
}
