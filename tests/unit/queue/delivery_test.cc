// Delivery through a scripted Sender (a misbehaving memory cannot be made real here).
#include "queue/delivery.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "src/api/api_status.h"
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

using Batch = std::vector<Result<json>>;

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
  // Unset: the default SubmitBatch (one Submit per item).
  std::function<Result<Batch>(const std::vector<Item>&)> batch;
  std::atomic<int> submits{0};
  std::vector<std::vector<std::string>> batches;  // the keys of each SubmitBatch call
  Result<json> Submit(const Item& item) override { return submit(item); }
  Result<json> PollJob(const std::string& job_id) override { return poll(job_id); }
  // The ids of each PollJobs call (from any poller thread).
  std::mutex polls_mu;
  std::vector<std::vector<std::string>> poll_calls;
  // Unset: the default PollJobs (one PollJob per id).
  std::function<std::vector<Result<json>>(const std::vector<std::string>&)> poll_batch;
  std::vector<Result<json>> PollJobs(const std::vector<std::string>& job_ids) override {
    {
      std::lock_guard lock(polls_mu);
      poll_calls.push_back(job_ids);
    }
    return poll_batch ? poll_batch(job_ids) : Sender::PollJobs(job_ids);
  }
  Result<Batch> SubmitBatch(const std::vector<Item>& items) override {
    std::vector<std::string> keys;
    for (const auto& item : items) keys.push_back(item.idempotency_key);
    batches.push_back(keys);
    if (!batch) return Sender::SubmitBatch(items);
    return batch(items);
  }
};

// A batch answer that accepts every item, as a memory would.
Result<Batch> AcceptAll(const std::vector<Item>& items) {
  Batch out;
  for (const auto& item : items) {
    out.push_back(
        json{{"jobs", {{{"job_id", "job-" + item.idempotency_key}, {"status", "pending"}}}},
             {"status", "submitted"}});
  }
  return out;
}

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

// A PollJobs answer: every job asked about has succeeded.
std::vector<Result<json>> AllSucceeded(const std::vector<std::string>& asked) {
  std::vector<Result<json>> out;
  out.reserve(asked.size());
  for (const auto& id : asked) out.emplace_back(json{{"job_id", id}, {"status", "succeeded"}});
  return out;
}

// A job poll's answer by the job's last digit: 7 is an error to retry, 0/3/6/9 a failed job,
// else succeeded.
Result<json> ByLastDigit(const std::string& id) {
  if (id.back() == '7') return Error::Unavailable("transport_error: reset");
  const bool failed = (id.back() - '0') % 3 == 0;
  return json{{"job_id", id}, {"status", failed ? "failed" : "succeeded"}};
}

