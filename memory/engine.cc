#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/failpoint.h"
#include "base/identifiers.h"
#include "base/ids.h"
#include "base/json_reader.h"
#include "base/process_owner.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "memory/cjk.h"
#include "memory/compaction.h"
#include "memory/engine_impl.h"
#include "memory/feedback.h"
#include "memory/ingest_validation.h"

namespace tmcra::memory {

namespace {

constexpr int kMaxJobAttempts = 5;
// Jobs claimed and run per transaction: one fsync covers them all.
constexpr int kJobsPerTransaction = 64;
// How much room /readyz asks for after a write failed for want of it.
constexpr off_t kWriteProbeBytes = 1 << 20;
// Moves the CJK index's watermark (memory/cjk.h, CjkWatermark).
constexpr const char* kCjkAdvanceSql =
    "UPDATE index_watermarks SET through_seq = ?1 WHERE name = 'records_cjk'";
// Records looked at per transaction of the CJK index's back-fill (about 25 ms of Japanese text).
constexpr int64_t kCjkRepairBatch = 2000;

// The first column of the statement's first row as an integer; 0 without a row or for NULL.
// Each entry moves user_version from its index to index + 1. Never edit a shipped entry; add one.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE IF NOT EXISTS scopes(
  name TEXT PRIMARY KEY,
  record_count INTEGER NOT NULL DEFAULT 0,
  last_event_seq INTEGER,
  last_job_id TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  job_id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  scope_name TEXT NOT NULL,
  job_type TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT,
  payload_sha256 TEXT,
  payload_json TEXT,
  consistency TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL,
  heartbeat_at REAL,
  lease_expires_at REAL,
  lease_owner TEXT,
  result_json TEXT,
  error_json TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idempotency ON jobs(tenant_id, idempotency_key);
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs(status, created_at);
CREATE TABLE IF NOT EXISTS records(
  event_seq INTEGER PRIMARY KEY AUTOINCREMENT,
  record_id TEXT NOT NULL UNIQUE,
  scope_name TEXT NOT NULL,
  session_id TEXT NOT NULL,
  message_id TEXT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  occurred_at REAL NOT NULL,
  timestamp TEXT NOT NULL,
  metadata_json TEXT NOT NULL,
  agent_id TEXT,
  target_agent_id TEXT,
  job_id TEXT NOT NULL,
  UNIQUE(scope_name, session_id, message_id));
CREATE INDEX IF NOT EXISTS records_session ON records(scope_name, session_id, occurred_at, event_seq);
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(
  content, content='records', content_rowid='event_seq',
  tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS records_tri USING fts5(
  content, content='records', content_rowid='event_seq', tokenize='trigram');
)sql",
    // 1 -> 2: feedback (docs/contract.md §1.4.5). `seq` orders feedback: for each record the
    // newest ignore/correct/restore that targets it decides what recall shows. feedback_targets
    // holds the resolved record ids (a restore of a feedback id is stored as that feedback's
    // records), in request order.
    R"sql(
CREATE TABLE IF NOT EXISTS feedback(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  feedback_id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  scope_name TEXT NOT NULL,
  rating TEXT NOT NULL,
  action TEXT NOT NULL,
  idempotency_key TEXT,
  payload_sha256 TEXT NOT NULL,
  request_json TEXT NOT NULL,
  created_at REAL NOT NULL,
  correction_job_id TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS feedback_idempotency ON feedback(tenant_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS feedback_scope ON feedback(scope_name, action);
CREATE TABLE IF NOT EXISTS feedback_targets(
  feedback_seq INTEGER NOT NULL,
  position INTEGER NOT NULL,
  record_id TEXT NOT NULL,
  scope_name TEXT NOT NULL,
  PRIMARY KEY(feedback_seq, position));
CREATE INDEX IF NOT EXISTS feedback_targets_scope ON feedback_targets(scope_name, feedback_seq);
)sql",
    // 2 -> 3: the CJK index (memory/cjk.h), contentless: its text is derived from `content`,
    // and a record without CJK text has no row. Every record at or below the watermark is
    // indexed; the records stored before are indexed after the migration, in batches
    // (EngineImpl::RepairCjkIndex), as are any an earlier build sharing the file writes later.
    R"sql(
CREATE VIRTUAL TABLE IF NOT EXISTS records_cjk USING fts5(
  grams, content='', tokenize='ascii');
CREATE TABLE IF NOT EXISTS index_watermarks(
  name TEXT PRIMARY KEY,
  through_seq INTEGER NOT NULL);
INSERT OR REPLACE INTO index_watermarks(name, through_seq) VALUES('records_cjk', 0);
)sql",
    // 3 -> 4: maintenance marks (admin.cc): erase_pending is 1 from a forget until its deleted
    // text is gone from the files (EngineImpl::Erase).
    R"sql(
CREATE TABLE IF NOT EXISTS maintenance(
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL);
)sql",
    // 4 -> 5: the stem index (memory/stems.h): each word form of the word index under its
    // Snowball stem. The records stored before are added after the migration, in batches
    // (EngineImpl::RepairStemIndex), up to the watermark.
    R"sql(
CREATE TABLE IF NOT EXISTS word_stems(
  stem TEXT NOT NULL,
  word TEXT NOT NULL,
  PRIMARY KEY(stem, word)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS word_stems_word ON word_stems(word);
INSERT OR REPLACE INTO index_watermarks(name, through_seq) VALUES('word_stems', 0);
)sql",
    // 5 -> 6: record vectors (memory/vectors.h, embedding.cc): at most one per record, with the
    // model it came from; a model's dimensions are fixed by its first vectors. vec_id orders
    // the rows as they were written, so a process's copy reads only the new ones; a forget
    // counts its deletions in maintenance 'vector_deletions', so every copy reads them all again.
    R"sql(
CREATE TABLE IF NOT EXISTS embedding_models(
  model_id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  dimensions INTEGER);
CREATE TABLE IF NOT EXISTS record_vectors(
  vec_id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_seq INTEGER NOT NULL UNIQUE,
  model_id INTEGER NOT NULL,
  vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS record_vectors_model ON record_vectors(model_id, vec_id);
)sql",
};

Status Migrate(db::Database& db) { return db::Migrate(db, kMigrations, "the memory database"); }

std::string NewId(std::string_view prefix) {
  std::string id = UuidV4();
  std::string hex;
  for (char c : id) {
    if (c != '-') hex.push_back(c);
  }
  return std::string(prefix) + hex;
}

}  // namespace

std::string RecordIdOf(std::string_view scope, std::string_view session_id,
                       std::string_view message_id) {
  std::string key;
  key.reserve(scope.size() + session_id.size() + message_id.size() + 2);
  key.append(scope).push_back('\0');
  key.append(session_id).push_back('\0');
  key.append(message_id);
  return "rec_" + Sha256Hex(key).substr(0, 32);
}

json JobResultJson(int64_t max_seq, int64_t written, int64_t duplicates) {
  return json{{"watermarks", {{"source_event_seq", max_seq}, {"indexed_event_seq", max_seq}}},
              {"index", {{"active_index", "fts5"}}},
              {"records_written", written},
              {"records_deduplicated", duplicates}};
}

namespace {

json NullableReal(const db::Statement& st, int column) {
  return st.IsNull(column) ? json(nullptr) : json(st.Double(column));
}

json ParsedOrNull(const db::Statement& st, int column) {
  if (st.IsNull(column)) return nullptr;
  json value = ParseJsonLenient(st.Text(column));
  return value.is_discarded() ? json(nullptr) : value;
}

constexpr const char* kJobColumns =
    "job_id, tenant_id, scope_name, job_type, status, attempts, created_at, updated_at, "
    "started_at, finished_at, heartbeat_at, lease_expires_at, result_json, error_json, "
    "consistency";

json JobViewFromRow(const db::Statement& st, const std::string& base_url) {
  const std::string job_id = st.Text(0);
  return json{{"job_id", job_id},
              {"tenant_id", st.Text(1)},
              {"scope_name", st.Text(2)},
              {"job_type", st.Text(3)},
              {"status", st.Text(4)},
              {"attempts", st.Int(5)},
              {"created_at", st.Double(6)},
              {"updated_at", st.Double(7)},
              {"started_at", NullableReal(st, 8)},
              {"finished_at", NullableReal(st, 9)},
              {"heartbeat_at", NullableReal(st, 10)},
              {"lease_expires_at", NullableReal(st, 11)},
              {"result", ParsedOrNull(st, 12)},
              {"error", ParsedOrNull(st, 13)},
              {"status_url", base_url + "/v1/jobs/" + job_id},
              {"idempotent_retry", nullptr},
              {"resume_mode", nullptr}};
}

Result<std::optional<json>> LoadJob(db::Database& db, std::string_view job_id,
                                    const std::string& base_url, std::string* consistency) {
  auto st = db.Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE job_id = ?");
  if (!st) return st.error();
  st->Bind(1, job_id);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<json>();
  if (consistency != nullptr) *consistency = st->Text(14);
  return std::optional<json>(JobViewFromRow(*st, base_url));
}

}  // namespace

