// The memory engine: the server side of the Memory API over one SQLite file.
//
// It speaks exactly the Memory API's JSON shapes (docs/contract.md §1.4), so tmcra-mcp can run
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

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "filter/content_filter.h"
#include "memory/compaction.h"
#include "memory/embedder.h"
#include "memory/shared_store.h"

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
  // map, each reads into its own page cache). tmcra-memd maps (docs/memd.md, "Limits and
  // middleware behaviour").
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
  // Stemming (memory/stems.h): "auto" detects each record's and query's language, a Snowball
  // language name stems everything in it, "none" neither writes nor searches stems.
  std::string stem_language = "auto";
  // Recall also searches English synonyms and related words of the query's words
  // (memory/synonyms.h), with a lower weight than the words asked.
  bool synonyms = true;
  // Semantic recall (docs/recall.md, "Vectors"): the embeddings service that records and
  // queries are embedded with, or null for none. A thread of the engine's own embeds the
  // records that have no vector of the current model, `embed_batch` texts per request, waiting
  // `embed_start_ms` after Open first (a hook's process is gone by then); failures are retried
  // with a backoff doubling up to a minute, and never hold up an ingest. Each recall embeds its
  // query within `query_embed_timeout` (after a failure, queries go without for 30 s) and
  // fuses the `vector_hits` most similar records of at least `vector_min_similarity` with the
  // lexical rankings. A scope's vectors are searched exactly up to `ann_threshold`, through an
  // HNSW graph above it (memory/vectors.h).
  std::shared_ptr<Embedder> embedder;
  int embed_batch = 32;
  int embed_start_ms = 1000;
  std::chrono::milliseconds embed_timeout{30000};
  std::chrono::milliseconds query_embed_timeout{2000};
  size_t vector_hits = 20;
  double vector_min_similarity = 0.3;
  size_t ann_threshold = 20000;
  // A store shared with other engines (tmcra-memd on PostgreSQL: memory/pg_store.h), or null.
  // With one, ingests are accepted there (its unique keys hold idempotency across engines), the
  // worker claims its jobs and writes their records there, and `path` is this engine's own index
  // of the shared records: brought up to the store's newest change before every read, and by
  // the worker. Feedback, forget, import and export behave as on a file; ForgetOldest (the
  // embedded store's size cap) answers not_implemented.
  std::shared_ptr<SharedStore> shared;
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
  // The pages in use, wherever they are (the file or the WAL): what the file holds once its
  // WAL is checkpointed and its free pages given back.
  int64_t live_bytes = 0;
  // Records the CJK index's back-fill has still to look at (Engine::RepairCjkIndex): after the
  // schema migration, until the worker has been through the stored records.
  int64_t cjk_index_backlog = 0;
  // Records the stem index's back-fill has still to look at (memory/stems.h); 0 with stemming
  // off.
  int64_t stem_index_backlog = 0;
  // The signals recall searches with (docs/recall.md): "word", "trigram", "cjk", and "stem"
  // and "synonym" as configured; and the stemming language option.
  std::vector<std::string> recall_signals;
  std::string recall_language;
  // Semantic recall, when an embedder is configured: the model, its dimensions (0 until its
  // first vectors), the records with and without a vector of it, the vectors this process
  // holds in an HNSW graph, and the embedding thread's state: "starting", "ok", "elsewhere"
  // (another process sharing the store holds the embedding lease and embeds for all), or
  // "failing" (with the last error, when, and how many attempts in a row failed); query_error
  // is the last failure to embed a query while queries go without (30 s).
  struct EmbeddingFigures {
    std::string model;
    int64_t dimensions = 0;
    int64_t vectors = 0;
    int64_t backlog = 0;
    int64_t graphed = 0;
    std::string state = "starting";
    std::string last_error;
    double last_error_at = 0;
    int64_t failures = 0;
    std::string query_error;
  };
  std::optional<EmbeddingFigures> embeddings;
  struct PostingsCacheFigures {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t words = 0;
    size_t bytes = 0;
    uint64_t caught_up = 0;  // postings brought up to a newer snapshot
  };
  std::optional<PostingsCacheFigures> postings_cache;  // when the engine keeps postings
  json ToJson() const;
};

