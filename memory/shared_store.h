// What the engine needs of a store that several engines share (tmcra-memd instances on one
// PostgreSQL database, memory/pg_store.h): the jobs with their idempotency keys, job claims with
// leases, the records jobs write, feedback, forget, import, record vectors, and a change feed in
// commit order. An
// engine given one (EngineOptions::shared) keeps its SQLite file as its own index of the shared
// records, brought up to date from the feed (docs/memd.md, "PostgreSQL").
//
// What an implementation promises:
//   * AcceptJob stores a job unless its (tenant, idempotency key) is known, and answers the
//     stored row either way: the same key accepted by two engines at once is one job.
//   * A job is held by one claimer at a time, under a lease that another may take over once it
//     expires; a holder that lost its lease cannot finish the job. A job claimed more than
//     kMaxJobClaims times is failed.
//   * Every change (a record written or deleted, a feedback added or deleted) has a number, and
//   changes become
//     visible in the order of their numbers: whoever holds every change up to N and reads the
//     ones above N later misses none. A written record's event_seq is its number.
// Errors are the store's: kUnavailable (retryable) while it cannot be reached.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace tmcra::memory {

class SharedStore {
 public:
  static constexpr int kMaxJobClaims = 5;

  virtual ~SharedStore() = default;

  struct JobRow {
    std::string job_id;
    std::string tenant_id;
    std::string scope_name;
    std::string job_type;
    std::string status;  // pending | running | succeeded | failed
    int64_t attempts = 0;
    std::optional<std::string> idempotency_key;
    std::string payload_sha256;
    std::optional<std::string> payload_json;  // dropped when the job finishes
    std::string consistency;
    double created_at = 0;
    double updated_at = 0;
    std::optional<double> started_at;
    std::optional<double> finished_at;
    std::optional<double> heartbeat_at;
    std::optional<double> lease_expires_at;
    std::optional<std::string> result_json;
    std::optional<std::string> error_json;
  };
  struct Accepted {
    JobRow job;
    bool created = false;  // false: the key was accepted before (by this engine or another)
  };
  // Stores each job as pending unless its (tenant, idempotency key) is known, all in one
  // transaction, and answers the stored rows in order; when a known key was accepted with
  // another payload_sha256, nothing is stored and `conflict` names the first such job.
  struct Acceptance {
    std::vector<Accepted> accepted;
    std::optional<size_t> conflict;
  };
  [[nodiscard]] virtual Result<Acceptance> AcceptJobs(const std::vector<JobRow>& jobs) = 0;
  [[nodiscard]] virtual Result<std::optional<JobRow>> GetJob(std::string_view job_id) = 0;
  struct JobCounts {
    int64_t unfinished = 0;  // pending or running
    int64_t failed = 0;
  };
  [[nodiscard]] virtual Result<JobCounts> CountJobs() = 0;

  struct Claimed {
    std::string job_id;
    std::string scope_name;
    std::string payload_json;
  };
  // Claims up to `max_jobs` jobs for `owner`: pending ones, oldest first, and running ones whose
  // lease has expired; a job past kMaxJobClaims claims is failed instead.
  [[nodiscard]] virtual Result<std::vector<Claimed>> ClaimJobs(std::string_view owner, int max_jobs,
                                                               double lease_seconds) = 0;

  struct NewRecord {
    std::string record_id;
    std::string session_id;
    std::string message_id;
    std::string role;
    std::string content;
    double occurred_at = 0;
    std::string timestamp;
    std::string metadata_json;
    std::optional<std::string> agent_id;
    std::optional<std::string> target_agent_id;
  };
  struct Written {
    bool written = false;  // false: the lease was lost (another claimer holds the job)
    int64_t records_written = 0;
    int64_t records_deduplicated = 0;
    int64_t max_event_seq = 0;  // the newest of the job's records (new or stored before)
  };
  // A claimed job's records, and the result to store made of what was written.
  struct JobWrite {
    std::string job_id;
    std::vector<NewRecord> records;
    std::function<std::string(const Written&)> result;
  };
  // Writes claimed jobs' records (a message stored before keeps its one copy) and marks each
  // job succeeded with its result, every job whose lease `owner` still holds, all in one
  // transaction (one commit for the lot); one Written per job, in order.
  [[nodiscard]] virtual Result<std::vector<Written>> FinishJobs(
      std::string_view owner, const std::vector<JobWrite>& jobs) = 0;
  // FinishJobs of one job.
  [[nodiscard]] Result<Written> FinishJob(
      std::string_view owner, std::string_view job_id, const std::vector<NewRecord>& records,
      const std::function<std::string(const Written&)>& result) {
    TMCRA_ASSIGN_OR_RETURN(auto written,
                           FinishJobs(owner, {JobWrite{std::string(job_id), records, result}}));
    return written.front();
  }
  // Marks a job `owner` holds failed with `error_json`; false when the lease was lost.
  [[nodiscard]] virtual Result<bool> FailJob(std::string_view owner, std::string_view job_id,
                                             const std::string& error_json) = 0;