json EngineStats::ToJson() const {
  json out{{"records", records},
           {"scopes", scopes},
           {"jobs_pending", jobs_pending},
           {"jobs_failed", jobs_failed},
           {"file_bytes", file_bytes},
           {"cjk_index_backlog", cjk_index_backlog},
           {"live_bytes", live_bytes},
           {"stem_index_backlog", stem_index_backlog},
           {"recall_signals", recall_signals},
           {"recall_language", recall_language}};
  if (postings_cache) {
    out["postings_cache"] = {{"words", postings_cache->words},
                             {"bytes", postings_cache->bytes},
                             {"hits", postings_cache->hits},
                             {"misses", postings_cache->misses},
                             {"caught_up", postings_cache->caught_up}};
  }
  if (embeddings) {
    const EmbeddingFigures& e = *embeddings;
    out["embeddings"] = {{"model", e.model},      {"dimensions", e.dimensions},
                         {"vectors", e.vectors},  {"backlog", e.backlog},
                         {"graphed", e.graphed},  {"state", e.state},
                         {"failures", e.failures}};
    if (!e.last_error.empty()) {
      out["embeddings"]["last_error"] = e.last_error;
      out["embeddings"]["last_error_at"] = e.last_error_at;
    }
    if (!e.query_error.empty()) out["embeddings"]["query_error"] = e.query_error;
  }
  return out;
}

EngineImpl::EngineImpl(EngineOptions options)
    : options_(std::move(options)), owner_(NewProcessOwnerId()) {
  filter_ = filter::ContentFilter(options_.filter_rules);
}

Result<std::unique_ptr<EngineImpl>> EngineImpl::Open(EngineOptions options) {
  if (!IsStemLanguage(options.stem_language)) {
    return Error::Invalid(
        "the recall language must be auto, none or one of the Snowball "
        "languages (" +
        options.stem_language + " is not one)");
  }
  std::unique_ptr<EngineImpl> engine(new EngineImpl(std::move(options)));
  engine->options_.read_connections = std::max(1, engine->options_.read_connections);
  engine->reader_permits_ =
      std::make_unique<Permits>(static_cast<unsigned>(engine->options_.read_connections));
  // One connection, which migrates the store and then serves whichever comes first, a write
  // (ApiDb) or a read (BorrowReader); the other opens its own when it is needed, and the
  // worker opens its own in its thread. A new process that only recalls opens the file once.
  auto first_db = db::Database::Open({engine->options_.path});
  if (!first_db) return first_db.error();
  if (auto s = Migrate(**first_db); !s) return s.error();
  engine->row_facts_ = std::make_unique<RowFacts>();
  engine->word_counts_ = std::make_unique<WordCounts>();
  engine->cjk_counts_ = std::make_unique<WordCounts>("records_cjk");
  if (engine->options_.postings_cache_bytes > 0) {
    engine->postings_ = std::make_unique<PostingsCache>(engine->options_.postings_cache_bytes);
  }
  if (auto s = RegisterBm25(**first_db, engine->row_facts_.get()); !s) return s.error();
  engine->spare_db_ = std::move(*first_db);
  if (engine->options_.warm_recall) {
    auto reader = engine->BorrowReader();
    if (!reader) return reader.error();
    auto tx = db::Transaction::Deferred(reader->db());
    if (!tx) return tx.error();
    if (auto s = engine->row_facts_->CatchUp(reader->db()); !s) return s.error();
    if (auto s = tx->Commit(); !s) return s.error();
  }
  if (engine->options_.start_worker) {
    engine->worker_ = std::thread([e = engine.get()] { e->WorkerLoop(); });
  }
  if (engine->options_.embedder) {
    engine->embedder_thread_ = std::thread([e = engine.get()] { e->EmbedLoop(); });
  }
  return engine;
}

bool EngineImpl::CatchUpFactsNow(int64_t highest) {
  if (highest - row_facts_->highest() <= options_.row_facts_lazy_rows) return true;
  // The first such recall of this engine ranks in SQL; the worker reads the facts when the
  // process is idle; a later one that still finds them missing reads them itself.
  if (facts_deferred_.exchange(true)) return true;
  facts_wanted_.store(true);
  return false;
}

std::unique_ptr<db::Database> EngineImpl::TakeSpare() {
  std::lock_guard lock(spare_mu_);
  return std::move(spare_db_);
}

Result<db::Database*> EngineImpl::ApiDb() {
  if (!api_db_) {
    std::unique_ptr<db::Database> db = TakeSpare();
    if (!db) {
      auto opened = db::Database::Open({options_.path});
      if (!opened) return opened.error();
      if (auto s = RegisterBm25(**opened, row_facts_.get()); !s) return s.error();
      db = std::move(*opened);
    }
    api_db_ = std::move(db);
  }
  return api_db_.get();
}

Status EngineImpl::PrepareReader(db::Database& db) {
  // Recall reads many index pages: a 16 MiB page cache keeps the hot ones out of read(2).
  std::string pragmas = "PRAGMA cache_size=-" + std::to_string(16 * 1024) + ";";
  if (options_.reader_mmap_bytes > 0) {
    pragmas += " PRAGMA mmap_size=" + std::to_string(options_.reader_mmap_bytes) + ";";
  }
  // Recall reads the word and CJK indexes' vocabularies (document counts per term) through
  // these tables.
  pragmas +=
      "CREATE VIRTUAL TABLE IF NOT EXISTS temp.records_fts_vocab USING "
      "fts5vocab(main, records_fts, 'row');"
      "CREATE VIRTUAL TABLE IF NOT EXISTS temp.records_cjk_vocab USING "
      "fts5vocab(main, records_cjk, 'row')";
  return db.Exec(pragmas);
}

Result<std::unique_ptr<db::Database>> EngineImpl::OpenReader() {
  if (std::unique_ptr<db::Database> spare = TakeSpare()) {
    if (auto s = PrepareReader(*spare); !s) return s.error();
    return spare;
  }
  auto db = db::Database::Open({options_.path});
  if (!db) return db.error();
  if (auto s = RegisterBm25(**db, row_facts_.get()); !s) return s.error();
  if (auto s = PrepareReader(**db); !s) return s.error();
  return std::move(*db);
}

Result<EngineImpl::ReadLease> EngineImpl::BorrowReader() {
  // A permit means an idle connection, or room to open one.
  reader_permits_->Acquire();
  {
    std::lock_guard lock(readers_mu_);
    if (!idle_readers_.empty()) {
      auto db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReadLease(this, std::move(db));
    }
  }
  auto db = OpenReader();
  if (!db) {
    reader_permits_->Release();
    return db.error();
  }
  return ReadLease(this, std::move(*db));
}

EngineImpl::ReadLease::~ReadLease() {
  if (!db_) return;
  {
    std::lock_guard lock(engine_->readers_mu_);
    engine_->idle_readers_.push_back(std::move(db_));
  }
  engine_->reader_permits_->Release();
}

EngineImpl::~EngineImpl() {
  {
    std::lock_guard lock(worker_mu_);
    stopping_ = true;
  }
  worker_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (embedder_thread_.joinable()) embedder_thread_.join();
}

namespace {

Error KeyError(const std::string& loc) {
  return Error::Api(Errc::kInvalidArgument, "validation_error", loc + ": must be 8..200 characters",
                    json::array({{{"loc", {"header", loc}},
                                  {"msg", "Idempotency-Key must be 8..200 characters"},
                                  {"type", "value_error"}}})
                        .dump());
}

}  // namespace

Result<EngineImpl::PreparedIngest> EngineImpl::PrepareIngest(std::string_view scope,
                                                             const json& body,
                                                             const std::string& key,
                                                             const IngestContext& context) {
  auto request = ValidateIngest(body);
  if (!request) return request.error();
  const json payload = request->ToJson();
  const json hashed{
      {"job_type", "ingest"},
      {"scope_name", scope},
      {"payload", payload},
      {"_usage_attribution",
       {{"client_platform", context.client_platform},
        {"integration_id", context.integration_id ? json(*context.integration_id) : json(nullptr)},
        {"agent_id", context.agent_id ? json(*context.agent_id) : json(nullptr)}}}};
  return PreparedIngest{key, Sha256Hex(CanonicalJson(hashed)),
                        CanonicalJson(FilteredPayload(payload)), request->consistency};
}

json EngineImpl::FilteredPayload(json payload) const {
  auto messages = payload.find("messages");
  if (messages == payload.end() || !messages->is_array()) return payload;
  json kept = json::array();
  for (json& m : *messages) {
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      std::string text = filter_.Apply(content->get_ref<const std::string&>()).text;
      if (text.empty()) continue;  // all of it was private or recalled memory
      *content = std::move(text);
    }
    kept.push_back(std::move(m));
  }
  *messages = std::move(kept);
  return payload;
}

namespace {

// Prefixes a validation error of one batch item with "items.<i>.".
Error ItemError(Error error, size_t index) {
  const std::string prefix = "items." + std::to_string(index);
  error.message = prefix + "." + error.message;
  json details = json::parse(error.details_json, nullptr, false);
  if (details.is_array()) {
    for (auto& d : details) {
      if (d.is_object() && d.contains("loc") && d["loc"].is_array()) {
        json loc = json::array({"body", "items", index});
        for (size_t i = 1; i < d["loc"].size(); ++i) loc.push_back(d["loc"][i]);
        d["loc"] = loc;
      }
    }
    error.details_json = details.dump();
  }
  return error;
}

}  // namespace

