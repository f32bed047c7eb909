// The engine on a shared store (EngineOptions::shared, memory/shared_store.h): ingests accepted
// into the shared store, its jobs run by whichever engine claims them, and this engine's file
// kept as an index of the shared records from the store's change feed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "base/canonical_json.h"
#include "base/clock.h"
#include "base/identifiers.h"
#include "base/ids.h"
#include "base/json_reader.h"
#include "memory/engine_impl.h"
#include "memory/ingest_validation.h"

namespace tmcra::memory {

namespace {

// Feed changes applied per local transaction.
constexpr int kFeedBatch = 2000;
// Records a worker writes to the shared store in one transaction (a job's, at least).
constexpr size_t kRecordsPerWrite = 2000;

json NullableReal(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json ParsedOrNull(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  json value = ParseJsonLenient(*text);
  return value.is_discarded() ? json(nullptr) : value;
}

// The JobView of a shared job row, as LoadJob makes it of a local one (engine.cc).
json JobView(const SharedStore::JobRow& job, const std::string& base_url) {
  return json{{"job_id", job.job_id},
              {"tenant_id", job.tenant_id},
              {"scope_name", job.scope_name},
              {"job_type", job.job_type},
              {"status", job.status},
              {"attempts", job.attempts},
              {"created_at", job.created_at},
              {"updated_at", job.updated_at},
              {"started_at", NullableReal(job.started_at)},
              {"finished_at", NullableReal(job.finished_at)},
              {"heartbeat_at", NullableReal(job.heartbeat_at)},
              {"lease_expires_at", NullableReal(job.lease_expires_at)},
              {"result", ParsedOrNull(job.result_json)},
              {"error", ParsedOrNull(job.error_json)},
              {"status_url", base_url + "/v1/jobs/" + job.job_id},
              {"idempotent_retry", nullptr},
              {"resume_mode", nullptr}};
}

std::string NewJobId() {
  std::string hex;
  for (char c : UuidV4()) {
    if (c != '-') hex.push_back(c);
  }
  return "job_" + hex;
}

std::vector<SharedStore::NewRecord> RecordsOf(const std::string& scope,
                                              const IngestRequest& request) {
  std::vector<SharedStore::NewRecord> records;
  for (const IngestMessage& m : request.messages) {
    const auto text_field = [&](const char* key) -> std::optional<std::string> {
      auto it = m.metadata.find(key);
      if (it == m.metadata.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    SharedStore::NewRecord r;
    r.record_id = RecordIdOf(scope, request.session_id, m.message_id);
    r.session_id = request.session_id;
    r.message_id = m.message_id;
    r.role = m.role;
    r.content = m.content;
    r.occurred_at = m.occurred_at;
    r.timestamp = m.timestamp;
    r.metadata_json = CanonicalJson(m.metadata);
    r.agent_id = text_field("agent_id");
    r.target_agent_id = text_field("target_agent_id");
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace

bool CanonicalJsonHoldsNul(std::string_view text) {
  // Canonical JSON writes U+0000 as \u0000 and a backslash as \\: an escape is a "u0000" after
  // an odd run of backslashes.
  for (size_t at = text.find("u0000"); at != std::string_view::npos;
       at = text.find("u0000", at + 1)) {
    size_t backslashes = 0;
    while (backslashes < at && text[at - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 1) return true;
  }
  return false;
}

Error EngineImpl::NotShared(std::string_view what) {
  return Error::Api(Errc::kUnimplemented, "not_implemented",
                    std::string(what) + " is not available on a PostgreSQL store yet");
}

SharedStore::JobRow EngineImpl::SharedJobRow(std::string_view scope,
                                             const PreparedIngest& prepared) const {
  SharedStore::JobRow row;
  row.job_id = NewJobId();
  row.tenant_id = options_.tenant_id;
  row.scope_name = std::string(scope);
  row.job_type = "ingest";
  row.idempotency_key = prepared.key;
  row.payload_sha256 = prepared.payload_sha;
  row.payload_json = prepared.payload_text;
  row.consistency = prepared.consistency;
  row.created_at = NowSeconds();
  return row;
}

Result<std::vector<json>> EngineImpl::AcceptShared(std::string_view scope,
                                                   const std::vector<PreparedIngest>& prepared,
                                                   bool batch) {
  std::vector<SharedStore::JobRow> rows;
  const double now = NowSeconds();
  for (size_t i = 0; i < prepared.size(); ++i) {
    // PostgreSQL text cannot hold U+0000.
    if (CanonicalJsonHoldsNul(prepared[i].payload_text)) {
      const std::string item = batch ? "items." + std::to_string(i) + "." : "";
      return ValidationError(item + "messages",
                             "U+0000 (NUL) cannot be stored in a PostgreSQL memory store");
    }
  }
  for (const PreparedIngest& p : prepared) {
    rows.push_back(SharedJobRow(scope, p));
    rows.back().created_at = now;
  }
  TMCRA_ASSIGN_OR_RETURN(auto acceptance, options_.shared->AcceptJobs(rows));
  if (acceptance.conflict) {
    const std::string item = batch ? "items." + std::to_string(*acceptance.conflict) + ": " : "";
    return Error::Api(Errc::kConflict, "idempotency_conflict",
                      item + "Idempotency-Key was already used with a different request");
  }
  std::vector<json> views;
  bool any_created = false;
  for (const SharedStore::Accepted& accepted : acceptance.accepted) {
    json view = JobView(accepted.job, options_.public_base_url);
    view["idempotent_replay"] = !accepted.created;
    const bool ryw = accepted.job.consistency == "read_your_writes";
    view["consistency_contract"] = {
        {"mode", accepted.job.consistency},
        {"visible_after_job_id", accepted.job.job_id},
        {"recall_wait_for_job_id", ryw ? json(accepted.job.job_id) : json(nullptr)}};
    any_created = any_created || accepted.created;
    views.push_back(std::move(view));
  }
  if (any_created) SignalWorker();
  return views;
}

Result<json> EngineImpl::SharedGetJob(std::string_view job_id) {
  TMCRA_ASSIGN_OR_RETURN(auto job, options_.shared->GetJob(job_id));
  if (!job || job->tenant_id != options_.tenant_id) {
    return Error::Api(Errc::kNotFound, "not_found", "job not found");
  }
  return JobView(*job, options_.public_base_url);
}

// The jobs to write this turn: those this engine claimed but could not write (the store was
// unreachable), for most of their lease (then they are left to whoever claims them once it has
// run out, their attempts counted), and those it claims now.
Result<std::vector<EngineImpl::UnwrittenJob>> EngineImpl::SharedJobsToWrite(int max_jobs) {
  std::vector<UnwrittenJob> retries;
  {
    std::lock_guard lock(orphans_mu_);
    retries.swap(unwritten_shared_jobs_);
  }
  const auto now = std::chrono::steady_clock::now();
  std::vector<UnwrittenJob> jobs;
  for (auto& retry : retries) {
    if (now < retry.give_up_at) jobs.push_back(std::move(retry));
  }
  auto claimed = options_.shared->ClaimJobs(owner_, max_jobs, options_.lease_seconds);
  if (!claimed) {
    // The store cannot be reached: the unwritten jobs wait for the next turn.
    std::lock_guard lock(orphans_mu_);
    for (auto& job : jobs) unwritten_shared_jobs_.push_back(std::move(job));
    return claimed.error();
  }
  const auto give_up_at =
      now + std::chrono::milliseconds(static_cast<int64_t>(options_.lease_seconds * 800));
  for (const auto& job : *claimed) jobs.push_back({job, give_up_at});
  return jobs;
}

Result<int> EngineImpl::RunSharedJobs(int max_jobs) {
  TMCRA_ASSIGN_OR_RETURN(std::vector<UnwrittenJob> jobs, SharedJobsToWrite(max_jobs));
  // Every job's records in one transaction of the store (one commit for the lot); a job that
  // could not be written is kept for the next turn when the failure may pass.
  std::vector<SharedStore::JobWrite> writes;
  std::vector<UnwrittenJob> writing;
  std::vector<UnwrittenJob> later;
  int done = 0;
  for (UnwrittenJob& job : jobs) {
    auto write = SharedJobWrite(job.job);
    if (!write) {
      spdlog::warn("memory job {}: {}", job.job.job_id, write.error().ToString());
      if (write.error().retryable) later.push_back(std::move(job));
    } else if (!*write) {
      ++done;  // failed as unreadable
    } else {
      writes.push_back(std::move(**write));
      writing.push_back(std::move(job));
    }
  }
  done += WriteSharedJobs(writes, writing, later);
  std::lock_guard lock(orphans_mu_);
  for (auto& job : later) unwritten_shared_jobs_.push_back(std::move(job));
  return done;  // 0 when every job failed: the worker waits before trying again
}

int EngineImpl::WriteSharedJobs(const std::vector<SharedStore::JobWrite>& writes,
                                std::vector<UnwrittenJob>& writing,
                                std::vector<UnwrittenJob>& later) {
  if (writes.empty()) return 0;
  size_t records = 0;
  for (const auto& write : writes) records += write.records.size();
  if (writes.size() > 1 && records > kRecordsPerWrite) {
    // The store's change counter is locked while a transaction writes: halves, until short.
    const auto half = static_cast<std::ptrdiff_t>(writes.size() / 2);
    std::vector<UnwrittenJob> first(std::make_move_iterator(writing.begin()),
                                    std::make_move_iterator(writing.begin() + half));
    std::vector<UnwrittenJob> second(std::make_move_iterator(writing.begin() + half),
                                     std::make_move_iterator(writing.end()));
    return WriteSharedJobs({writes.begin(), writes.begin() + half}, first, later) +
           WriteSharedJobs({writes.begin() + half, writes.end()}, second, later);
  }
  auto written = options_.shared->FinishJobs(owner_, writes);
  if (!written && !written.error().retryable && writes.size() > 1) {
    // One job the store refuses (a bug, bad data) must not hold the others back: each alone.
    spdlog::warn("memory jobs: {} (written one by one)", written.error().ToString());
    int done = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      std::vector<UnwrittenJob> one{std::move(writing[i])};
      done += WriteSharedJobs({writes[i]}, one, later);
    }
    return done;
  }
  if (!written) {
    spdlog::warn("memory jobs: {}", written.error().ToString());
    if (written.error().retryable) {
      std::move(writing.begin(), writing.end(), std::back_inserter(later));
    }
    return 0;
  }
  for (size_t i = 0; i < written->size(); ++i) {
    if (!(*written)[i].written) {
      spdlog::info("memory job {}: its lease passed to another", writes[i].job_id);
    }
  }
  return static_cast<int>(written->size());
}

Result<std::optional<SharedStore::JobWrite>> EngineImpl::SharedJobWrite(
    const SharedStore::Claimed& job) {
  const json payload = ParseJsonLenient(job.payload_json);
  if (payload.is_discarded() || !payload.is_object()) {
    const std::string error =
        json{{"code", "invalid_payload"}, {"message", "stored payload is unreadable"}}.dump();
    TMCRA_ASSIGN_OR_RETURN(const bool failed, options_.shared->FailJob(owner_, job.job_id, error));
    (void)failed;  // false: another engine holds the job now
    return std::optional<SharedStore::JobWrite>();
  }
  const IngestRequest request = IngestRequest::FromJson(payload);
  return std::optional<SharedStore::JobWrite>(SharedStore::JobWrite{
      job.job_id, RecordsOf(job.scope_name, request), [](const SharedStore::Written& w) {
        return JobResultJson(w.max_event_seq, w.records_written, w.records_deduplicated).dump();
      }});
}

Status EngineImpl::SyncReplica() {
  // The store's newest change is read before the lock, so recalls do not queue behind each
  // other's round trip; a head found behind the index is read again under the lock, since
  // another call may have applied newer changes meanwhile.
  TMCRA_ASSIGN_OR_RETURN(int64_t head, options_.shared->Head());
  std::lock_guard sync(sync_mu_);
  if (!replica_through_) {
    std::lock_guard lock(api_mu_);
    TMCRA_ASSIGN_OR_RETURN(db::Database * db, ApiDb());
    // An index an older build kept did not apply every kind of change the feed has now: it
    // reads the feed again from the start (applying a change twice changes nothing).
    TMCRA_ASSIGN_OR_RETURN(
        replica_through_,
        db->QueryInt("SELECT CASE WHEN COALESCE((SELECT value FROM maintenance WHERE name = "
                     "'shared_feed_format'), 0) < " +
                     std::to_string(kSharedFeedFormat) +
                     " THEN 0 ELSE COALESCE((SELECT value FROM maintenance WHERE name = "
                     "'shared_through'), 0) END"));
  }
  if (head < *replica_through_) {
    TMCRA_ASSIGN_OR_RETURN(head, options_.shared->Head());
  }
  if (head < *replica_through_) {
    // The store went back: a restore, or a failover to a replica without the newest changes.
    // The index holds changes the store has lost, and would skip new ones under their numbers.
    return Error{Errc::kDataLoss, false,
                 "the shared store's newest change (" + std::to_string(head) +
                     ") is older than this index's (" + std::to_string(*replica_through_) +
                     "): it was restored or failed over; restart this instance, which rebuilds "
                     "its index"};
  }
  while (*replica_through_ < head) {
    TMCRA_ASSIGN_OR_RETURN(const auto feed,
                           options_.shared->ChangesAfter(*replica_through_, kFeedBatch));
    const bool deletes = std::any_of(feed.changes.begin(), feed.changes.end(), [](const auto& c) {
      return c.kind == SharedStore::ChangeKind::kRecordDeleted;
    });
    {
      // Deletions clear the ranking caches, which no recall may be reading then.
      std::optional<ReadersPaused> paused;
      if (deletes) paused.emplace(*this);
      std::lock_guard lock(api_mu_);
      TMCRA_ASSIGN_OR_RETURN(db::Database * db, ApiDb());
      TMCRA_ASSIGN_OR_RETURN(const int64_t deleted, ApplySharedChanges(*db, feed));
      if (deleted > 0) ClearRankingCaches();
    }
    replica_through_ = feed.through;
    if (!feed.more) break;
  }
  return Ok();
}

}  // namespace tmcra::memory
