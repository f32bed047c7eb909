// The outbox: every write to memory is first a row in a local SQLite file, committed before the
// host is told anything, and delivered from there. A write whose outcome is uncertain stays in
// the outbox and is reconciled later by its idempotency key; nothing acknowledged is lost or
// written twice.
//
// Tables and state strings are TMCRA's (docs/contract.md §3.2), so a database written by
// TMCRA's Python client opens here; we add columns (next_attempt_at, claim_owner,
// claim_expires_at) and a delivery_lease table. queue/README.md has the schema and the state
// machine.
//
// The outbox knows nothing of HTTP or MCP: items are JSON, delivery goes through the Sender
// interface of delivery.h.
//
// Thread-safe (one connection behind a mutex); several processes may share the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"

namespace tmcra::queue {

using json = nlohmann::json;

inline constexpr const char* kPending = "pending";
inline constexpr const char* kSubmitted = "submitted";
inline constexpr const char* kSucceeded = "succeeded";
inline constexpr const char* kDeadLetter = "dead_letter";

struct Item {
  std::string item_id;
  std::string scope_name;
  std::string session_id;
  json messages = json::array();  // wire messages
  std::string consistency;
  std::string slow_policy;
  std::string idempotency_key;
  json metadata = json::object();  // request metadata
  std::optional<std::string> agent_id;
  json recall_receipt;  // null, or {"_local_capture": ...} / a prepared recall
  std::string state;
  int64_t attempts = 0;
  json receipt;  // the ingest receipt once submitted, else null
  std::optional<std::string> last_error;
  std::string created_at;
  std::string updated_at;
  double next_attempt_at = 0;  // epoch seconds; 0: due now
};

// What a delivery round looks at first, without a claim: enough to put a pending item into a
// batch and to poll a submitted item's jobs, without reading its content.
struct Peek {
  std::string item_id;
  std::string state;
  std::string scope_name;
  std::optional<std::string> agent_id;
  int64_t attempts = 0;
  double next_attempt_at = 0;
  size_t message_count = 0;  // pending: its messages (0 when not a JSON array); else 0
  json receipt;              // submitted: the stored ingest receipt; else null
  std::string receipt_text;  // submitted: that receipt's text as stored; else empty
};

struct PreparedTurn {
  std::string turn_id;
  std::string scope_name;
  std::string session_id;
  std::string user_message_id;
  std::string user_content;
  std::string user_timestamp;
  // The full prepared recall receipt; once the turn's write has succeeded, only
  // {"pruned": true, "query_id"} (the injected memory is not kept in the outbox).
  json recall_receipt;
  std::string state;  // prepared | committed
  std::optional<std::string> item_id;
};

// A host session's prepared turns: how many, and the newest one's id.
struct SessionTurns {
  int64_t count = 0;
  std::optional<std::string> latest_turn_id;
};

struct CommitRequest {
  std::string turn_id;
  json messages;  // the wire messages [user, assistant]
  std::string consistency;
  std::string slow_policy;
  std::string idempotency_key;
  json metadata;
  std::optional<std::string> agent_id;
};

// What a delivery step decided for one claimed item, for Outbox::RecordEach.
struct Outcome {
  enum class Kind {
    kReleaseOnly,     // nothing to record: only the claim is released
    kMarkSubmitted,   // MarkSubmitted(receipt)
    kMarkSucceeded,   // MarkSucceeded(receipt)
    kMarkDeadLetter,  // MarkDeadLetter(error, receipt (null keeps the stored one), erase_content)
    kRetryLater,      // RecordFailure(error, next_attempt_at)
  };
  std::string item_id;
  Kind kind = Kind::kReleaseOnly;
  json receipt;
  std::string error;
  double next_attempt_at = 0;
  bool erase_content = false;
};

struct Counts {
  int64_t pending = 0;
  int64_t submitted = 0;
  int64_t succeeded = 0;
  int64_t dead_letter = 0;
  std::optional<double> oldest_pending_seconds;  // age of the oldest pending/submitted item
  std::optional<std::string> last_error;         // of the most recently failed item
  json ToJson() const;
  // The four state counts alone: {"pending", "submitted", "succeeded", "dead_letter"}.
  json StatesJson() const;
};

// What Outbox::Forget removes: the items and prepared turns of one scope that every given
// selector matches (`match` is an exact phrase of a message or the prompt; `before` compares
// creation times, epoch seconds), and from the remaining rows every recall receipt quoting the
// phrase. At least one selector, or `all`.
struct ForgetSelection {
  std::string scope;
  std::optional<std::string> session_id;
  std::optional<std::string> turn_id;
  std::optional<double> before;
  std::optional<std::string> match;
  bool all = false;
  bool dry_run = false;
};

struct ForgetCounts {
  int64_t items = 0;           // outbox items deleted
  int64_t pending_items = 0;   // of them, not yet delivered (they never will be)
  int64_t turns = 0;           // prepared turns deleted
  int64_t receipts = 0;        // recall receipts of other rows cleared
  int64_t notes = 0;           // status notes (the last recall) deleted
  std::string erase = "none";  // "done", "pending" (another process reads the file) or "none"
  json ToJson() const;
};

// One scope's items still to deliver (pending or submitted) and dead letters.
struct ScopeCounts {
  int64_t pending = 0;
  int64_t dead_letter = 0;
};

// A turn as the outbox knows it: its scope, session and the ids of its messages.
struct TurnMessages {
  std::string scope;
  std::string session_id;
  std::vector<std::string> message_ids;
};

class Outbox {
 public:
  // Creates the file (0600, in a 0700 directory) or opens and upgrades an existing one.
  [[nodiscard]] static Result<std::unique_ptr<Outbox>> Open(const std::string& path);