Result<json> EngineImpl::StoreIngest(db::Database& db, std::string_view scope,
                                     const PreparedIngest& p, bool* created) {
  auto existing = db.Prepare(
      "SELECT job_id, payload_sha256 FROM jobs WHERE tenant_id = ? AND idempotency_key = ?");
  if (!existing) return existing.error();
  existing->Bind(1, options_.tenant_id).Bind(2, p.key);
  auto found = existing->Step();
  if (!found) return found.error();
  bool replay = false;
  std::string job_id;
  if (*found) {
    if (existing->Text(1) != p.payload_sha) {
      return Error::Api(Errc::kConflict, "idempotency_conflict",
                        "Idempotency-Key was already used with a different request");
    }
    job_id = existing->Text(0);
    replay = true;
  } else {
    job_id = NewId("job_");
    const double now = NowSeconds();
    auto insert = db.Prepare(
        "INSERT INTO jobs(job_id, tenant_id, scope_name, job_type, status, attempts, "
        "idempotency_key, payload_sha256, payload_json, consistency, created_at, updated_at) "
        "VALUES(?, ?, ?, 'ingest', 'pending', 0, ?, ?, ?, ?, ?, ?)");
    if (!insert) return insert.error();
    insert->Bind(1, job_id)
        .Bind(2, options_.tenant_id)
        .Bind(3, scope)
        .Bind(4, p.key)
        .Bind(5, p.payload_sha)
        .Bind(6, p.payload_text)
        .Bind(7, p.consistency)
        .Bind(8, now)
        .Bind(9, now);
    if (auto s = insert->Run(); !s) return s.error();
  }
  std::string consistency;
  auto job = LoadJob(db, job_id, options_.public_base_url, &consistency);
  if (!job) return job.error();
  if (!*job) return Error::Internal("a stored job vanished");
  json view = std::move(**job);
  view["idempotent_replay"] = replay;
  const bool ryw = consistency == "read_your_writes";
  view["consistency_contract"] = {{"mode", consistency},
                                  {"visible_after_job_id", job_id},
                                  {"recall_wait_for_job_id", ryw ? json(job_id) : json(nullptr)}};
  *created = !replay;
  return view;
}

Result<json> EngineImpl::IngestInTransaction(db::Database& db, std::string_view scope,
                                             const json& body, const IngestContext& context,
                                             bool* created) {
  auto prepared = PrepareIngest(scope, body, context.idempotency_key, context);
  if (!prepared) return prepared.error();
  return StoreIngest(db, scope, *prepared, created);
}

void EngineImpl::SignalWorker() {
  {
    std::lock_guard lock(worker_mu_);
    work_signalled_ = true;
  }
  worker_cv_.notify_all();
}

Result<json> EngineImpl::Ingest(std::string_view scope, const json& body,
                                const IngestContext& context) {
  return Noted(IngestNow(scope, body, context));
}

Result<json> EngineImpl::IngestNow(std::string_view scope, const json& body,
                                   const IngestContext& context) {
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  const size_t key_length = CodePointLength(context.idempotency_key);
  if (key_length < 8 || key_length > 200) return KeyError("Idempotency-Key");
  auto prepared = PrepareIngest(scope, body, context.idempotency_key, context);
  if (!prepared) return prepared.error();
  if (options_.shared) {
    std::vector<PreparedIngest> one;
    one.push_back(std::move(*prepared));
    TMCRA_ASSIGN_OR_RETURN(auto views, AcceptShared(scope, one, false));
    return std::move(views.front());
  }

  std::lock_guard lock(api_mu_);
  auto api_db = ApiDb();
  if (!api_db) return api_db.error();
  db::Database& db = **api_db;
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  bool created = false;
  auto view = StoreIngest(db, scope, *prepared, &created);
  if (!view) return view.error();
  if (auto s = tx->Commit(); !s) return s.error();
  if (created) SignalWorker();
  return view;
}

Result<json> EngineImpl::IngestBatch(std::string_view scope, const json& body,
                                     const IngestContext& context) {
  return Noted(IngestBatchNow(scope, body, context));
}

namespace {

// The batch request's own fields: a dictionary holding only `items`, 1..100 of them.
Result<const json*> BatchItems(std::string_view scope, const json& body) {
  if (!IsValidScope(scope)) return ValidationError("scope", "invalid scope name");
  if (!body.is_object()) return ValidationError("body", "Input should be a valid dictionary");
  for (const auto& [key, value] : body.items()) {
    if (key != "items")
      return ValidationError(key, "Extra inputs are not permitted", "extra_forbidden");
  }
  auto items = body.find("items");
  if (items == body.end() || !items->is_array()) {
    return ValidationError("items", "Input should be a valid list", "list_type");
  }
  if (items->empty() || items->size() > 100) {
    return ValidationError("items", "List should have 1..100 items");
  }
  return &*items;
}

// Item `i`'s idempotency key: present, 8..200 characters, not used by an earlier item.
Result<std::string> BatchItemKey(const json& item, size_t i, std::set<std::string>& keys) {
  if (!item.is_object())
    return ItemError(ValidationError("item", "Input should be a valid dictionary"), i);
  auto key_it = item.find("idempotency_key");
  if (key_it == item.end() || !key_it->is_string()) {
    return ItemError(ValidationError("idempotency_key", "Field required", "missing"), i);
  }
  std::string key = key_it->get<std::string>();
  const size_t key_length = CodePointLength(key);
  if (key_length < 8 || key_length > 200) {
    return ItemError(ValidationError("idempotency_key", "must be 8..200 characters"), i);
  }
  if (!keys.insert(key).second) {
    return ItemError(ValidationError("idempotency_key", "must be unique within the batch"), i);
  }
  return key;
}

}  // namespace

Result<std::vector<EngineImpl::PreparedIngest>> EngineImpl::PrepareBatch(
    std::string_view scope, const json& items, const IngestContext& context) {
  std::vector<PreparedIngest> prepared;
  std::set<std::string> keys;
  size_t total_messages = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    TMCRA_ASSIGN_OR_RETURN(std::string key, BatchItemKey(items[i], i, keys));
    json request = items[i];
    request.erase("idempotency_key");
    auto p = PrepareIngest(scope, request, key, context);
    if (!p) return ItemError(p.error(), i);
    if (request.contains("messages") && request["messages"].is_array()) {
      total_messages += request["messages"].size();
    }
    prepared.push_back(std::move(*p));
  }
  if (total_messages > 5000) {
    return ValidationError("items", "a batch may hold at most 5000 messages in total");
  }
  return prepared;
}

Result<json> EngineImpl::IngestBatchNow(std::string_view scope, const json& body,
                                        const IngestContext& context) {
  TMCRA_ASSIGN_OR_RETURN(const json* items, BatchItems(scope, body));
  TMCRA_ASSIGN_OR_RETURN(const auto prepared, PrepareBatch(scope, *items, context));
  if (options_.shared) {
    TMCRA_ASSIGN_OR_RETURN(auto views, AcceptShared(scope, prepared, true));
    json jobs = json::array();
    for (json& view : views) jobs.push_back(std::move(view));
    return json{{"scope_name", scope}, {"jobs", std::move(jobs)}};
  }
  std::lock_guard lock(api_mu_);
  TMCRA_ASSIGN_OR_RETURN(db::Database * api_db, ApiDb());
  db::Database& db = *api_db;
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  json jobs = json::array();
  bool any_created = false;
  for (size_t i = 0; i < prepared.size(); ++i) {
    bool created = false;
    auto view = StoreIngest(db, scope, prepared[i], &created);
    if (!view) {
      Error e = view.error();
      e.message = "items." + std::to_string(i) + ": " + e.message;
      return e;
    }
    any_created = any_created || created;
    jobs.push_back(std::move(*view));
  }
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  if (any_created) SignalWorker();
  return json{{"scope_name", scope}, {"jobs", std::move(jobs)}};
}

Status EngineImpl::Ready() {
  if (options_.shared) {
    auto head = options_.shared->Head();
    if (!head) return head.error();
  }
  {
    auto reader = BorrowReader();
    if (!reader) return reader.error();
    if (auto s = reader->db().QueryInt("SELECT count(*) FROM scopes WHERE 0"); !s) {
      return s.error();
    }
  }
  if (!writes_failing_.load()) return Ok();
  return Noted(ProbeWrite());
}

// Whether the store's file system has room for a write again: a scratch file beside the
// store gets kWriteProbeBytes allocated, then goes. (A write of SQLite's own could succeed in
// the few pages left while every ingest still fails.)
Status EngineImpl::ProbeWrite() {
  const std::string probe = options_.path + ".write-probe";
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Error::StorageFull(probe + ": " + std::strerror(errno));
  const int rc = posix_fallocate(fd, 0, kWriteProbeBytes);
  close(fd);
  unlink(probe.c_str());
  if (rc == ENOSPC || rc == EDQUOT) return Error::StorageFull(probe + ": " + std::strerror(rc));
  return Ok();  // (a file system without fallocate: the next real write tells)
}

