// The memory engine: the server side of the Memory API over one SQLite file.
//
// It speaks exactly the Memory API's JSON shapes (tmcra-contract.md §1.4), so tmcra-mcp can run
// it in-process (EmbeddedMemoryApi) and tmcra-memd can serve it over HTTPS unchanged:
//   Ingest  POST /v1/scopes/{scope}/ingest   -> 202 JobView
//   GetJob  GET  /v1/jobs/{job_id}           -> 200 JobView
//   Recall  POST /v1/scopes/{scope}/recall   -> 200 RecallResponse
//   Evidence GET /v1/scopes/{scope}/memory-graph/nodes/{memory_id}/evidence -> 200
//   Feedback POST /v1/scopes/{scope}/feedback -> 201 FeedbackView
// Errors carry the service's error kind and code (Error::Api), e.g. kInvalidArgument
// validation_error with the field path, kConflict idempotency_conflict, kNotFound not_found.
//
// Jobs: Ingest validates, stores the normalised payload as a `pending` job and returns. A worker
// thread claims jobs with a lease (pending -> running), writes the records and their indexes and
// marks the job succeeded with result.watermarks.source_event_seq, all in one transaction. A job
// whose lease expired (its process died) is claimed again by any process sharing the file.
//
// Concurrency: one Engine per process; several processes may share the file (WAL, busy timeout,
// BEGIN IMMEDIATE for every write). Methods are thread-safe. Writes take turns on one
// connection; Recall and GetJob borrow a read connection from a small pool and run in parallel.
#pragma once

#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"
#include "filter/content_filter.h"
#include "memory/bm25.h"
#include "memory/compaction.h"

namespace tmcra::memory {

using json = nlohmann::json;

struct EngineOptions {
  std::string path;  // the SQLite file
  std::string tenant_id = "local";
  std::string public_base_url = "embedded://local";  // prefix of status_url
  double lease_seconds = 30.0;                       // a running job's lease
  int idle_poll_ms = 1000;                           // how often an idle worker looks for work
  // The worker compacts the full-text indexes (memory/compaction.h) once no job has run for
  // this long.
  int compaction_quiet_ms = 500;
  int compaction_step_pages = kPagesPerStep;  // leaf pages merged per step (one transaction)
  bool start_worker = true;                   // false: jobs run only via RunPendingJobs
  // Recall and GetJob read on their own connections, opened when calls overlap, up to this
  // many, so reads run in parallel with each other and with writes (WAL snapshots).
  int read_connections = 4;
  // Recall's connections read the file through a memory map of up to this many bytes (0: no
  // map, each reads into its own page cache). tmcra-memd maps (docs/memd.md, "Memory").
  int64_t reader_mmap_bytes = 0;
  // Recall remembers the word index's postings of the words it searches, up to this many bytes
  // in all (PostingsCache, memory/bm25.h; 0: none, each recall walks its words' doclists).
  // tmcra-memd keeps them.
  size_t postings_cache_bytes = 0;
  // Read every record's length and scope for recall ranking (memory/bm25.h) while opening,
  // instead of in the first recall: about 25 ms per 100k records. tmcra-memd does.
  bool warm_recall = false;
  // Without warm_recall, a recall whose copy of the row facts lacks more records than this
  // (a new process on a large store: all of them) does not read them first: it ranks in SQL
  // (the same answers; about 2 ms slower on 100k records, against 25 ms for reading them), and
  // the worker reads them once the process has been idle for compaction_quiet_ms; a later
  // recall that finds them still unread reads them itself. A hook is a process per event
  // that recalls once: it never pays for the copy.
  int64_t row_facts_lazy_rows = 4096;
  // The worker truncates the write-ahead log once its file passes this many bytes (Engine::
  // BoundWal): readers that always overlap keep SQLite's own checkpoints from ever resetting it.
  int64_t wal_limit_bytes = 32 << 20;
  // The content filter (filter/content_filter.h) every stored text goes through: message
  // contents of ingests (after the idempotency hash, which is taken on the body as received, so
  // a change of these rules never turns a client's retry into a conflict) and feedback texts.
  filter::FilterRules filter_rules;
};

// The attribution an ingest carries in headers.
struct IngestContext {
  std::string idempotency_key;                // required, 8..200 characters
  std::optional<std::string> agent_id;        // X-TMCRA-Agent-ID
  std::string client_platform = "mcp";        // X-TMCRA-Client-Platform
  std::optional<std::string> integration_id;  // X-TMCRA-Integration-ID
};

struct EngineStats {
  int64_t records = 0;
  int64_t scopes = 0;
  int64_t jobs_pending = 0;  // pending or running
  int64_t jobs_failed = 0;
  int64_t file_bytes = 0;  // the database file plus its WAL
  // Records the CJK index's back-fill has still to look at (Engine::RepairCjkIndex): after the
  // schema migration, until the worker has been through the stored records.
  int64_t cjk_index_backlog = 0;
  std::optional<PostingsCache::Stats> postings_cache;  // when the engine keeps postings
  json ToJson() const;
};

class Engine {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Engine>> Open(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] Result<json> Ingest(std::string_view scope, const json& body,
                                    const IngestContext& context);
  // POST /v1/scopes/{scope}/ingest/batch -> 202 {scope_name, jobs: [JobView...]}: body
  // {"items": [{...ingest request..., "idempotency_key"}]}, 1..100 items with unique keys and
  // at most 5000 messages in total, all stored in one transaction. Errors name the item
  // ("items.3.messages.0.role: ...").
  [[nodiscard]] Result<json> IngestBatch(std::string_view scope, const json& body,
                                         const IngestContext& context);
  [[nodiscard]] Result<json> GetJob(std::string_view job_id);
  [[nodiscard]] Result<json> Recall(std::string_view scope, const json& body);