// Each item polled once, and in the state its job's answer (ByLastDigit) leaves it.
void CheckByLastDigit(tmcra::queue::Outbox& ob, const std::vector<std::string>& ids,
                      std::map<std::string, int>& polled) {
  for (const auto& id : ids) {
    auto item = ob.Get(id);
    REQUIRE(item);
    const std::string job = "job-" + item->idempotency_key;
    INFO(job);
    CHECK(polled[job] == 1);
    if (job.back() == '7') {
      CHECK(item->state == "submitted");  // polled again next round
    } else if ((job.back() - '0') % 3 == 0) {
      CHECK(item->state == "dead_letter");
    } else {
      CHECK(item->state == "succeeded");
    }
  }
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
      return Error::Api(tmcra::Errc::kInvalidArgument, "validation_error",
                        "messages.0.content: too long");
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

// ---- batch delivery (background delivery and reconcile) -------------------------------------

namespace {

Item ItemIn(const std::string& key, const std::string& scope,
            std::optional<std::string> agent = std::nullopt, int messages = 1) {
  Item item = NewItem(key);
  item.scope_name = scope;
  item.agent_id = std::move(agent);
  item.messages = json::array();
  for (int i = 0; i < messages; ++i) {
    item.messages.push_back(
        {{"message_id", key + "-" + std::to_string(i)}, {"role", "user"}, {"content", "x"}});
  }
  return item;
}

std::vector<std::string> All(tmcra::queue::Outbox& ob) {
  return *ob.InStates({"pending", "submitted", "succeeded", "dead_letter"}, 100000);
}

}  // namespace

TEST_CASE(
    "pending items go in batches of one scope and agent id, within 100 items and 5000 "
    "messages",
    "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = AcceptAll;
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  std::map<std::string, std::string> scope_of;  // key -> scope/agent
  const auto add = [&](const Item& item) {
    REQUIRE(ob.Enqueue(item));
    scope_of[item.idempotency_key] = item.scope_name + "/" + item.agent_id.value_or("-");
  };
  for (int i = 0; i < 250; ++i) add(ItemIn("key-p-" + std::to_string(i) + "-xxxx", "p"));
  for (int i = 0; i < 3; ++i) add(ItemIn("key-q-" + std::to_string(i) + "-xxxx", "q"));
  for (int i = 0; i < 2; ++i) add(ItemIn("key-pa-" + std::to_string(i) + "-xxx", "p", "agent-1"));
  for (int i = 0; i < 9; ++i) add(ItemIn("key-big-" + std::to_string(i) + "-xx", "big", {}, 1200));
  add(ItemIn("key-alone-0-xxxx", "alone"));

  auto changed = service.DeliverBatch(All(ob));
  REQUIRE(changed);
  CHECK(*changed == 265);
  std::multiset<size_t> sizes;
  std::set<std::string> keys;
  for (const auto& batch : sender.batches) {
    sizes.insert(batch.size());
    for (const auto& key : batch) {
      CHECK(scope_of[key] == scope_of[batch.front()]);  // one scope and agent id per batch
      CHECK(keys.insert(key).second);                   // each item in one batch only
    }
  }
  // p: 100 + 100 + 50; q: 3; p with agent-1: 2; big (1200 messages each): 4 + 4, then 1 alone.
  CHECK(sizes == std::multiset<size_t>{100, 100, 50, 3, 2, 4, 4});
  CHECK(sender.submits == 2);  // the ninth big item and "alone": one-item batches go singly
  CHECK(ob.GetCounts()->submitted == 265);
  // The next pass polls their jobs; nothing is submitted again.
  REQUIRE(service.DeliverBatch(All(ob)));
  CHECK(ob.GetCounts()->succeeded == 265);
  CHECK(sender.batches.size() == 7);
  CHECK(sender.submits == 2);
}

TEST_CASE("a batch refused as a whole is sent item by item: a bad item dead-letters alone",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  // As the Memory API does: one invalid item refuses the whole batch, naming it.
  sender.batch = [](const std::vector<Item>& items) -> Result<Batch> {
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].idempotency_key == "key-bad-0001") {
        return Error::Api(tmcra::Errc::kInvalidArgument, "validation_error",
                          "items." + std::to_string(i) + ".messages.0.content: too long");
      }
    }
    return AcceptAll(items);
  };
  std::vector<std::string> singles;
  sender.submit = [&](const Item& item) -> Result<json> {
    singles.push_back(item.idempotency_key);
    if (item.idempotency_key == "key-bad-0001") {
      return Error::Api(tmcra::Errc::kInvalidArgument, "validation_error",
                        "messages.0.content: too long");
    }
    return json{{"jobs", {{{"job_id", "job-" + item.idempotency_key}, {"status", "succeeded"}}}}};
  };
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (const char* key : {"key-good-0001", "key-bad-0001", "key-good-0002", "key-good-0003"}) {
    ids.push_back(*ob.Enqueue(NewItem(key)));
  }
  REQUIRE(service.DeliverBatch(ids));
  CHECK(sender.batches.size() == 1);
  CHECK(singles == std::vector<std::string>{"key-good-0001", "key-bad-0001", "key-good-0002",
                                            "key-good-0003"});
  CHECK(ob.Get(ids[1])->state == "dead_letter");
  CHECK(ob.Get(ids[1])->last_error->find("validation_error") != std::string::npos);
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}}) {
    INFO(i);
    CHECK(ob.Get(ids[i])->state == "submitted");
    CHECK(ob.Get(ids[i])->receipt["jobs"][0]["job_id"] == "job-" + ob.Get(ids[i])->idempotency_key);
  }
  REQUIRE(service.DeliverBatch(ids));
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}}) CHECK(ob.Get(ids[i])->state == "succeeded");
  CHECK(ob.Get(ids[1])->state == "dead_letter");
}

