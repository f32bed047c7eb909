#include "queue/delivery.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <spdlog/spdlog.h>

#include "src/common/clock.h"
#include "src/common/failpoint.h"

namespace tmcra::queue {

namespace {

bool IsTerminal(const json& job) {
  if (!job.is_object() || !job.contains("status") || !job["status"].is_string()) return false;
  const std::string status = job["status"];
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

}  // namespace

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

Result<bool> DeliveryService::Step(Outbox& outbox, const std::string& item_id) {
  auto item = outbox.Get(item_id);
  if (!item) return item.error();
  if (item->state == kPending) {
    if (gate_ && !gate_(*item)) {
      if (auto s = outbox.MarkDeadLetter(item_id, "discarded_by_memory_mode", nullptr,
                                         /*erase_content=*/true);
          !s) {
        return s.error();
      }
      return false;
    }
    TMCRA_FAILPOINT("deliver.before_send");
    auto receipt = sender_.Submit(*item);
    if (!receipt) {
      const Error& e = receipt.error();
      if (e.retryable) {
        if (auto s = outbox.RecordFailure(item_id, e.ToString(),
                                          NowSeconds() + Backoff(item->attempts));
            !s) {
          return s.error();
        }
      } else if (auto s = outbox.MarkDeadLetter(item_id, e.ToString(), nullptr); !s) {
        return s.error();
      }
      return false;
    }
    TMCRA_FAILPOINT("deliver.after_accept_before_mark");
    if (auto s = outbox.MarkSubmitted(item_id, *receipt); !s) return s.error();
    return true;  // now submitted: its jobs can be polled
  }
  if (item->state == kSubmitted) {
    json receipt = item->receipt;
    if (!receipt.is_object() || !receipt.contains("jobs") || !receipt["jobs"].is_array() ||
        receipt["jobs"].empty()) {
      if (auto s = outbox.MarkDeadLetter(item_id, "the stored ingest receipt has no jobs", receipt);
          !s) {
        return s.error();
      }
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
    auto claimed = ob.Claim(item_id, options_.owner, options_.claim_seconds);
    if (!claimed) return claimed.error();
    if (*claimed) {
      Result<bool> more = true;
      while (more && *more) more = Step(ob, item_id);
      if (auto s = ob.Release(item_id, options_.owner); !s) return s.error();
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
          auto due = ob.Due(32);
          if (due && !due->empty()) {
            for (const auto& id : *due) {
              if (stopping_.load()) break;
              auto r = DeliverItem(id, /*wait_terminal=*/false, std::chrono::milliseconds(0));
              if (!r) spdlog::warn("delivery of {}: {}", id, r.error().ToString());
            }
            wait = std::chrono::milliseconds(50);  // submitted items: poll their jobs soon
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