Result<json> EngineImpl::GetJob(std::string_view job_id) {
  if (options_.shared) return SharedGetJob(job_id);
  auto reader = BorrowReader();
  if (!reader) return reader.error();
  auto job = LoadJob(reader->db(), job_id, options_.public_base_url, nullptr);
  if (!job) return job.error();
  if (!*job) return Error::Api(Errc::kNotFound, "not_found", "job not found");
  return std::move(**job);
}

Result<std::optional<std::string>> EngineImpl::ClaimJobForTest(double lease_seconds) {
  std::lock_guard lock(api_mu_);
  auto api_db = ApiDb();
  if (!api_db) return api_db.error();
  db::Database& db = **api_db;
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  const double now = NowSeconds();
  auto pick =
      db.Prepare("SELECT job_id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1");
  if (!pick) return pick.error();
  auto row = pick->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::string>();
  const std::string job_id = pick->Text(0);
  auto claim = db.Prepare(
      "UPDATE jobs SET status = 'running', attempts = attempts + 1, started_at = ?, "
      "heartbeat_at = ?, lease_owner = 'dead-process', lease_expires_at = ?, updated_at = ? "
      "WHERE job_id = ?");
  if (!claim) return claim.error();
  claim->Bind(1, now).Bind(2, now).Bind(3, now + lease_seconds).Bind(4, now).Bind(5, job_id);
  if (auto s = claim->Run(); !s) return s.error();
  if (auto s = tx->Commit(); !s) return s.error();
  return std::optional<std::string>(job_id);
}

Result<int> EngineImpl::RunJobs(db::Database& db, int max_jobs) {
  if (options_.shared) {
    TMCRA_ASSIGN_OR_RETURN(const int ran, RunSharedJobs(max_jobs));
    TMCRA_RETURN_IF_ERROR(SyncReplica());
    return ran;
  }
  if (auto s = ReleaseOrphanedClaims(db); !s) return s.error();
  std::vector<std::string> claimed;
  auto found = ClaimJobs(db, max_jobs, claimed);
  if (!found) return found.error();
  if (*found == 0) return 0;
  if (claimed.empty()) return 1;  // only exhausted jobs were found; look again
  TMCRA_FAILPOINT("engine.job.after_claim");
  auto written = WriteClaimedJobs(db, claimed);
  if (!written) {
    // The claims would hold the jobs until their lease ran out, each failure counted as an
    // attempt: a full disk would use up a job's attempts and fail it. They go back to pending
    // at once, the attempt not counted, so the next turn tries them again.
    std::lock_guard lock(orphans_mu_);
    orphaned_claims_.insert(orphaned_claims_.end(), claimed.begin(), claimed.end());
    return written.error();
  }
  return *written;
}

// Step 1: claims the oldest pending jobs, and running ones whose holder lost its lease, into
// `claimed` (jobs out of attempts are failed instead). Returns how many jobs were found.
namespace {

// Up to `max_jobs` jobs to claim, each with its attempt number: pending ones, and running ones
// whose lease expired or whose holder's process is gone.
Result<std::vector<std::pair<std::string, int64_t>>> FindClaimableJobs(db::Database& db,
                                                                       int max_jobs, double now) {
  TMCRA_ASSIGN_OR_RETURN(auto pick,
                         db.Prepare("SELECT job_id, attempts, NULL, NULL FROM jobs WHERE status = "
                                    "'pending' UNION ALL SELECT job_id, attempts, lease_owner, "
                                    "lease_expires_at FROM jobs WHERE status = 'running' LIMIT ?"));
  pick.Bind(1, max_jobs * 4);
  std::vector<std::pair<std::string, int64_t>> found;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, pick.Step());
    if (!row || static_cast<int>(found.size()) >= max_jobs) break;
    const bool running = !pick.IsNull(2) || !pick.IsNull(3);
    if (running && pick.Double(3) >= now && !ProcessOwnerIsDead(pick.Text(2))) continue;
    found.emplace_back(pick.Text(0), pick.Int(1) + 1);
  }
  pick.Reset();
  return found;
}

}  // namespace

Result<int> EngineImpl::ClaimJobs(db::Database& db, int max_jobs,
                                  std::vector<std::string>& claimed) {
  // A claim is a lease: if a power failure loses it, the job is claimed again.
  db::RelaxedDurability relaxed(db);
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  const double now = NowSeconds();
  TMCRA_ASSIGN_OR_RETURN(const auto found, FindClaimableJobs(db, max_jobs, now));
  if (found.empty()) return 0;
  TMCRA_ASSIGN_OR_RETURN(
      auto fail, db.Prepare("UPDATE jobs SET status = 'failed', finished_at = ?, updated_at = ?, "
                            "lease_owner = NULL, lease_expires_at = NULL, error_json = ? "
                            "WHERE job_id = ?"));
  TMCRA_ASSIGN_OR_RETURN(
      auto claim, db.Prepare("UPDATE jobs SET status = 'running', attempts = ?, started_at = "
                             "COALESCE(started_at, ?), heartbeat_at = ?, lease_owner = ?, "
                             "lease_expires_at = ?, updated_at = ? WHERE job_id = ?"));
  const std::string exhausted = json{
      {"code", "job_attempts_exhausted"},
      {"message", "the job did not complete after " + std::to_string(kMaxJobAttempts) +
                      " attempts"}}.dump();
  for (const auto& [job_id, attempts] : found) {
    if (attempts > kMaxJobAttempts) {
      fail.Reset();
      fail.Bind(1, now).Bind(2, now).Bind(3, exhausted).Bind(4, job_id);
      TMCRA_RETURN_IF_ERROR(fail.Run());
      continue;
    }
    claim.Reset();
    claim.Bind(1, attempts)
        .Bind(2, now)
        .Bind(3, now)
        .Bind(4, owner_)
        .Bind(5, now + options_.lease_seconds)
        .Bind(6, now)
        .Bind(7, job_id);
    TMCRA_RETURN_IF_ERROR(claim.Run());
    claimed.push_back(job_id);
  }
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return static_cast<int>(found.size());
}

// Step 2: writes the records of the claimed jobs and their indexes, and finishes the jobs,
// atomically. Returns how many jobs were claimed.
namespace {

// The statements a job transaction runs, prepared once per transaction.
struct JobStatements {
  db::Statement load;      // a claimed job's scope and payload
  db::Statement insert;    // a record (ignored when the message is stored already)
  db::Statement fts;       // the word index
  db::Statement tri;       // the trigram index
  db::Statement cjk;       // the CJK index
  db::Statement advance;   // the CJK index's watermark
  db::Statement existing;  // the seq of a message stored before
  db::Statement upsert;    // the scope's counts and watermark
  db::Statement done;      // a job's outcome
  // The stem index's writes (memory/stems.h): the word index's tokenizer, the option, and the
  // forms added in this transaction (remembered once it commits).
  std::optional<WordTokenizer> tokenizer;
  std::string stem_language;
  KnownForms* known = nullptr;
  std::vector<std::string> stems_added;

