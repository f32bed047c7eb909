#include "memory/compaction.h"

#include <algorithm>
#include <string_view>

namespace tmcra::memory {

namespace {

constexpr int64_t kStructureRowid = 10;  // FTS5_STRUCTURE_ROWID

Error Malformed(const std::string& what) {
  return Error::Internal("unexpected FTS5 structure record: " + what);
}

}  // namespace

Result<IndexShape> ParseIndexShape(std::string_view record) {
  size_t at = 4;  // the cookie
  if (record.size() < at) return Malformed("shorter than its cookie");
  // SQLite 3.44 marks the newer layout, with five more fields per segment.
  const bool v2 =
      record.size() >= 8 && record.substr(4, 4) == std::string_view("\xff\x00\x00\x01", 4);
  if (v2) at += 4;
  uint64_t levels = 0;
  uint64_t segments = 0;
  uint64_t write_counter = 0;
  if (!db::ReadVarint(record, at, levels) || !db::ReadVarint(record, at, segments) ||
      !db::ReadVarint(record, at, write_counter)) {
    return Malformed("header");
  }
  // Every level and segment takes bytes of the record. (SQLite 3.40 adds a level at each full
  // merge and never drops the empty ones, so a long-lived store can have hundreds.)
  if (levels > record.size() || segments > record.size()) return Malformed("implausible sizes");
  IndexShape shape;
  shape.levels = static_cast<int>(levels);
  for (uint64_t level = 0; level < levels; ++level) {
    uint64_t merging = 0;
    uint64_t count = 0;
    if (!db::ReadVarint(record, at, merging) || !db::ReadVarint(record, at, count)) {
      return Malformed("level header");
    }
    if (merging > 0) shape.merging = true;
    for (uint64_t s = 0; s < count; ++s) {
      uint64_t id = 0;
      uint64_t first = 0;
      uint64_t last = 0;
      if (!db::ReadVarint(record, at, id) || !db::ReadVarint(record, at, first) ||
          !db::ReadVarint(record, at, last)) {
        return Malformed("segment");
      }
      if (v2) {  // origin1, origin2, tombstone pages, tombstone entries, entries
        for (int extra = 0; extra < 5; ++extra) {
          uint64_t ignored = 0;
          if (!db::ReadVarint(record, at, ignored)) return Malformed("segment (3.44 layout)");
        }
      }
      const int64_t pages = last >= first ? static_cast<int64_t>(last - first + 1) : 0;
      ++shape.segments;
      shape.pages += pages;
      shape.largest_pages = std::max(shape.largest_pages, pages);
    }
  }
  if (static_cast<uint64_t>(shape.segments) != segments) return Malformed("segment count");
  return shape;
}

namespace {

Result<std::string> ReadStructure(db::Database& db, const std::string& table) {
  auto st = db.Prepare("SELECT block FROM \"" + table + "_data\" WHERE id = ?");
  if (!st) return st.error();
  st->Bind(1, kStructureRowid);
  auto row = st->Step();
  if (!row) return row.error();
  if (!*row) return std::string();  // nothing written yet
  return st->Text(0);
}

}  // namespace

Result<IndexShape> ReadIndexShape(db::Database& db, const std::string& table) {
  auto record = ReadStructure(db, table);
  if (!record) return record.error();
  if (record->empty()) return IndexShape{};
  return ParseIndexShape(*record);
}

bool CompactionDue(const IndexShape& shape) {
  if (shape.segments < 2) return false;
  const int64_t small = shape.pages - shape.largest_pages;
  return small >= kMinSmallPages && small * kSmallShare >= shape.largest_pages;
}

CompactionStep ChooseCompaction(const IndexShape& shape) {
  if (shape.merging) return CompactionStep::kContinue;
  if (shape.segments < 2) return CompactionStep::kNone;
  if (CompactionDue(shape) && shape.levels < kMaxLevelsForFullMerge) return CompactionStep::kFull;
  if (shape.segments > kMaxSegments) return CompactionStep::kSmall;
  return CompactionStep::kNone;
}

Result<bool> CompactStep(db::Database& db, const std::string& table, CompactionStep kind,
                         int pages) {
  if (kind == CompactionStep::kNone) return false;
  // Compaction changes no content: a step lost to a power failure is simply redone.
  db::RelaxedDurability relaxed(db);
  auto tx = db::Transaction::Immediate(db);
  if (!tx) return tx.error();
  auto before = ReadStructure(db, table);
  if (!before) return before.error();
  auto st = db.Prepare("INSERT INTO \"" + table + "\"(\"" + table + "\", rank) VALUES('merge', ?)");
  if (!st) return st.error();
  const int n = std::max(1, pages);
  st->Bind(1, kind == CompactionStep::kFull ? -n : n);
  if (auto s = st->Run(); !s) return s.error();
  auto after = ReadStructure(db, table);
  if (!after) return after.error();
  if (auto s = tx->Commit(); !s) return s.error();
  return *after != *before;
}

}  // namespace tmcra::memory
