#include "memd/migrate.h"

#include <cstdio>
#include <map>

#include "base/sha256.h"
#include "base/sqlite_db.h"

namespace tmcra::memd {

namespace {

using memory::PgStore;

constexpr const char* kRecordColumns =
    "event_seq, scope_name, job_id, record_id, session_id, message_id, role, content, "
    "occurred_at, timestamp, metadata_json, agent_id, target_agent_id";

std::optional<std::string> OptionalText(const db::Statement& st, int column) {
  if (st.IsNull(column)) return std::nullopt;
  return st.Text(column);
}

PgStore::ImportedRecord RecordOf(const db::Statement& st) {
  PgStore::ImportedRecord out;
  out.scope_name = st.Text(1);
  out.job_id = st.Text(2);
  auto& r = out.record;
  r.record_id = st.Text(3);
  r.session_id = st.Text(4);
  r.message_id = st.Text(5);
  r.role = st.Text(6);
  r.content = st.Text(7);
  r.occurred_at = st.Double(8);
  r.timestamp = st.Text(9);
  r.metadata_json = st.Text(10);
  r.agent_id = OptionalText(st, 11);
  r.target_agent_id = OptionalText(st, 12);
  return out;
}

// A record's content as compared: every stored field, unambiguously joined.
std::string Fingerprint(const PgStore::ImportedRecord& in) {
  const auto& r = in.record;
  char occurred[40];
  std::snprintf(occurred, sizeof occurred, "%.17g", r.occurred_at);
  std::string joined;
  for (const std::string* part :
       {&in.scope_name, &in.job_id, &r.record_id, &r.session_id, &r.message_id, &r.role, &r.content,
        &r.timestamp, &r.metadata_json}) {
    joined += std::to_string(part->size()) + ":" + *part + ";";
  }
  joined += occurred;
  joined += ";" + r.agent_id.value_or("\x01") + ";" + r.target_agent_id.value_or("\x01");
  return Sha256Hex(joined);
}

// The schema the engine writes (memory/engine.cc's migrations): an older source has not been
// opened by this version yet.
constexpr int64_t kSourceSchema = 6;

Status RefuseOldSchema(db::Database& source) {
  TMCRA_ASSIGN_OR_RETURN(const int64_t version, source.QueryInt("PRAGMA user_version"));
  if (version >= kSourceSchema) return Ok();
  return Error::Invalid("the source store is at schema " + std::to_string(version) +
                        ", older than this tmcra-memd's: start `tmcra-memd serve --data-dir` on "
                        "it once to bring it up to date, stop it, and migrate again");
}

Status RefuseUnrunJobs(db::Database& source) {
  TMCRA_ASSIGN_OR_RETURN(
      const int64_t unrun,
      source.QueryInt("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"));
  if (unrun == 0) return Ok();
  return Error::Invalid(std::to_string(unrun) +
                        " jobs of the source have not run: start `tmcra-memd serve --data-dir` on "
                        "it once so its worker runs them, stop it, and migrate again");
}

Status CopyRecords(db::Database& source, const std::string& source_id, PgStore& store, int batch,
                   int64_t total, MigrationSummary& out,
                   const std::function<void(int64_t, int64_t)>& progress) {
  TMCRA_ASSIGN_OR_RETURN(int64_t through, store.ImportedThrough(source_id));
  TMCRA_ASSIGN_OR_RETURN(auto done_before,
                         source.Prepare("SELECT count(*) FROM records WHERE event_seq <= ?"));
  done_before.Bind(1, through);
  TMCRA_ASSIGN_OR_RETURN(const bool counted, done_before.Step());
  int64_t done = counted ? done_before.Int(0) : 0;
  done_before.Reset();
  TMCRA_ASSIGN_OR_RETURN(auto page,
                         source.Prepare(std::string("SELECT ") + kRecordColumns +
                                        " FROM records WHERE event_seq > ? ORDER BY event_seq "
                                        "LIMIT ?"));
  for (;;) {
    page.Reset();
    page.Bind(1, through).Bind(2, int64_t{batch});
    std::vector<PgStore::ImportedRecord> records;
    for (;;) {
      TMCRA_ASSIGN_OR_RETURN(const bool row, page.Step());
      if (!row) break;
      through = page.Int(0);
      records.push_back(RecordOf(page));
    }
    if (records.empty()) return Ok();
    TMCRA_ASSIGN_OR_RETURN(const int64_t copied, store.ImportRecords(source_id, through, records));
    out.records_copied += copied;
    done += static_cast<int64_t>(records.size());
    progress(done, total);
  }
}

Status CopyJobs(db::Database& source, PgStore& store, MigrationSummary& out) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, source.Prepare("SELECT job_id, tenant_id, scope_name, job_type, status, attempts, "
                              "idempotency_key, payload_sha256, COALESCE(consistency, ''), "
                              "created_at, updated_at, finished_at, result_json, error_json FROM "
                              "jobs WHERE status IN ('succeeded', 'failed')"));
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return Ok();
    PgStore::JobRow job;
    job.job_id = st.Text(0);
    job.tenant_id = st.Text(1);
    job.scope_name = st.Text(2);
    job.job_type = st.Text(3);
    job.status = st.Text(4);
    job.attempts = st.Int(5);
    job.idempotency_key = OptionalText(st, 6);
    job.payload_sha256 = st.IsNull(7) ? "" : st.Text(7);
    job.consistency = st.Text(8);
    job.created_at = st.Double(9);
    job.updated_at = st.Double(10);
    if (!st.IsNull(11)) job.finished_at = st.Double(11);
    job.result_json = OptionalText(st, 12);
    job.error_json = OptionalText(st, 13);
    TMCRA_ASSIGN_OR_RETURN(const bool copied, store.ImportJob(job));
    if (copied) ++out.jobs_copied;
  }
}