  static Result<JobStatements> Prepare(db::Database& db) {
    auto load = db.Prepare(
        "SELECT scope_name, payload_json FROM jobs WHERE job_id = ? AND status = 'running' "
        "AND lease_owner = ?");
    auto insert = db.Prepare(
        "INSERT OR IGNORE INTO records(record_id, scope_name, session_id, message_id, role, "
        "content, occurred_at, timestamp, metadata_json, agent_id, target_agent_id, job_id) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    auto fts = db.Prepare("INSERT INTO records_fts(rowid, content) VALUES(?, ?)");
    auto tri = db.Prepare("INSERT INTO records_tri(rowid, content) VALUES(?, ?)");
    auto cjk = db.Prepare("INSERT INTO records_cjk(rowid, grams) VALUES(?, ?)");
    auto advance = db.Prepare(kCjkAdvanceSql);
    auto existing = db.Prepare(
        "SELECT event_seq FROM records WHERE scope_name = ? AND session_id = ? AND message_id = "
        "?");
    auto upsert = db.Prepare(
        "INSERT INTO scopes(name, record_count, last_event_seq, last_job_id, created_at, "
        "updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT(name) DO UPDATE SET "
        "record_count = record_count + ?2, last_event_seq = MAX(COALESCE(last_event_seq, 0), ?3), "
        "last_job_id = ?4, updated_at = ?5");
    auto done = db.Prepare(
        "UPDATE jobs SET status = ?, finished_at = ?, updated_at = ?, heartbeat_at = ?, "
        "lease_owner = NULL, lease_expires_at = NULL, result_json = ?, error_json = ?, "
        "payload_json = NULL WHERE job_id = ?");
    for (auto* st : {&load, &insert, &fts, &tri, &cjk, &advance, &existing, &upsert, &done}) {
      if (!*st) return st->error();
    }
    return JobStatements{std::move(*load),
                         std::move(*insert),
                         std::move(*fts),
                         std::move(*tri),
                         std::move(*cjk),
                         std::move(*advance),
                         std::move(*existing),
                         std::move(*upsert),
                         std::move(*done),
                         std::nullopt,
                         {},
                         nullptr,
                         {}};
  }
};

// What one job wrote: the newest seq of its messages, and how many were new or stored before.
struct JobTally {
  int64_t max_seq = 0;
  int64_t written = 0;
  int64_t duplicates = 0;
};

// Marks a job failed because its stored payload cannot be read.
Status FailUnreadableJob(JobStatements& st, const std::string& job_id, double now) {
  st.done.Reset();
  st.done.Bind(1, "failed")
      .Bind(2, now)
      .Bind(3, now)
      .Bind(4, now)
      .BindNull(5)
      .Bind(6,
            json{{"code", "invalid_payload"}, {"message", "stored payload is unreadable"}}.dump())
      .Bind(7, job_id);
  return st.done.Run();
}

// Adds a new record's text to the word index, and where it has non-ASCII text to the trigram
// index (which serves queries with non-ASCII words: CJK has no spaces; ASCII-only text cannot
// hold such a word, and the word index finds it) and the CJK index (a row only for a record
// with CJK text; a forget deletes it with the same derived text: memory/admin.cc).
Status IndexRecord(db::Database& db, JobStatements& st, int64_t seq, const std::string& content) {
  const bool non_ascii =
      std::any_of(content.begin(), content.end(), [](char c) { return (c & 0x80) != 0; });
  for (db::Statement* index : {&st.fts, &st.tri}) {
    if (index == &st.tri && !non_ascii) continue;
    index->Reset();
    index->Bind(1, seq).Bind(2, content);
    TMCRA_RETURN_IF_ERROR(index->Run());
  }
  if (non_ascii) {
    const std::string grams = CjkIndexText(content);
    if (!grams.empty()) {
      st.cjk.Reset();
      st.cjk.Bind(1, seq).Bind(2, grams);
      TMCRA_RETURN_IF_ERROR(st.cjk.Run());
    }
  }
  if (!st.tokenizer) return Ok();
  const std::vector<std::string> tokens = st.tokenizer->Tokens(content);
  return st.known->Write(db, tokens, LanguageFor(tokens, st.stem_language, 2), st.stems_added);
}

// Stores one message of a job as a record and indexes it; a message stored before (a retry
// under another key) keeps its one copy. Returns the record's seq (0 if none is found).
Result<int64_t> WriteMessage(db::Database& db, JobStatements& st, const std::string& job_id,
                             const std::string& scope, const IngestRequest& request,
                             const IngestMessage& m, JobTally& tally) {
  const auto text_field = [&](const char* key) -> std::optional<std::string> {
    auto it = m.metadata.find(key);
    if (it == m.metadata.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  st.insert.Reset();
  st.insert.Bind(1, RecordIdOf(scope, request.session_id, m.message_id))
      .Bind(2, scope)
      .Bind(3, request.session_id)
      .Bind(4, m.message_id)
      .Bind(5, m.role)
      .Bind(6, m.content)
      .Bind(7, m.occurred_at)
      .Bind(8, m.timestamp)
      .Bind(9, CanonicalJson(m.metadata))
      .Bind(10, text_field("agent_id"))
      .Bind(11, text_field("target_agent_id"))
      .Bind(12, job_id);
  TMCRA_RETURN_IF_ERROR(st.insert.Run());
  int64_t seq = 0;
  if (db.Changes() == 1) {
    seq = db.LastInsertRowId();
    TMCRA_RETURN_IF_ERROR(IndexRecord(db, st, seq, m.content));
    ++tally.written;
  } else {
    st.existing.Reset();
    st.existing.Bind(1, scope).Bind(2, request.session_id).Bind(3, m.message_id);
    TMCRA_ASSIGN_OR_RETURN(const bool found, st.existing.Step());
    if (found) seq = st.existing.Int(0);
    ++tally.duplicates;
  }
  tally.max_seq = std::max(tally.max_seq, seq);
  return seq;
}

// The scope's counts and watermark, and the job's outcome.
Status FinishJob(JobStatements& st, const std::string& job_id, const std::string& scope,
                 const JobTally& tally, double now) {
  st.upsert.Reset();
  st.upsert.Bind(1, scope)
      .Bind(2, tally.written)
      .Bind(3, tally.max_seq)
      .Bind(4, job_id)
      .Bind(5, now);
  TMCRA_RETURN_IF_ERROR(st.upsert.Run());
  const json result = JobResultJson(tally.max_seq, tally.written, tally.duplicates);
  st.done.Reset();
  st.done.Bind(1, "succeeded")
      .Bind(2, now)
      .Bind(3, now)
      .Bind(4, now)
      .Bind(5, result.dump())
      .BindNull(6)
      .Bind(7, job_id);
  return st.done.Run();
}

// Moves the stem index's watermark (memory/stems.h, StemWatermark).
Status AdvanceStemWatermark(db::Database& db, int64_t through) {
  TMCRA_ASSIGN_OR_RETURN(
      auto advance,
      db.Prepare("UPDATE index_watermarks SET through_seq = ?1 WHERE name = 'word_stems'"));
  advance.Bind(1, through);
  return advance.Run();
}

// The CJK and stem indexes' watermarks and the newest record, read before a transaction wrote.
struct Watermarks {
  int64_t cjk = 0;
  int64_t stems = 0;
  int64_t newest = 0;
};

// Moves the CJK and stem watermarks past the records just written up to `newest_written`, each
// when it had reached every record before them (else its back-fill covers them).
Status AdvanceWatermarks(db::Database& db, JobStatements& st, const Watermarks& at,
                         int64_t newest_written) {
  if (at.cjk == at.newest && newest_written > at.newest) {
    st.advance.Bind(1, newest_written);
    TMCRA_RETURN_IF_ERROR(st.advance.Run());
  }
  if (st.tokenizer && at.stems == at.newest && newest_written > at.newest) {
    TMCRA_RETURN_IF_ERROR(AdvanceStemWatermark(db, newest_written));
  }
  return Ok();
}

// Readies `st` to write the stem index in `language` unless stemming is off ("none"): the
// tokenizer, and the known forms brought in line with the table's generation.
Status StartStemWrites(db::Database& db, JobStatements& st, const std::string& language,
                       KnownForms& known) {
  if (language == "none") return Ok();
  TMCRA_ASSIGN_OR_RETURN(const int64_t generation, StemGeneration(db));
  known.Sync(generation);
  TMCRA_ASSIGN_OR_RETURN(WordTokenizer tokenizer, WordTokenizer::Open(db));
  st.tokenizer.emplace(std::move(tokenizer));
  st.stem_language = language;
  st.known = &known;
  return Ok();
}

}  // namespace

Result<int> EngineImpl::WriteClaimedJobs(db::Database& db,
                                         const std::vector<std::string>& claimed) {
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  TMCRA_ASSIGN_OR_RETURN(JobStatements st, JobStatements::Prepare(db));
  // Whether every record so far is in the CJK index (the watermark is the newest record): then
  // the records written here, which are, move it on. Otherwise RepairCjkIndex looks at them.
  // The same for the stem index.
  auto indexed = CjkWatermark(db);
  auto before = db.QueryInt("SELECT max(event_seq) FROM records");
  if (!indexed) return indexed.error();
  if (!before) return before.error();
  TMCRA_ASSIGN_OR_RETURN(const int64_t stemmed, StemWatermark(db));
  TMCRA_RETURN_IF_ERROR(StartStemWrites(db, st, options_.stem_language, known_forms_));
  int64_t newest_written = 0;
  const double now = NowSeconds();
  for (const std::string& job_id : claimed) {
    st.load.Reset();
    st.load.Bind(1, job_id).Bind(2, owner_);
    TMCRA_ASSIGN_OR_RETURN(const bool found, st.load.Step());
    if (!found) continue;  // someone else took it over
    const std::string scope = st.load.Text(0);
    const json payload = ParseJsonLenient(st.load.Text(1));
    if (payload.is_discarded() || !payload.is_object()) {
      TMCRA_RETURN_IF_ERROR(FailUnreadableJob(st, job_id, now));
      continue;
    }
    const IngestRequest request = IngestRequest::FromJson(payload);
    JobTally tally;
    for (const auto& m : request.messages) {
      const int64_t written_before = tally.written;
      TMCRA_ASSIGN_OR_RETURN(const int64_t seq,
                             WriteMessage(db, st, job_id, scope, request, m, tally));
      if (tally.written > written_before) newest_written = std::max(newest_written, seq);
    }
    TMCRA_RETURN_IF_ERROR(FinishJob(st, job_id, scope, tally, now));
  }
  TMCRA_RETURN_IF_ERROR(AdvanceWatermarks(db, st, {*indexed, stemmed, *before}, newest_written));
  TMCRA_FAILPOINT("engine.job.before_commit");
  TMCRA_RETURN_IF_ERROR(tx->Commit());
  known_forms_.Remember(st.stems_added);
  index_writes_.fetch_add(1);  // the indexes may need compacting now
  return static_cast<int>(claimed.size());
}

namespace {

// Adds one record of the shared store's feed to the index with its own event_seq, and counts it
// in its scope; false when the index holds it already.
Result<bool> ApplyWrittenRecord(db::Database& db, JobStatements& st, db::Statement& place,
                                const SharedStore::Change& change, double now) {
  const SharedStore::NewRecord& r = change.record;
  place.Reset();
  place.Bind(1, change.event_seq)
      .Bind(2, r.record_id)
      .Bind(3, change.scope_name)
      .Bind(4, r.session_id)
      .Bind(5, r.message_id)
      .Bind(6, r.role)
      .Bind(7, r.content)
      .Bind(8, r.occurred_at)
      .Bind(9, r.timestamp)
      .Bind(10, r.metadata_json)
      .Bind(11, r.agent_id)
      .Bind(12, r.target_agent_id)
      .Bind(13, change.job_id);
  TMCRA_RETURN_IF_ERROR(place.Run());
  if (db.Changes() != 1) return false;
  TMCRA_RETURN_IF_ERROR(IndexRecord(db, st, change.event_seq, r.content));
  st.upsert.Reset();
  st.upsert.Bind(1, change.scope_name)
      .Bind(2, int64_t{1})
      .Bind(3, change.event_seq)
      .Bind(4, change.job_id)
      .Bind(5, now);
  TMCRA_RETURN_IF_ERROR(st.upsert.Run());
  return true;
}

// Notes in the index how far it holds the feed, and the feed's format it applies.
Status NoteFeedApplied(db::Database& db, int64_t through, int64_t format) {
  TMCRA_ASSIGN_OR_RETURN(auto note,
                         db.Prepare("INSERT INTO maintenance(name, value) VALUES(?, ?) ON "
                                    "CONFLICT(name) DO UPDATE SET value = excluded.value"));
  for (const auto& [name, value] :
       {std::pair{"shared_through", through}, std::pair{"shared_feed_format", format}}) {
    note.Reset();
    note.Bind(1, name).Bind(2, value);
    TMCRA_RETURN_IF_ERROR(note.Run());
  }
  return Ok();
}

}  // namespace

Result<int64_t> EngineImpl::ApplySharedChanges(db::Database& db, const SharedStore::Changes& feed) {
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  TMCRA_ASSIGN_OR_RETURN(JobStatements st, JobStatements::Prepare(db));
  TMCRA_ASSIGN_OR_RETURN(
      auto place,
      db.Prepare("INSERT OR IGNORE INTO records(event_seq, record_id, scope_name, session_id, "
                 "message_id, role, content, occurred_at, timestamp, metadata_json, agent_id, "
                 "target_agent_id, job_id) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  TMCRA_ASSIGN_OR_RETURN(const int64_t indexed, CjkWatermark(db));
  TMCRA_ASSIGN_OR_RETURN(const int64_t before, db.QueryInt("SELECT max(event_seq) FROM records"));
  TMCRA_ASSIGN_OR_RETURN(const int64_t stemmed, StemWatermark(db));
  TMCRA_RETURN_IF_ERROR(StartStemWrites(db, st, options_.stem_language, known_forms_));
  int64_t newest_written = 0;
  int64_t deleted = 0;
  const double now = NowSeconds();
  // Deletions wait to be applied together (one pass over the indexes) until an addition follows
  // them: in the feed's order, a message deleted and written again in one batch ends up present.
  std::vector<int64_t> doomed;
  std::vector<std::string> doomed_feedback;
  const auto apply_deletions = [&]() -> Status {
    if (doomed.empty() && doomed_feedback.empty()) return Ok();
    TMCRA_RETURN_IF_ERROR(ApplySharedDeletions(db, doomed, doomed_feedback));
    doomed.clear();
    doomed_feedback.clear();
    return Ok();
  };
  for (const SharedStore::Change& change : feed.changes) {
    switch (change.kind) {
      case SharedStore::ChangeKind::kRecordDeleted:
        doomed.push_back(change.event_seq);
        ++deleted;
        break;
      case SharedStore::ChangeKind::kFeedbackDeleted:
        doomed_feedback.push_back(change.feedback.feedback_id);
        break;
      case SharedStore::ChangeKind::kFeedbackAdded: {
        TMCRA_RETURN_IF_ERROR(apply_deletions());
        TMCRA_ASSIGN_OR_RETURN(const bool added, AddSharedFeedback(db, change.feedback));
        (void)added;  // false: applied before
        break;
      }
      case SharedStore::ChangeKind::kRecordWritten: {
        TMCRA_RETURN_IF_ERROR(apply_deletions());
        TMCRA_ASSIGN_OR_RETURN(const bool added, ApplyWrittenRecord(db, st, place, change, now));
        if (added) newest_written = std::max(newest_written, change.event_seq);
        break;
      }
    }
  }
  TMCRA_RETURN_IF_ERROR(apply_deletions());
  TMCRA_RETURN_IF_ERROR(AdvanceWatermarks(db, st, {indexed, stemmed, before}, newest_written));
  TMCRA_RETURN_IF_ERROR(NoteFeedApplied(db, feed.through, kSharedFeedFormat));
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  known_forms_.Remember(st.stems_added);
  index_writes_.fetch_add(1);
  return deleted;
}

// Claims whose jobs could not be written go back to pending (the attempt not counted). On a
// full disk this write may fail as well: the claims stay listed and the next turn tries again.
Status EngineImpl::ReleaseOrphanedClaims(db::Database& db) {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(orphans_mu_);
    if (orphaned_claims_.empty()) return Ok();
    ids = orphaned_claims_;
  }
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto release = db.Prepare(
      "UPDATE jobs SET status = 'pending', attempts = MAX(attempts - 1, 0), "
      "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
      "WHERE job_id = ? AND status = 'running' AND lease_owner = ?");
  if (!release) return release.error();
  const double now = NowSeconds();
  for (const std::string& id : ids) {
    release->Reset();
    release->Bind(1, now).Bind(2, id).Bind(3, owner_);
    if (auto s = release->Run(); !s) return s.error();
  }
  if (auto s = tx->Commit(); !s) return s.error();
  std::lock_guard lock(orphans_mu_);
  orphaned_claims_.erase(orphaned_claims_.begin(),
                         orphaned_claims_.begin() + static_cast<std::ptrdiff_t>(ids.size()));
  return Ok();
}

Result<bool> EngineImpl::RepairCjkIndex(db::Database& db) {
  // The watermark and the newest record, in the caller's transaction.
  const auto range = [&db]() -> Result<std::pair<int64_t, int64_t>> {
    auto indexed = CjkWatermark(db);
    if (!indexed) return indexed.error();
    auto newest = db.QueryInt("SELECT max(event_seq) FROM records");
    if (!newest) return newest.error();
    return std::pair{*indexed, *newest};
  };
  // Looked at without the write lock first: nearly always there is nothing to do.
  {
    auto tx = db::Transaction::Deferred(db);
    if (!tx) return tx.error();
    auto seen = range();
    if (!seen) return seen.error();
    if (seen->first >= seen->second) return false;
    if (auto s = tx->Commit(); !s) return s.error();
  }
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto seen = range();
  if (!seen) return seen.error();
  const auto [indexed, newest] = *seen;
  if (indexed >= newest) return false;
  const int64_t through = std::min(newest, indexed + kCjkRepairBatch);
  auto missing = db.Prepare(
      "SELECT r.event_seq, r.content FROM records r WHERE r.event_seq > ?1 AND "
      "r.event_seq <= ?2 AND NOT EXISTS (SELECT 1 FROM records_cjk_docsize d "
      "WHERE d.id = r.event_seq)");
  auto insert = db.Prepare("INSERT INTO records_cjk(rowid, grams) VALUES(?, ?)");
  auto advance = db.Prepare(kCjkAdvanceSql);
  for (auto* st : {&missing, &insert, &advance}) {
    if (!*st) return st->error();
  }
  missing->Bind(1, indexed).Bind(2, through);
  int64_t added = 0;
  for (;;) {
    auto row = missing->Step();
    if (!row) return row.error();
    if (!*row) break;
    const std::string grams = CjkIndexText(missing->Text(1));
    if (grams.empty()) continue;
    insert->Reset();
    insert->Bind(1, missing->Int(0)).Bind(2, grams);
    if (auto s = insert->Run(); !s) return s.error();
    ++added;
  }
  advance->Bind(1, through);
  if (auto s = advance->Run(); !s) return s.error();
  if (auto s = tx->Commit(); !s) return s.error();
  if (added > 0) {
    index_writes_.fetch_add(1);  // the index may need compacting now
    spdlog::debug("CJK index: {} records added, indexed through {}", added, through);
  }
  return through < newest;
}

Result<bool> EngineImpl::RepairStemIndex(db::Database& db) {
  if (options_.stem_language == "none") return false;
  {  // looked at without the write lock first: nearly always there is nothing to do
    TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Deferred(db));
    TMCRA_ASSIGN_OR_RETURN(const int64_t stemmed, StemWatermark(db));
    TMCRA_ASSIGN_OR_RETURN(const int64_t newest, db.QueryInt("SELECT max(event_seq) FROM records"));
    if (stemmed >= newest) return false;
    TMCRA_RETURN_IF_ERROR(tx.Commit());
  }
  TMCRA_ASSIGN_OR_RETURN(auto tx, db::Transaction::Immediate(db));
  TMCRA_ASSIGN_OR_RETURN(const int64_t stemmed, StemWatermark(db));
  TMCRA_ASSIGN_OR_RETURN(const int64_t newest, db.QueryInt("SELECT max(event_seq) FROM records"));
  if (stemmed >= newest) return false;
  const int64_t through = std::min(newest, stemmed + kCjkRepairBatch);
  TMCRA_ASSIGN_OR_RETURN(
      auto rows,
      db.Prepare("SELECT content FROM records WHERE event_seq > ?1 AND event_seq <= ?2"));
  rows.Bind(1, stemmed).Bind(2, through);
  TMCRA_ASSIGN_OR_RETURN(const int64_t generation, StemGeneration(db));
  known_forms_.Sync(generation);
  TMCRA_ASSIGN_OR_RETURN(WordTokenizer tokenizer, WordTokenizer::Open(db));
  std::vector<std::string> added;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, rows.Step());
    if (!row) break;
    const std::vector<std::string> tokens = tokenizer.Tokens(rows.Text(0));
    TMCRA_RETURN_IF_ERROR(
        known_forms_.Write(db, tokens, LanguageFor(tokens, options_.stem_language, 2), added));
  }
  TMCRA_RETURN_IF_ERROR(AdvanceStemWatermark(db, through));
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  known_forms_.Remember(added);
  spdlog::debug("stem index: {} new forms, through {}", added.size(), through);
  return through < newest;
}

Result<int> EngineImpl::RunPendingJobs() {
  if (options_.shared) {
    int ran = 0;
    for (;;) {
      TMCRA_ASSIGN_OR_RETURN(const int r, RunSharedJobs(kJobsPerTransaction));
      if (r == 0) break;
      ran += r;
    }
    TMCRA_RETURN_IF_ERROR(SyncReplica());
    return ran;
  }
  std::lock_guard lock(api_mu_);
  auto api_db = ApiDb();
  if (!api_db) return api_db.error();
  int ran = 0;
  for (;;) {
    auto r = RunJobs(**api_db, kJobsPerTransaction);
    if (!r) return r.error();
    if (*r == 0) break;
    ran += *r;
  }
  for (;;) {  // and the CJK index's back-fill, as the worker does when idle
    auto more = RepairCjkIndex(**api_db);
    if (!more) return more.error();
    if (!*more) return ran;
  }
}

Result<bool> EngineImpl::CompactOnce(db::Database& db, bool force) {
  static constexpr const char* kIndexTables[] = {"records_fts", "records_tri", "records_cjk"};
  std::lock_guard lock(compaction_mu_);
  // Jobs run since the indexes were last found compact; a job that commits while this looks
  // raises the count again, so it is looked at next time.
  const uint64_t writes = index_writes_.load();
  if (!force && writes == compact_as_of_) return false;
  for (const char* table : kIndexTables) {
    auto shape = ReadIndexShape(db, table);
    if (!shape) return shape.error();
    const CompactionStep step = ChooseCompaction(*shape);
    if (step == CompactionStep::kNone) continue;
    if (step == CompactionStep::kFull) {
      spdlog::debug("compacting {}: {} segments, {} pages", table, shape->segments, shape->pages);
    }
    if (shape->levels >= kMaxLevelsForFullMerge && !levels_warned_) {
      levels_warned_ = true;
      spdlog::warn("{}: {} levels in the FTS5 structure; full rewrites stop here", table,
                   shape->levels);
    }
    auto changed = CompactStep(db, table, step, options_.compaction_step_pages);
    if (!changed) return changed.error();
    if (*changed) return true;  // more may follow: look again
  }
  compact_as_of_ = writes;  // nothing to do: no need to look again until a job writes
  return false;
}

Result<int> EngineImpl::CompactIndexes() {
  std::lock_guard lock(api_mu_);
  int steps = 0;
  for (;;) {
    auto api_db = ApiDb();
    if (!api_db) return api_db.error();
    auto r = CompactOnce(**api_db, /*force=*/true);  // asked for: look whatever the count says
    if (!r) return r.error();
    if (!*r) return steps;
    ++steps;
  }
}

// Checkpoint starvation (sqlite.org/wal.html, "Avoiding Excessively Large WAL Files"): SQLite's
// automatic checkpoint copies the WAL's frames into the database only up to the oldest snapshot
// a reader still holds, and the WAL is reset only once every frame is copied. Under readers that
// always overlap (tmcra-memd under steady recall traffic) that never happens, and the WAL grows
// for as long as writes come: 67 MB in one minute of 16 clients recalling with 50 ingests/s,
// with every read slower for it. Past the limit, a TRUNCATE checkpoint takes the write lock,
// waits for the readers of older snapshots to finish (recalls take milliseconds; new readers
// start from the database once every frame is copied, so they do not hold it up), copies every
// frame and empties the file. It waits at most a quarter of a second for those readers; writers
// wait for that and for the copy (their busy timeout is 10 s). When readers are still there (one
// that never lets go is another bug), it is tried again after 2, 4, 8 … up to 60 s, with a
// warning once the waits reach a minute.
bool EngineImpl::BoundWal(db::Database& db) {
  struct stat st {};
  const std::string wal = options_.path + "-wal";
  if (stat(wal.c_str(), &st) != 0 || st.st_size <= options_.wal_limit_bytes) return false;
  // The connection's own busy timeout, put back afterwards (SQLite reads it as a pragma only).
  int timeout_ms = db::Database::Options{}.busy_timeout_ms;
  if (auto q = db.Prepare("PRAGMA busy_timeout"); q) {
    if (auto row = q->Step(); row && *row) timeout_ms = static_cast<int>(q->Int(0));
  }
  sqlite3* handle = db.handle();
  sqlite3_busy_timeout(handle, 250);
  int frames = 0;
  int copied = 0;
  const int rc =
      sqlite3_wal_checkpoint_v2(handle, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &frames, &copied);
  sqlite3_busy_timeout(handle, timeout_ms);
  if (rc != SQLITE_OK) {
    spdlog::debug("WAL of {} bytes not truncated yet: {}", st.st_size, sqlite3_errstr(rc));
    return true;
  }
  spdlog::info("truncated the WAL of {} bytes (readers had kept it from being reset)", st.st_size);
  return false;
}

struct EngineImpl::WorkerSchedule {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> last_job;              // when this worker last ran a job
  Clock::time_point retry_at = Clock::time_point::min();  // after a failed compaction step
  std::optional<Clock::time_point> wal_next;              // when BoundWal looks next
  std::chrono::seconds wal_backoff{1};
  Clock::time_point repair_next = Clock::time_point::min();  // when RepairCjkIndex looks next
  Clock::time_point erase_next = Clock::time_point::min();   // when a pending erase is retried
};

// Opens the worker's own connection, with tmcra_bm25 registered; false (logged) when it cannot.
bool EngineImpl::OpenWorkerDb() {
  if (worker_db_) return true;
  auto opened = db::Database::Open({options_.path});
  if (!opened) {
    spdlog::warn("memory job worker: {}", opened.error().ToString());
  } else if (auto s = RegisterBm25(**opened, row_facts_.get()); !s) {
    spdlog::warn("memory job worker: {}", s.error().ToString());
  } else {
    worker_db_ = std::move(*opened);
  }
  return worker_db_ != nullptr;
}

// Truncates the WAL when it is past its limit, looking again after 1 s, or after a backoff
// doubling up to 60 s while readers keep it from being truncated.
void EngineImpl::BoundWalWhenDue(WorkerSchedule& schedule) {
  using Clock = WorkerSchedule::Clock;
  if (const auto now = Clock::now(); schedule.wal_next && now < *schedule.wal_next) return;
  schedule.wal_backoff = BoundWal(*worker_db_)
                             ? std::min(schedule.wal_backoff * 2, std::chrono::seconds(60))
                             : std::chrono::seconds(1);
  if (schedule.wal_backoff == std::chrono::seconds(60)) {
    spdlog::warn(
        "the WAL of {} stays past {} bytes: a reader has held one snapshot for "
        "minutes (the WAL cannot be truncated until it ends)",
        options_.path, options_.wal_limit_bytes);
  }
  schedule.wal_next = Clock::now() + schedule.wal_backoff;
}

// The CJK and stem indexes' back-fills do not wait for a pause in the jobs, as compaction
// does: the records they have not reached are not found by CJK queries or through stems. A batch
// (about 25 ms) at most once a second while jobs keep coming; batch after batch when there are none
// (`more`).
void EngineImpl::RepairCjkWhenDue(WorkerSchedule& schedule, bool& more) {
  const auto now = WorkerSchedule::Clock::now();
  if (now < schedule.repair_next) return;
  auto repaired = RepairCjkIndex(*worker_db_);
  if (repaired) {
    auto stems = RepairStemIndex(*worker_db_);
    repaired = stems ? Result<bool>(*repaired || *stems) : Result<bool>(stems.error());
  }
  if (!repaired) {
    spdlog::warn("memory index back-fill: {}", repaired.error().ToString());
    schedule.repair_next = now + std::chrono::seconds(5);
  } else if (*repaired && !more) {
    more = true;
    schedule.repair_next = now;
  } else {
    schedule.repair_next = now + std::chrono::seconds(1);
  }
}

// With no job to run: once the jobs have paused for compaction_quiet_ms, the row facts a
// recall wanted, else one compaction step at a time, looking for jobs between steps. Shortens
// `wait` to the end of the pause or of a failed step's retry delay.
void EngineImpl::WorkWhileIdle(WorkerSchedule& schedule, bool& more,
                               std::chrono::milliseconds& wait) {
  using Clock = WorkerSchedule::Clock;
  // Compaction waits for a pause in the jobs, so a burst of writes (a delivery draining its
  // outbox) is not slowed by rewrites that its next job would start over.
  const auto quiet = std::chrono::milliseconds(options_.compaction_quiet_ms);
  const auto idle = schedule.last_job ? Clock::now() - *schedule.last_job : Clock::duration::max();
  if (idle >= quiet && facts_wanted_.exchange(false)) {
    // A recall ranked in SQL rather than read every record's facts (CatchUpFactsNow): read
    // them now, so the next recalls rank from them.
    if (auto tx = db::Transaction::Deferred(*worker_db_); !tx) {
      spdlog::warn("memory row facts: {}", tx.error().ToString());
    } else if (auto read = row_facts_->CatchUp(*worker_db_); !read) {
      spdlog::warn("memory row facts: {}", read.error().ToString());
    } else if (auto done = tx->Commit(); !done) {
      spdlog::warn("memory row facts: {}", done.error().ToString());
    }
    more = true;
  } else if (idle < quiet) {
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(quiet - idle));
  } else if (Clock::now() >= schedule.erase_next) {
    // A forget whose erase another process held back (admin.cc): looked at once a minute.
    schedule.erase_next = Clock::now() + std::chrono::minutes(1);
    EraseWhenPending(*worker_db_);
    more = true;
  } else if (const auto now = Clock::now(); now < schedule.retry_at) {
    wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(schedule.retry_at - now));
  } else if (auto compacted = CompactOnce(*worker_db_, false); compacted) {
    more = *compacted;
  } else {
    // E.g. another process holds the write lock: try again in a while.
    spdlog::warn("memory index compaction: {}", compacted.error().ToString());
    schedule.retry_at = Clock::now() + std::chrono::seconds(5);
  }
}

