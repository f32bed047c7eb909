// Delivery of outbox items to memory, through the Sender interface (the outbox never sees HTTP).
//
// An item moves pending -> submitted -> succeeded | dead_letter:
//   - pending: the write gate (memory controls) is asked first; a refused item is discarded to
//     dead_letter with its content erased. Otherwise it is submitted with its stored
//     idempotency key. A retryable failure keeps it pending with exponential backoff and jitter
//     (never dead-lettered: an uncertain write is retried by key until it lands); a
//     non-retryable one (a 4xx, a receipt that fails validation) dead-letters it with the reason.
//   - submitted: its jobs are polled; when all are terminal it is succeeded (all succeeded) or
//     dead_letter (any failed or cancelled).
// One deliverer works on an item at a time (a per-item claim with expiry), so several processes
// sharing the outbox never submit the same item concurrently; if they ever did, the idempotency
// key would make the second submission a replay.
//
// DeliveryService also runs background delivery: one thread per process tries to hold the
// outbox's delivery lease; the holder delivers due items at startup, when kicked (an item was
// added) and on the backoff schedule; a holder that dies loses the lease when it expires.
//
// Background delivery and reconcile submit pending items in batches (DeliverBatch): items of one
// scope and agent id, at most kMaxBatchItems items and kMaxBatchMessages messages, one request
// (for the embedded memory, one transaction and one fsync) instead of one per item. Nothing else
// changes: each item is claimed on its own, keeps its own idempotency key and gets its own
// result; a batch refused as a whole is sent again item by item, so a bad item dead-letters
// alone; a retryable failure of the whole batch backs off every item of it. A round's submitted
// items have their jobs polled on poll_parallelism threads while its pending items are sent,
// up to kMaxJobsPerPoll jobs a call (Sender::PollJobs).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "queue/outbox.h"

namespace tmcra::queue {

// The limits of one batch (the Memory API's POST /v1/scopes/{scope}/ingest/batch).
inline constexpr size_t kMaxBatchItems = 100;
inline constexpr size_t kMaxBatchMessages = 5000;
// The most jobs background delivery asks about in one Sender::PollJobs call (one request of a
// memory that takes POST /v1/jobs/batch).
inline constexpr size_t kMaxJobsPerPoll = 100;

class Sender {
 public:
  virtual ~Sender() = default;
  // Submits the item's ingest with its stored key; returns the ingest receipt
  // ({jobs: [job receipt...], ...}).
  [[nodiscard]] virtual Result<json> Submit(const Item& item) = 0;
  // Submits several items of one scope and one agent id at once (within the limits above), each
  // with its own stored key. The answer holds one result per item, in order: its ingest receipt,
  // or its own error. An error for the whole call means no item is known to have been accepted:
  // a retryable one is retried later for every item; any other makes the caller submit the
  // items one by one (so one invalid item cannot fail the others). The default submits them one
  // by one.
  [[nodiscard]] virtual Result<std::vector<Result<json>>> SubmitBatch(
      const std::vector<Item>& items);
  // The current job receipt of a job ({status, ...}).
  [[nodiscard]] virtual Result<json> PollJob(const std::string& job_id) = 0;
  // The current job receipts of several distinct jobs (at most kMaxJobsPerPoll): one result per
  // id, in order, each what PollJob would give for it. The default asks PollJob for each.
  [[nodiscard]] virtual std::vector<Result<json>> PollJobs(const std::vector<std::string>& job_ids);
};

// What a failed submit or job poll does to the item. Errors come from the Sender with a code
// and a retryable flag (base/error.h); the queue knows nothing of HTTP.
enum class FailureAction {
  kRetry,         // retryable: pending (or submitted) again after backoff with jitter
  kHold,          // the content is fine but the connection is not (credentials, a redirect, TLS,
                  // a configuration change): kept, tried again after the longest backoff
  kToDeadLetter,  // the memory refused this content (invalid, conflicting, gone): kept for replay
};
// An answer that is not a valid receipt (Errc::kProtocol) is retried by key, since the write may
// have landed, up to this many attempts, then dead-lettered.
inline constexpr int64_t kMaxInvalidAnswers = 10;
FailureAction ClassifyFailure(const Error& error, int64_t attempts);

// May this item still be written? false discards it (the memory mode changed since capture).
using WriteGate = std::function<bool(const Item&)>;

struct DeliveryOptions {
  std::string path;   // the outbox file
  std::string owner;  // this process's claim and lease id
  double claim_seconds = 60;
  double lease_seconds = 10;
  double base_backoff_seconds = 0.5;
  double max_backoff_seconds = 300;
  std::chrono::milliseconds idle_poll{2000};
  // How many job polls a delivery round runs at once. 1 polls one after the other, before the
  // round's batches are sent (right for an in-process memory, which answers in microseconds); a
  // remote memory answers each poll after a round trip, so a few in flight, beside the round's
  // batches, keep both ends busy. The Sender must be thread-safe when this is above 1 (polls
  // then run beside each other and beside SubmitBatch).
  int poll_parallelism = 1;
  // How many jobs one Sender::PollJobs call of a round asks about, at most kMaxJobsPerPoll (a
  // round with fewer submitted items than that many per poller asks fewer at a time, so each
  // poller has some). 1 asks one job at a time, checking for a cancel before each (an
  // in-process memory gains nothing from asking several at once); a remote memory that takes
  // POST /v1/jobs/batch answers 100 jobs in one round trip.
  size_t jobs_per_poll = 1;
};

class DeliveryService {
 public:
  DeliveryService(DeliveryOptions options, Sender& sender, WriteGate gate);
  ~DeliveryService();
  DeliveryService(const DeliveryService&) = delete;
  DeliveryService& operator=(const DeliveryService&) = delete;