// The engine's implementation (memory/engine_impl.h): its connections, job worker, ranking
// caches and semaphores, out of sight of the engine's users.
class EngineImpl;

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
  // MemoryGraphEvidenceResponse (docs/contract.md §1.4.4): the exact stored text of a record
  // (`rec_...`), or of the records a feedback (`fb_...`) targeted. 404 not_found for an id that
  // is unknown or belongs to another scope. Feedback effects do not apply here: a hidden record's
  // source stays readable (for audit and for restore previews).
  [[nodiscard]] Result<json> Evidence(std::string_view scope, std::string_view memory_id,
                                      int limit);
  // POST /v1/scopes/{scope}/feedback -> 201 FeedbackView (§1.4.5). Strict FeedbackRequest
  // validation (422), targets resolved in the scope (404), idempotent by key (a replay returns
  // the same feedback; another body under the key is 409 idempotency_conflict). ignore/correct/
  // restore change what Recall shows; `correct` also ingests the replacement as a user message
  // in session `correction-<feedback_id>`, in the same transaction.
  [[nodiscard]] Result<json> Feedback(std::string_view scope, const json& body,
                                      std::string_view idempotency_key);
  [[nodiscard]] Result<EngineStats> Stats();
  // Whether the store serves (tmcra-memd's /readyz): it answers a read and, while the last
  // write failed for want of room (Errc::kStorageFull), a small write too. Any write that
  // succeeds clears that mark; until then this is the StorageFull error.
  [[nodiscard]] Status Ready();

  // Maintenance of what the store holds, behind `tmcra-mcp memory` and tmcra-memd's admin
  // endpoints (docs/memory-commands.md). Bodies and answers are JSON; a bad field is
  // kInvalidArgument validation_error naming it, as for the Memory API's calls.
  //
  // ScopeStats -> {"scopes": [{scope_name, sessions, messages, bytes, oldest, newest,
  // redactions, feedback}], "erase_pending"}: every scope, by name; bytes are the stored texts'.
  [[nodiscard]] Result<json> ScopeStats();
  // Deletes a scope's records selected by body {"session_id", "message_ids", "before" (an ISO
  // timestamp: occurred before it), "match" (an exact, case-sensitive phrase of the text),
  // "all": true, "dry_run"}; the selectors given must all hold, and at least one is given.
  // With them go their index entries, the feedback that targeted only them or quotes the
  // phrase, and the payloads of jobs that carried them (a job not yet run is failed with
  // "forgotten"). Then the freed bytes are erased (Erase). Answers {"scope_name", "dry_run",
  // "records", "feedback", "jobs", "preview": [first 20 records: memory_id, session_id,
  // timestamp, role, excerpt], "erase": "done" | "pending" | "none", "erase_note"}.
  [[nodiscard]] Result<json> Forget(std::string_view scope, const json& body);
  // The oldest records of any scope, oldest first, until their texts total `bytes` or more,
  // deleted as Forget deletes (for a retention size cap). Answers as Forget, scope_name "*".
  [[nodiscard]] Result<json> ForgetOldest(int64_t bytes);
  // Makes deleted text unrecoverable from the files: the full-text indexes merged (their old
  // segments freed), the file vacuumed with secure_delete on, and the write-ahead log
  // checkpointed and truncated to zero bytes. Another process reading the file can hold the
  // checkpoint back: then {"erased": false, "note"} and the store stays marked erase-pending; the
  // worker and the next Forget or Erase try again. {"erased": true} once done.
  [[nodiscard]] Result<json> Erase();
  // Every record and feedback of `scope` as export lines (docs/memory-commands.md, "Export
  // format"), oldest first, each handed to `sink`; a sink error stops the export and is returned.
  [[nodiscard]] Status Export(std::string_view scope,
                              const std::function<Status(const json& line)>& sink);
  // Stores export lines into `scope` keeping their ids, times and feedback; a line whose id is
  // stored already is counted as present and changes nothing, so importing twice stores once.
  // Every line is validated before any is stored (errors name "lines.N.field"); all are stored
  // in one transaction. Answers {"records_added", "records_present", "feedback_added",
  // "feedback_present"}.
  [[nodiscard]] Result<json> Import(std::string_view scope, const json& lines);

  // Runs claimable jobs on the calling thread until none is left, then the CJK index's
  // back-fill (RepairCjkIndex) to its end; returns how many jobs ran. A job that the engine's
  // worker (or another process) has claimed is not claimable and not waited for: it may still
  // be running when this returns (GetJob tells).
  [[nodiscard]] Result<int> RunPendingJobs();
  // Compacts the full-text indexes on the calling thread as far as the worker would
  // (memory/compaction.h); returns how many steps ran. The worker does this by itself when it
  // has no job; this is for engines without a worker (tests, benchmarks).
  [[nodiscard]] Result<int> CompactIndexes();

  // For tests: claims one job as if by a process that then died (the lease stays held).
  [[nodiscard]] Result<std::optional<std::string>> ClaimJobForTest(double lease_seconds);

 private:
  explicit Engine(std::unique_ptr<EngineImpl> impl);
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace tmcra::memory