void EngineImpl::WorkerLoop() {
  WorkerSchedule schedule;
  // The first look waits for this process's first job or the first poll: a new process's
  // first call does not share the CPU and the file's locks with it, and a process that never
  // writes and lives less than a poll (a hook) never opens the worker's connection.
  {
    std::unique_lock lock(worker_mu_);
    worker_cv_.wait_for(lock, std::chrono::milliseconds(options_.idle_poll_ms),
                        [this] { return work_signalled_ || stopping_.load(); });
    work_signalled_ = false;
  }
  while (!stopping_.load()) {
    bool more = false;
    auto wait = std::chrono::milliseconds(options_.idle_poll_ms);
    try {
      if (!OpenWorkerDb()) {
        std::unique_lock lock(worker_mu_);
        worker_cv_.wait_for(lock, wait, [this] { return stopping_.load(); });
        continue;
      }
      BoundWalWhenDue(schedule);
      auto r = RunJobs(*worker_db_, kJobsPerTransaction);
      if (!r || *r > 0) r = Noted(std::move(r));
      if (r) {
        more = *r > 0;
        if (more) schedule.last_job = WorkerSchedule::Clock::now();
        if (more && options_.embedder) SignalEmbedder();
      } else {
        spdlog::warn("memory job worker: {}", r.error().ToString());
      }
      RepairCjkWhenDue(schedule, more);
      if (r && !more) WorkWhileIdle(schedule, more, wait);
    } catch (const std::exception& e) {
      spdlog::error("memory job worker failed: {}", e.what());
    }
    if (more) continue;
    std::unique_lock lock(worker_mu_);
    worker_cv_.wait_for(lock, wait, [this] { return work_signalled_ || stopping_.load(); });
    work_signalled_ = false;
  }
}