  // GET /v1/scopes/{scope}/memory-graph/nodes/{memory_id}/evidence?limit=N (1..25) -> 200
  // MemoryGraphEvidenceResponse (tmcra-contract.md §1.4.4): the exact stored text of a record
  // (`rec_...`), or of the records a feedback (`fb_...`) targeted. 404 not_found for an id that
  // is unknown or belongs to another scope. Feedback effects do not apply here: a hidden record's
  // source stays readable (for audit and for restore previews). Defined in feedback.cc.
  [[nodiscard]] Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                                      int limit);
  // POST /v1/scopes/{scope}/feedback -> 201 FeedbackView (§1.4.5). Strict FeedbackRequest
  // validation (422), targets resolved in the scope (404), idempotent by key (a replay returns
  // the same feedback; another body under the key is 409 idempotency_conflict). ignore/correct/
  // restore change what Recall shows; `correct` also ingests the replacement as a user message
  // in session `correction-<feedback_id>`, in the same transaction. Defined in feedback.cc.
  [[nodiscard]] Result<json> Feedback(std::string_view scope, const json& body,
                                      std::string_view idempotency_key);
  [[nodiscard]] Result<EngineStats> Stats();
  // Whether the store serves (tmcra-memd's /readyz): it answers a read and, while the last
  // write failed for want of room (Errc::kStorageFull), a small write too. Any write that
  // succeeds clears that mark; until then this is the StorageFull error.
  [[nodiscard]] Status Ready();

  // Runs claimable jobs on the calling thread until none is left, then the CJK index's
  // back-fill (RepairCjkIndex) to its end; returns how many jobs ran.
  [[nodiscard]] Result<int> RunPendingJobs();
  // Compacts the full-text indexes on the calling thread as far as the worker would
  // (memory/compaction.h); returns how many steps ran. The worker does this by itself when it
  // has no job; this is for engines without a worker (tests, benchmarks).
  [[nodiscard]] Result<int> CompactIndexes();

  // For tests: claims one job as if by a process that then died (the lease stays held).
  [[nodiscard]] Result<std::optional<std::string>> ClaimJobForTest(double lease_seconds);