  // A feedback with the records it targets (ids, in order). `correction_job_id` names the job
  // that ingests a correction's replacement.
  struct FeedbackRow {
    std::string feedback_id;
    std::string tenant_id;
    std::string scope_name;
    std::string rating;
    std::string action;
    std::optional<std::string> idempotency_key;
    std::string payload_sha256;
    std::string request_json;
    double created_at = 0;
    std::optional<std::string> correction_job_id;
    std::vector<std::string> targets;
  };
  struct StoredFeedback {
    FeedbackRow feedback;
    std::optional<std::string> correction_status;  // the correction job's status now
    bool created = false;  // false: the key was used before (by this engine or another)
  };
  // The feedback stored under (tenant, idempotency key), if any.
  [[nodiscard]] virtual Result<std::optional<StoredFeedback>> FeedbackOfKey(
      std::string_view tenant_id, std::string_view idempotency_key) = 0;
  // Stores a feedback, numbered in the feed, and with it `correction` (the job that ingests a
  // correction's replacement, accepted as AcceptJobs does) in one transaction; when its
  // (tenant, idempotency key) is known, stores nothing and answers the stored feedback.
  // kNotFound, naming them, when targets are not records of its scope (a forget since they
  // were resolved).
  [[nodiscard]] virtual Result<StoredFeedback> AddFeedback(
      const FeedbackRow& feedback, const std::optional<JobRow>& correction) = 0;

  // What a forget deletes: the records of a scope that every given condition selects.
  struct ForgetSelection {
    std::optional<std::string> session_id;
    std::optional<std::vector<std::string>> message_ids;
    std::optional<double> before;      // occurred before
    std::optional<std::string> match;  // content holds the phrase
    bool all = false;
    bool dry_run = false;  // select only
  };
  // A record on its way out.
  struct ForgottenRecord {
    int64_t seq = 0;  // event_seq
    std::string record_id;
    std::string scope;
    std::string session_id;
    std::string role;
    std::string timestamp;
    std::string content;  // at least its first 200 characters (what a preview shows)
    std::string job_id;
  };
  struct Forgotten {
    std::vector<ForgottenRecord> records;  // oldest first
    int64_t feedback = 0;                  // feedback deleted with them
    int64_t jobs = 0;                      // unrun jobs failed ("forgotten")
    bool vacuumed = false;                 // the store's dead rows were vacuumed after
    std::string vacuum_error;              // why not, when they were not
  };
  // In one transaction: deletes the selected records, each deletion numbered in the feed; the
  // targets feedback had on them, and each feedback of the scope left without a target or
  // whose request quotes the phrase (numbered too); and fails each job of the scope not yet run
  // whose payload holds the session or the phrase (or any, for `all` alone). Then vacuums.
  [[nodiscard]] virtual Result<Forgotten> Forget(std::string_view scope,
                                                 const ForgetSelection& selection) = 0;

  // Copies records and feedback of an export into `scope`: each record unless its id or its
  // message is stored, each feedback unless its id is; new ones numbered in the feed, all in
  // one transaction. Lines are validated by the caller (memory/admin.cc).
  struct ImportLine {
    bool is_record = true;
    std::string job_id;  // a record's
    NewRecord record;
    FeedbackRow feedback;
  };
  struct Imported {
    int64_t records_added = 0;
    int64_t records_present = 0;
    int64_t feedback_added = 0;
    int64_t feedback_present = 0;
  };
  [[nodiscard]] virtual Result<Imported> Import(std::string_view scope,
                                                const std::vector<ImportLine>& lines) = 0;

  // Record vectors (stored form, memory/vectors.h), kept with their model's name so that one
  // instance's call to the embeddings service serves every instance. Not in the feed: each
  // instance's embedding thread asks for the vectors of the records it has none for. A vector
  // names its record by event_seq and record id both, so a number reused after a restore never
  // takes another record's vector.
  struct SharedVector {
    int64_t event_seq = 0;
    std::string record_id;
    std::string vector;
  };
  // The vectors the store holds of `model` for these records; others absent.
  [[nodiscard]] virtual Result<std::vector<SharedVector>> VectorsOf(
      std::string_view model, const std::vector<int64_t>& event_seqs) = 0;
  // Stores each vector unless its record (event_seq and id) has one of `model` or is gone.
  [[nodiscard]] virtual Status AddVectors(std::string_view model,
                                          const std::vector<SharedVector>& vectors) = 0;

  // One change of the feed: a record written (with its row) or deleted, a feedback added (with
  // its row) or deleted.
  enum class ChangeKind { kRecordWritten, kRecordDeleted, kFeedbackAdded, kFeedbackDeleted };
  struct Change {
    int64_t seq = 0;
    ChangeKind kind = ChangeKind::kRecordWritten;
    int64_t event_seq = 0;  // a record's: its own seq when written; the deleted one's
    std::string scope_name;
    std::string job_id;
    NewRecord record;      // set when a record is written
    FeedbackRow feedback;  // set when a feedback is added; its id when deleted
  };
  struct Changes {
    std::vector<Change> changes;  // seq order
    int64_t through = 0;          // every change up to here is in `changes` or before `after`
    bool more = false;            // changes past `through` were left for the next call
  };
  // The changes numbered above `after`, at most `limit`, read in one snapshot.
  [[nodiscard]] virtual Result<Changes> ChangesAfter(int64_t after, int limit) = 0;
  // The store's id, made when its schema was: an index of the store is kept under it, so a
  // store made afresh under the same name is never mistaken for the one indexed before.
  [[nodiscard]] virtual Result<std::string> StoreId() = 0;
  // The number of the newest change.
  [[nodiscard]] virtual Result<int64_t> Head() = 0;
};

}  // namespace tmcra::memory