// Every feedback with its targets, `batch` per transaction, in the source's order (each is
// numbered in the database's feed as it is copied; one copied before is left as it is).
Status CopyFeedback(db::Database& source, PgStore& store, int batch, MigrationSummary& out) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st, source.Prepare("SELECT seq, feedback_id, tenant_id, scope_name, rating, action, "
                              "idempotency_key, payload_sha256, request_json, created_at, "
                              "correction_job_id FROM feedback ORDER BY seq"));
  TMCRA_ASSIGN_OR_RETURN(auto targets,
                         source.Prepare("SELECT record_id FROM feedback_targets WHERE "
                                        "feedback_seq = ? ORDER BY position"));
  std::vector<PgStore::ImportLine> lines;
  const auto flush = [&]() -> Status {
    if (lines.empty()) return Ok();
    // Feedback lines carry their own scope; the call's scope is a record's.
    TMCRA_ASSIGN_OR_RETURN(const auto imported, store.Import("", lines));
    out.feedback_copied += imported.feedback_added;
    lines.clear();
    return Ok();
  };
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return flush();
    PgStore::ImportLine line;
    line.is_record = false;
    PgStore::FeedbackRow& f = line.feedback;
    f.feedback_id = st.Text(1);
    f.tenant_id = st.Text(2);
    f.scope_name = st.Text(3);
    f.rating = st.Text(4);
    f.action = st.Text(5);
    f.idempotency_key = OptionalText(st, 6);
    f.payload_sha256 = st.Text(7);
    f.request_json = st.Text(8);
    f.created_at = st.Double(9);
    f.correction_job_id = OptionalText(st, 10);
    targets.Reset();
    targets.Bind(1, st.Int(0));
    for (;;) {
      TMCRA_ASSIGN_OR_RETURN(const bool target, targets.Step());
      if (!target) break;
      f.targets.push_back(targets.Text(0));
    }
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) >= batch) TMCRA_RETURN_IF_ERROR(flush());
  }
}

// Every source record's fingerprint against the database's record of the same id.
Status Verify(db::Database& source, PgStore& store, MigrationSummary& out) {
  std::map<std::string, std::string> expected;
  TMCRA_ASSIGN_OR_RETURN(auto st,
                         source.Prepare(std::string("SELECT ") + kRecordColumns + " FROM records"));
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    PgStore::ImportedRecord record = RecordOf(st);
    expected.emplace(record.record.record_id, Fingerprint(record));
  }
  std::string after;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(auto page, store.RecordsById(after, 5000));
    if (page.empty()) break;
    for (const auto& record : page) {
      auto it = expected.find(record.record.record_id);
      if (it == expected.end()) continue;  // a record the database had of its own
      if (it->second != Fingerprint(record)) {
        return Error{Errc::kDataLoss, false,
                     "record " + record.record.record_id + " differs in the database"};
      }
      ++out.verified;
    }
    after = page.back().record.record_id;
  }
  if (out.verified != out.records) {
    return Error{Errc::kDataLoss, false,
                 std::to_string(out.records - out.verified) +
                     " source records are not in the database (a record of the same session "
                     "and message id, stored there before under another id, is kept instead)"};
  }
  return Ok();
}

}  // namespace

Result<MigrationSummary> MigrateStore(const std::string& sqlite_path, PgStore& store, int batch,
                                      const std::function<void(int64_t, int64_t)>& progress) {
  db::Database::Options options;
  options.path = sqlite_path;
  options.read_only = true;
  TMCRA_ASSIGN_OR_RETURN(auto source, db::Database::Open(options));
  TMCRA_RETURN_IF_ERROR(RefuseOldSchema(*source));
  TMCRA_RETURN_IF_ERROR(RefuseUnrunJobs(*source));
  MigrationSummary out;
  TMCRA_ASSIGN_OR_RETURN(out.records, source->QueryInt("SELECT count(*) FROM records"));
  TMCRA_ASSIGN_OR_RETURN(out.feedback, source->QueryInt("SELECT count(*) FROM feedback"));
  TMCRA_RETURN_IF_ERROR(
      CopyRecords(*source, sqlite_path, store, batch, out.records, out, progress));
  TMCRA_RETURN_IF_ERROR(CopyJobs(*source, store, out));
  TMCRA_RETURN_IF_ERROR(CopyFeedback(*source, store, batch, out));
  TMCRA_RETURN_IF_ERROR(store.RecountScopes());
  TMCRA_RETURN_IF_ERROR(Verify(*source, store, out));
  return out;
}

}  // namespace tmcra::memd
