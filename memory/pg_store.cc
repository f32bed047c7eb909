#include "memory/pg_store.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace tmcra::memory {

namespace {

using pg::Param;

// Step i takes the schema from version i to i + 1. Never edit a shipped step; add one.
constexpr const char* kSteps[] = {
    R"sql(
CREATE TABLE mem_store(id TEXT NOT NULL);
INSERT INTO mem_store(id) SELECT replace(gen_random_uuid()::text, '-', '');
CREATE TABLE mem_change_counter(
  id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
  seq BIGINT NOT NULL);
INSERT INTO mem_change_counter(id, seq) VALUES (TRUE, 0);
CREATE TABLE mem_scopes(
  name TEXT PRIMARY KEY,
  record_count BIGINT NOT NULL DEFAULT 0,
  last_event_seq BIGINT,
  last_job_id TEXT,
  created_at DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE mem_jobs(
  job_id TEXT PRIMARY KEY,
  accepted_seq BIGINT GENERATED ALWAYS AS IDENTITY,
  tenant_id TEXT NOT NULL,
  scope_name TEXT NOT NULL,
  job_type TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT,
  payload_sha256 TEXT NOT NULL,
  payload_json TEXT,
  consistency TEXT NOT NULL DEFAULT '',
  created_at DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL,
  started_at DOUBLE PRECISION,
  finished_at DOUBLE PRECISION,
  heartbeat_at DOUBLE PRECISION,
  lease_expires_at DOUBLE PRECISION,
  lease_owner TEXT,
  result_json TEXT,
  error_json TEXT);
CREATE UNIQUE INDEX mem_jobs_idempotency ON mem_jobs(tenant_id, idempotency_key);
CREATE INDEX mem_jobs_claim ON mem_jobs(created_at, accepted_seq)
  WHERE status IN ('pending', 'running');
CREATE TABLE mem_records(
  event_seq BIGINT PRIMARY KEY,
  record_id TEXT NOT NULL UNIQUE,
  scope_name TEXT NOT NULL,
  session_id TEXT NOT NULL,
  message_id TEXT NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  occurred_at DOUBLE PRECISION NOT NULL,
  timestamp TEXT NOT NULL,
  metadata_json TEXT NOT NULL,
  agent_id TEXT,
  target_agent_id TEXT,
  job_id TEXT NOT NULL,
  UNIQUE(scope_name, session_id, message_id));
CREATE INDEX mem_records_session ON mem_records(scope_name, session_id, occurred_at, event_seq);
CREATE TABLE mem_imports(
  source TEXT PRIMARY KEY,
  through BIGINT NOT NULL);
CREATE TABLE mem_deletions(
  seq BIGINT PRIMARY KEY,
  event_seq BIGINT NOT NULL,
  scope_name TEXT NOT NULL);
)sql",
    // 1 -> 2: feedback with its targets, numbered in the feed like records; a deletion row
    // names the feedback it deleted (event_seq 0) or the record (feedback_id NULL); record
    // vectors by model, deleted with their record.
    R"sql(
CREATE TABLE mem_feedback(
  seq BIGINT PRIMARY KEY,
  feedback_id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  scope_name TEXT NOT NULL,
  rating TEXT NOT NULL,
  action TEXT NOT NULL,
  idempotency_key TEXT,
  payload_sha256 TEXT NOT NULL,
  request_json TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  correction_job_id TEXT);
CREATE UNIQUE INDEX mem_feedback_idempotency ON mem_feedback(tenant_id, idempotency_key);
CREATE INDEX mem_feedback_scope ON mem_feedback(scope_name, seq);
CREATE TABLE mem_feedback_targets(
  feedback_id TEXT NOT NULL REFERENCES mem_feedback(feedback_id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  record_id TEXT NOT NULL,
  PRIMARY KEY(feedback_id, position));
CREATE INDEX mem_feedback_targets_record ON mem_feedback_targets(record_id);
ALTER TABLE mem_deletions ADD COLUMN feedback_id TEXT;
CREATE TABLE mem_vectors(
  event_seq BIGINT NOT NULL REFERENCES mem_records(event_seq) ON DELETE CASCADE,
  model TEXT NOT NULL,
  vector BYTEA NOT NULL,
  PRIMARY KEY(event_seq, model));
)sql",
};

constexpr const char* kJobColumns =
    "job_id, tenant_id, scope_name, job_type, status, attempts, idempotency_key, payload_sha256, "
    "payload_json, consistency, created_at, updated_at, started_at, finished_at, heartbeat_at, "
    "lease_expires_at, result_json, error_json";

constexpr const char* kRecordColumns =
    "event_seq, scope_name, job_id, record_id, session_id, message_id, role, content, "
    "occurred_at, timestamp, metadata_json, agent_id, target_agent_id";

// The database's clock in seconds: leases are timed by one clock, whatever the instances' say.
constexpr const char* kNow = "extract(epoch from clock_timestamp())::double precision";

std::optional<std::string> OptionalText(const pg::Rows& rows, int row, int column) {
  if (rows.IsNull(row, column)) return std::nullopt;
  return std::string(rows.Text(row, column));
}

std::optional<double> OptionalDouble(const pg::Rows& rows, int row, int column) {
  if (rows.IsNull(row, column)) return std::nullopt;
  return rows.Double(row, column);
}

SharedStore::JobRow JobFromRow(const pg::Rows& rows, int row) {
  SharedStore::JobRow job;
  job.job_id = std::string(rows.Text(row, 0));
  job.tenant_id = std::string(rows.Text(row, 1));
  job.scope_name = std::string(rows.Text(row, 2));
  job.job_type = std::string(rows.Text(row, 3));
  job.status = std::string(rows.Text(row, 4));
  job.attempts = rows.Int(row, 5);
  job.idempotency_key = OptionalText(rows, row, 6);
  job.payload_sha256 = std::string(rows.Text(row, 7));
  job.payload_json = OptionalText(rows, row, 8);
  job.consistency = std::string(rows.Text(row, 9));
  job.created_at = rows.Double(row, 10);
  job.updated_at = rows.Double(row, 11);
  job.started_at = OptionalDouble(rows, row, 12);
  job.finished_at = OptionalDouble(rows, row, 13);
  job.heartbeat_at = OptionalDouble(rows, row, 14);
  job.lease_expires_at = OptionalDouble(rows, row, 15);
  job.result_json = OptionalText(rows, row, 16);
  job.error_json = OptionalText(rows, row, 17);
  return job;
}

SharedStore::Change RecordChange(const pg::Rows& rows, int row) {
  SharedStore::Change change;
  change.seq = rows.Int(row, 0);
  change.event_seq = change.seq;
  change.scope_name = std::string(rows.Text(row, 1));
  change.job_id = std::string(rows.Text(row, 2));
  SharedStore::NewRecord& r = change.record;
  r.record_id = std::string(rows.Text(row, 3));
  r.session_id = std::string(rows.Text(row, 4));
  r.message_id = std::string(rows.Text(row, 5));
  r.role = std::string(rows.Text(row, 6));
  r.content = std::string(rows.Text(row, 7));
  r.occurred_at = rows.Double(row, 8);
  r.timestamp = std::string(rows.Text(row, 9));
  r.metadata_json = std::string(rows.Text(row, 10));
  r.agent_id = OptionalText(rows, row, 11);
  r.target_agent_id = OptionalText(rows, row, 12);
  return change;
}

Param OptionalParam(const std::optional<std::string>& value) {
  return value ? Param(*value) : Param::Null();
}

struct Statement {
  const char* sql;
  std::vector<Param> params;
};

// Runs statements in order, their rows not wanted.
Status ExecAll(pg::Connection& conn, const std::vector<Statement>& statements) {
  for (const Statement& st : statements) {
    TMCRA_ASSIGN_OR_RETURN(auto rows, conn.Exec(st.sql, st.params));
    (void)rows;
  }
  return Ok();
}

// Takes the change counter's row lock (held to the commit) and returns its value. Every
// transaction that numbers changes takes this lock first, so they also commit in that order,
// and no two lock in opposite orders.
Result<int64_t> LockCounter(pg::Connection& conn) {
  // A holder that went silent (a frozen instance) delays writers by this much at most; they
  // then fail retryably (55P03).
  TMCRA_RETURN_IF_ERROR(conn.Run("SET LOCAL lock_timeout = '30s'"));
  TMCRA_ASSIGN_OR_RETURN(auto rows,
                         conn.Exec("SELECT seq FROM mem_change_counter WHERE id FOR UPDATE"));
  if (rows.size() != 1) return Error::Internal("PostgreSQL: the change counter row is missing");
  return rows.Int(0, 0);
}

Status MoveCounter(pg::Connection& conn, int64_t to) {
  TMCRA_ASSIGN_OR_RETURN(auto rows,
                         conn.Exec("UPDATE mem_change_counter SET seq = $1 WHERE id", {Param(to)}));
  (void)rows;
  return Ok();
}

// Inserts one record numbered `seq`, doing nothing on the `conflict` ("(scope_name, session_id,
// message_id)", or "" for any unique key); true when it was inserted.
Result<bool> PlaceRecord(pg::Connection& conn, int64_t seq, std::string_view scope,
                         std::string_view job_id, const SharedStore::NewRecord& r,
                         std::string_view conflict) {
  const Param params[] = {seq,
                          r.record_id,
                          scope,
                          r.session_id,
                          r.message_id,
                          r.role,
                          r.content,
                          r.occurred_at,
                          r.timestamp,
                          r.metadata_json,
                          OptionalParam(r.agent_id),
                          OptionalParam(r.target_agent_id),
                          job_id};
  TMCRA_ASSIGN_OR_RETURN(
      auto inserted,
      conn.Exec("INSERT INTO mem_records(event_seq, record_id, scope_name, session_id, "
                "message_id, role, content, occurred_at, timestamp, metadata_json, agent_id, "
                "target_agent_id, job_id) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                "$12, $13) ON CONFLICT " +
                    std::string(conflict) + " DO NOTHING",
                params));
  return inserted.Affected() == 1;
}