Result<EngineStats> EngineImpl::Stats() {
  EngineStats stats;
  stats.recall_signals = {"word", "trigram", "cjk"};
  if (options_.stem_language != "none") stats.recall_signals.push_back("stem");
  if (options_.stem_language != "none" && options_.synonyms) {
    stats.recall_signals.push_back("synonym");
  }
  if (options_.embedder) stats.recall_signals.push_back("vector");
  stats.recall_language = options_.stem_language;
  {
    std::lock_guard lock(api_mu_);
    auto api_db = ApiDb();
    if (!api_db) return api_db.error();
    auto st = (*api_db)->Prepare(
        "SELECT (SELECT COALESCE(SUM(record_count), 0) FROM scopes), (SELECT COUNT(*) FROM "
        "scopes), "
        "(SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')), "
        "(SELECT COUNT(*) FROM jobs WHERE status = 'failed'), "
        "(SELECT COUNT(*) FROM records WHERE event_seq > (SELECT through_seq FROM "
        "index_watermarks WHERE name = 'records_cjk')), "
        "(SELECT COUNT(*) FROM records WHERE event_seq > (SELECT through_seq FROM "
        "index_watermarks WHERE name = 'word_stems'))");
    if (!st) return st.error();
    auto row = st->Step();
    if (!row) return row.error();
    stats.records = st->Int(0);
    stats.scopes = st->Int(1);
    stats.jobs_pending = st->Int(2);
    stats.jobs_failed = st->Int(3);
    stats.cjk_index_backlog = st->Int(4);
    stats.stem_index_backlog = options_.stem_language == "none" ? 0 : st->Int(5);
    auto live = (*api_db)->QueryInt(
        "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count, "
        "pragma_freelist_count, pragma_page_size");
    if (!live) return live.error();
    stats.live_bytes = *live;
    if (options_.embedder) {
      auto figures = EmbeddingFigures(**api_db);
      if (!figures) return figures.error();
      stats.embeddings = std::move(*figures);
    }
  }
  for (const std::string& file : {options_.path, options_.path + "-wal"}) {
    struct stat st {};
    if (stat(file.c_str(), &st) == 0) stats.file_bytes += static_cast<int64_t>(st.st_size);
  }
  if (postings_) {
    const PostingsCache::Stats cache = postings_->stats();
    stats.postings_cache = EngineStats::PostingsCacheFigures{cache.hits, cache.misses, cache.words,
                                                             cache.bytes, cache.caught_up};
  }
  if (options_.shared) {  // the jobs are the shared store's
    TMCRA_ASSIGN_OR_RETURN(const auto jobs, options_.shared->CountJobs());
    stats.jobs_pending = jobs.unfinished;
    stats.jobs_failed = jobs.failed;
  }
  return stats;
}