  // The outbox, opened on first use.
  [[nodiscard]] Result<Outbox*> outbox();

  // Works on one item now, on the calling thread. With `wait_terminal`, keeps polling its jobs
  // until they are terminal, `timeout` passes or `cancelled` says stop. Returns the item as it is
  // afterwards (still pending or submitted if it could not finish), read as for delivery: its
  // recall receipt reduced to {"_local_capture": ...} (Outbox::GetForDelivery).
  [[nodiscard]] Result<Item> DeliverItem(const std::string& item_id, bool wait_terminal,
                                         std::chrono::milliseconds timeout,
                                         const std::function<bool()>& cancelled = {});

  // Works once on each of `item_ids` that this process can claim: pending ones are submitted in
  // batches (with `due_only`, only those whose backoff has passed), submitted ones have their
  // jobs polled once (and are claimed only when a job finished). Never waits for jobs. Returns
  // how many items changed state; a failure on one item is logged and the others go on.
  [[nodiscard]] Result<int> DeliverBatch(const std::vector<std::string>& item_ids,
                                         const std::function<bool()>& cancelled = {},
                                         bool due_only = false);

  void Start();  // background delivery; idempotent
  void Kick();   // an item was added or is due: look now (starts the thread if needed)
  void Stop();   // finishes the current item, releases the lease
  bool holds_lease() const { return holds_lease_.load(); }
  const std::string& owner() const { return options_.owner; }

 private:
  void Loop();
  double Backoff(int64_t attempts);
  // One step on a claimed item; false when there is nothing more to do now. `changed` (if
  // given) is set when the item's state or receipt was written.
  Result<bool> Step(Outbox& outbox, const std::string& item_id, bool* changed = nullptr);

  // What polling a submitted item's jobs decided; `jobs_terminal` when every job finished.
  struct Decision {
    Outcome outcome;
    bool jobs_terminal = false;
  };
  // The outcome of a failed submit or poll, as ClassifyFailure decides.
  Outcome FailureOutcome(const Item& item, const Error& error);
  // The outcome of submitting a pending item (submitted, a retry with backoff, a dead letter).
  Outcome SubmitOutcome(const Item& item, const Result<json>& receipt);
  // The submitted items [begin, end) of a round whose unfinished jobs one PollJobs call asks
  // about (job_ids, distinct, at most jobs_per_poll; empty: polled one by one, or none to poll).
  struct PollChunk {
    size_t begin = 0;
    size_t end = 0;
    std::vector<std::string> job_ids;
  };
  // `items` in order, cut into chunks that leave each of `pollers` threads some work.
  std::vector<PollChunk> ChunkPolls(const std::vector<Item>& items, size_t pollers) const;
  // The jobs polled by one PollJobs call, by job id.
  using PolledJobs = std::map<std::string, Result<json>>;
  // Polls a submitted item's unfinished jobs (reads only), or takes them from `polled` when
  // given. Nothing while a job is still running (`progress`, if given, then gets the receipt
  // with the jobs as polled).
  std::optional<Decision> PollOutcome(const Item& item, json* progress,
                                      const PolledJobs* polled = nullptr);
  // Polls one chunk's jobs with one PollJobs call and sets decisions[i] for each of its
  // items[i] (left empty while a job runs, or when looking at the item threw).
  void DecideChunk(const PollChunk& chunk, const std::vector<Item>& items,
                   std::vector<std::optional<Decision>>& decisions);
  static Outcome Discard(const Item& item);  // refused by the write gate
  static bool Changes(const Outcome& outcome);
  // Records one outcome with the single outbox calls (the claim stays held).
  Status Apply(Outbox& outbox, const Outcome& outcome);

  // The per-item claim: in this process (so the background thread and a tool call never work
  // on one item together: they share the owner id) and in the outbox (other processes).
  Result<bool> ClaimItem(Outbox& outbox, const std::string& item_id);
  void ReleaseItem(Outbox& outbox, const std::string& item_id);
  // The same for several items (one outbox transaction); returns the ones now held.
  std::vector<std::string> ClaimEach(Outbox& outbox, const std::vector<std::string>& item_ids);
  // Records the outcomes and releases their claims (one outbox transaction).
  void RecordEach(Outbox& outbox, const std::vector<Outcome>& outcomes);
  // Sends one batch of claimed pending items (one by one if it is refused as a whole); the
  // outcome of each, in order.
  std::vector<Outcome> SubmitClaimed(const std::vector<Item>& items);
  // A submitted item as first looked at (without its claim) and what its jobs said then.
  struct Looked {
    Decision decision;
    std::string receipt_text;  // the receipt as stored then (Peek::receipt_text)
  };
  // Claims the items of one group, checks each again under its claim, sends the pending ones as
  // one batch and records every outcome (releasing the claims). Returns how many changed.
  int SubmitGroup(Outbox& outbox, const std::vector<std::string>& item_ids);
  // The same for submitted items whose jobs finished: records the outcome looked up before if
  // the item is still as it was then.
  int FinishGroup(Outbox& outbox, const std::vector<std::string>& item_ids,
                  std::map<std::string, Looked>& looked);

  DeliveryOptions options_;
  Sender& sender_;
  WriteGate gate_;
  // Whether the write gate refuses a pending item (it is then discarded, never sent).
  bool GateRefuses(const Item& item) const { return gate_ && !gate_(item); }

  std::mutex open_mu_;
  std::unique_ptr<Outbox> outbox_;

  std::mutex claims_mu_;
  std::set<std::string> claimed_;  // items this process is working on; guarded by claims_mu_

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool kicked_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> holds_lease_{false};
  std::thread thread_;
};

// True when every job of an ingest receipt has a terminal status.
bool AllJobsTerminal(const json& ingest_receipt);

}  // namespace tmcra::queue