// Inserts one record numbered `seq` unless its message is stored; the stored one's event_seq
// otherwise (0 when there is none, which a unique record id clash would be).
Result<std::pair<bool, int64_t>> InsertRecord(pg::Connection& conn, int64_t seq,
                                              std::string_view scope, std::string_view job_id,
                                              const SharedStore::NewRecord& r) {
  TMCRA_ASSIGN_OR_RETURN(const bool placed, PlaceRecord(conn, seq, scope, job_id, r,
                                                        "(scope_name, session_id, message_id)"));
  if (placed) return std::make_pair(true, seq);
  TMCRA_ASSIGN_OR_RETURN(
      auto existing,
      conn.Exec("SELECT event_seq FROM mem_records WHERE scope_name = $1 AND session_id = $2 AND "
                "message_id = $3",
                {Param(scope), Param(r.session_id), Param(r.message_id)}));
  return std::make_pair(false, existing.size() == 0 ? int64_t{0} : existing.Int(0, 0));
}

}  // namespace

template <class Step>
auto PgStore::Retrying(const Step& step) -> decltype(step(std::declval<pg::Connection&>())) {
  for (int attempt = 0;; ++attempt) {
    auto conn = pool_.Borrow();
    if (!conn) return conn.error();
    auto out = step(**conn);
    if (out || !out.error().retryable) return out;
    if (attempt > 0) {
      // A deadlock or serialization failure twice in a row is the store being busy, not a
      // conflict of the caller's request.
      if (out.error().code == Errc::kConflict) return Error::Unavailable(out.error().message);
      return out;
    }
  }
}

PgStore::PgStore(const pg::ConnectOptions& options, size_t pool_size) : pool_(options, pool_size) {}
PgStore::~PgStore() = default;

Result<std::unique_ptr<PgStore>> PgStore::Open(const pg::ConnectOptions& options,
                                               size_t pool_size) {
  std::unique_ptr<PgStore> store(new PgStore(options, pool_size));
  TMCRA_ASSIGN_OR_RETURN(auto conn, store->pool_.Borrow());
  TMCRA_RETURN_IF_ERROR(pg::Migrate(*conn, "memory", kSteps, "the memory store"));
  return store;
}

namespace {

// Stores one job unless its key is known; the row that won either way (committed: ON CONFLICT
// waited for a concurrent insert of the key, and the read that follows sees it).
Result<SharedStore::Accepted> AcceptJob(pg::Connection& conn, const SharedStore::JobRow& job) {
  const Param params[] = {job.job_id,
                          job.tenant_id,
                          job.scope_name,
                          job.job_type,
                          OptionalParam(job.idempotency_key),
                          job.payload_sha256,
                          OptionalParam(job.payload_json),
                          job.consistency,
                          job.created_at};
  TMCRA_ASSIGN_OR_RETURN(
      auto inserted,
      conn.Exec("INSERT INTO mem_jobs(job_id, tenant_id, scope_name, job_type, status, "
                "idempotency_key, payload_sha256, payload_json, consistency, created_at, "
                "updated_at) VALUES($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $9) "
                "ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
                params));
  const bool created = inserted.Affected() == 1;
  TMCRA_ASSIGN_OR_RETURN(
      auto rows,
      created ? conn.Exec(std::string("SELECT ") + kJobColumns + " FROM mem_jobs WHERE job_id = $1",
                          {Param(job.job_id)})
              : conn.Exec(std::string("SELECT ") + kJobColumns +
                              " FROM mem_jobs WHERE tenant_id = $1 AND idempotency_key = $2",
                          {Param(job.tenant_id), OptionalParam(job.idempotency_key)}));
  if (rows.size() != 1) return Error::Internal("PostgreSQL: the accepted job cannot be read back");
  return SharedStore::Accepted{JobFromRow(rows, 0), created};
}

}  // namespace

