// Keeping the full-text indexes in few segments.
//
// An FTS5 index is a set of b-tree segments: every write transaction adds a small one, and
// FTS5's automerge folds them four at a time into larger ones, so a store written in many
// transactions holds a dozen or more. A query seeks every word in every segment and merges the
// word's doclist across them: on a 100k-message store written in batches (13 segments) that
// was a third of a recall's search. FTS5's `optimize` leaves one segment, but rewrites the
// whole index in one transaction.
//
// The engine's worker compacts incrementally instead, once no job has run for
// EngineOptions::compaction_quiet_ms (0.5 s): FTS5's
// `merge` command with a negative page count moves every segment to one level and merges them
// there, `kPagesPerStep` leaf pages per call, each call its own short write transaction, so a
// job that arrives waits for one step at most, and readers never wait (WAL). It starts when
// CompactionDue says the index has grown fragmented enough to pay for a full rewrite, and goes
// on until one segment is left.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/db/sqlite_db.h"

namespace tmcra::memory {

struct IndexShape {
  int segments = 0;
  int64_t pages = 0;          // leaf pages in all segments
  int64_t largest_pages = 0;  // leaf pages in the largest segment
  // A full merge was left half done (by a process that stopped or was killed): every segment
  // but one is an input of the merge in progress, as a compaction step leaves them. Going on
  // finishes it; the rule alone might not, once the partial output is the largest segment.
  bool interrupted = false;
};

// The segments of FTS5 table `table` (its structure record in `<table>_data`), as of `db`'s
// current snapshot. An error when the record cannot be read or parsed.
[[nodiscard]] Result<IndexShape> ReadIndexShape(db::Database& db, const std::string& table);

// Parses an FTS5 structure record (both the format of SQLite 3.40, Debian 12's, and the one
// with the 0xff000001 marker that SQLite 3.44 added for contentless-delete tables).
[[nodiscard]] Result<IndexShape> ParseIndexShape(std::string_view record);

// Whether compacting to one segment is worth a rewrite of the whole index: the segments besides
// the largest hold at least 1/kSmallShare of its pages (and at least kMinSmallPages), or there
// are more than kMaxSegments. The first rule spaces the rewrites of a growing index
// geometrically (each follows at least 1/8 more data), so they cost a bounded multiple of what
// growth writes; its floor keeps a young store from being rewritten after every write. The
// second is a backstop: FTS5's automerge does little for small transactions, and its crisis
// merge at 16 segments at one level keeps the count near that, so it rarely fires.
//
// Between rewrites a store written in many small transactions (a chat's turns) can hold up to
// about 16 segments. A rewrite adds two levels to the structure record on SQLite 3.40 (empty
// ones, 2 bytes each; later versions cap them at 64), which the geometric spacing keeps to a
// few dozen over a store's life.
bool CompactionDue(const IndexShape& shape);

inline constexpr int kMaxSegments = 16;
inline constexpr int64_t kSmallShare = 8;
inline constexpr int64_t kMinSmallPages = 64;
inline constexpr int kPagesPerStep = 128;

// One step of compacting `table`, in its own IMMEDIATE transaction: FTS5's
// ('merge', -pages). Returns the shape after it.
[[nodiscard]] Result<IndexShape> CompactStep(db::Database& db, const std::string& table,
                                             int pages = kPagesPerStep);

}  // namespace tmcra::memory
