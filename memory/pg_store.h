// The memory engine's shared state in PostgreSQL, for several tmcra-memd instances on one
// database: the accepted jobs with their idempotency keys, job claims with leases, the records
// a job writes, and a commit-ordered change feed from which each instance keeps its own index
// of the records current. docs/memd.md ("PostgreSQL") has the design.
//
// What it promises:
//   * Idempotency is held by unique constraints: the same (tenant, key) accepted by two
//     instances at once is one job, and both are answered with that job's row.
//   * A job is claimed by one instance at a time (FOR UPDATE SKIP LOCKED) under a lease timed
//     by the database's clock; a lease that expires (its holder was killed) lets another
//     instance claim the job, and the old holder can no longer write it. A job past
//     kMaxAttempts claims is failed.
//   * Every change an index must follow (a record written, a record deleted) gets its number
//     from one counter row, updated inside the change's own transaction. Its row lock is held
//     to the commit, so changes commit in the order of their numbers: a reader that holds every
//     change up to N and reads those above N in a later snapshot misses none. (Sequence values
//     would not do: they are handed out at the call and commit in any order across
//     transactions.) A record's event_seq is its change number.
// Thread-safe: statements run on pooled connections.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/pg_db.h"
#include "base/result.h"

namespace tmcra::memory {

class PgStore {
 public:
  static constexpr int kMaxAttempts = 5;

  // Connects (`pool_size` connections at most) and applies the schema (component "memory").
  [[nodiscard]] static Result<std::unique_ptr<PgStore>> Open(const pg::ConnectOptions& options,
                                                             size_t pool_size);
  ~PgStore();
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

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
    double created_at = 0;
    std::optional<double> finished_at;
    std::optional<std::string> result_json;
    std::optional<std::string> error_json;
  };
  struct Accepted {
    JobRow job;
    bool created = false;  // false: the key was accepted before (this or another instance)
  };
  // Stores `job` as pending unless its (tenant, idempotency key) is known; either way returns
  // the stored row (the caller compares payload hashes: a different one is a conflict).
  [[nodiscard]] Result<Accepted> AcceptJob(const JobRow& job);
  [[nodiscard]] Result<std::optional<JobRow>> GetJob(std::string_view job_id);

  struct Claimed {
    std::string job_id;
    std::string scope_name;
    std::string payload_json;
  };
  // Claims up to `max_jobs` jobs for `owner`: pending ones, oldest first, and running ones whose
  // lease has expired; a job past kMaxAttempts is failed instead of claimed.
  [[nodiscard]] Result<std::vector<Claimed>> ClaimJobs(std::string_view owner, int max_jobs,
                                                       double lease_seconds);

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
    bool written = false;  // false: the lease was lost (another instance holds the job)
    int64_t records_written = 0;
    int64_t records_deduplicated = 0;
    int64_t max_event_seq = 0;  // the newest of the job's records (new or stored before)
  };
  // Writes a claimed job's records (a message stored before keeps its one copy) and marks the
  // job succeeded with `result_json`, in one transaction, if `owner` still holds its lease.
  // `result_json` may hold "{max_event_seq}" where the job's newest event_seq goes.
  [[nodiscard]] Result<Written> FinishJob(std::string_view owner, std::string_view job_id,
                                          const std::vector<NewRecord>& records,
                                          const std::string& result_json);

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
  [[nodiscard]] Result<Changes> ChangesAfter(int64_t after, int limit);
  // Deletes records by event_seq, each deletion numbered in the feed; returns how many existed.
  [[nodiscard]] Result<int64_t> DeleteRecords(const std::vector<int64_t>& event_seqs);

 private:
  explicit PgStore(const pg::ConnectOptions& options, size_t pool_size);

  pg::ConnectionPool pool_;
};

}  // namespace tmcra::memory