Result<SharedStore::Acceptance> PgStore::AcceptJobs(const std::vector<JobRow>& jobs) {
  return Retrying([&](pg::Connection& connection) -> Result<SharedStore::Acceptance> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
    Acceptance out;
    for (size_t i = 0; i < jobs.size(); ++i) {
      TMCRA_ASSIGN_OR_RETURN(auto accepted, AcceptJob(*conn, jobs[i]));
      if (!accepted.created && accepted.job.payload_sha256 != jobs[i].payload_sha256) {
        out.conflict = i;
        return out;  // rolled back: nothing of this call is stored
      }
      out.accepted.push_back(std::move(accepted));
    }
    TMCRA_RETURN_IF_ERROR(tx.Commit());
    return out;
  });
}

Result<SharedStore::JobCounts> PgStore::CountJobs() {
  return Retrying([&](pg::Connection& connection) -> Result<SharedStore::JobCounts> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(
        auto rows, conn->Exec("SELECT count(*) FILTER (WHERE status IN ('pending', 'running')), "
                              "count(*) FILTER (WHERE status = 'failed') FROM mem_jobs"));
    return JobCounts{rows.Int(0, 0), rows.Int(0, 1)};
  });
}

Result<std::string> PgStore::StoreId() {
  return Retrying([&](pg::Connection& connection) -> Result<std::string> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(auto rows, conn->Exec("SELECT id FROM mem_store"));
    if (rows.size() != 1) return Error::Internal("PostgreSQL: the memory store has no id");
    return std::string(rows.Text(0, 0));
  });
}

Result<int64_t> PgStore::Head() {
  return Retrying([&](pg::Connection& connection) -> Result<int64_t> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(auto rows, conn->Exec("SELECT seq FROM mem_change_counter WHERE id"));
    return rows.size() == 1 ? rows.Int(0, 0) : int64_t{0};
  });
}

Result<std::optional<SharedStore::JobRow>> PgStore::GetJob(std::string_view job_id) {
  return Retrying([&](pg::Connection& connection) -> Result<std::optional<SharedStore::JobRow>> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(auto rows, conn->Exec(std::string("SELECT ") + kJobColumns +
                                                     " FROM mem_jobs WHERE job_id = $1",
                                                 {Param(job_id)}));
    if (rows.size() == 0) return std::optional<JobRow>();
    return std::optional<JobRow>(JobFromRow(rows, 0));
  });
}

Result<std::vector<SharedStore::Claimed>> PgStore::ClaimJobs(std::string_view owner, int max_jobs,
                                                             double lease_seconds) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
  TMCRA_ASSIGN_OR_RETURN(
      auto picked,
      conn->Exec(std::string("SELECT job_id, attempts, scope_name, payload_json, ") + kNow +
                     " FROM mem_jobs WHERE status = 'pending' OR (status = 'running' AND "
                     "lease_expires_at < " +
                     kNow + ") ORDER BY created_at, accepted_seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                 {Param(max_jobs)}));
  std::vector<Claimed> claimed;
  for (int i = 0; i < picked.size(); ++i) {
    const std::string job_id(picked.Text(i, 0));
    const double now = picked.Double(i, 4);
    if (picked.Int(i, 1) + 1 > kMaxJobClaims) {
      const std::string error =
          R"({"code":"job_attempts_exhausted","message":"the job did not complete after )" +
          std::to_string(kMaxJobClaims) + R"( attempts"})";
      TMCRA_ASSIGN_OR_RETURN(
          auto failed,
          conn->Exec(
              "UPDATE mem_jobs SET status = 'failed', finished_at = $2, updated_at = $2, "
              "lease_owner = NULL, lease_expires_at = NULL, error_json = $3 WHERE job_id = $1",
              {Param(job_id), Param(now), Param(error)}));
      (void)failed;
      continue;
    }
    TMCRA_ASSIGN_OR_RETURN(
        auto claim,
        conn->Exec("UPDATE mem_jobs SET status = 'running', attempts = attempts + 1, started_at = "
                   "COALESCE(started_at, $2), heartbeat_at = $2, lease_owner = $3, "
                   "lease_expires_at = $4, updated_at = $2 WHERE job_id = $1",
                   {Param(job_id), Param(now), Param(owner), Param(now + lease_seconds)}));
    (void)claim;
    claimed.push_back({job_id, std::string(picked.Text(i, 2)),
                       picked.IsNull(i, 3) ? std::string() : std::string(picked.Text(i, 3))});
  }
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return claimed;
}

namespace {

// Writes one job's records numbered after `*next` and marks it succeeded, if `owner` holds it;
// inside the caller's transaction, which holds the counter's lock.
Result<SharedStore::Written> WriteJob(pg::Connection& conn, std::string_view owner,
                                      const SharedStore::JobWrite& job, int64_t* next) {
  TMCRA_ASSIGN_OR_RETURN(
      auto held,
      conn.Exec(std::string("SELECT scope_name, ") + kNow +
                    " FROM mem_jobs WHERE job_id = $1 AND status = 'running' AND lease_owner = "
                    "$2 FOR UPDATE",
                {Param(job.job_id), Param(owner)}));
  if (held.size() == 0) return SharedStore::Written{};  // the lease is another's now
  const std::string scope(held.Text(0, 0));
  const double now = held.Double(0, 1);
  SharedStore::Written out;
  out.written = true;
  for (const SharedStore::NewRecord& r : job.records) {
    TMCRA_ASSIGN_OR_RETURN(const auto stored, InsertRecord(conn, *next + 1, scope, job.job_id, r));
    if (stored.first) {
      ++*next;
      ++out.records_written;
    } else {
      ++out.records_deduplicated;
    }
    out.max_event_seq = std::max(out.max_event_seq, stored.second);
  }
  TMCRA_RETURN_IF_ERROR(ExecAll(
      conn,
      {{"INSERT INTO mem_scopes(name, record_count, last_event_seq, last_job_id, created_at, "
        "updated_at) VALUES($1, $2, $3, $4, $5, $5) ON CONFLICT (name) DO UPDATE SET "
        "record_count = mem_scopes.record_count + $2, last_event_seq = "
        "GREATEST(COALESCE(mem_scopes.last_event_seq, 0), $3), last_job_id = $4, updated_at = $5",
        {Param(scope), Param(out.records_written), Param(out.max_event_seq), Param(job.job_id),
         Param(now)}},
       {"UPDATE mem_jobs SET status = 'succeeded', finished_at = $2, updated_at = $2, "
        "heartbeat_at = $2, lease_owner = NULL, lease_expires_at = NULL, result_json = $3, "
        "error_json = NULL, payload_json = NULL WHERE job_id = $1",
        {Param(job.job_id), Param(now), Param(job.result(out))}}}));
  return out;
}

}  // namespace