TEST_CASE("each item of a batch answer has its own outcome", "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = [](const std::vector<Item>& items) -> Result<Batch> {
    auto out = *AcceptAll(items);
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].idempotency_key == "key-receipt-01") {
        out[i] = Error::Protocol("ingest.jobs: must be a non-empty array");  // a bad receipt
      }
      if (items[i].idempotency_key == "key-retry-0001") {
        out[i] = Error::Unavailable("transport_error: reset");
      }
    }
    return out;
  };
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  const std::string ok = *ob.Enqueue(NewItem("key-fine-0001"));
  const std::string bad = *ob.Enqueue(NewItem("key-receipt-01"));
  const std::string retry = *ob.Enqueue(NewItem("key-retry-0001"));
  auto changed = service.DeliverBatch({ok, bad, retry});
  REQUIRE(changed);
  CHECK(*changed == 1);  // a retry to come is not a change of state
  CHECK(sender.submits == 0);
  CHECK(ob.Get(ok)->state == "submitted");
  // An answer that is not a valid receipt may hide a write that landed: retried by its key.
  CHECK(ob.Get(bad)->state == "pending");
  CHECK(ob.Get(bad)->attempts == 1);
  CHECK(ob.Get(bad)->last_error->find("ingest.jobs") != std::string::npos);
  auto r = ob.Get(retry);
  CHECK(r->state == "pending");
  CHECK(r->attempts == 1);
  CHECK(r->next_attempt_at > 0);
  CHECK(r->last_error->find("reset") != std::string::npos);
}

TEST_CASE("a retryable failure of a whole batch backs off every item and never re-mints keys",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  int calls = 0;
  sender.batch = [&calls](const std::vector<Item>& items) -> Result<Batch> {
    if (++calls == 1) return Error::Unavailable("transport_error: connection refused");
    return AcceptAll(items);
  };
  std::vector<std::string> singles;
  sender.submit = [&singles](const Item& item) -> Result<json> {
    singles.push_back(item.idempotency_key);
    return json{{"jobs", {{{"job_id", "job-" + item.idempotency_key}, {"status", "pending"}}}}};
  };
  DeliveryOptions options = Options(dir);
  options.base_backoff_seconds = 0.5;  // long enough to see the items wait (0.25-0.5 s)
  options.max_backoff_seconds = 1;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(*ob.Enqueue(NewItem("key-rb-" + std::to_string(i) + "-xxxx")));
  auto changed = service.DeliverBatch(ids);
  REQUIRE(changed);
  CHECK(*changed == 0);
  CHECK(singles.empty());  // not resent one by one: that would fail the same way
  for (const auto& id : ids) {
    auto item = ob.Get(id);
    CHECK(item->state == "pending");
    CHECK(item->attempts == 1);
    CHECK(item->next_attempt_at > 0);
    CHECK(item->last_error->find("connection refused") != std::string::npos);
  }
  CHECK(ob.Due(100)->empty());  // all backing off
  // Background delivery retries them when due, under the same keys.
  service.Start();
  for (int i = 0; i < 300 && ob.GetCounts()->succeeded < 5; ++i) std::this_thread::sleep_for(10ms);
  service.Stop();
  CHECK(ob.GetCounts()->succeeded == 5);
  // Each item was sent again exactly once, under the key it was first sent with (in one batch
  // or several, or alone: their backoffs end at different times).
  REQUIRE(sender.batches.size() >= 1);
  std::multiset<std::string> first(sender.batches[0].begin(), sender.batches[0].end());
  std::multiset<std::string> again(singles.begin(), singles.end());
  for (size_t b = 1; b < sender.batches.size(); ++b) {
    again.insert(sender.batches[b].begin(), sender.batches[b].end());
  }
  CHECK(first.size() == 5);
  CHECK(again == first);
}