  // A new pending item (§3.4 enqueue): the same key with the same scope, session and messages
  // returns the existing item; the same key with other content is kConflict. The row is
  // committed when this returns.
  [[nodiscard]] Result<std::string> Enqueue(const Item& item);

  [[nodiscard]] Result<std::optional<PreparedTurn>> GetTurn(const std::string& turn_id);
  // Stores a prepared turn; kConflict if the id is bound to a different user turn.
  [[nodiscard]] Status PrepareTurn(const PreparedTurn& turn);
  // The turns prepared in `session_id` (its host session): their count and the newest, and
  // all of them in the order they were prepared (turn_id, user_content and state only).
  [[nodiscard]] Result<SessionTurns> GetSessionTurns(const std::string& session_id);
  [[nodiscard]] Result<std::vector<PreparedTurn>> ListSessionTurns(const std::string& session_id);
  // The newest `limit` committed turns of a scope, newest first (turn_id, session_id,
  // user_content, user_timestamp): what this machine's hooks stored there lately.
  [[nodiscard]] Result<std::vector<PreparedTurn>> RecentTurns(const std::string& scope_name,
                                                              int limit);
  // Whether a committed turn of `scope_name` has this (filtered) prompt, in any session.
  [[nodiscard]] Result<bool> HasCommittedPrompt(const std::string& scope_name,
                                                const std::string& user_content);
  // The recalled memory already given to a host session's model, by key (a memory id or a
  // SHA-256, never the text), so a later prompt of the session is not given it again; and marks
  // ("skip:<sha256>") of prompts deliberately not stored. ForgetInjectedBlocks forgets the
  // given memory (the session's context was compacted away) and keeps the marks.
  [[nodiscard]] Result<std::set<std::string>> InjectedBlocks(const std::string& session_id);
  [[nodiscard]] Status AddInjectedBlocks(const std::string& session_id,
                                         const std::vector<std::string>& hashes);
  [[nodiscard]] Status ForgetInjectedBlocks(const std::string& session_id);
  // Small named facts for status displays (what the last prompt was given), not durable
  // across a power failure. GetNote answers null for a name never put.
  [[nodiscard]] Status PutNote(const std::string& name, const json& value);
  [[nodiscard]] Result<json> GetNote(const std::string& name);
  // Atomically (BEGIN IMMEDIATE, rolled back on every error): a pending item for the turn's
  // messages and the turn marked committed. kNotFound for an unknown turn; kConflict when the
  // key is bound elsewhere. One turn has one answer: a turn already committed returns its item
  // id and changes nothing when the request carries the same messages (ids, roles and text,
  // in order; timestamps, metadata and the key may differ), or when the item's content was
  // discarded; any other answer is kConflict (not retryable) naming the turn and both
  // assistant message ids, whether the item is pending, delivered or dead-lettered.
  [[nodiscard]] Result<std::string> CommitTurn(const CommitRequest& request);

  [[nodiscard]] Result<Item> Get(const std::string& item_id);
  // The item as delivery needs it: everything but the recall receipt, which is reduced to
  // {"_local_capture": ...} (the write gate's input), or null when it holds none. A prepared
  // recall is tens of kB that delivery never sends.
  [[nodiscard]] Result<Item> GetForDelivery(const std::string& item_id);
  // The item's Peek (kNotFound when there is none).
  [[nodiscard]] Result<Peek> PeekForDelivery(const std::string& item_id);
  // The item's state and its stored receipt's text ("" when it has none): under a claim, whether
  // it is still as a Peek saw it.
  [[nodiscard]] Result<std::pair<std::string, std::string>> StateAndReceipt(
      const std::string& item_id);
  [[nodiscard]] Result<Counts> GetCounts();
  // Items to work on now: submitted ones (their jobs to poll), oldest first, at most `limit`;
  // then pending ones whose next attempt is due, oldest first, at most `limit`.
  [[nodiscard]] Result<std::vector<std::string>> Due(int limit);
  // The earliest next_attempt_at of a pending item, if any.
  [[nodiscard]] Result<std::optional<double>> NextDue();
  // Every item in the given states, oldest first (for reconcile).
  [[nodiscard]] Result<std::vector<std::string>> InStates(const std::vector<std::string>& states,
                                                          int limit);