Result<std::vector<SharedStore::Written>> PgStore::FinishJobs(std::string_view owner,
                                                              const std::vector<JobWrite>& jobs) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
  TMCRA_ASSIGN_OR_RETURN(const int64_t counter, LockCounter(*conn));
  int64_t next = counter;
  std::vector<Written> out;
  for (const JobWrite& job : jobs) {
    TMCRA_ASSIGN_OR_RETURN(auto written, WriteJob(*conn, owner, job, &next));
    out.push_back(written);
  }
  if (next != counter) TMCRA_RETURN_IF_ERROR(MoveCounter(*conn, next));
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return out;
}

Result<bool> PgStore::FailJob(std::string_view owner, std::string_view job_id,
                              const std::string& error_json) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  TMCRA_ASSIGN_OR_RETURN(
      auto failed,
      conn->Exec(
          std::string("UPDATE mem_jobs SET status = 'failed', finished_at = ") + kNow +
              ", updated_at = " + kNow +
              ", lease_owner = NULL, lease_expires_at = NULL, payload_json = NULL, "
              "error_json = $3 WHERE job_id = $1 AND status = 'running' AND lease_owner = $2",
          {Param(job_id), Param(owner), Param(error_json)}));
  return failed.Affected() == 1;
}

namespace {

constexpr const char* kFeedbackColumns =
    "f.seq, f.feedback_id, f.tenant_id, f.scope_name, f.rating, f.action, f.idempotency_key, "
    "f.payload_sha256, f.request_json, f.created_at, f.correction_job_id";

SharedStore::FeedbackRow FeedbackFromRow(const pg::Rows& rows, int row) {
  SharedStore::FeedbackRow f;
  f.feedback_id = std::string(rows.Text(row, 1));
  f.tenant_id = std::string(rows.Text(row, 2));
  f.scope_name = std::string(rows.Text(row, 3));
  f.rating = std::string(rows.Text(row, 4));
  f.action = std::string(rows.Text(row, 5));
  f.idempotency_key = OptionalText(rows, row, 6);
  f.payload_sha256 = std::string(rows.Text(row, 7));
  f.request_json = std::string(rows.Text(row, 8));
  f.created_at = rows.Double(row, 9);
  f.correction_job_id = OptionalText(rows, row, 10);
  return f;
}

// The feed's changes of one kind numbered in (after, through], at most `limit`, appended.
// Returns how many there were.
Result<int> WrittenRecords(pg::Connection& conn, int64_t after, int64_t through, int limit,
                           std::vector<SharedStore::Change>* out) {
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, conn.Exec(std::string("SELECT ") + kRecordColumns +
                               " FROM mem_records WHERE event_seq > $1 AND event_seq <= $2 ORDER "
                               "BY event_seq LIMIT $3",
                           {Param(after), Param(through), Param(limit)}));
  for (int i = 0; i < rows.size(); ++i) out->push_back(RecordChange(rows, i));
  return rows.size();
}

Result<int> Deletions(pg::Connection& conn, int64_t after, int64_t through, int limit,
                      std::vector<SharedStore::Change>* out) {
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, conn.Exec("SELECT seq, event_seq, scope_name, feedback_id FROM mem_deletions "
                           "WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3",
                           {Param(after), Param(through), Param(limit)}));
  for (int i = 0; i < rows.size(); ++i) {
    SharedStore::Change change;
    change.seq = rows.Int(i, 0);
    change.event_seq = rows.Int(i, 1);
    change.scope_name = std::string(rows.Text(i, 2));
    if (rows.IsNull(i, 3)) {
      change.kind = SharedStore::ChangeKind::kRecordDeleted;
    } else {
      change.kind = SharedStore::ChangeKind::kFeedbackDeleted;
      change.feedback.feedback_id = std::string(rows.Text(i, 3));
      change.feedback.scope_name = change.scope_name;
    }
    out->push_back(std::move(change));
  }
  return rows.size();
}

// Feedback added, each with the targets it has now (a record deleted since has taken its
// target with it; its deletion comes later in the feed).
Result<int> AddedFeedback(pg::Connection& conn, int64_t after, int64_t through, int limit,
                          std::vector<SharedStore::Change>* out) {
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, conn.Exec(std::string("SELECT ") + kFeedbackColumns +
                               " FROM mem_feedback f WHERE seq > $1 AND seq <= $2 ORDER BY seq "
                               "LIMIT $3",
                           {Param(after), Param(through), Param(limit)}));
  if (rows.size() == 0) return 0;
  std::map<int64_t, size_t> by_seq;
  for (int i = 0; i < rows.size(); ++i) {
    SharedStore::Change change;
    change.seq = rows.Int(i, 0);
    change.kind = SharedStore::ChangeKind::kFeedbackAdded;
    change.feedback = FeedbackFromRow(rows, i);
    change.scope_name = change.feedback.scope_name;
    by_seq[change.seq] = out->size();
    out->push_back(std::move(change));
  }
  TMCRA_ASSIGN_OR_RETURN(
      auto targets,
      conn.Exec("SELECT f.seq, t.record_id FROM mem_feedback f JOIN mem_feedback_targets t ON "
                "t.feedback_id = f.feedback_id WHERE f.seq > $1 AND f.seq <= $2 ORDER BY f.seq, "
                "t.position",
                {Param(after), Param(by_seq.rbegin()->first)}));
  for (int i = 0; i < targets.size(); ++i) {
    (*out)[by_seq[targets.Int(i, 0)]].feedback.targets.emplace_back(targets.Text(i, 1));
  }
  return rows.size();
}

}  // namespace

