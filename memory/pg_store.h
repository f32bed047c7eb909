// The shared store (memory/shared_store.h) on PostgreSQL, for several tmcra-memd instances on
// one database. Linked by tmcra-memd only (library tmcra::memory_pg). docs/memd.md
// ("PostgreSQL") has the design and the schema.
//
// How it keeps SharedStore's promises:
//   * Idempotency: unique indexes on mem_jobs(tenant_id, idempotency_key) and on
//     mem_feedback's; INSERT ... ON CONFLICT DO NOTHING waits for a concurrent insert of the
//     same key, then the row that won is read back.
//   * Claims: SELECT ... FOR UPDATE SKIP LOCKED, oldest first (the items of one batch in their
//     order, as on one SQLite store), and leases timed by the database's clock, so instances
//     whose clocks disagree still agree on when a lease expires.
//   * The feed: every change takes its number from one counter row (mem_change_counter),
//     locked first in its transaction and held to the commit, so changes commit in the order of
//     their numbers. (Sequence values would not do: they are handed out at the call and commit
//     in any order across transactions.) The counter serialises writing transactions from that
//     lock to their commit; a worker's batch of jobs goes in one transaction. Records written,
//     feedback added and deletions (mem_deletions) are the feed's three lists, merged by number.
//   * Forget selects and deletes under the counter's lock, so no job's records land between
//     the selection and the deletion, then runs VACUUM on the tables that held the rows.
// Thread-safe: statements run on pooled connections.
#pragma once

#include <memory>
#include <utility>

#include "base/pg_db.h"
#include "memory/shared_store.h"

namespace tmcra::memory {

class PgStore final : public SharedStore {
 public:
  // Connects (`pool_size` connections at most) and applies the schema (component "memory").
  [[nodiscard]] static Result<std::unique_ptr<PgStore>> Open(const pg::ConnectOptions& options,
                                                             size_t pool_size);
  ~PgStore() override;
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  Result<Acceptance> AcceptJobs(const std::vector<JobRow>& jobs) override;
  Result<std::optional<JobRow>> GetJob(std::string_view job_id) override;
  Result<JobCounts> CountJobs() override;
  Result<std::vector<Claimed>> ClaimJobs(std::string_view owner, int max_jobs,
                                         double lease_seconds) override;
  Result<std::vector<Written>> FinishJobs(std::string_view owner,
                                          const std::vector<JobWrite>& jobs) override;
  Result<bool> FailJob(std::string_view owner, std::string_view job_id,
                       const std::string& error_json) override;
  Result<Changes> ChangesAfter(int64_t after, int limit) override;
  Result<std::string> StoreId() override;
  Result<int64_t> Head() override;
  Result<std::optional<StoredFeedback>> FeedbackOfKey(std::string_view tenant_id,
                                                      std::string_view idempotency_key) override;
  Result<StoredFeedback> AddFeedback(const FeedbackRow& feedback,
                                     const std::optional<JobRow>& correction) override;
  Result<Forgotten> Forget(std::string_view scope, const ForgetSelection& selection) override;
  Result<Imported> Import(std::string_view scope, const std::vector<ImportLine>& lines) override;
  Result<std::vector<SharedVector>> VectorsOf(std::string_view model,
                                              const std::vector<int64_t>& event_seqs) override;
  Status AddVectors(std::string_view model, const std::vector<SharedVector>& vectors) override;

  // Copying a store in (tmcra-memd migrate). A record of another store, with its own ids.
  struct ImportedRecord {
    std::string scope_name;
    std::string job_id;
    NewRecord record;
  };
  // How far the copy from `source` has come: the source's highest row copied (0: none).
  [[nodiscard]] Result<int64_t> ImportedThrough(std::string_view source);
  // Stores records (a record whose id or message is stored already is left as it is), each new
  // one numbered in the feed, and notes `through` as `source`'s progress, in one transaction.
  // Returns how many were new.
  [[nodiscard]] Result<int64_t> ImportRecords(std::string_view source, int64_t through,
                                              const std::vector<ImportedRecord>& records);
  // Stores a finished job of another store unless its id or key is known; true when stored.
  [[nodiscard]] Result<bool> ImportJob(const JobRow& job);
  // Sets every scope's record count and newest record from the records.
  [[nodiscard]] Status RecountScopes();
  // The records whose id is above `after`, by id, at most `limit`.
  [[nodiscard]] Result<std::vector<ImportedRecord>> RecordsById(std::string_view after, int limit);

 private:
  PgStore(const pg::ConnectOptions& options, size_t pool_size);
  // Runs `step` (reads, and AcceptJobs, whose keys make a second run a replay) on a pooled
  // connection, and once more on a fresh one when the first turns out broken (kUnavailable:
  // the server restarted since it was last used).
  template <class Step>
  auto Retrying(const Step& step) -> decltype(step(std::declval<pg::Connection&>()));

  pg::ConnectionPool pool_;
};

}  // namespace tmcra::memory
