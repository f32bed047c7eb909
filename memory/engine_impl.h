// The memory engine's implementation behind memory/engine.h's Engine: the write connection,
// the pool of read connections and its permits, the job worker and its schedule, the ranking
// caches (memory/bm25.h) and the compaction state. Included only by the engine's own .cc files
// (engine.cc, recall.cc, feedback.cc, admin.cc); everything above the engine sees engine.h alone.
#pragma once

#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"
#include "filter/content_filter.h"
#include "memory/bm25.h"
#include "memory/engine.h"
#include "memory/shared_store.h"
#include "memory/stems.h"
#include "memory/vectors.h"

namespace tmcra::memory {

// A record's id: "rec_" and 32 hex digits of the SHA-256 of its scope, session and message ids,
// so every store that holds the record (a SQLite store, each index of a shared store) names it
// alike. Unique, as (scope, session, message) is.
std::string RecordIdOf(std::string_view scope, std::string_view session_id,
                       std::string_view message_id);
// A succeeded ingest job's result: its newest record's event_seq and how many of its messages
// were new and stored before.
json JobResultJson(int64_t max_seq, int64_t written, int64_t duplicates);

// Whether canonical JSON text holds U+0000 (escaped), which PostgreSQL text cannot.
bool CanonicalJsonHoldsNul(std::string_view text);

struct FeedbackRequest;  // a validated feedback request (feedback.cc)

class EngineImpl {
 public:
  [[nodiscard]] static Result<std::unique_ptr<EngineImpl>> Open(EngineOptions options);
  ~EngineImpl();
  EngineImpl(const EngineImpl&) = delete;
  EngineImpl& operator=(const EngineImpl&) = delete;

  // Engine's calls; engine.h states their contracts. Evidence and Feedback are defined in
  // feedback.cc, Recall in recall.cc, the maintenance calls (ScopeStats to Import) in admin.cc,
  // the rest in engine.cc.
  [[nodiscard]] Result<json> Ingest(std::string_view scope, const json& body,
                                    const IngestContext& context);
  [[nodiscard]] Result<json> IngestBatch(std::string_view scope, const json& body,
                                         const IngestContext& context);
  [[nodiscard]] Result<json> GetJob(std::string_view job_id);
  [[nodiscard]] Result<json> Recall(std::string_view scope, const json& body);
  [[nodiscard]] Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                                      int limit);
  [[nodiscard]] Result<json> Feedback(std::string_view scope, const json& body,
                                      std::string_view idempotency_key);
  [[nodiscard]] Result<EngineStats> Stats();
  [[nodiscard]] Status Ready();
  [[nodiscard]] Result<json> ScopeStats();
  [[nodiscard]] Result<json> Forget(std::string_view scope, const json& body);
  [[nodiscard]] Result<json> ForgetOldest(int64_t bytes);
  [[nodiscard]] Result<json> Erase();
  [[nodiscard]] Status Export(std::string_view scope,
                              const std::function<Status(const json& line)>& sink);
  [[nodiscard]] Result<json> Import(std::string_view scope, const json& lines);
  [[nodiscard]] Result<int> RunPendingJobs();
  [[nodiscard]] Result<int> CompactIndexes();
  [[nodiscard]] Result<std::optional<std::string>> ClaimJobForTest(double lease_seconds);

 private:
  explicit EngineImpl(EngineOptions options);

  // A validated ingest: its key, the hash of the body as received, the payload as stored.
  struct PreparedIngest {
    std::string key;
    std::string payload_sha;
    std::string payload_text;
    std::string consistency;
  };
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
  // Forget's steps (admin.cc): what one forget deleted, the transaction that runs a selection
  // while no recall runs, the ranking caches cleared after it, an imported record, and the
  // worker's retry of an erase another process held back.
  struct ForgetPlan {
    json preview = json::array();
    int64_t records = 0;
    int64_t feedback = 0;
    int64_t jobs = 0;
  };
  // Holds every read permit, so no recall runs while the ranking caches are cleared.
  class ReadersPaused {
   public:
    explicit ReadersPaused(EngineImpl& engine) : engine_(engine) {
      for (int i = 0; i < engine_.options_.read_connections; ++i) {
        engine_.reader_permits_->Acquire();
      }
    }
    ~ReadersPaused() {
      for (int i = 0; i < engine_.options_.read_connections; ++i) {
        engine_.reader_permits_->Release();
      }
    }
    ReadersPaused(const ReadersPaused&) = delete;
    ReadersPaused& operator=(const ReadersPaused&) = delete;