Result<SharedStore::Changes> PgStore::ChangesAfter(int64_t after, int limit) {
  return Retrying([&](pg::Connection& connection) -> Result<SharedStore::Changes> {
    pg::Connection* conn = &connection;
    TMCRA_ASSIGN_OR_RETURN(
        auto tx, pg::Transaction::Begin(*conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    TMCRA_ASSIGN_OR_RETURN(auto head_rows,
                           conn->Exec("SELECT seq FROM mem_change_counter WHERE id"));
    const int64_t head = head_rows.size() == 1 ? head_rows.Int(0, 0) : 0;
    Changes out;
    out.through = std::max(after, head);
    if (head <= after) return out;
    // Each kind's list holds every change of its kind up to its own last row; so, when one is
    // cut off at `limit`, the first `limit` of the merge hold every change up to the last of
    // them.
    bool cut = false;
    for (const auto read : {WrittenRecords, Deletions, AddedFeedback}) {
      TMCRA_ASSIGN_OR_RETURN(const int count, read(*conn, after, head, limit, &out.changes));
      cut = cut || count == limit;
    }
    std::sort(out.changes.begin(), out.changes.end(),
              [](const Change& a, const Change& b) { return a.seq < b.seq; });
    if (static_cast<int>(out.changes.size()) > limit) {
      out.changes.resize(static_cast<size_t>(limit));
      cut = true;
    }
    if (cut) {
      out.through = out.changes.back().seq;
      out.more = true;
    }
    TMCRA_RETURN_IF_ERROR(tx.Commit());
    return out;
  });
}

namespace {

// Notes a deletion in the feed: a record's (`feedback_id` empty) or a feedback's.
Status NoteDeletion(pg::Connection& conn, int64_t seq, int64_t event_seq, std::string_view scope,
                    std::string_view feedback_id) {
  TMCRA_ASSIGN_OR_RETURN(
      auto noted, conn.Exec("INSERT INTO mem_deletions(seq, event_seq, scope_name, feedback_id) "
                            "VALUES($1, $2, $3, $4)",
                            {Param(seq), Param(event_seq), Param(scope),
                             feedback_id.empty() ? Param::Null() : Param(feedback_id)}));
  (void)noted;
  return Ok();
}

// The targets of the feedback numbered `seq`, in order.
Result<std::vector<std::string>> TargetsOf(pg::Connection& conn, std::string_view feedback_id) {
  TMCRA_ASSIGN_OR_RETURN(auto rows, conn.Exec("SELECT record_id FROM mem_feedback_targets WHERE "
                                              "feedback_id = $1 ORDER BY position",
                                              {Param(feedback_id)}));
  std::vector<std::string> out;
  for (int i = 0; i < rows.size(); ++i) out.emplace_back(rows.Text(i, 0));
  return out;
}

Result<std::optional<SharedStore::StoredFeedback>> StoredFeedbackOfKey(
    pg::Connection& conn, std::string_view tenant_id, std::string_view idempotency_key) {
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, conn.Exec(std::string("SELECT ") + kFeedbackColumns +
                               ", j.status FROM mem_feedback f LEFT JOIN mem_jobs j ON j.job_id = "
                               "f.correction_job_id WHERE f.tenant_id = $1 AND "
                               "f.idempotency_key = $2",
                           {Param(tenant_id), Param(idempotency_key)}));
  if (rows.size() == 0) return std::optional<SharedStore::StoredFeedback>();
  SharedStore::StoredFeedback stored;
  stored.feedback = FeedbackFromRow(rows, 0);
  stored.correction_status = OptionalText(rows, 0, 11);
  TMCRA_ASSIGN_OR_RETURN(stored.feedback.targets, TargetsOf(conn, stored.feedback.feedback_id));
  return std::optional<SharedStore::StoredFeedback>(std::move(stored));
}

// Inserts a feedback numbered `seq` with its targets; false when its key (or, for an
// imported one, its id) is held.
Result<bool> PlaceFeedback(pg::Connection& conn, int64_t seq, const SharedStore::FeedbackRow& f) {
  const Param params[] = {seq,
                          f.feedback_id,
                          f.tenant_id,
                          f.scope_name,
                          f.rating,
                          f.action,
                          OptionalParam(f.idempotency_key),
                          f.payload_sha256,
                          f.request_json,
                          f.created_at,
                          OptionalParam(f.correction_job_id)};
  TMCRA_ASSIGN_OR_RETURN(
      auto inserted,
      conn.Exec("INSERT INTO mem_feedback(seq, feedback_id, tenant_id, scope_name, rating, "
                "action, idempotency_key, payload_sha256, request_json, created_at, "
                "correction_job_id) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON "
                "CONFLICT DO NOTHING",
                params));
  if (inserted.Affected() != 1) return false;
  for (size_t i = 0; i < f.targets.size(); ++i) {
    TMCRA_ASSIGN_OR_RETURN(
        auto target,
        conn.Exec("INSERT INTO mem_feedback_targets(feedback_id, position, "
                  "record_id) VALUES($1, $2, $3)",
                  {Param(f.feedback_id), Param(static_cast<int64_t>(i)), Param(f.targets[i])}));
    (void)target;
  }
  return true;
}

// kNotFound naming the feedback's targets that are not records of its scope (any more).
Status CheckTargets(pg::Connection& conn, const SharedStore::FeedbackRow& f) {
  if (f.targets.empty()) return Ok();
  TMCRA_ASSIGN_OR_RETURN(
      auto rows, conn.Exec("SELECT t FROM json_array_elements_text($2::json) AS t WHERE NOT "
                           "EXISTS (SELECT 1 FROM mem_records WHERE scope_name = $1 AND "
                           "record_id = t)",
                           {Param(f.scope_name), Param(nlohmann::json(f.targets).dump())}));
  if (rows.size() == 0) return Ok();
  std::vector<std::string> missing;
  std::string list;
  for (int i = 0; i < rows.size(); ++i) {
    missing.emplace_back(rows.Text(i, 0));
    list += (list.empty() ? "" : ", ") + missing.back();
  }
  return Error::Api(Errc::kNotFound, "not_found",
                    "feedback targets not found in this scope: " + list,
                    nlohmann::json{{"missing_memory_ids", missing}}.dump());
}

}  // namespace

Result<std::optional<SharedStore::StoredFeedback>> PgStore::FeedbackOfKey(
    std::string_view tenant_id, std::string_view idempotency_key) {
  return Retrying(
      [&](pg::Connection& conn) { return StoredFeedbackOfKey(conn, tenant_id, idempotency_key); });
}

Result<SharedStore::StoredFeedback> PgStore::AddFeedback(const FeedbackRow& feedback,
                                                         const std::optional<JobRow>& correction) {
  const auto add = [&](pg::Connection& conn) -> Result<StoredFeedback> {
    TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(conn));
    TMCRA_ASSIGN_OR_RETURN(const int64_t counter, LockCounter(conn));
    TMCRA_ASSIGN_OR_RETURN(const bool placed, PlaceFeedback(conn, counter + 1, feedback));
    if (!placed) {
      if (!feedback.idempotency_key) {
        return Error::Internal("PostgreSQL: a new feedback id clashed with a stored one");
      }
      TMCRA_ASSIGN_OR_RETURN(
          auto stored, StoredFeedbackOfKey(conn, feedback.tenant_id, *feedback.idempotency_key));
      if (!stored) return Error::Internal("PostgreSQL: a feedback's key is held by no feedback");
      return std::move(*stored);  // rolled back: nothing of this call is stored
    }
    // The targets were resolved before the lock: a forget may have deleted one since (an
    // error rolls the feedback back).
    TMCRA_RETURN_IF_ERROR(CheckTargets(conn, feedback));
    StoredFeedback out{feedback, std::nullopt, true};
    if (correction) {
      TMCRA_ASSIGN_OR_RETURN(const auto accepted, AcceptJob(conn, *correction));
      out.correction_status = accepted.job.status;
    }
    TMCRA_RETURN_IF_ERROR(MoveCounter(conn, counter + 1));
    TMCRA_RETURN_IF_ERROR(tx.Commit());
    return out;
  };
  if (feedback.idempotency_key) return Retrying(add);  // a second run replays the first
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  return add(*conn);
}