TEST_CASE("a batch answer with the wrong number of results is sent again item by item",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = [](const std::vector<Item>&) -> Result<Batch> { return Batch{}; };
  DeliveryService service(Options(dir), sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(*ob.Enqueue(NewItem("key-mm-" + std::to_string(i) + "-xxxx")));
  REQUIRE(service.DeliverBatch(ids));
  CHECK(sender.submits == 3);
  for (const auto& id : ids) CHECK(ob.Get(id)->state == "submitted");
}

TEST_CASE("the write gate discards items on the batch path too", "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = AcceptAll;
  DeliveryService service(Options(dir), sender,
                          [](const Item& item) { return item.idempotency_key != "key-gated-01"; });
  auto& ob = **service.outbox();
  const std::string a = *ob.Enqueue(NewItem("key-kept-001"));
  const std::string b = *ob.Enqueue(NewItem("key-gated-01"));
  const std::string c = *ob.Enqueue(NewItem("key-kept-002"));
  REQUIRE(service.DeliverBatch({a, b, c}));
  REQUIRE(sender.batches.size() == 1);
  CHECK(sender.batches[0] == std::vector<std::string>{"key-kept-001", "key-kept-002"});
  CHECK(ob.Get(b)->state == "dead_letter");
  CHECK(ob.Get(b)->messages.empty());
}

TEST_CASE("an item in a batch being sent is not worked on by another thread of the process",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  DeliveryService* service_ptr = nullptr;
  std::string other_state;
  std::string watched;
  sender.batch = [&](const std::vector<Item>& items) -> Result<Batch> {
    // A tool call (same process, same owner id) tries the item while its batch is in flight.
    auto item = service_ptr->DeliverItem(watched, /*wait_terminal=*/false, 0ms);
    other_state = item ? item->state : item.error().ToString();
    return AcceptAll(items);
  };
  DeliveryService service(Options(dir), sender, nullptr);
  service_ptr = &service;
  auto& ob = **service.outbox();
  watched = *ob.Enqueue(NewItem("key-busy-001"));
  const std::string other = *ob.Enqueue(NewItem("key-busy-002"));
  REQUIRE(service.DeliverBatch({watched, other}));
  CHECK(other_state == "pending");  // left alone: the batch holds its claim
  CHECK(sender.submits == 0);
  CHECK(ob.Get(watched)->state == "submitted");
  // The claim is released afterwards.
  CHECK(service.DeliverItem(watched, true, 2s)->state == "succeeded");
}

TEST_CASE("background delivery drains a backlog in batches, each item submitted once",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  std::mutex mu;
  std::map<std::string, int> sent;
  sender.batch = [&](const std::vector<Item>& items) -> Result<Batch> {
    std::lock_guard lock(mu);
    for (const auto& item : items) ++sent[item.idempotency_key];
    return AcceptAll(items);
  };
  DeliveryService service(Options(dir, "pid-" + std::to_string(getpid()) + "-bg"), sender, nullptr);
  auto& ob = **service.outbox();
  for (int i = 0; i < 450; ++i)
    REQUIRE(ob.Enqueue(NewItem("key-bl-" + std::to_string(i) + "-xxx")));
  service.Start();
  for (int i = 0; i < 500 && ob.GetCounts()->succeeded < 450; ++i)
    std::this_thread::sleep_for(10ms);
  service.Stop();
  CHECK(ob.GetCounts()->succeeded == 450);
  std::lock_guard lock(mu);
  CHECK(sent.size() + static_cast<size_t>(sender.submits.load()) == 450);
  for (const auto& [key, n] : sent) CHECK(n == 1);
  CHECK(sender.batches.size() >= 5);  // at most 100 per batch
}

TEST_CASE("failures are classified: retry, hold or dead letter", "[queue][delivery]") {
  using tmcra::queue::ClassifyFailure;
  using tmcra::queue::FailureAction;
  // Retryable statuses and transport errors: backoff.
  for (int status : {408, 425, 429, 500, 502, 503, 504}) {
    INFO(status);
    CHECK(ClassifyFailure(tmcra::api::ErrorFromStatus(status, "x", "m"), 0) ==
          FailureAction::kRetry);
  }
  CHECK(ClassifyFailure(Error::Unavailable("transport_error: reset"), 5) == FailureAction::kRetry);
  CHECK(ClassifyFailure(Error::Timeout("timed out"), 5) == FailureAction::kRetry);
  // The memory refused the content: dead letter (kept, replayable under the same key).
  for (int status : {400, 404, 409, 410, 411, 413, 422}) {
    INFO(status);
    CHECK(ClassifyFailure(tmcra::api::ErrorFromStatus(status, "x", "m"), 0) ==
          FailureAction::kToDeadLetter);
  }
  // Credentials, redirects, configuration: held, never dead-lettered however often.
  for (int status : {301, 302, 307, 308, 401, 402, 403}) {
    INFO(status);
    CHECK(ClassifyFailure(tmcra::api::ErrorFromStatus(status, "x", "m"), 1000) ==
          FailureAction::kHold);
  }
  CHECK(ClassifyFailure(Error::Internal("TLS: certificate verify failed"), 0) ==
        FailureAction::kHold);
  CHECK(ClassifyFailure(Error(tmcra::Errc::kPermissionDenied, false, "switched"), 0) ==
        FailureAction::kHold);
  // An invalid answer: retried by key, dead-lettered after kMaxInvalidAnswers attempts.
  const Error invalid = Error::Protocol("invalid_json_response");
  CHECK(ClassifyFailure(invalid, 0) == FailureAction::kRetry);
  CHECK(ClassifyFailure(invalid, tmcra::queue::kMaxInvalidAnswers - 2) == FailureAction::kRetry);
  CHECK(ClassifyFailure(invalid, tmcra::queue::kMaxInvalidAnswers - 1) ==
        FailureAction::kToDeadLetter);
}

TEST_CASE("a held failure keeps the item pending for the longest backoff", "[queue][delivery]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = [](const std::vector<Item>& items) -> Result<Batch> {
    Batch out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(Error::Api(tmcra::Errc::kPermissionDenied, "unauthorized", "no"));
    return out;
  };
  DeliveryOptions options = Options(dir);
  options.max_backoff_seconds = 600;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  const std::string a = *ob.Enqueue(NewItem("key-held-0001"));
  const std::string b = *ob.Enqueue(NewItem("key-held-0002"));
  const double before = tmcra::NowSeconds();
  REQUIRE(service.DeliverBatch({a, b}));
  for (const auto& id : {a, b}) {
    auto item = ob.Get(id);
    CHECK(item->state == "pending");
    CHECK(item->next_attempt_at >= before + 599);
    CHECK(item->last_error->find("unauthorized") != std::string::npos);
  }
}