 private:
  explicit Engine(EngineOptions options);

  struct PreparedIngest;  // a validated ingest with its key and payload hash
  // Validates an ingest and hashes it as received; what is stored is its filtered form.
  Result<PreparedIngest> PrepareIngest(std::string_view scope, const json& body,
                                       const std::string& key, const IngestContext& context);
  // The payload with each message's content filtered; messages left empty are dropped.
  json FilteredPayload(json payload) const;
  // Stores one validated ingest inside the caller's transaction; replays a known key.
  Result<json> StoreIngest(db::Database& db, std::string_view scope, const PreparedIngest& prepared,
                           bool* created);
  // Validates and stores one ingest inside the caller's transaction (a correction's
  // replacement, written with its feedback); the caller signals the worker when `created`.
  Result<json> IngestInTransaction(db::Database& db, std::string_view scope, const json& body,
                                   const IngestContext& context, bool* created);
  void SignalWorker();
  // Claims up to `max_jobs` jobs and runs them in one transaction on `db`; returns how many
  // were claimed (0: nothing to do). Jobs whose writing failed go back to pending, their
  // attempt not counted (ReleaseOrphanedClaims, at the next call).
  Result<int> RunJobs(db::Database& db, int max_jobs);
  Result<int> ClaimJobs(db::Database& db, int max_jobs, std::vector<std::string>& claimed);
  Result<int> WriteClaimedJobs(db::Database& db, const std::vector<std::string>& claimed);
  Status ReleaseOrphanedClaims(db::Database& db);
  // The public writes without the write-health mark (NoteWrite).
  Result<json> IngestNow(std::string_view scope, const json& body, const IngestContext& context);
  Result<json> IngestBatchNow(std::string_view scope, const json& body,
                              const IngestContext& context);
  Result<json> FeedbackNow(std::string_view scope, const json& body,
                           std::string_view idempotency_key);
  // A write's outcome: a failure for want of room marks the store as not writing; a success
  // clears the mark.
  template <class T>
  Result<T> Noted(Result<T> outcome) {
    if (outcome) {
      writes_failing_.store(false);
    } else if (outcome.error().code == Errc::kStorageFull) {
      writes_failing_.store(true);
    }
    return outcome;
  }
  Status ProbeWrite();
  // Adds to the CJK index a batch of the records above its watermark that have CJK text and no
  // row in it (the records stored before schema 3, or written by an earlier build sharing the
  // file), and moves the watermark past them; true when more are left.
  Result<bool> RepairCjkIndex(db::Database& db);
  // One compaction step on `db` for the first index that needs one; false when none does.
  // Without `force`, the indexes are only looked at when a job has run since they were last
  // found compact.
  Result<bool> CompactOnce(db::Database& db, bool force);
  void WorkerLoop();
  // The job worker's steps (engine.cc): its timers, opening its connection, bounding the WAL,
  // the CJK back-fill, and what it does when no job is left (row facts, compaction).
  struct WorkerSchedule;
  bool OpenWorkerDb();
  void BoundWalWhenDue(WorkerSchedule& schedule);
  void RepairCjkWhenDue(WorkerSchedule& schedule, bool& more);
  void WorkWhileIdle(WorkerSchedule& schedule, bool& more, std::chrono::milliseconds& wait);
  // Truncates the WAL when its file is past wal_limit_bytes; true when it is past it and
  // readers kept it from being truncated (the worker tries again later, backing off).
  bool BoundWal(db::Database& db);

  EngineOptions options_;
  std::string owner_;  // lease owner id of this process

  // Each record's length and scope, shared by every connection's tmcra_bm25 (memory/bm25.h);
  // declared before the connections so that it outlives them.
  std::unique_ptr<RowFacts> row_facts_;
  std::unique_ptr<WordCounts> word_counts_;  // the word index's document counts, per word
  std::unique_ptr<PostingsCache> postings_;  // the word index's postings, or null
  std::unique_ptr<WordCounts> cjk_counts_;   // the CJK index's, per bigram and lone prefix
  filter::ContentFilter filter_;