namespace {

// The records of `scope` the selection names, oldest first (as the SQLite store selects them),
// with their first 200 characters.
Result<std::vector<SharedStore::ForgottenRecord>> SelectForgotten(
    pg::Connection& conn, std::string_view scope, const SharedStore::ForgetSelection& s) {
  const Param params[] = {
      scope, OptionalParam(s.session_id), s.before ? Param(*s.before) : Param::Null(),
      OptionalParam(s.match),
      s.message_ids ? Param(nlohmann::json(*s.message_ids).dump()) : Param::Null()};
  TMCRA_ASSIGN_OR_RETURN(
      auto rows,
      conn.Exec("SELECT event_seq, record_id, scope_name, session_id, role, timestamp, "
                "left(content, 200), job_id FROM mem_records WHERE scope_name = $1 AND ($2::text "
                "IS NULL OR session_id = $2) AND ($3::float8 IS NULL OR occurred_at < $3) AND "
                "($4::text IS NULL OR strpos(content, $4) > 0) AND ($5::json IS NULL OR "
                "message_id IN (SELECT json_array_elements_text($5::json))) ORDER BY "
                "occurred_at, event_seq",
                params));
  std::vector<SharedStore::ForgottenRecord> out;
  for (int i = 0; i < rows.size(); ++i) {
    out.push_back({rows.Int(i, 0), std::string(rows.Text(i, 1)), std::string(rows.Text(i, 2)),
                   std::string(rows.Text(i, 3)), std::string(rows.Text(i, 4)),
                   std::string(rows.Text(i, 5)), std::string(rows.Text(i, 6)),
                   std::string(rows.Text(i, 7))});
  }
  return out;
}

// Deletes the records and the targets feedback had on them, their deletions numbered after
// `*counter` in event_seq order, and counts them out of their scope: a few statements whatever
// their number, since the counter's lock is held meanwhile.
Status DeleteForgotten(pg::Connection& conn, std::string_view scope,
                       const std::vector<SharedStore::ForgottenRecord>& doomed, int64_t* counter) {
  if (doomed.empty()) return Ok();
  std::vector<int64_t> seqs;
  std::vector<std::string> ids;
  for (const auto& d : doomed) {
    seqs.push_back(d.seq);
    ids.push_back(d.record_id);
  }
  std::sort(seqs.begin(), seqs.end());
  const std::string seq_list = nlohmann::json(seqs).dump();
  TMCRA_RETURN_IF_ERROR(ExecAll(
      conn, {{"DELETE FROM mem_records WHERE event_seq IN (SELECT "
              "json_array_elements_text($1::json)::bigint)",
              {Param(seq_list)}},
             {"DELETE FROM mem_feedback_targets WHERE record_id IN (SELECT "
              "json_array_elements_text($1::json))",
              {Param(nlohmann::json(ids).dump())}},
             {"INSERT INTO mem_deletions(seq, event_seq, scope_name) SELECT $2::bigint + n, "
              "e::bigint, $3 FROM json_array_elements_text($1::json) WITH ORDINALITY AS t(e, n)",
              {Param(seq_list), Param(*counter), Param(scope)}},
             {"UPDATE mem_scopes SET record_count = GREATEST(record_count - $2, 0) WHERE name = $1",
              {Param(scope), Param(static_cast<int64_t>(doomed.size()))}}}));
  *counter += static_cast<int64_t>(doomed.size());
  return Ok();
}

// `text` as JSON writes it inside a string (quotes, backslashes and control characters escaped),
// to find it in stored JSON.
std::optional<std::string> AsInJson(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::string quoted = nlohmann::json(*text).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// Deletes each feedback of `scope` left without a target, or whose request quotes `match`
// (as typed, or as JSON writes it), each deletion numbered after `*counter`; how many went.
Result<int64_t> DropFeedback(pg::Connection& conn, std::string_view scope,
                             const std::optional<std::string>& match, int64_t* counter) {
  const std::optional<std::string> escaped = AsInJson(match);
  TMCRA_ASSIGN_OR_RETURN(
      auto gone,
      conn.Exec("DELETE FROM mem_feedback f WHERE scope_name = $1 AND (NOT EXISTS (SELECT 1 FROM "
                "mem_feedback_targets t WHERE t.feedback_id = f.feedback_id) OR ($2::text IS NOT "
                "NULL AND (strpos(request_json, $2) > 0 OR strpos(request_json, $3) > 0))) "
                "RETURNING seq, feedback_id",
                {Param(scope), OptionalParam(match), OptionalParam(escaped)}));
  std::vector<std::pair<int64_t, std::string>> deleted;
  for (int i = 0; i < gone.size(); ++i) deleted.emplace_back(gone.Int(i, 0), gone.Text(i, 1));
  std::sort(deleted.begin(), deleted.end());  // in the order they were added
  for (const auto& [seq, feedback_id] : deleted) {
    TMCRA_RETURN_IF_ERROR(NoteDeletion(conn, ++*counter, 0, scope, feedback_id));
  }
  return static_cast<int64_t>(deleted.size());
}

// The jobs that carried the records keep no copy: a finished job's payload is cleared, and a
// job of the scope not yet run whose payload holds the session or the phrase (any, for `all`
// alone) is failed with "forgotten". How many changed.
Result<int64_t> ScrubJobs(pg::Connection& conn, std::string_view scope,
                          const std::vector<SharedStore::ForgottenRecord>& doomed,
                          const SharedStore::ForgetSelection& s) {
  int64_t changed = 0;
  std::set<std::string> jobs;
  for (const auto& d : doomed) jobs.insert(d.job_id);
  for (const std::string& job : jobs) {
    TMCRA_ASSIGN_OR_RETURN(
        auto cleared,
        conn.Exec("UPDATE mem_jobs SET payload_json = NULL WHERE job_id = $1 AND payload_json IS "
                  "NOT NULL AND status NOT IN ('pending', 'running')",
                  {Param(job)}));
    changed += cleared.Affected();
  }
  const std::optional<std::string> escaped = AsInJson(s.match);
  const bool any = s.all && !s.before && !s.message_ids;
  TMCRA_ASSIGN_OR_RETURN(
      auto failed,
      conn.Exec(std::string("UPDATE mem_jobs SET status = 'failed', payload_json = NULL, "
                            "updated_at = ") +
                    kNow + ", finished_at = " + kNow +
                    ", lease_owner = NULL, lease_expires_at = NULL, error_json = "
                    "'{\"code\":\"forgotten\",\"message\":\"forgotten before it was stored\"}' "
                    "WHERE scope_name = $1 AND status IN ('pending', 'running') AND payload_json "
                    "IS NOT NULL AND ($2::boolean OR (payload_json::json ->> 'session_id') = "
                    "$3::text OR strpos(payload_json, $4::text) > 0 OR strpos(payload_json, "
                    "$5::text) > 0)",
                {Param(scope), Param(any ? "true" : "false"), OptionalParam(s.session_id),
                 OptionalParam(s.match), OptionalParam(escaped)}));
  return changed + failed.Affected();
}

}  // namespace

namespace {

// VACUUM of the tables a forget deletes from; kPermissionDenied when the role owns neither one
// of them nor the database (PostgreSQL would skip it with a warning).
Status Vacuum(pg::Connection& conn) {
  static constexpr const char* kTables =
      "mem_records, mem_vectors, mem_feedback, "
      "mem_feedback_targets, mem_jobs";
  TMCRA_ASSIGN_OR_RETURN(
      auto foreign,
      conn.Exec("SELECT string_agg(relname, ', ') FROM pg_class WHERE relname IN ('mem_records', "
                "'mem_vectors', 'mem_feedback', 'mem_feedback_targets', 'mem_jobs') AND "
                "relnamespace = to_regnamespace(current_schema())::oid AND NOT "
                "pg_has_role(current_user, relowner, 'USAGE') AND NOT pg_has_role(current_user, "
                "(SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')"));
  if (!foreign.IsNull(0, 0)) {
    return Error{Errc::kPermissionDenied, false,
                 "the database role does not own " + std::string(foreign.Text(0, 0))};
  }
  return conn.Run(std::string("VACUUM ") + kTables);
}

}  // namespace

Result<SharedStore::Forgotten> PgStore::Forget(std::string_view scope,
                                               const ForgetSelection& selection) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  Forgotten out;
  {
    if (selection.dry_run) {
      TMCRA_ASSIGN_OR_RETURN(out.records, SelectForgotten(*conn, scope, selection));
      return out;
    }
    // Under the counter's lock no job's records land between the selection and the deletion.
    TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
    TMCRA_ASSIGN_OR_RETURN(int64_t counter, LockCounter(*conn));
    const int64_t before = counter;
    TMCRA_ASSIGN_OR_RETURN(out.records, SelectForgotten(*conn, scope, selection));
    TMCRA_RETURN_IF_ERROR(DeleteForgotten(*conn, scope, out.records, &counter));
    TMCRA_ASSIGN_OR_RETURN(out.feedback, DropFeedback(*conn, scope, selection.match, &counter));
    TMCRA_ASSIGN_OR_RETURN(out.jobs, ScrubJobs(*conn, scope, out.records, selection));
    if (counter != before) TMCRA_RETURN_IF_ERROR(MoveCounter(*conn, counter));
    TMCRA_RETURN_IF_ERROR(tx.Commit());
  }
  if (out.records.empty() && out.feedback == 0 && out.jobs == 0) return out;
  // The deleted rows' space reused and their index entries removed now, not when autovacuum
  // comes by (docs/memd.md, "PostgreSQL"). PostgreSQL skips, with a warning only, a table the
  // role does not own: that is found out first.
  auto vacuumed = Vacuum(*conn);
  out.vacuumed = static_cast<bool>(vacuumed);
  if (!vacuumed) out.vacuum_error = vacuumed.error().message;
  return out;
}

