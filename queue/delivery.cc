#include "queue/delivery.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>

#include <spdlog/spdlog.h>

#include "src/common/clock.h"
#include "src/common/failpoint.h"

namespace tmcra::queue {

namespace {

// Due items looked at per round of background delivery: enough for several full batches.
constexpr int kItemsPerRound = 1000;

bool IsTerminal(const json& job) {
  if (!job.is_object() || !job.contains("status") || !job["status"].is_string()) return false;
  const std::string status = job["status"];
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

}  // namespace

Result<std::vector<Result<json>>> Sender::SubmitBatch(const std::vector<Item>& items) {
  std::vector<Result<json>> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(Submit(item));
  return out;
}

bool AllJobsTerminal(const json& receipt) {
  if (!receipt.is_object() || !receipt.contains("jobs") || !receipt["jobs"].is_array() ||
      receipt["jobs"].empty()) {
    return false;
  }
  return std::all_of(receipt["jobs"].begin(), receipt["jobs"].end(), IsTerminal);
}

DeliveryService::DeliveryService(DeliveryOptions options, Sender& sender, WriteGate gate)
    : options_(std::move(options)), sender_(sender), gate_(std::move(gate)) {}

DeliveryService::~DeliveryService() { Stop(); }

Result<Outbox*> DeliveryService::outbox() {
  std::lock_guard lock(open_mu_);
  if (outbox_) return outbox_.get();
  auto opened = Outbox::Open(options_.path);
  if (!opened) {
    spdlog::error("cannot open the outbox {}: {}", options_.path, opened.error().message);
    return opened.error();
  }
  outbox_ = std::move(*opened);
  return outbox_.get();
}

double DeliveryService::Backoff(int64_t attempts) {
  thread_local std::mt19937 rng(std::random_device{}());
  const double exp = options_.base_backoff_seconds *
                     std::pow(2.0, static_cast<double>(std::min<int64_t>(attempts, 20)));
  const double capped = std::min(exp, options_.max_backoff_seconds);
  // Full jitter in [capped/2, capped]: processes that failed together do not retry together.
  return std::uniform_real_distribution<double>(capped / 2, capped)(rng);
}

Status DeliveryService::RecordSubmit(Outbox& outbox, const Item& item,
                                     const Result<json>& receipt) {
  if (receipt) return outbox.MarkSubmitted(item.item_id, *receipt);
  const Error& e = receipt.error();
  if (e.retryable) {
    return outbox.RecordFailure(item.item_id, e.ToString(), NowSeconds() + Backoff(item.attempts));
  }
  return outbox.MarkDeadLetter(item.item_id, e.ToString(), nullptr);
}

Result<bool> DeliveryService::Step(Outbox& outbox, const std::string& item_id, bool* changed) {
  auto item = outbox.Get(item_id);
  if (!item) return item.error();
  if (item->state == kPending) {
    if (gate_ && !gate_(*item)) {
      if (auto s = outbox.MarkDeadLetter(item_id, "discarded_by_memory_mode", nullptr,
                                         /*erase_content=*/true);
          !s) {
        return s.error();
      }
      if (changed != nullptr) *changed = true;
      return false;
    }
    TMCRA_FAILPOINT("deliver.before_send");
    auto receipt = sender_.Submit(*item);
    if (receipt) TMCRA_FAILPOINT("deliver.after_accept_before_mark");
    if (auto s = RecordSubmit(outbox, *item, receipt); !s) return s.error();
    if (changed != nullptr) *changed = receipt || !receipt.error().retryable;
    return receipt.has_value();  // now submitted: its jobs can be polled
  }
  if (item->state == kSubmitted) {
    json receipt = item->receipt;
    if (!receipt.is_object() || !receipt.contains("jobs") || !receipt["jobs"].is_array() ||
        receipt["jobs"].empty()) {
      if (auto s = outbox.MarkDeadLetter(item_id, "the stored ingest receipt has no jobs", receipt);
          !s) {
        return s.error();
      }
      if (changed != nullptr) *changed = true;
      return false;
    }
    for (auto& job : receipt["jobs"]) {
      if (IsTerminal(job)) continue;
      const std::string job_id = job.value("job_id", "");
      auto polled = sender_.PollJob(job_id);
      if (!polled) {
        const Error& e = polled.error();
        if (!e.retryable) {
          if (auto s = outbox.MarkDeadLetter(item_id, e.ToString(), receipt); !s) return s.error();
          if (changed != nullptr) *changed = true;
          return false;
        }
        if (auto s = outbox.RecordFailure(item_id, e.ToString(), NowSeconds() + Backoff(item->attempts));
            !s) {
          return s.error();
        }
        return false;
      }
      job = std::move(*polled);
    }
    if (!AllJobsTerminal(receipt)) {
      if (receipt != item->receipt) {
        if (auto s = outbox.MarkSubmitted(item_id, receipt); !s) return s.error();
        if (changed != nullptr) *changed = true;
      }
      return false;  // not yet; the caller decides whether to wait
    }
    bool all_succeeded = true;
    bool all_cancelled = true;
    for (const auto& job : receipt["jobs"]) {
      all_succeeded = all_succeeded && job["status"] == "succeeded";
      all_cancelled = all_cancelled && job["status"] == "cancelled";
    }
    receipt["status"] = all_succeeded ? "succeeded" : all_cancelled ? "cancelled" : "failed";
    receipt["observed_status"] = receipt["status"];
    receipt["final_status"] = receipt["status"];
    receipt["final"] = true;
    TMCRA_FAILPOINT("deliver.after_job_terminal_before_mark");
    if (all_succeeded) {
      if (auto s = outbox.MarkSucceeded(item_id, receipt); !s) return s.error();
    } else if (auto s = outbox.MarkDeadLetter(item_id, "a job of the ingest did not succeed",
                                              receipt);
               !s) {
      return s.error();
    }
    if (changed != nullptr) *changed = true;
    return false;
  }
  return false;  // succeeded or dead_letter: nothing to do
}

Result<Item> DeliveryService::DeliverItem(const std::string& item_id, bool wait_terminal,
                                          std::chrono::milliseconds timeout,
                                          const std::function<bool()>& cancelled) {
  auto opened = outbox();
  if (!opened) return opened.error();
  Outbox& ob = **opened;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    auto claimed = ClaimItem(ob, item_id);
    if (!claimed) return claimed.error();
    if (*claimed) {
      Result<bool> more = true;
      while (more && *more) more = Step(ob, item_id);
      ReleaseItem(ob, item_id);
      if (!more) return more.error();
    }
    auto item = ob.Get(item_id);
    if (!item) return item.error();
    const bool settled = item->state == kSucceeded || item->state == kDeadLetter;
    if (!wait_terminal || settled || std::chrono::steady_clock::now() >= deadline ||
        (cancelled && cancelled())) {
      return item;
    }
    // A failed attempt waits for its backoff; jobs are polled with a growing pause.
    auto sleep = pause;
    if (item->state == kPending) {
      const double until = item->next_attempt_at - NowSeconds();
      if (until > 0) sleep = std::chrono::milliseconds(static_cast<int64_t>(until * 1000) + 1);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::max(std::chrono::milliseconds(1), std::min(sleep, left)));
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

Result<bool> DeliveryService::ClaimItem(Outbox& outbox, const std::string& item_id) {
  {
    std::lock_guard lock(claims_mu_);
    if (!claimed_.insert(item_id).second) return false;  // another thread of ours has it
  }
  auto claimed = outbox.Claim(item_id, options_.owner, options_.claim_seconds);
  if (!claimed || !*claimed) {
    std::lock_guard lock(claims_mu_);
    claimed_.erase(item_id);
  }
  return claimed;
}

void DeliveryService::ReleaseItem(Outbox& outbox, const std::string& item_id) {
  // A release that fails leaves the claim to expire; nothing is lost.
  if (auto s = outbox.Release(item_id, options_.owner); !s) {
    spdlog::warn("releasing the claim on {}: {}", item_id, s.error().ToString());
  }
  std::lock_guard lock(claims_mu_);
  claimed_.erase(item_id);
}

int DeliveryService::SubmitClaimed(Outbox& outbox, std::vector<Item>& items) {
  std::vector<Result<json>> results;
  results.reserve(items.size());
  const auto one_by_one = [&] {
    results.clear();
    for (const auto& item : items) {
      TMCRA_FAILPOINT("deliver.before_send");
      results.push_back(sender_.Submit(item));
    }
  };
  if (items.size() == 1) {
    one_by_one();
  } else {
    for (size_t i = 0; i < items.size(); ++i) TMCRA_FAILPOINT("deliver.before_send");
    auto batch = sender_.SubmitBatch(items);
    if (batch && batch->size() == items.size()) {
      results = std::move(*batch);
    } else if (!batch && batch.error().retryable) {
      // Nothing is known to have landed: every item is retried later, by its own key.
      for (size_t i = 0; i < items.size(); ++i) results.push_back(batch.error());
    } else {
      // Refused as a whole (the Memory API refuses a batch with one invalid item) or answered
      // with the wrong number of results: each item again on its own, so only a bad item fails.
      // An item the memory did accept is replayed by its key, not written twice.
      spdlog::info("a batch of {} items was refused ({}); sending them one by one", items.size(),
                   batch ? "the answer does not match the items" : batch.error().ToString());
      one_by_one();
    }
  }
  int changed = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (results[i]) TMCRA_FAILPOINT("deliver.after_accept_before_mark");
    if (auto s = RecordSubmit(outbox, items[i], results[i]); !s) {
      spdlog::warn("delivery of {}: {}", items[i].item_id, s.error().ToString());
    } else if (results[i] || !results[i].error().retryable) {
      ++changed;
    }
    ReleaseItem(outbox, items[i].item_id);
  }
  return changed;
}

Result<int> DeliveryService::DeliverBatch(const std::vector<std::string>& item_ids,
                                          const std::function<bool()>& cancelled) {
  auto opened = outbox();
  if (!opened) return opened.error();
  Outbox& ob = **opened;
  const auto stop = [&] { return stopping_.load() || (cancelled && cancelled()); };
  struct Chunk {
    std::vector<Item> items;
    size_t messages = 0;
  };
  // Open batches by scope and agent id (the Memory API takes one of each per batch).
  std::map<std::pair<std::string, std::optional<std::string>>, Chunk> chunks;
  int changed = 0;
  const auto send = [&](Chunk& chunk) {
    if (!chunk.items.empty()) changed += SubmitClaimed(ob, chunk.items);
    chunk = Chunk{};
  };
  for (const auto& id : item_ids) {
    if (stop()) break;
    auto claimed = ClaimItem(ob, id);
    if (!claimed) {
      if (claimed.error().code != Errc::kNotFound) {  // an unknown id is the caller's to report
        spdlog::warn("delivery of {}: {}", id, claimed.error().ToString());
      }
      continue;
    }
    if (!*claimed) continue;  // another deliverer has it
    auto item = ob.Get(id);
    if (!item) {
      spdlog::warn("delivery of {}: {}", id, item.error().ToString());
      ReleaseItem(ob, id);
      continue;
    }
    if (item->state == kPending && !(gate_ && !gate_(*item))) {
      Chunk& chunk = chunks[{item->scope_name, item->agent_id}];
      const size_t messages = item->messages.is_array() ? item->messages.size() : 0;
      if (!chunk.items.empty() && chunk.messages + messages > kMaxBatchMessages) send(chunk);
      chunk.messages += messages;
      chunk.items.push_back(std::move(*item));
      if (chunk.items.size() >= kMaxBatchItems) send(chunk);
      continue;  // claimed until its batch is sent
    }
    // Discarded by the write gate, or submitted (its jobs are polled once), or finished.
    bool item_changed = false;
    if (auto r = Step(ob, id, &item_changed); !r) {
      spdlog::warn("delivery of {}: {}", id, r.error().ToString());
    }
    if (item_changed) ++changed;
    ReleaseItem(ob, id);
  }
  for (auto& [key, chunk] : chunks) {
    if (stop()) {
      for (const auto& item : chunk.items) ReleaseItem(ob, item.item_id);  // not sent: later
      chunk = Chunk{};
    } else {
      send(chunk);
    }
  }
  return changed;
}

void DeliveryService::Start() {
  std::lock_guard lock(loop_mu_);
  if (thread_.joinable() || stopping_.load()) return;
  thread_ = std::thread([this] { Loop(); });
}

void DeliveryService::Kick() {
  Start();
  {
    std::lock_guard lock(loop_mu_);
    kicked_ = true;
  }
  loop_cv_.notify_all();
}

void DeliveryService::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeliveryService::Loop() {
  while (!stopping_.load()) {
    auto wait = options_.idle_poll;
    try {
      auto opened = outbox();
      if (opened) {
        Outbox& ob = **opened;
        auto lease = ob.AcquireDeliveryLease(options_.owner, options_.lease_seconds);
        holds_lease_ = lease && *lease;
        if (holds_lease_) {
          auto due = ob.Due(kItemsPerRound);
          if (due && !due->empty()) {
            auto changed = DeliverBatch(*due);
            if (!changed) spdlog::warn("delivery: {}", changed.error().ToString());
            // Progress: look again at once (a backlog is worked off without pauses). Otherwise
            // only submitted items whose jobs are still running are left: poll them soon.
            wait = changed && *changed > 0 ? std::chrono::milliseconds(0)
                                           : std::chrono::milliseconds(50);
          } else if (auto next = ob.NextDue(); next && *next) {
            const double in = **next - NowSeconds();
            wait = std::chrono::milliseconds(
                static_cast<int64_t>(std::clamp(in, 0.01, 2.0) * 1000));
          }
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("delivery loop failed: {}", e.what());
    }
    std::unique_lock lock(loop_mu_);
    loop_cv_.wait_for(lock, wait, [this] { return kicked_ || stopping_.load(); });
    kicked_ = false;
  }
  if (holds_lease_.load() && outbox_) {
    (void)outbox_->ReleaseDeliveryLease(options_.owner);
    holds_lease_ = false;
  }
}

}  // namespace tmcra::queue