TEST_CASE("job polls run several at once when asked, each item's outcome its own",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  std::mutex mu;
  std::map<std::string, int> polled;
  std::atomic<int> in_flight{0};
  std::atomic<int> most_in_flight{0};
  sender.batch = AcceptAll;
  sender.poll = [&](const std::string& id) -> Result<json> {
    const int now = ++in_flight;
    int seen = most_in_flight.load();
    while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(2ms);  // a round trip
    {
      std::lock_guard lock(mu);
      ++polled[id];
    }
    --in_flight;
    return ByLastDigit(id);
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 4;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 120; ++i)
    ids.push_back(*ob.Enqueue(NewItem("key-pp-xx-" + std::to_string(i))));
  REQUIRE(service.DeliverBatch(ids));  // submits
  REQUIRE(service.DeliverBatch(ids));  // polls
  CHECK(most_in_flight.load() > 1);
  CHECK(most_in_flight.load() <= 4);
  CheckByLastDigit(ob, ids, polled);
}

TEST_CASE("a round's job polls run while its pending items are sent, not before them",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  std::atomic<int> polls_done{0};
  std::vector<int> polled_at_batch;  // SubmitBatch runs on the delivering thread only
  sender.batch = [&](const std::vector<Item>& items) -> Result<Batch> {
    polled_at_batch.push_back(polls_done.load());
    return AcceptAll(items);
  };
  sender.poll = [&](const std::string& id) -> Result<json> {
    std::this_thread::sleep_for(5ms);  // a round trip
    ++polls_done;
    return json{{"job_id", id}, {"status", "succeeded"}};
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 4;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> first;
  for (int i = 0; i < 128; ++i)
    first.push_back(*ob.Enqueue(NewItem("key-ov-a-" + std::to_string(i))));
  REQUIRE(*service.DeliverBatch(first) == 128);  // submitted: 2 batches, nothing to poll
  REQUIRE(polled_at_batch == std::vector<int>{0, 0});
  polled_at_batch.clear();
  std::vector<std::string> second;
  for (int i = 0; i < 200; ++i)
    second.push_back(*ob.Enqueue(NewItem("key-ov-b-" + std::to_string(i))));
  // One round as the background loop makes it: the submitted items first, then the pending.
  auto due = ob.Due(1000);
  REQUIRE(due);
  REQUIRE(due->size() == 328);
  REQUIRE(std::vector<std::string>(due->begin(), due->begin() + 128) == first);
  // 128 polls of 5 ms, 4 at a time, take 160 ms; the first batch is sent without waiting for
  // them (polled before the batches, all 128 would be done by then).
  REQUIRE(*service.DeliverBatch(*due) == 328);
  REQUIRE(polled_at_batch.size() == 2);
  CHECK(polled_at_batch.front() < 128);
  CHECK(polls_done.load() == 128);
  for (const auto& id : first) CHECK(ob.Get(id)->state == "succeeded");
  for (const auto& id : second) CHECK(ob.Get(id)->state == "submitted");
}

TEST_CASE("a cancelled round stops its job polls, and the unpolled items wait for the next",
          "[queue][delivery][batch]") {
  // On four threads (a remote memory) and on the delivering thread (an in-process one).
  const int parallelism = GENERATE(4, 1);
  INFO("poll_parallelism " << parallelism);
  TempDir dir;
  ScriptedSender sender;
  sender.batch = AcceptAll;
  std::atomic<int> polls{0};
  std::atomic<bool> cancel{false};
  sender.poll = [&](const std::string& id) -> Result<json> {
    if (++polls == 8) cancel = true;
    std::this_thread::sleep_for(20ms);  // all 100, 4 at a time, would take 500 ms
    return json{{"job_id", id}, {"status", "succeeded"}};
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = parallelism;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(*ob.Enqueue(NewItem("key-cx-" + std::to_string(i))));
  REQUIRE(*service.DeliverBatch(ids) == 100);  // submitted
  REQUIRE(service.DeliverBatch(ids, [&] { return cancel.load(); }));
  // Polls already started finish; no more start once the round has seen the cancel.
  CHECK(polls.load() >= 8);
  CHECK(polls.load() < 100);
  if (parallelism == 1) CHECK(polls.load() == 8);  // checked before each poll
  int submitted = 0;
  for (const auto& id : ids) submitted += ob.Get(id)->state == "submitted" ? 1 : 0;
  CHECK(submitted == 100);  // a cancelled round records nothing: polled again next round
  cancel = false;
  REQUIRE(*service.DeliverBatch(ids) == 100);
  for (const auto& id : ids) CHECK(ob.Get(id)->state == "succeeded");
}

TEST_CASE("with jobs_per_poll, a round asks about up to 100 jobs a call, each poller some",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = AcceptAll;
  std::mutex mu;
  std::map<std::string, int> polled;
  sender.poll = [&](const std::string& id) -> Result<json> {
    {
      std::lock_guard lock(mu);
      ++polled[id];
    }
    return ByLastDigit(id);
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 4;
  options.jobs_per_poll = tmcra::queue::kMaxJobsPerPoll;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  // A large round: 100 jobs a call. A small one: fewer, so that all four pollers get some.
  const int n = GENERATE(1000, 120, 3);
  INFO(n << " submitted items");
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(*ob.Enqueue(NewItem("key-jp-" + std::to_string(n) + "-" + std::to_string(i))));
  }
  REQUIRE(service.DeliverBatch(ids));  // submits
  sender.poll_calls.clear();
  REQUIRE(service.DeliverBatch(ids));  // polls
  const auto count = static_cast<size_t>(n);
  const size_t per_call = count >= 400 ? 100 : (count + 3) / 4;
  size_t asked = 0;
  for (const auto& call : sender.poll_calls) {
    CHECK(call.size() <= per_call);
    asked += call.size();
  }
  CHECK(asked == count);
  CHECK(sender.poll_calls.size() == (count + per_call - 1) / per_call);
  CheckByLastDigit(ob, ids, polled);
}

TEST_CASE("an item's jobs are asked about in one call, and finished jobs not again",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  // Two jobs per item, the first already finished when submitted.
  sender.submit = [](const Item& item) -> Result<json> {
    return json{{"jobs",
                 {{{"job_id", "job-done-" + item.idempotency_key}, {"status", "succeeded"}},
                  {{"job_id", "job-" + item.idempotency_key}, {"status", "pending"}}}},
                {"status", "submitted"}};
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 1;
  options.jobs_per_poll = 3;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(*ob.Enqueue(NewItem("key-two-" + std::to_string(i))));
  REQUIRE(*service.DeliverBatch(ids) == 7);  // submits (one Submit each: no batch answer set)
  REQUIRE(sender.poll_calls.empty());
  REQUIRE(*service.DeliverBatch(ids) == 7);
  REQUIRE(sender.poll_calls.size() == 3);  // 3 + 3 + 1 unfinished jobs
  for (const auto& call : sender.poll_calls) {
    for (const auto& job : call) CHECK(job.rfind("job-key-two-", 0) == 0);
  }
  for (const auto& id : ids) CHECK(ob.Get(id)->state == "succeeded");
}

TEST_CASE("chunked polls: short answers, shared jobs, large items and odd receipts",
          "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  std::atomic<int> single_polls{0};
  sender.poll = [&](const std::string& id) -> Result<json> {
    ++single_polls;
    if (id.empty()) return Error::Invalid("job_id: must not be empty");
    return json{{"job_id", id}, {"status", "succeeded"}};
  };
  // Jobs by the key's last character: '3' has three, '5' shares its job with '4', '6' names a
  // job without an id, '7' a job that is not an object; the others have one job each.
  sender.submit = [](const Item& item) -> Result<json> {
    const std::string& key = item.idempotency_key;
    const std::string own = "job-" + key;
    json jobs = json::array({{{"job_id", own}, {"status", "pending"}}});
    if (key.back() == '3') {
      jobs.push_back({{"job_id", own + "-b"}, {"status", "pending"}});
      jobs.push_back({{"job_id", own + "-c"}, {"status", "running"}});
    }
    if (key.back() == '5') jobs[0]["job_id"] = "job-" + key.substr(0, key.size() - 1) + "4";
    if (key.back() == '6') jobs[0].erase("job_id");
    if (key.back() == '7') jobs[0] = "job-7";
    return json{{"jobs", jobs}, {"status", "submitted"}};
  };
  sender.poll_batch = AllSucceeded;  // not through PollJob
  // 10 jobs with ids over 5 pollers: 2 a call, but item 3's three (within jobs_per_poll) in
  // a call of their own.
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 5;
  options.jobs_per_poll = 3;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(*ob.Enqueue(NewItem("key-odd-" + std::to_string(i))));
  REQUIRE(*service.DeliverBatch(ids) == 10);  // submitted
  const auto state = [&](int i) { return ob.Get(ids[static_cast<size_t>(i)])->state; };
  const auto has = [](const std::vector<std::string>& call, const std::string& job) {
    return std::find(call.begin(), call.end(), job) != call.end();
  };

  SECTION("every call's answers") {
    sender.poll_calls.clear();
    REQUIRE(service.DeliverBatch(ids));
    int with_three = 0;
    int with_shared = 0;
    for (const auto& call : sender.poll_calls) {
      CHECK(call.size() <= 3);
      for (const auto& job : call) CHECK_FALSE(job.empty());
      if (has(call, "job-key-odd-3")) {
        CHECK(call.size() == 3);
        with_three += has(call, "job-key-odd-3-b") && has(call, "job-key-odd-3-c");
      }
      with_shared += has(call, "job-key-odd-4");
      CHECK(std::count(call.begin(), call.end(), "job-key-odd-4") <= 1);
    }
    CHECK(sender.poll_calls.size() == 5);
    CHECK(with_three == 1);
    CHECK(with_shared == 1);
    // Only the two jobs without an id were polled alone, and refused as a single poll is.
    CHECK(single_polls == 2);
    for (int i : {0, 1, 2, 3, 4, 5, 8, 9}) CHECK(state(i) == "succeeded");
    CHECK(state(6) == "dead_letter");
    CHECK(state(7) == "dead_letter");
  }
  SECTION("a call that answers for fewer jobs than asked: the rest are polled alone") {
    sender.poll_batch = [&](const std::vector<std::string>& asked) {
      return std::vector<Result<json>>{json{{"job_id", asked[0]}, {"status", "succeeded"}}};
    };
    REQUIRE(service.DeliverBatch(ids));
    for (int i : {0, 1, 2, 3, 4, 5, 8, 9}) CHECK(state(i) == "succeeded");
    CHECK(single_polls == 2 + 4);  // job-key-odd-1, 3-b, 3-c and 8 were not answered for
  }
}

TEST_CASE(
    "with jobs_per_poll, a cancelled round starts no more calls and records no unpolled "
    "item",
    "[queue][delivery][batch]") {
  TempDir dir;
  ScriptedSender sender;
  sender.batch = AcceptAll;
  std::atomic<int> calls{0};
  std::atomic<bool> cancel{false};
  sender.poll_batch = [&](const std::vector<std::string>& asked) {
    if (++calls == 2) cancel = true;
    return AllSucceeded(asked);
  };
  DeliveryOptions options = Options(dir);
  options.poll_parallelism = 1;
  options.jobs_per_poll = 10;
  DeliveryService service(options, sender, nullptr);
  auto& ob = **service.outbox();
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(*ob.Enqueue(NewItem("key-cj-" + std::to_string(i))));
  REQUIRE(*service.DeliverBatch(ids) == 100);  // submitted
  REQUIRE(service.DeliverBatch(ids, [&] { return cancel.load(); }));
  CHECK(calls.load() == 2);  // of 10; checked before each call, on the delivering thread
  int submitted = 0;
  for (const auto& id : ids) submitted += ob.Get(id)->state == "submitted" ? 1 : 0;
  CHECK(submitted == 100);  // a cancelled round records nothing: polled again next round
  cancel = false;
  REQUIRE(*service.DeliverBatch(ids) == 100);
  CHECK(calls.load() == 12);
  for (const auto& id : ids) CHECK(ob.Get(id)->state == "succeeded");
}