Result<SharedStore::Imported> PgStore::Import(std::string_view scope,
                                              const std::vector<ImportLine>& lines) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
  TMCRA_ASSIGN_OR_RETURN(const int64_t counter, LockCounter(*conn));
  int64_t next = counter;
  Imported out;
  std::optional<std::string> last_job;
  int64_t last_record = 0;
  for (const ImportLine& line : lines) {
    if (line.is_record) {
      TMCRA_ASSIGN_OR_RETURN(const bool placed,
                             PlaceRecord(*conn, next + 1, scope, line.job_id, line.record, ""));
      ++(placed ? out.records_added : out.records_present);
      if (placed) {
        last_record = ++next;
        last_job = line.job_id;
      }
    } else {
      TMCRA_ASSIGN_OR_RETURN(const bool placed, PlaceFeedback(*conn, next + 1, line.feedback));
      ++(placed ? out.feedback_added : out.feedback_present);
      if (placed) ++next;
    }
  }
  if (out.records_added > 0) {
    TMCRA_ASSIGN_OR_RETURN(
        auto scope_row,
        conn->Exec(
            std::string("INSERT INTO mem_scopes(name, record_count, last_event_seq, "
                        "last_job_id, created_at, updated_at) VALUES($1, $2, $3, $4, ") +
                kNow + ", " + kNow +
                ") ON CONFLICT (name) DO UPDATE SET record_count = mem_scopes.record_count "
                "+ $2, last_event_seq = GREATEST(COALESCE(mem_scopes.last_event_seq, 0), "
                "$3), updated_at = EXCLUDED.updated_at",
            {Param(scope), Param(out.records_added), Param(last_record), OptionalParam(last_job)}));
    (void)scope_row;
  }
  if (next != counter) TMCRA_RETURN_IF_ERROR(MoveCounter(*conn, next));
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return out;
}

