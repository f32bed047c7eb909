// What the engine needs of a store that several engines share (tmcra-memd instances on one
// PostgreSQL database, memory/pg_store.h): the jobs with their idempotency keys, job claims with
// leases, the records jobs write, and a change feed in commit order. An engine given one
// (EngineOptions::shared) keeps its SQLite file as its own index of the shared records, brought
// up to date from the feed (docs/memd.md, "PostgreSQL").
//
// What an implementation promises:
//   * AcceptJob stores a job unless its (tenant, idempotency key) is known, and answers the
//     stored row either way: the same key accepted by two engines at once is one job.
//   * A job is held by one claimer at a time, under a lease that another may take over once it
//     expires; a holder that lost its lease cannot finish the job. A job claimed more than
//     kMaxJobClaims times is failed.
//   * Every change (a record written, a record deleted) has a number, and changes become
//     visible in the order of their numbers: whoever holds every change up to N and reads the
//     ones above N later misses none. A written record's event_seq is its number.
// Errors are the store's: kUnavailable (retryable) while it cannot be reached.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
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
  // Writes a claimed job's records (a message stored before keeps its one copy) and marks the
  // job succeeded with the result `result` makes of what was written, in one transaction, if
  // `owner` still holds its lease.
  [[nodiscard]] virtual Result<Written> FinishJob(
      std::string_view owner, std::string_view job_id, const std::vector<NewRecord>& records,
      const std::function<std::string(const Written&)>& result) = 0;
  // Marks a job `owner` holds failed with `error_json`; false when the lease was lost.
  [[nodiscard]] virtual Result<bool> FailJob(std::string_view owner, std::string_view job_id,
                                             const std::string& error_json) = 0;

  // One change of the feed: a record written (with its row) or deleted.
  struct Change {
    int64_t seq = 0;
    bool deleted = false;
    int64_t event_seq = 0;  // the record's: its own seq when written; the deleted one's
    std::string scope_name;
    std::string job_id;
    NewRecord record;  // set when written
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
  // Deletes records by event_seq, each deletion numbered in the feed; returns how many existed.
  [[nodiscard]] virtual Result<int64_t> DeleteRecords(const std::vector<int64_t>& event_seqs) = 0;
};

}  // namespace tmcra::memory