  // Per-item claim: only the holder works on the item until the claim expires, or until its
  // process is gone (owners are "pid-<pid>-<random>").
  [[nodiscard]] Result<bool> Claim(const std::string& item_id, const std::string& owner,
                                   double seconds);
  [[nodiscard]] Status Release(const std::string& item_id, const std::string& owner);
  // Claim for each of several items, in one transaction: each item is claimed on its own terms,
  // exactly as by Claim (true where `owner` now holds it; false for unknown ids).
  [[nodiscard]] Result<std::vector<bool>> ClaimEach(const std::vector<std::string>& item_ids,
                                                    const std::string& owner, double seconds);
  // Records each outcome and releases each item's claim by `owner`, in one transaction (with the
  // durability of the single calls: these are progress marks, replayed by key if lost). All or
  // nothing: on an error none is recorded.
  [[nodiscard]] Status RecordEach(const std::vector<Outcome>& outcomes, const std::string& owner);

  [[nodiscard]] Status MarkSubmitted(const std::string& item_id, const json& receipt);
  [[nodiscard]] Status MarkSucceeded(const std::string& item_id, const json& receipt);
  // Terminal failure; the content is kept (it can be replayed) unless `erase_content`.
  [[nodiscard]] Status MarkDeadLetter(const std::string& item_id, const std::string& reason,
                                      const json& receipt, bool erase_content = false);
  // A failed attempt that will be retried at `next_attempt_at` (epoch seconds).
  [[nodiscard]] Status RecordFailure(const std::string& item_id, const std::string& error,
                                     double next_attempt_at);
  // dead_letter -> pending, attempts reset, due now. kConflict for items in other states or with
  // erased content.
  [[nodiscard]] Status Replay(const std::string& item_id);

  // One process at a time runs background delivery: the holder renews the lease; a holder whose
  // process is gone loses it at once, any other when it expires.
  [[nodiscard]] Result<bool> AcquireDeliveryLease(const std::string& holder, double seconds);
  [[nodiscard]] Status ReleaseDeliveryLease(const std::string& holder);
  // {holder, pid, expires_in_seconds} or null.
  [[nodiscard]] Result<json> DeliveryLeaseHolder();

  // Deletes what `selection` names and erases the freed bytes (secure_delete, VACUUM and a
  // truncating checkpoint of the write-ahead log); the dry run only counts. queue/README.md,
  // "Forget".
  [[nodiscard]] Result<ForgetCounts> Forget(const ForgetSelection& selection);
  // The turn's scope, session and message ids (the user's and, once committed, the answer's);
  // kNotFound for a turn this outbox never prepared.
  [[nodiscard]] Result<TurnMessages> TurnMessageIds(const std::string& turn_id);
  // Retention: deletes delivered items and committed turns created before `before` (epoch
  // seconds); pending, submitted and dead-lettered items stay. Returns how many rows went.
  [[nodiscard]] Result<int64_t> DropDeliveredBefore(double before);
  // Gives the file's free pages back and empties the write-ahead log (VACUUM, then a truncating
  // checkpoint); "done", or "pending" when another process's reader held the checkpoint back.
  [[nodiscard]] Result<std::string> Compact();
  // Each scope's ScopeCounts, by scope name (scopes without items are absent).
  [[nodiscard]] Result<std::map<std::string, ScopeCounts>> CountsByScope();
  // The outbox's files' bytes (the database and its write-ahead log).
  int64_t FileBytes() const;
  // The bytes of the pages in use, wherever they are (the file or its write-ahead log).
  [[nodiscard]] Result<int64_t> LiveBytes();

  // PRAGMA integrity_check == "ok".
  [[nodiscard]] Result<bool> IntegrityOk();

 private:
  explicit Outbox(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}
  Result<Item> GetLocked(const std::string& item_id);
  Status SetState(const std::string& item_id, const char* state, const json* receipt,
                  const std::optional<std::string>& error, bool count_attempt,
                  double next_attempt_at, bool erase_content);
  // The single operations' bodies, for a caller that holds mu_ (and, for Claim, a write
  // transaction).
  Result<bool> ClaimLocked(const std::string& item_id, const std::string& owner, double seconds);
  Status ReleaseLocked(const std::string& item_id, const std::string& owner);
  Status SetStateLocked(const std::string& item_id, const char* state, const json* receipt,
                        const std::optional<std::string>& error, bool count_attempt,
                        double next_attempt_at, bool erase_content);
  Status RecordFailureLocked(const std::string& item_id, const std::string& error,
                             double next_attempt_at);
  // A stored item's turn no longer needs the memory its recall injected: the recall receipt
  // (the item's copy and its prepared turn's) keeps only {"pruned": true, "query_id"}.
  Status PruneRecallLocked(const std::string& item_id);

  std::mutex mu_;
  std::unique_ptr<db::Database> db_;  // guarded by mu_
};

// Python's datetime.now(timezone.utc).isoformat(): "2026-11-30T01:02:03.456789+00:00".
std::string NowIsoformat();

}  // namespace tmcra::queue