Result<int64_t> PgStore::ImportedThrough(std::string_view source) {
  return Retrying([&](pg::Connection& conn) -> Result<int64_t> {
    TMCRA_ASSIGN_OR_RETURN(
        auto rows, conn.Exec("SELECT through FROM mem_imports WHERE source = $1", {Param(source)}));
    return rows.size() == 0 ? int64_t{0} : rows.Int(0, 0);
  });
}

Result<int64_t> PgStore::ImportRecords(std::string_view source, int64_t through,
                                       const std::vector<ImportedRecord>& records) {
  TMCRA_ASSIGN_OR_RETURN(auto conn, pool_.Borrow());
  TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(*conn));
  TMCRA_ASSIGN_OR_RETURN(const int64_t counter, LockCounter(*conn));
  int64_t next = counter;
  for (const ImportedRecord& imported : records) {
    TMCRA_ASSIGN_OR_RETURN(const bool placed, PlaceRecord(*conn, next + 1, imported.scope_name,
                                                          imported.job_id, imported.record, ""));
    if (placed) ++next;
  }
  if (next != counter) TMCRA_RETURN_IF_ERROR(MoveCounter(*conn, next));
  TMCRA_ASSIGN_OR_RETURN(
      auto noted, conn->Exec("INSERT INTO mem_imports(source, through) VALUES($1, $2) ON CONFLICT "
                             "(source) DO UPDATE SET through = EXCLUDED.through",
                             {Param(source), Param(through)}));
  (void)noted;
  TMCRA_RETURN_IF_ERROR(tx.Commit());
  return next - counter;
}

Result<bool> PgStore::ImportJob(const JobRow& job) {
  return Retrying([&](pg::Connection& conn) -> Result<bool> {
    const Param params[] = {job.job_id,
                            job.tenant_id,
                            job.scope_name,
                            job.job_type,
                            job.status,
                            job.attempts,
                            OptionalParam(job.idempotency_key),
                            job.payload_sha256,
                            job.consistency,
                            job.created_at,
                            job.updated_at,
                            job.finished_at ? Param(*job.finished_at) : Param::Null(),
                            OptionalParam(job.result_json),
                            OptionalParam(job.error_json)};
    TMCRA_ASSIGN_OR_RETURN(
        auto inserted,
        conn.Exec("INSERT INTO mem_jobs(job_id, tenant_id, scope_name, job_type, status, "
                  "attempts, idempotency_key, payload_sha256, consistency, created_at, "
                  "updated_at, finished_at, result_json, error_json) VALUES($1, $2, $3, $4, $5, "
                  "$6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING",
                  params));
    return inserted.Affected() == 1;
  });
}

Status PgStore::RecountScopes() {
  return Retrying([&](pg::Connection& conn) -> Status {
    // Under the counter's lock, so no job's count lands between the reading and the writing.
    TMCRA_ASSIGN_OR_RETURN(auto tx, pg::Transaction::Begin(conn));
    TMCRA_ASSIGN_OR_RETURN(const int64_t counter, LockCounter(conn));
    (void)counter;
    TMCRA_RETURN_IF_ERROR(conn.Run(
        std::string(
            "INSERT INTO mem_scopes(name, record_count, last_event_seq, last_job_id, created_at, "
            "updated_at) SELECT scope_name, count(*), max(event_seq), (array_agg(job_id ORDER BY "
            "event_seq DESC))[1], ") +
        kNow + ", " + kNow +
        " FROM mem_records GROUP BY scope_name ON CONFLICT (name) DO UPDATE SET record_count = "
        "EXCLUDED.record_count, last_event_seq = EXCLUDED.last_event_seq, last_job_id = "
        "EXCLUDED.last_job_id, updated_at = EXCLUDED.updated_at"));
    return tx.Commit();
  });
}

Result<std::vector<PgStore::ImportedRecord>> PgStore::RecordsById(std::string_view after,
                                                                  int limit) {
  return Retrying([&](pg::Connection& conn) -> Result<std::vector<ImportedRecord>> {
    TMCRA_ASSIGN_OR_RETURN(
        auto rows, conn.Exec(std::string("SELECT ") + kRecordColumns +
                                 " FROM mem_records WHERE record_id COLLATE \"C\" > $1 ORDER BY "
                                 "record_id COLLATE \"C\" LIMIT $2",
                             {Param(after), Param(limit)}));
    std::vector<ImportedRecord> out;
    for (int i = 0; i < rows.size(); ++i) {
      Change change = RecordChange(rows, i);
      out.push_back({change.scope_name, change.job_id, std::move(change.record)});
    }
    return out;
  });
}

Result<std::vector<SharedStore::SharedVector>> PgStore::VectorsOf(
    std::string_view model, const std::vector<int64_t>& event_seqs) {
  return Retrying([&](pg::Connection& conn) -> Result<std::vector<SharedVector>> {
    TMCRA_ASSIGN_OR_RETURN(
        auto rows,
        conn.Exec("SELECT v.event_seq, r.record_id, v.vector FROM mem_vectors v JOIN mem_records "
                  "r USING (event_seq) WHERE v.model = $1 AND v.event_seq IN (SELECT "
                  "json_array_elements_text($2::json)::bigint)",
                  {Param(model), Param(nlohmann::json(event_seqs).dump())}));
    std::vector<SharedVector> out;
    for (int i = 0; i < rows.size(); ++i) {
      out.push_back({rows.Int(i, 0), std::string(rows.Text(i, 1)), rows.Bytes(i, 2)});
    }
    return out;
  });
}

Status PgStore::AddVectors(std::string_view model, const std::vector<SharedVector>& vectors) {
  // One statement (and transaction) a vector, so no transaction here holds locks on several
  // records while a forget deletes them; each is harmless to repeat.
  return Retrying([&](pg::Connection& conn) -> Status {
    for (const SharedVector& v : vectors) {
      // A record deleted meanwhile takes none (its deletion's lock is waited for, then the row
      // is skipped), nor does another record under the same number.
      TMCRA_ASSIGN_OR_RETURN(
          auto added,
          conn.Exec(
              "INSERT INTO mem_vectors(event_seq, model, vector) SELECT event_seq, $2, $3 "
              "FROM mem_records WHERE event_seq = $1 AND record_id = $4 FOR KEY SHARE ON "
              "CONFLICT DO NOTHING",
              {Param(v.event_seq), Param(model), Param::Bytes(v.vector), Param(v.record_id)}));
      (void)added;
    }
    return Ok();
  });
}

}  // namespace tmcra::memory
