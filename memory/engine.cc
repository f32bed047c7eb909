#include "memory/engine.h"

#include <sys/stat.h>
#include <unistd.h>

#include <regex>

#include <spdlog/spdlog.h>

#include "memory/ingest_validation.h"
#include "src/common/canonical_json.h"
#include "src/common/clock.h"
#include "src/common/ids.h"
#include "src/common/sha256.h"
#include "src/common/utf8.h"

namespace tmcra::memory {

namespace {

constexpr int kMaxJobAttempts = 5;

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
};

Status Migrate(db::Database& db) {
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto version = db.Prepare("PRAGMA user_version");
  if (!version) return version.error();
  auto row = version->Step();
  if (!row) return row.error();
  const int64_t current = version->Int(0);
  constexpr auto kTarget = static_cast<int64_t>(std::size(kMigrations));
  if (current > kTarget) {
    return Error{Errc::kDataLoss, false,
                 "the memory database was written by a newer version (schema " +
                     std::to_string(current) + ")"};
  }
  for (int64_t v = current; v < kTarget; ++v) {
    if (auto s = db.Exec(kMigrations[v]); !s) return s;
  }
  if (current != kTarget) {
    if (auto s = db.Exec("PRAGMA user_version=" + std::to_string(kTarget)); !s) return s;
  }
  return tx->Commit();
}

std::string NewId(std::string_view prefix) {
  std::string id = UuidV4();
  std::string hex;
  for (char c : id) {
    if (c != '-') hex.push_back(c);
  }
  return std::string(prefix) + hex;
}

json NullableReal(const db::Statement& st, int column) {
  return st.IsNull(column) ? json(nullptr) : json(st.Double(column));
}

json ParsedOrNull(const db::Statement& st, int column) {
  if (st.IsNull(column)) return nullptr;
  json value = json::parse(st.Text(column), nullptr, false);
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

bool IsValidScopeName(std::string_view scope) {
  static const std::regex kScope("^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
  return scope.size() <= 128 && std::regex_match(scope.begin(), scope.end(), kScope);
}

json EngineStats::ToJson() const {
  return json{{"records", records}, {"scopes", scopes}, {"jobs_pending", jobs_pending},
              {"jobs_failed", jobs_failed}, {"file_bytes", file_bytes}};
}

Engine::Engine(EngineOptions options) : options_(std::move(options)), owner_(NewId("worker_")) {}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  std::unique_ptr<Engine> engine(new Engine(std::move(options)));
  auto api_db = db::Database::Open({engine->options_.path});
  if (!api_db) return api_db.error();
  if (auto s = Migrate(**api_db); !s) return s.error();
  engine->api_db_ = std::move(*api_db);
  if (engine->options_.start_worker) {
    auto worker_db = db::Database::Open({engine->options_.path});
    if (!worker_db) return worker_db.error();
    engine->worker_db_ = std::move(*worker_db);
    engine->worker_ = std::thread([e = engine.get()] { e->WorkerLoop(); });
  }
  return engine;
}

Engine::~Engine() {
  {
    std::lock_guard lock(worker_mu_);
    stopping_ = true;
  }
  worker_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Result<json> Engine::Ingest(std::string_view scope, const json& body,
                            const IngestContext& context) {
  if (!IsValidScopeName(scope)) return ValidationError("scope", "invalid scope name");
  const size_t key_length = CodePointLength(context.idempotency_key);
  if (key_length < 8 || key_length > 200) {
    return Error::Api(422, "validation_error",
                      "Idempotency-Key: must be 8..200 characters",
                      json::array({{{"loc", {"header", "Idempotency-Key"}},
                                    {"msg", "Idempotency-Key must be 8..200 characters"},
                                    {"type", "value_error"}}})
                          .dump());
  }
  auto request = ValidateIngest(body);
  if (!request) return request.error();
  const json payload = request->ToJson();
  const json hashed{{"job_type", "ingest"},
                    {"scope_name", scope},
                    {"payload", payload},
                    {"_usage_attribution",
                     {{"client_platform", context.client_platform},
                      {"integration_id", context.integration_id ? json(*context.integration_id)
                                                                : json(nullptr)},
                      {"agent_id", context.agent_id ? json(*context.agent_id) : json(nullptr)}}}};
  const std::string payload_sha = Sha256Hex(CanonicalJson(hashed));

  std::lock_guard lock(api_mu_);
  db::Database& db = *api_db_;
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto existing = db.Prepare(
      "SELECT job_id, payload_sha256 FROM jobs WHERE tenant_id = ? AND idempotency_key = ?");
  if (!existing) return existing.error();
  existing->Bind(1, options_.tenant_id).Bind(2, context.idempotency_key);
  auto found = existing->Step();
  if (!found) return found.error();
  bool replay = false;
  std::string job_id;
  if (*found) {
    if (existing->Text(1) != payload_sha) {
      return Error::Api(409, "idempotency_conflict",
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
        .Bind(4, context.idempotency_key)
        .Bind(5, payload_sha)
        .Bind(6, CanonicalJson(payload))
        .Bind(7, request->consistency)
        .Bind(8, now)
        .Bind(9, now);
    if (auto s = insert->Run(); !s) return s.error();
  }
  std::string consistency;
  auto job = LoadJob(db, job_id, options_.public_base_url, &consistency);
  if (!job) return job.error();
  if (auto s = tx->Commit(); !s) return s.error();
  if (!replay) {
    {
      std::lock_guard wl(worker_mu_);
      work_signalled_ = true;
    }
    worker_cv_.notify_all();
  }
  json view = std::move(**job);
  view["idempotent_replay"] = replay;
  const bool ryw = consistency == "read_your_writes";
  view["consistency_contract"] = {{"mode", consistency},
                                  {"visible_after_job_id", job_id},
                                  {"recall_wait_for_job_id", ryw ? json(job_id) : json(nullptr)}};
  return view;
}

Result<json> Engine::GetJob(std::string_view job_id) {
  std::lock_guard lock(api_mu_);
  auto job = LoadJob(*api_db_, job_id, options_.public_base_url, nullptr);
  if (!job) return job.error();
  if (!*job) return Error::Api(404, "not_found", "job not found");
  return std::move(**job);
}

Result<std::optional<std::string>> Engine::ClaimJobForTest(double lease_seconds) {
  std::lock_guard lock(api_mu_);
  db::Database& db = *api_db_;
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  const double now = NowSeconds();
  auto pick = db.Prepare(
      "SELECT job_id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1");
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

Result<bool> Engine::RunOneJob(db::Database& db) {
  // Step 1: claim the oldest pending job, or a running one whose holder lost its lease.
  std::string job_id;
  int64_t attempts = 0;
  {
    auto tx = db::Transaction::Immediate(db);
    if (!tx) return tx.error();
    const double now = NowSeconds();
    auto pick = db.Prepare(
        "SELECT job_id, attempts FROM jobs WHERE status = 'pending' "
        "UNION ALL SELECT job_id, attempts FROM jobs WHERE status = 'running' "
        "AND lease_expires_at < ? LIMIT 1");
    if (!pick) return pick.error();
    pick->Bind(1, now);
    auto row = pick->Step();
    if (!row) return row.error();
    if (!*row) return false;
    job_id = pick->Text(0);
    attempts = pick->Int(1) + 1;
    if (attempts > kMaxJobAttempts) {
      auto fail = db.Prepare(
          "UPDATE jobs SET status = 'failed', finished_at = ?, updated_at = ?, "
          "lease_owner = NULL, lease_expires_at = NULL, error_json = ? WHERE job_id = ?");
      if (!fail) return fail.error();
      fail->Bind(1, now).Bind(2, now)
          .Bind(3, json{{"code", "job_attempts_exhausted"},
                        {"message", "the job did not complete after " +
                                        std::to_string(kMaxJobAttempts) + " attempts"}}
                       .dump())
          .Bind(4, job_id);
      if (auto s = fail->Run(); !s) return s.error();
      if (auto s = tx->Commit(); !s) return s.error();
      return true;
    }
    auto claim = db.Prepare(
        "UPDATE jobs SET status = 'running', attempts = ?, started_at = COALESCE(started_at, ?), "
        "heartbeat_at = ?, lease_owner = ?, lease_expires_at = ?, updated_at = ? "
        "WHERE job_id = ?");
    if (!claim) return claim.error();
    claim->Bind(1, attempts).Bind(2, now).Bind(3, now).Bind(4, owner_)
        .Bind(5, now + options_.lease_seconds).Bind(6, now).Bind(7, job_id);
    if (auto s = claim->Run(); !s) return s.error();
    if (auto s = tx->Commit(); !s) return s.error();
  }

  // Step 2: write the records and their indexes, and finish the job, atomically.
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto load = db.Prepare(
      "SELECT scope_name, payload_json FROM jobs WHERE job_id = ? AND status = 'running' "
      "AND lease_owner = ?");
  if (!load) return load.error();
  load->Bind(1, job_id).Bind(2, owner_);
  auto row = load->Step();
  if (!row) return row.error();
  if (!*row) return true;  // someone else took it over; nothing to do
  const std::string scope = load->Text(0);
  const json payload = json::parse(load->Text(1), nullptr, false);
  const double now = NowSeconds();
  if (payload.is_discarded() || !payload.is_object()) {
    auto fail = db.Prepare(
        "UPDATE jobs SET status = 'failed', finished_at = ?, updated_at = ?, lease_owner = NULL, "
        "lease_expires_at = NULL, error_json = ? WHERE job_id = ?");
    if (!fail) return fail.error();
    fail->Bind(1, now).Bind(2, now)
        .Bind(3, json{{"code", "invalid_payload"}, {"message", "stored payload is unreadable"}}
                     .dump())
        .Bind(4, job_id);
    if (auto s = fail->Run(); !s) return s.error();
    if (auto s = tx->Commit(); !s) return s.error();
    return true;
  }
  const IngestRequest request = IngestRequest::FromJson(payload);

  auto insert = db.Prepare(
      "INSERT OR IGNORE INTO records(record_id, scope_name, session_id, message_id, role, "
      "content, occurred_at, timestamp, metadata_json, agent_id, target_agent_id, job_id) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  auto fts = db.Prepare("INSERT INTO records_fts(rowid, content) VALUES(?, ?)");
  auto tri = db.Prepare("INSERT INTO records_tri(rowid, content) VALUES(?, ?)");
  auto existing = db.Prepare(
      "SELECT event_seq FROM records WHERE scope_name = ? AND session_id = ? AND message_id = ?");
  if (!insert) return insert.error();
  if (!fts) return fts.error();
  if (!tri) return tri.error();
  if (!existing) return existing.error();

  int64_t max_seq = 0;
  int64_t written = 0;
  int64_t duplicates = 0;
  for (const auto& m : request.messages) {
    const auto text_field = [&](const char* key) -> std::optional<std::string> {
      auto it = m.metadata.find(key);
      if (it == m.metadata.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    insert->Reset();
    insert->Bind(1, NewId("rec_")).Bind(2, scope).Bind(3, request.session_id)
        .Bind(4, m.message_id).Bind(5, m.role).Bind(6, m.content).Bind(7, m.occurred_at)
        .Bind(8, m.timestamp).Bind(9, CanonicalJson(m.metadata)).Bind(10, text_field("agent_id"))
        .Bind(11, text_field("target_agent_id")).Bind(12, job_id);
    if (auto s = insert->Run(); !s) return s.error();
    int64_t seq = 0;
    if (db.Changes() == 1) {
      seq = db.LastInsertRowId();
      fts->Reset();
      fts->Bind(1, seq).Bind(2, m.content);
      if (auto s = fts->Run(); !s) return s.error();
      tri->Reset();
      tri->Bind(1, seq).Bind(2, m.content);
      if (auto s = tri->Run(); !s) return s.error();
      ++written;
    } else {
      // The same message was stored before (a retry without the same key): keep one copy.
      existing->Reset();
      existing->Bind(1, scope).Bind(2, request.session_id).Bind(3, m.message_id);
      auto e = existing->Step();
      if (!e) return e.error();
      if (*e) seq = existing->Int(0);
      ++duplicates;
    }
    max_seq = std::max(max_seq, seq);
  }
  auto upsert = db.Prepare(
      "INSERT INTO scopes(name, record_count, last_event_seq, last_job_id, created_at, updated_at) "
      "VALUES(?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT(name) DO UPDATE SET "
      "record_count = record_count + ?2, last_event_seq = MAX(COALESCE(last_event_seq, 0), ?3), "
      "last_job_id = ?4, updated_at = ?5");
  if (!upsert) return upsert.error();
  upsert->Bind(1, scope).Bind(2, written).Bind(3, max_seq).Bind(4, job_id).Bind(5, now);
  if (auto s = upsert->Run(); !s) return s.error();
  const json result{{"watermarks", {{"source_event_seq", max_seq}, {"indexed_event_seq", max_seq}}},
                    {"index", {{"active_index", "fts5"}}},
                    {"records_written", written},
                    {"records_deduplicated", duplicates}};
  auto done = db.Prepare(
      "UPDATE jobs SET status = 'succeeded', finished_at = ?, updated_at = ?, heartbeat_at = ?, "
      "lease_owner = NULL, lease_expires_at = NULL, result_json = ?, payload_json = NULL "
      "WHERE job_id = ?");
  if (!done) return done.error();
  done->Bind(1, now).Bind(2, now).Bind(3, now).Bind(4, result.dump()).Bind(5, job_id);
  if (auto s = done->Run(); !s) return s.error();
  if (auto s = tx->Commit(); !s) return s.error();
  return true;
}

Result<int> Engine::RunPendingJobs() {
  std::lock_guard lock(api_mu_);
  int ran = 0;
  for (;;) {
    auto r = RunOneJob(*api_db_);
    if (!r) return r.error();
    if (!*r) return ran;
    ++ran;
  }
}

void Engine::WorkerLoop() {
  while (!stopping_.load()) {
    bool more = false;
    try {
      auto r = RunOneJob(*worker_db_);
      if (r) {
        more = *r;
      } else {
        spdlog::warn("memory job worker: {}", r.error().ToString());
      }
    } catch (const std::exception& e) {
      spdlog::error("memory job worker failed: {}", e.what());
    }
    if (more) continue;
    std::unique_lock lock(worker_mu_);
    worker_cv_.wait_for(lock, std::chrono::milliseconds(options_.idle_poll_ms),
                        [this] { return work_signalled_ || stopping_.load(); });
    work_signalled_ = false;
  }
}

Result<EngineStats> Engine::Stats() {
  EngineStats stats;
  {
    std::lock_guard lock(api_mu_);
    auto st = api_db_->Prepare(
        "SELECT (SELECT COALESCE(SUM(record_count), 0) FROM scopes), (SELECT COUNT(*) FROM scopes), "
        "(SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')), "
        "(SELECT COUNT(*) FROM jobs WHERE status = 'failed')");
    if (!st) return st.error();
    auto row = st->Step();
    if (!row) return row.error();
    stats.records = st->Int(0);
    stats.scopes = st->Int(1);
    stats.jobs_pending = st->Int(2);
    stats.jobs_failed = st->Int(3);
  }
  for (const std::string& file : {options_.path, options_.path + "-wal"}) {
    struct stat st {};
    if (stat(file.c_str(), &st) == 0) stats.file_bytes += static_cast<int64_t>(st.st_size);
  }
  return stats;
}

}  // namespace tmcra::memory