// Engine: each call is the implementation's.

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  TMCRA_ASSIGN_OR_RETURN(auto impl, EngineImpl::Open(std::move(options)));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<json> Engine::Ingest(std::string_view scope, const json& body,
                            const IngestContext& context) {
  return impl_->Ingest(scope, body, context);
}
Result<json> Engine::IngestBatch(std::string_view scope, const json& body,
                                 const IngestContext& context) {
  return impl_->IngestBatch(scope, body, context);
}
Result<json> Engine::GetJob(std::string_view job_id) { return impl_->GetJob(job_id); }
Result<json> Engine::Recall(std::string_view scope, const json& body) {
  return impl_->Recall(scope, body);
}
Result<json> Engine::Evidence(std::string_view scope, std::string_view memory_id, int limit) {
  return impl_->Evidence(scope, memory_id, limit);
}
Result<json> Engine::Feedback(std::string_view scope, const json& body,
                              std::string_view idempotency_key) {
  return impl_->Feedback(scope, body, idempotency_key);
}
Result<EngineStats> Engine::Stats() { return impl_->Stats(); }
Status Engine::Ready() { return impl_->Ready(); }
Result<int> Engine::RunPendingJobs() { return impl_->RunPendingJobs(); }
Result<int> Engine::CompactIndexes() { return impl_->CompactIndexes(); }
Result<std::optional<std::string>> Engine::ClaimJobForTest(double lease_seconds) {
  return impl_->ClaimJobForTest(lease_seconds);
}

Result<json> Engine::ScopeStats() { return impl_->ScopeStats(); }
Result<json> Engine::Forget(std::string_view scope, const json& body) {
  return impl_->Forget(scope, body);
}
Result<json> Engine::ForgetOldest(int64_t bytes) { return impl_->ForgetOldest(bytes); }
Result<json> Engine::Erase() { return impl_->Erase(); }
Status Engine::Export(std::string_view scope, const std::function<Status(const json& line)>& sink) {
  return impl_->Export(scope, sink);
}
Result<json> Engine::Import(std::string_view scope, const json& lines) {
  return impl_->Import(scope, lines);
}

}  // namespace tmcra::memory
