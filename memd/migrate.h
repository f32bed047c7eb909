// `tmcra-memd migrate`: copies a SQLite memory store (a --data-dir's memory.db) into a
// PostgreSQL store, then verifies the copy.
//
// What it promises:
//   * Records keep their ids, sessions, texts, times and metadata; finished jobs keep their
//     ids, keys and results, so a client's retry of an old key is a replay. Each record copied
//     is numbered in the change feed, so every serving instance indexes it.
//   * Resumable: each batch and the source's progress commit together, and a record or job
//     already present is left alone, so a run killed at any point and run again finishes with
//     the same result.
//   * Refuses a source with jobs that have not run (their messages are not records yet).
//     Feedback is not copied (PostgreSQL stores have none yet); the summary says how much.
//   * Verifies at the end: every source record is in the database with the same content (a
//     SHA-256 per record compared), and the counts agree.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"
#include "memory/pg_store.h"

namespace tmcra::memd {

struct MigrationSummary {
  int64_t records = 0;         // in the source
  int64_t records_copied = 0;  // new in the database in this run
  int64_t jobs_copied = 0;
  int64_t feedback = 0;         // in the source
  int64_t feedback_copied = 0;  // new in the database in this run
  int64_t verified = 0;         // source records found identical in the database
};

// Copies `sqlite_path` into `store`, `batch` records per transaction; `progress` is called
// after each batch with the records done so far and the total.
[[nodiscard]] Result<MigrationSummary> MigrateStore(
    const std::string& sqlite_path, memory::PgStore& store, int batch,
    const std::function<void(int64_t done, int64_t total)>& progress);

}  // namespace tmcra::memd
