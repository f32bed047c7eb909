// Keeping the full-text indexes in few segments.
//
// An FTS5 index is a set of b-tree segments: every write transaction adds a small one. FTS5's
// automerge does work in proportion to what a transaction writes, so small transactions leave
// their segments alone until its crisis merge folds 16 of one level; a store written in many
// transactions holds a dozen or more. A query seeks every word in every segment and merges the
// word's doclist across them: on a 100k-message store written in batches (13 segments) that
// was a third of a recall's search. FTS5's `optimize` leaves one segment, but rewrites the
// whole index in one transaction.
//
// The engine's worker compacts incrementally instead, once no job has run for
// EngineOptions::compaction_quiet_ms (0.5 s), with FTS5's `merge` command, kPagesPerStep leaf
// pages per call, each call its own short write transaction (a job that arrives waits for one
// step at most; readers never wait, WAL). ChooseCompaction decides each step from the index's
// structure record:
//   * a merge in progress (left by a step, by a process that was killed, or by FTS5's own
//     automerge) is continued with a positive `merge`, which finishes it and leaves segments
//     written since alone;
//   * when a full rewrite is due (CompactionDue), a negative `merge` moves every segment to one
//     level and starts merging them there; positive steps then finish it: one segment;
//   * with more than kMaxSegments and no full rewrite due, a positive `merge` folds the levels
//     that hold usermerge (4) or more segments: it rewrites only those, not the large one.
// Full rewrites are spaced geometrically, so a store sees a few dozen in its life. That matters
// on SQLite 3.40 (Debian 12): each full merge adds two empty levels to the structure record
// and never drops them, and FTS5 reports a structure of more than 2000 levels as corrupt. No
// full rewrite starts at kMaxLevelsForFullMerge levels or more (later SQLite caps the levels).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/sqlite_db.h"

namespace tmcra::memory {

struct IndexShape {
  int segments = 0;
  int levels = 0;
  int64_t pages = 0;          // leaf pages in all segments
  int64_t largest_pages = 0;  // leaf pages in the largest segment
  bool merging = false;       // a level has a merge in progress
};

// The segments of FTS5 table `table` (its structure record in `<table>_data`), as of `db`'s
// current snapshot. An error when the record cannot be read or parsed.
[[nodiscard]] Result<IndexShape> ReadIndexShape(db::Database& db, const std::string& table);

// Parses an FTS5 structure record (both the format of SQLite 3.40, Debian 12's, and the one
// with the 0xff000001 marker that SQLite 3.44 added for contentless-delete tables).
[[nodiscard]] Result<IndexShape> ParseIndexShape(std::string_view record);

// Whether a full rewrite is due: the segments besides the largest hold at least 1/kSmallShare
// of its pages, and at least kMinSmallPages. Rewrites of a growing index are then spaced
// geometrically (each follows at least 1/8 more data), so they cost a bounded multiple of what
// growth writes, and their number grows with the logarithm of the index's size; the floor
// keeps a young store from being rewritten after every write.
bool CompactionDue(const IndexShape& shape);

enum class CompactionStep {
  kNone,      // nothing to do
  kContinue,  // positive merge: finish the merge in progress
  kFull,      // negative merge: start a full rewrite
  kSmall,     // positive merge: fold the levels with usermerge or more segments
};
CompactionStep ChooseCompaction(const IndexShape& shape);

inline constexpr int kMaxSegments = 16;
inline constexpr int64_t kSmallShare = 8;
inline constexpr int64_t kMinSmallPages = 64;
inline constexpr int kMaxLevelsForFullMerge = 1000;
inline constexpr int kPagesPerStep = 128;

// One step of `kind` (not kNone) on `table`, in its own IMMEDIATE transaction: FTS5's
// ('merge', ±pages). Returns whether the structure record changed (false: FTS5 found nothing
// to merge).
[[nodiscard]] Result<bool> CompactStep(db::Database& db, const std::string& table,
                                       CompactionStep kind, int pages = kPagesPerStep);

}  // namespace tmcra::memory