   private:
    EngineImpl& engine_;
  };
  Result<json> ForgetWith(std::string_view label, bool dry_run,
                          const std::function<Result<ForgetPlan>(db::Database&)>& plan);
  void ClearRankingCaches();
  Result<bool> ImportRecord(db::Database& db, std::string_view scope, const json& line);
  void EraseWhenPending(db::Database& db);
  // Claims up to `max_jobs` jobs and runs them in one transaction on `db`; returns how many
  // were claimed (0: nothing to do). Jobs whose writing failed go back to pending, their
  // attempt not counted (ReleaseOrphanedClaims, at the next call).
  Result<int> RunJobs(db::Database& db, int max_jobs);
  Result<int> ClaimJobs(db::Database& db, int max_jobs, std::vector<std::string>& claimed);
  Result<int> WriteClaimedJobs(db::Database& db, const std::vector<std::string>& claimed);
  Status ReleaseOrphanedClaims(db::Database& db);
  // A correction's replacement as a user message of its own session, ingested in the
  // feedback's transaction (so the feedback and its correction job exist together or not at
  // all), and the job's id written on feedback row `seq`.
  Status IngestCorrection(db::Database& db, std::string_view scope, const std::string& feedback_id,
                          int64_t seq, const std::string& replacement,
                          const std::vector<std::string>& targets, double now, bool* job_created);
  // A batch's items validated and hashed in order (errors name the item), at most 5000
  // messages in all.
  Result<std::vector<PreparedIngest>> PrepareBatch(std::string_view scope, const json& items,
                                                   const IngestContext& context);
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
  // Adds to the stem index the forms of a batch of the records above its watermark (the
  // records stored before schema 5, imported, or written by an earlier build sharing the
  // file), and moves the watermark past them; true when more are left.
  Result<bool> RepairStemIndex(db::Database& db);
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

  // Semantic recall's steps (embedding.cc): the embedding thread and its batches, the model's
  // row, the query's vector, and the vector ranking of a recall.
  struct ModelRow {
    int64_t id = 0;
    int64_t dimensions = 0;  // 0 until the model's first vectors are stored
  };
  struct Backlog;
  void EmbedLoop();
  bool WaitToEmbed(std::chrono::milliseconds wait);
  Result<bool> EmbedStep(db::Database& db, int64_t& cursor);
  Result<bool> EmbedSingly(db::Database& db, const ModelRow& model, const Backlog& backlog,
                           int64_t& cursor);
  Result<Backlog> ReadBacklog(db::Database& db, const ModelRow& model, int64_t after);
  // On a shared store: the batch's records whose vectors of this model the store holds get
  // them from it (no call to the service); the rest are returned, to be embedded here and then
  // offered to the store by ShareVectors.
  Result<Backlog> TakeSharedVectors(db::Database& db, const ModelRow& model, Backlog backlog);
  void ShareVectors(const Backlog& backlog, const std::vector<std::string>& stored);
  Result<std::vector<std::string>> EmbedTexts(const Backlog& backlog, const ModelRow& model);
  Status StoreVectors(db::Database& db, const ModelRow& model, const Backlog& backlog,
                      const std::vector<std::string>& stored);
  void NoteEmbedding(const Status& outcome, bool elsewhere = false);
  Result<bool> HoldEmbeddingLease(db::Database& db,
                                  std::chrono::steady_clock::time_point& renew_at);
  void ReleaseEmbeddingLease(db::Database& db);
  Result<ModelRow> ReadModel(db::Database& db, bool create);
  void SignalEmbedder();
  // The query's vector in stored form, or nullopt (no embedder, an empty query, or the service
  // failed: the recall goes on lexically and `note` says why).
  std::optional<std::string> QueryVector(const std::string& asked, std::string& note);
  // The scope's records most similar to `query_vector` in `db`'s snapshot, best first; nullopt
  // when the vectors cannot be searched (none of the model yet, or the query's vector is of
  // other dimensions), which `note` says.
  Result<std::optional<std::vector<std::pair<int64_t, double>>>> VectorHits(
      db::Database& db, std::string_view scope, const std::string& query_vector, std::string& note);
  Result<EngineStats::EmbeddingFigures> EmbeddingFigures(db::Database& db);

