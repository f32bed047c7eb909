#include "queue/delivery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/failpoint.h"

namespace tmcra::queue {

namespace {

// Due items looked at per round of background delivery, of each kind (submitted items to poll,
// pending items to send; Outbox::Due): enough for several full batches.
constexpr int kItemsPerRound = 1000;

// Appends to `out` each of `ids` it does not hold yet, in order.
void AppendDistinct(std::vector<std::string>& out, std::vector<std::string>& ids) {
  for (auto& id : ids) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(std::move(id));
  }
}

// A job's id as a stored receipt names it, "" when it names none (never throws).
std::string JobIdOf(const json& job) {
  if (!job.is_object()) return {};
  auto it = job.find("job_id");
  return it != job.end() && it->is_string() ? it->get<std::string>() : std::string();
}

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

std::vector<Result<json>> Sender::PollJobs(const std::vector<std::string>& job_ids) {
  std::vector<Result<json>> out;
  out.reserve(job_ids.size());
  for (const auto& id : job_ids) out.push_back(PollJob(id));
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

FailureAction ClassifyFailure(const Error& error, int64_t attempts) {
  if (error.retryable) return FailureAction::kRetry;
  switch (error.code) {
    case Errc::kInvalidArgument:  // 400, 411, 413, 422: the memory refused this content
    case Errc::kConflict:         // 409, e.g. idempotency_conflict: never re-minted, kept
    case Errc::kNotFound:         // 404, 410: the scope or job is gone
      return FailureAction::kToDeadLetter;
    case Errc::kProtocol:  // an answer that is not a valid receipt: the write may have landed
      return attempts + 1 >= kMaxInvalidAnswers ? FailureAction::kToDeadLetter
                                                : FailureAction::kRetry;
    default:  // credentials, a redirect, TLS, a changed configuration: the content is fine
      return FailureAction::kHold;
  }
}

Outcome DeliveryService::FailureOutcome(const Item& item, const Error& error) {
  Outcome o;
  o.item_id = item.item_id;
  o.error = error.ToString();
  switch (ClassifyFailure(error, item.attempts)) {
    case FailureAction::kRetry:
      o.kind = Outcome::Kind::kRetryLater;
      o.next_attempt_at = NowSeconds() + Backoff(item.attempts);
      break;
    case FailureAction::kHold:
      o.kind = Outcome::Kind::kRetryLater;
      o.next_attempt_at = NowSeconds() + options_.max_backoff_seconds;
      break;
    case FailureAction::kToDeadLetter:
      o.kind = Outcome::Kind::kMarkDeadLetter;
      break;
  }
  return o;
}

Outcome DeliveryService::SubmitOutcome(const Item& item, const Result<json>& receipt) {
  if (!receipt) return FailureOutcome(item, receipt.error());
  Outcome o;
  o.item_id = item.item_id;
  o.kind = Outcome::Kind::kMarkSubmitted;
  o.receipt = *receipt;
  return o;
}

std::optional<DeliveryService::Decision> DeliveryService::PollOutcome(const Item& item,
                                                                      json* progress,
                                                                      const PolledJobs* polled) {
  json receipt = item.receipt;
  Decision d;
  d.outcome.item_id = item.item_id;
  if (!receipt.is_object() || !receipt.contains("jobs") || !receipt["jobs"].is_array() ||
      receipt["jobs"].empty()) {
    d.outcome.kind = Outcome::Kind::kMarkDeadLetter;
    d.outcome.error = "the stored ingest receipt has no jobs";
    d.outcome.receipt = receipt;
    return d;
  }
  for (auto& job : receipt["jobs"]) {
    if (IsTerminal(job)) continue;
    const std::string job_id = JobIdOf(job);
    const auto answered = polled != nullptr ? polled->find(job_id) : PolledJobs::const_iterator();
    Result<json> now =
        polled != nullptr && answered != polled->end() ? answered->second : sender_.PollJob(job_id);
    if (!now) {
      d.outcome = FailureOutcome(item, now.error());
      if (d.outcome.kind == Outcome::Kind::kMarkDeadLetter) d.outcome.receipt = receipt;
      return d;
    }
    job = std::move(*now);
  }
  if (!AllJobsTerminal(receipt)) {
    if (progress != nullptr) *progress = std::move(receipt);
    return std::nullopt;  // not yet
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
  d.jobs_terminal = true;
  d.outcome.receipt = std::move(receipt);
  if (all_succeeded) {
    d.outcome.kind = Outcome::Kind::kMarkSucceeded;
  } else {
    d.outcome.kind = Outcome::Kind::kMarkDeadLetter;
    d.outcome.error = "a job of the ingest did not succeed";
  }
  return d;
}

std::vector<DeliveryService::PollChunk> DeliveryService::ChunkPolls(const std::vector<Item>& items,
                                                                    size_t pollers) const {
  std::vector<std::vector<std::string>> unfinished(items.size());
  size_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const json& receipt = items[i].receipt;
    if (!receipt.is_object() || !receipt.contains("jobs") || !receipt["jobs"].is_array()) continue;
    for (const auto& job : receipt["jobs"]) {
      // A job without an id is left to PollOutcome, which polls it alone (and fails it there,
      // as before), so that it cannot spoil a call for the others.
      if (std::string id = JobIdOf(job); !IsTerminal(job) && !id.empty()) {
        unfinished[i].push_back(std::move(id));
      }
    }
    total += unfinished[i].size();
  }
  // Up to jobs_per_poll jobs a call, fewer when that leaves a poller without any.
  pollers = std::max<size_t>(1, pollers);
  const size_t per_call = std::clamp<size_t>(options_.jobs_per_poll, 1, kMaxJobsPerPoll);
  const size_t most = std::clamp<size_t>((total + pollers - 1) / pollers, 1, per_call);
  std::vector<PollChunk> chunks;
  bool open = false;  // the last chunk takes more items
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<std::string>& ids = unfinished[i];
    if (ids.size() > most) {
      // A call of its own; with more jobs than one call takes, they are polled one by one.
      chunks.push_back(PollChunk{i, i + 1, {}});
      if (ids.size() <= per_call) AppendDistinct(chunks.back().job_ids, ids);
      open = false;
      continue;
    }
    if (!open || chunks.back().job_ids.size() + ids.size() > most) {
      chunks.push_back(PollChunk{i, i, {}});
      open = true;
    }
    PollChunk& chunk = chunks.back();  // an item's jobs are asked about in one call
    chunk.end = i + 1;
    AppendDistinct(chunk.job_ids, ids);
  }
  return chunks;
}

Status DeliveryService::Apply(Outbox& outbox, const Outcome& o) {
  switch (o.kind) {
    case Outcome::Kind::kReleaseOnly:
      return Ok();
    case Outcome::Kind::kMarkSubmitted:
      return outbox.MarkSubmitted(o.item_id, o.receipt);
    case Outcome::Kind::kMarkSucceeded:
      return outbox.MarkSucceeded(o.item_id, o.receipt);
    case Outcome::Kind::kMarkDeadLetter:
      return outbox.MarkDeadLetter(o.item_id, o.error, o.receipt, o.erase_content);
    case Outcome::Kind::kRetryLater:
      return outbox.RecordFailure(o.item_id, o.error, o.next_attempt_at);
  }
  return Ok();
}

bool DeliveryService::Changes(const Outcome& o) {
  return o.kind != Outcome::Kind::kReleaseOnly && o.kind != Outcome::Kind::kRetryLater;
}

Outcome DeliveryService::Discard(const Item& item) {
  Outcome o;
  o.item_id = item.item_id;
  o.kind = Outcome::Kind::kMarkDeadLetter;
  o.error = "discarded_by_memory_mode";
  o.erase_content = true;
  return o;
}

Result<bool> DeliveryService::Step(Outbox& outbox, const std::string& item_id, bool* changed) {
  auto item = outbox.GetForDelivery(item_id);
  if (!item) return item.error();
  if (item->state == kPending) {
    if (GateRefuses(*item)) {
      if (auto s = Apply(outbox, Discard(*item)); !s) return s.error();
      if (changed != nullptr) *changed = true;
      return false;
    }
    TMCRA_FAILPOINT("deliver.before_send");
    auto receipt = sender_.Submit(*item);
    if (receipt) TMCRA_FAILPOINT("deliver.after_accept_before_mark");
    const Outcome o = SubmitOutcome(*item, receipt);
    if (auto s = Apply(outbox, o); !s) return s.error();
    if (changed != nullptr) *changed = Changes(o);
    return o.kind == Outcome::Kind::kMarkSubmitted;  // now submitted: its jobs can be polled
  }
  if (item->state == kSubmitted) {
    json progress;
    auto decision = PollOutcome(*item, &progress);
    if (!decision) {
      // Not finished: record what the jobs report now (e.g. running), if anything changed.
      if (progress != item->receipt) {
        if (auto s = outbox.MarkSubmitted(item_id, progress); !s) return s.error();
        if (changed != nullptr) *changed = true;
      }
      return false;  // not yet; the caller decides whether to wait
    }
    if (decision->jobs_terminal) TMCRA_FAILPOINT("deliver.after_job_terminal_before_mark");
    if (auto s = Apply(outbox, decision->outcome); !s) return s.error();
    if (changed != nullptr) *changed = Changes(decision->outcome);
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
  // The embedded memory runs a job within a millisecond or two of its ingest: look again soon,
  // then less and less often.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto claimed = ClaimItem(ob, item_id);
    if (!claimed) return claimed.error();
    if (*claimed) {
      Result<bool> more = true;
      while (more && *more) more = Step(ob, item_id);
      ReleaseItem(ob, item_id);
      if (!more) return more.error();
    }
    auto item = ob.GetForDelivery(item_id);
    if (!item) return item.error();
    const bool settled = item->state == kSucceeded || item->state == kDeadLetter;
    if (!wait_terminal || settled || std::chrono::steady_clock::now() >= deadline ||
        (cancelled && cancelled())) {
      return item;  // the recall receipt reduced to its capture, as DeliverItem documents
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

std::vector<std::string> DeliveryService::ClaimEach(Outbox& outbox,
                                                    const std::vector<std::string>& item_ids) {
  std::vector<std::string> local;  // not being worked on by another thread of ours
  {
    std::lock_guard lock(claims_mu_);
    for (const auto& id : item_ids) {
      if (claimed_.insert(id).second) local.push_back(id);
    }
  }
  std::vector<std::string> held;
  auto claimed = outbox.ClaimEach(local, options_.owner, options_.claim_seconds);
  if (!claimed)
    spdlog::warn("delivery: claiming {} items: {}", local.size(), claimed.error().ToString());
  std::lock_guard lock(claims_mu_);
  for (size_t i = 0; i < local.size(); ++i) {
    if (claimed && (*claimed)[i]) {
      held.push_back(local[i]);
    } else {
      claimed_.erase(local[i]);
    }
  }
  return held;
}

void DeliveryService::RecordEach(Outbox& outbox, const std::vector<Outcome>& outcomes) {
  if (outcomes.empty()) return;
  // All or nothing. If it fails, nothing is lost: the claims expire; an item the memory
  // accepted stays pending and is submitted again under its key, which the memory replays.
  if (auto s = outbox.RecordEach(outcomes, options_.owner); !s) {
    spdlog::warn("delivery: recording {} outcomes: {}", outcomes.size(), s.error().ToString());
  }
  std::lock_guard lock(claims_mu_);
  for (const auto& o : outcomes) claimed_.erase(o.item_id);
}

std::vector<Outcome> DeliveryService::SubmitClaimed(const std::vector<Item>& items) {
  std::vector<Outcome> outcomes;
  outcomes.reserve(items.size());
  const auto one_by_one = [&] {
    outcomes.clear();
    for (const auto& item : items) {
      TMCRA_FAILPOINT("deliver.before_send");
      auto receipt = sender_.Submit(item);
      if (receipt) TMCRA_FAILPOINT("deliver.after_accept_before_mark");
      outcomes.push_back(SubmitOutcome(item, receipt));
    }
  };
  if (items.size() == 1) {
    one_by_one();
    return outcomes;
  }
  for (size_t i = 0; i < items.size(); ++i) TMCRA_FAILPOINT("deliver.before_send");
  auto batch = sender_.SubmitBatch(items);
  if (batch && batch->size() == items.size()) {
    for (size_t i = 0; i < items.size(); ++i) {
      if ((*batch)[i]) TMCRA_FAILPOINT("deliver.after_accept_before_mark");
      outcomes.push_back(SubmitOutcome(items[i], (*batch)[i]));
    }
  } else if (!batch && batch.error().retryable) {
    // Nothing is known to have landed: every item is retried later, by its own key.
    for (const auto& item : items) {
      Outcome o;
      o.item_id = item.item_id;
      o.kind = Outcome::Kind::kRetryLater;
      o.error = batch.error().ToString();
      o.next_attempt_at = NowSeconds() + Backoff(item.attempts);
      outcomes.push_back(std::move(o));
    }
  } else {
    // Refused as a whole (the Memory API refuses a batch with one invalid item) or answered
    // with the wrong number of results: each item again on its own, so only a bad item fails.
    // An item the memory did accept is replayed by its key, not written twice.
    spdlog::info("a batch of {} items was refused ({}); sending them one by one", items.size(),
                 batch ? "the answer does not match the items" : batch.error().ToString());
    one_by_one();
  }
  return outcomes;
}

int DeliveryService::SubmitGroup(Outbox& ob, const std::vector<std::string>& item_ids) {
  int changed = 0;
  std::vector<Outcome> outcomes;  // recorded with the claims' release at the end
  std::vector<std::vector<Item>> batches(1);
  size_t messages = 0;
  for (const auto& id : ClaimEach(ob, item_ids)) {
    // Taken again under the claim: another deliverer may have moved the item since the look.
    auto item = ob.GetForDelivery(id);
    Outcome release;
    release.item_id = id;
    if (!item || item->state != kPending) {
      if (!item) spdlog::warn("delivery of {}: {}", id, item.error().ToString());
      outcomes.push_back(std::move(release));
      continue;
    }
    if (GateRefuses(*item)) {
      outcomes.push_back(Discard(*item));
      ++changed;
      continue;
    }
    const size_t n = item->messages.is_array() ? item->messages.size() : 0;
    if (!batches.back().empty() &&
        (batches.back().size() >= kMaxBatchItems || messages + n > kMaxBatchMessages)) {
      batches.emplace_back();
      messages = 0;
    }
    messages += n;
    batches.back().push_back(std::move(*item));
  }
  for (const auto& batch : batches) {
    if (batch.empty()) continue;
    for (auto& o : SubmitClaimed(batch)) {
      changed += Changes(o) ? 1 : 0;
      outcomes.push_back(std::move(o));
    }
  }
  RecordEach(ob, outcomes);
  return changed;
}

int DeliveryService::FinishGroup(Outbox& ob, const std::vector<std::string>& item_ids,
                                 std::map<std::string, Looked>& looked) {
  int changed = 0;
  std::vector<Outcome> outcomes;
  for (const auto& id : ClaimEach(ob, item_ids)) {
    // Moved since the look, unless its receipt's text is the one looked at (the same text is
    // the same receipt; an equal receipt stored in other text only waits for the next round).
    auto now = ob.StateAndReceipt(id);
    Looked& l = looked.at(id);
    if (!now || now->first != kSubmitted || now->second != l.receipt_text) {
      Outcome release;  // moved since the look: the next round sees it as it is now
      release.item_id = id;
      outcomes.push_back(std::move(release));
      continue;
    }
    if (l.decision.jobs_terminal) TMCRA_FAILPOINT("deliver.after_job_terminal_before_mark");
    changed += Changes(l.decision.outcome) ? 1 : 0;
    outcomes.push_back(std::move(l.decision.outcome));
  }
  RecordEach(ob, outcomes);
  return changed;
}

namespace {

// What one delivery round does with its items: the pending ones in groups to send, and the
// submitted ones whose jobs are to be polled.
struct RoundPlan {
  std::vector<std::vector<std::string>> sends;  // full groups, in the order they filled
  std::vector<Item> to_poll;
  std::vector<std::string> poll_texts;  // each one's receipt as stored, for FinishGroup
};

// Plans a round over `item_ids`; false when `stop` said so on the way.
bool PlanRound(Outbox& ob, const std::vector<std::string>& item_ids,
               const std::function<bool()>& stop, bool due_only, RoundPlan& round) {
  // Each item is looked at without its claim first: submitted items are set aside to have their
  // jobs polled (most of a backlog's are still running, and finding that out writes nothing),
  // pending items are grouped by scope and agent id. A group is claimed (each item on its own,
  // in one outbox transaction), sent and recorded in one go, so claims are held for one
  // request, never for a whole round, and other deliverers (a reconcile, a read_your_writes
  // commit, other processes) are kept waiting no longer than that.
  struct Group {
    std::vector<std::string> ids;
    size_t messages = 0;
  };
  std::map<std::pair<std::string, std::optional<std::string>>, Group> groups;
  for (const auto& id : item_ids) {
    if (stop()) return false;
    // Without the content: a pending item's is read under its claim (SubmitGroup), and polling
    // needs only the id, the receipt and the attempts.
    auto peek = ob.PeekForDelivery(id);
    if (!peek) {
      if (peek.error().code != Errc::kNotFound) {  // an unknown id is the caller's to report
        spdlog::warn("delivery of {}: {}", id, peek.error().ToString());
      }
      continue;
    }
    if (peek->state == kSubmitted) {
      Item item;
      item.item_id = id;
      item.state = peek->state;
      item.attempts = peek->attempts;
      item.receipt = std::move(peek->receipt);
      round.to_poll.push_back(std::move(item));
      round.poll_texts.push_back(std::move(peek->receipt_text));
      continue;
    }
    if (peek->state != kPending) continue;                           // finished
    if (due_only && peek->next_attempt_at > NowSeconds()) continue;  // backing off
    Group& group = groups[{peek->scope_name, peek->agent_id}];
    const size_t n = peek->message_count;
    if (!group.ids.empty() && group.messages + n > kMaxBatchMessages) {
      round.sends.push_back(std::move(group.ids));
      group = Group{};
    }
    group.ids.push_back(id);
    group.messages += n;
    if (group.ids.size() >= kMaxBatchItems) {
      round.sends.push_back(std::move(group.ids));
      group = Group{};
    }
  }
  for (auto& [key, group] : groups) {
    if (!group.ids.empty()) round.sends.push_back(std::move(group.ids));
  }
  return true;
}

// The threads that poll a round's jobs. On every way out of the round they are told to give
// up (`abandon`) and joined.
class PollerThreads {
 public:
  explicit PollerThreads(std::atomic<bool>& abandon) : abandon_(abandon) {}
  PollerThreads(const PollerThreads&) = delete;
  PollerThreads& operator=(const PollerThreads&) = delete;
  ~PollerThreads() {
    abandon_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Up to `count` threads running `work`; fewer when no more thread is to be had (the started
  // ones go on).
  void Start(size_t count, const std::function<void()>& work) {
    try {
      for (size_t w = 0; w < count; ++w) threads_.emplace_back(work);
    } catch (const std::system_error& e) {
      spdlog::warn("delivery: starting a job poller: {}", e.what());
    }
  }
  bool empty() const { return threads_.empty(); }

 private:
  std::atomic<bool>& abandon_;
  std::vector<std::thread> threads_;
};

}  // namespace

void DeliveryService::DecideChunk(const PollChunk& chunk, const std::vector<Item>& items,
                                  std::vector<std::optional<Decision>>& decisions) {
  // A call that throws leaves its jobs to be polled one by one; an item whose look throws is
  // looked at next round, and the others of its chunk go on.
  PolledJobs jobs;
  try {
    if (!chunk.job_ids.empty()) {
      std::vector<Result<json>> now = sender_.PollJobs(chunk.job_ids);
      for (size_t j = 0; j < chunk.job_ids.size() && j < now.size(); ++j) {
        jobs.emplace(chunk.job_ids[j], std::move(now[j]));
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("delivery: polling jobs: {}", e.what());
  }
  for (size_t i = chunk.begin; i < chunk.end; ++i) {
    try {
      // A job the call did not answer for is polled alone (PollOutcome).
      decisions[i] = PollOutcome(items[i], nullptr, &jobs);
    } catch (const std::exception& e) {
      spdlog::warn("delivery: polling the jobs of {}: {}", items[i].item_id, e.what());
    }
  }
}

Result<int> DeliveryService::DeliverBatch(const std::vector<std::string>& item_ids,
                                          const std::function<bool()>& cancelled, bool due_only) {
  auto opened = outbox();
  if (!opened) return opened.error();
  Outbox& ob = **opened;
  const auto stop = [&] { return stopping_.load() || (cancelled && cancelled()); };
  int changed = 0;
  RoundPlan round;
  if (!PlanRound(ob, item_ids, stop, due_only, round)) return changed;
  std::vector<Item>& to_poll = round.to_poll;
  std::vector<std::string>& poll_texts = round.poll_texts;

  // The submitted items' jobs are polled (reads only) on poll_parallelism threads while this
  // thread submits the pending groups: a remote memory answers each poll after a round trip,
  // and a backlog's rounds hold both kinds (Outbox::Due), so the polls and the batches overlap
  // instead of taking turns. The decisions are taken here in the items' order (between batches,
  // and as polls finish once the batches are sent) and recorded under claims by FinishGroup, a
  // hundred at a time. With one poll at a time (an in-process memory, which answers in
  // microseconds) they run here, first, checking for a cancel before each.
  const size_t n_poll = to_poll.size();
  const size_t parallel =
      std::min(static_cast<size_t>(std::max(1, options_.poll_parallelism)), n_poll);
  const std::vector<PollChunk> chunks = ChunkPolls(to_poll, parallel);
  std::vector<std::optional<Decision>> decisions(n_poll);
  std::unique_ptr<std::atomic<bool>[]> polled(new std::atomic<bool>[n_poll]);
  for (size_t i = 0; i < n_poll; ++i) polled[i].store(false, std::memory_order_relaxed);
  std::atomic<size_t> next_chunk{0};
  std::atomic<bool> abandon{false};  // stopping or cancelled: the rest waits for the next round
  std::mutex poll_mu;
  std::condition_variable poll_cv;  // a poll finished
  const auto poll_some = [&](const std::function<bool()>& halt) {
    for (;;) {
      const size_t c = next_chunk.fetch_add(1);
      if (c >= chunks.size()) return;
      const PollChunk& chunk = chunks[c];
      if (!halt()) DecideChunk(chunk, to_poll, decisions);
      for (size_t i = chunk.begin; i < chunk.end; ++i) {
        polled[i].store(true, std::memory_order_release);
      }
      { std::lock_guard lock(poll_mu); }  // so the wait below cannot miss this
      poll_cv.notify_all();
    }
  };
  // Declared before the guard below, which joins the pollers that use it.
  const auto halted = [&] { return stopping_.load() || abandon.load(); };
  PollerThreads pollers(abandon);
  if (parallel > 1) pollers.Start(parallel, [&] { poll_some(halted); });
  if (pollers.empty()) poll_some(stop);  // on this thread (`cancelled` is the caller's)
  if (stop()) return changed;

  std::vector<std::string> finishing;  // submitted items whose jobs finished
  std::map<std::string, Looked> looked;
  const auto finish = [&] {
    if (!finishing.empty()) changed += FinishGroup(ob, finishing, looked);
    finishing.clear();
    looked.clear();
  };
  size_t drained = 0;  // decisions taken, in order
  const auto take_polled = [&] {
    while (drained < n_poll && polled[drained].load(std::memory_order_acquire)) {
      if (auto& d = decisions[drained]) {  // else its jobs are still running
        const std::string id = to_poll[drained].item_id;
        looked.emplace(id, Looked{std::move(*d), std::move(poll_texts[drained])});
        finishing.push_back(id);
        if (finishing.size() >= kMaxBatchItems) finish();
      }
      ++drained;
    }
  };
  take_polled();
  for (const auto& ids : round.sends) {
    if (stop()) return changed;
    changed += SubmitGroup(ob, ids);
    take_polled();
  }
  while (drained < n_poll) {
    if (stop()) return changed;
    {
      std::unique_lock lock(poll_mu);
      poll_cv.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return polled[drained].load(std::memory_order_acquire); });
    }
    take_polled();
  }
  finish();
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
            wait =
                std::chrono::milliseconds(static_cast<int64_t>(std::clamp(in, 0.01, 2.0) * 1000));
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