  std::mutex api_mu_;
  std::unique_ptr<db::Database> api_db_;  // guarded by api_mu_; opened by the first write
  // The write connection, opened (with api_mu_ held) on first use: the spare, or a new one.
  [[nodiscard]] Result<db::Database*> ApiDb();
  // The connection Open migrated the store with, until the first write (ApiDb) or the first
  // read (BorrowReader) takes it: a process that only recalls, or only writes, opens the file
  // once.
  std::mutex spare_mu_;
  std::unique_ptr<db::Database> spare_db_;  // guarded by spare_mu_
  [[nodiscard]] std::unique_ptr<db::Database> TakeSpare();
  // Whether this recall, of a snapshot whose newest record is `highest`, reads the records the
  // row facts lack first (EngineOptions::row_facts_lazy_rows).
  bool CatchUpFactsNow(int64_t highest);
  std::atomic<bool> facts_wanted_{false};    // a recall ranked in SQL: the worker reads them
  std::atomic<bool> facts_deferred_{false};  // CatchUpFactsNow has said no once

  // A read connection borrowed from the pool, given back when destroyed.
  class ReadLease {
   public:
    ReadLease(Engine* engine, std::unique_ptr<db::Database> db)
        : engine_(engine), db_(std::move(db)) {}
    ReadLease(ReadLease&& other) noexcept = default;
    ReadLease& operator=(ReadLease&&) = delete;
    ReadLease(const ReadLease&) = delete;
    ReadLease& operator=(const ReadLease&) = delete;
    ~ReadLease();
    db::Database& db() { return *db_; }

   private:
    Engine* engine_;
    std::unique_ptr<db::Database> db_;
  };
  [[nodiscard]] Result<ReadLease> BorrowReader();
  Result<std::unique_ptr<db::Database>> OpenReader();
  // What a connection needs to serve recalls (OpenReader's settings, on an open connection).
  [[nodiscard]] Status PrepareReader(db::Database& db);
  // One permit per read connection (open or not yet opened). A semaphore rather than a
  // condition variable: with many request threads waiting, glibc's condvar signal blocked the
  // returning thread on the condvar's own lock, a context switch per recall. POSIX's, not
  // std::counting_semaphore: libstdc++ 12's can lose a wake-up (a waiter that lost the permit it
  // saw sleeps on a stale count while permits are free; GCC PR 104928).
  class Permits {
   public:
    explicit Permits(unsigned count) { sem_init(&sem_, 0, count); }
    ~Permits() { sem_destroy(&sem_); }
    Permits(const Permits&) = delete;
    Permits& operator=(const Permits&) = delete;
    void Acquire() {
      while (sem_wait(&sem_) != 0) {
      }  // EINTR: wait again
    }
    void Release() { sem_post(&sem_); }

   private:
    sem_t sem_;
  };
  std::unique_ptr<Permits> reader_permits_;
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<db::Database>> idle_readers_;  // guarded by readers_mu_

  std::mutex worker_mu_;
  std::condition_variable worker_cv_;
  bool work_signalled_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> writes_failing_{false};  // the last write failed for want of room
  std::mutex orphans_mu_;
  std::vector<std::string> orphaned_claims_;  // guarded by orphans_mu_ (RunJobs)
  std::unique_ptr<db::Database> worker_db_;
  std::thread worker_;

  // Compaction (memory/compaction.h): how many job transactions this process has committed,
  // and the count when the indexes were last found compact (so an engine that starts looks
  // once). A compaction under way is read from the index's structure record at each step.
  std::atomic<uint64_t> index_writes_{1};
  std::mutex compaction_mu_;
  uint64_t compact_as_of_ = 0;  // guarded by compaction_mu_
  bool levels_warned_ = false;  // guarded by compaction_mu_
};

}  // namespace tmcra::memory