  // Shared mode (EngineOptions::shared; shared.cc): jobs, their idempotency keys and the
  // records live in the shared store, which the worker claims jobs from and writes records to;
  // this engine's file is its own index of the shared records, brought up to the store's newest
  // change by SyncReplica before every read and by the worker. With `batch`, an idempotency
  // conflict names its item ("items.3: ").
  Result<std::vector<json>> AcceptShared(std::string_view scope,
                                         const std::vector<PreparedIngest>& prepared, bool batch);
  // A shared store's job row for one validated ingest.
  SharedStore::JobRow SharedJobRow(std::string_view scope, const PreparedIngest& prepared) const;
  Result<json> SharedGetJob(std::string_view job_id);
  // Feedback, forget and import on the shared store (feedback.cc, admin.cc): targets resolved
  // and views read in this index, rows written by the store, and this index brought up to
  // date from the feed.
  Result<json> SharedFeedback(std::string_view scope, const FeedbackRequest& request,
                              std::string_view idempotency_key, const std::string& payload_sha,
                              const std::string& payload_text);
  Result<json> SharedForget(std::string_view scope, const SharedStore::ForgetSelection& selection);
  Result<json> SharedImport(std::string_view scope, const json& lines);
  Result<int> RunSharedJobs(int max_jobs);
  struct UnwrittenJob;
  Result<std::vector<UnwrittenJob>> SharedJobsToWrite(int max_jobs);
  // Writes `writes` (the jobs `writing`, in order) in transactions of up to 2,000 records (a
  // job's at least), each job alone when the store refuses a lot for good; jobs to try again on
  // the next turn go to `later`. Returns how many were written (or found another's).
  int WriteSharedJobs(const std::vector<SharedStore::JobWrite>& writes,
                      std::vector<UnwrittenJob>& writing, std::vector<UnwrittenJob>& later);
  // A claimed job's records to write; nullopt when its payload is unreadable (the job is
  // failed).
  Result<std::optional<SharedStore::JobWrite>> SharedJobWrite(const SharedStore::Claimed& job);
  Status SyncReplica();
  // Before a recall: the job it waits for (if any) checked, then the index brought up to date.
  Status CheckSharedWaitedJob(std::string_view scope, const std::string& job_id);
  // Applies a batch of the feed to `db` in one transaction (engine.cc); returns how many
  // records it deleted (the caller then clears the ranking caches).
  Result<int64_t> ApplySharedChanges(db::Database& db, const SharedStore::Changes& feed);
  // Deletes the records with these event_seqs (with their index entries and the feedback
  // targets on them) and these feedback, and marks the file for an erase (admin.cc).
  Status ApplySharedDeletions(db::Database& db, const std::vector<int64_t>& seqs,
                              const std::vector<std::string>& feedback_ids);
  // The answer to a call that a shared store does not offer yet.
  static Error NotShared(std::string_view what);
  // The kinds of change an index applies (records written and deleted, feedback added and
  // deleted), noted in the index with each batch: an index of an older format is rebuilt.
  static constexpr int64_t kSharedFeedFormat = 2;
  std::mutex sync_mu_;
  std::optional<int64_t> replica_through_;  // guarded by sync_mu_; read from the file at first

  EngineOptions options_;
  std::string owner_;  // lease owner id of this process

  // Each record's length and scope, shared by every connection's tmcra_bm25 (memory/bm25.h);
  // declared before the connections so that it outlives them.
  std::unique_ptr<RowFacts> row_facts_;
  std::unique_ptr<WordCounts> word_counts_;  // the word index's document counts, per word
  std::unique_ptr<PostingsCache> postings_;  // the word index's postings, or null
  std::unique_ptr<WordCounts> cjk_counts_;   // the CJK index's, per bigram and lone prefix
  KnownForms known_forms_;                   // forms the stem index holds (memory/stems.h)
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
    ReadLease(EngineImpl* engine, std::unique_ptr<db::Database> db)
        : engine_(engine), db_(std::move(db)) {}
    ReadLease(ReadLease&& other) noexcept = default;
    ReadLease& operator=(ReadLease&&) = delete;
    ReadLease(const ReadLease&) = delete;
    ReadLease& operator=(const ReadLease&) = delete;
    ~ReadLease();
    db::Database& db() { return *db_; }

   private:
    EngineImpl* engine_;
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
  // Shared jobs this engine holds that could not be written yet, and until when it tries them
  // again itself; guarded by orphans_mu_.
  struct UnwrittenJob {
    SharedStore::Claimed job;
    std::chrono::steady_clock::time_point give_up_at;
  };
  std::vector<UnwrittenJob> unwritten_shared_jobs_;
  std::unique_ptr<db::Database> worker_db_;
  std::thread worker_;

  // Semantic recall (embedding.cc).
  std::thread embedder_thread_;
  bool embed_signalled_ = false;  // guarded by worker_mu_
  std::mutex vectors_mu_;
  std::shared_ptr<VectorIndex> vector_index_;      // guarded by vectors_mu_; the current model's
  EngineStats::EmbeddingFigures embedding_state_;  // guarded by vectors_mu_
  std::chrono::steady_clock::time_point queries_resume_at_{};   // guarded by vectors_mu_
  std::unordered_map<std::string, std::string> query_vectors_;  // guarded by vectors_mu_

  // Compaction (memory/compaction.h): how many job transactions this process has committed,
  // and the count when the indexes were last found compact (so an engine that starts looks
  // once). A compaction under way is read from the index's structure record at each step.
  std::atomic<uint64_t> index_writes_{1};
  std::mutex compaction_mu_;
  uint64_t compact_as_of_ = 0;  // guarded by compaction_mu_
  bool levels_warned_ = false;  // guarded by compaction_mu_
};

}  // namespace tmcra::memory
