// Ranking for the word index without a lookup per matching row.
//
// FTS5's built-in bm25() reads each matching row's length from the %_docsize table with an SQL
// lookup, and on its first row scans every phrase's whole doclist to count the documents that
// hold it; recall then looked up each ranked row's scope in `records`. On a 100k-message store
// those steps were most of a recall's search. Two FTS5 auxiliary functions compute the same
// score as bm25() (same formula and operation order, k1 = 1.2, b = 0.75) from
//   * the phrases' document counts, which the caller already has for the same snapshot
//     (WordCounts: from the fts5vocab table, or a prefix's own count) and passes in as
//     'df1,df2,...', one per phrase in query order (an item 'df*w' weighs its phrase's IDF
//     by w, 0 < w <= 1: recall's expansions, memory/expansion.h), and
//   * the row's length from RowFacts, an in-memory copy of each record's length in tokens and
//     scope, shared by every connection of the process:
//
//   tmcra_bm25(records_fts, 'df1,df2,...')
//       one row's score; a row RowFacts does not hold gets its length from FTS5's own lookup.
//   tmcra_sized_bm25(index, 'df1,df2,...')
//       the same with every row's length from FTS5's lookup (for the CJK index, whose lengths
//       tmcra_bm25 does not read from RowFacts).
//   tmcra_rank(records_fts, 'df1,df2,...', scope_id, limit, pointer)
//       called once, on the first row of `... WHERE records_fts MATCH ?1 LIMIT 1` where ?1 is
//       an OR of phrases (recall's), it ranks the whole query within one scope: it walks each
//       phrase's doclist once (xQueryPhrase), merges them by rowid, scores each row of the scope,
//       and stores the best `limit` in the std::vector<RankedRow> bound as `pointer`
//       (sqlite3_bind_pointer, type kRankedRowsPointer): best first, equal scores newest row
//       (highest rowid) first. It returns how many it stored, or NULL (storing nothing) when a
//       matching row is not in RowFacts or a score is not a number: the caller then ranks with
//       tmcra_bm25 in SQL.
//   tmcra_rank(records_fts, 'df1,df2,...', scope_id, limit, pointer, postings)
//       the same, each phrase's postings taken from (or walked once into) the PostingsCache
//       of `postings`, a RankPostings bound as kRankPostingsPointer.
//   tmcra_occurrences(records_fts)
//       how often the query's first phrase occurs in the row, counted as tmcra_rank's walk
//       counts it (PostingsCache::CatchUp).
//   tmcra_rank(records_cjk, 'df1,df2,...', scope_id, limit, pointer, 'cjk')
//       the same for the CJK index (memory/cjk.h), with each row's length in that index.
//       Against `ORDER BY tmcra_bm25(...) LIMIT n` this saves the virtual machine, the OR
//       merge and the sorter on every matching row: a third of a recall's search.
//
// Records are never rewritten and event_seq only grows, so the copy is brought up to date by
// reading the rows above the highest one it holds (a deleted record's facts stay in the copy,
// unused: no index matches it any more) (RowFacts::CatchUp, inside the
// caller's read transaction): about 25 ms per 100k records the first time, then only new rows.
// It costs 20 bytes per record: the length and scope, and apart from them (so ranking's reads
// stay dense) a 32-bit hash of the record's session id, with which recall passes over hits of
// sessions it does not show without reading them, and the record's occurred_at, with which it
// orders hits of equal score without reading them. A record's length in the CJK index takes 4
// bytes more, in chunks of rows made only where a record has CJK text.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"

namespace tmcra::memory {

// Readers never lock: entries at or below highest() are written once, before highest() is
// published, in chunks that never move.
class RowFacts {
 public:
  struct Facts {
    uint32_t length = 0;  // tokens in the word index
    uint32_t scope = 0;   // ScopeId of the record's scope
  };

  RowFacts();
  ~RowFacts();
  RowFacts(const RowFacts&) = delete;
  RowFacts& operator=(const RowFacts&) = delete;

  // Reads the records above highest(), in `db`'s current snapshot, and the CJK index lengths
  // of rows read before that the index's watermark has passed since.
  [[nodiscard]] Status CatchUp(db::Database& db);

  // The facts of row `rowid`, or nullopt when this copy does not hold it.
  std::optional<Facts> Get(int64_t rowid) const;
  // Row `rowid`'s length in tokens in the CJK index (0 when it has no CJK text, or had none
  // in the index when read), or nullopt when this copy does not hold the row.
  std::optional<uint32_t> CjkLength(int64_t rowid) const;
  // Starts loading row `rowid`'s entry into the CPU cache, so a Get after other work finds it
  // there (the rows a query matches are spread over the whole copy).
  void Prefetch(int64_t rowid) const;
  // HashSession of row `rowid`'s session id, or nullopt when this copy does not hold the row.
  std::optional<uint32_t> SessionHash(int64_t rowid) const;
  // Row `rowid`'s occurred_at, or nullopt when this copy does not hold the row.
  std::optional<double> OccurredAt(int64_t rowid) const;
  // FNV-1a of the bytes: equal session ids hash equal; different ones rarely do.
  static uint32_t HashSession(std::string_view session_id);
  // The id of a scope that has records here, or nullopt.
  std::optional<uint32_t> ScopeId(std::string_view scope) const;
  int64_t highest() const { return highest_.load(std::memory_order_acquire); }

  static constexpr int kChunkBits = 16;
  static constexpr int64_t kChunkSize = int64_t{1} << kChunkBits;
  static constexpr size_t kChunks = size_t{1} << 15;  // rows up to 2^31

 private:
  static constexpr uint32_t kMissing = UINT32_MAX;  // in Facts::length: no such row
  std::mutex write_mu_;
  // The chunk tables (1 MiB of pointers), made by the first CatchUp: a process that never
  // fills the copy (a hook recalls once, in SQL) neither allocates nor zeroes them.
  struct Tables;
  std::atomic<Tables*> tables_{nullptr};
  std::unique_ptr<Tables> owned_tables_;  // guarded by write_mu_; published in tables_
  int64_t cjk_through_ = 0;  // the CJK index's watermark when last read; guarded by write_mu_
  void SetCjkLength(int64_t rowid, uint32_t length);  // with write_mu_ held
  // Steps of CatchUp, with write_mu_ held. ReadRowsAbove stores the rows above `from` in
  // `tables` (StoreRow, one row of its statement) and returns the highest one it read, or
  // `from`; CatchUpCjkLengths reads the CJK lengths of rows up to `from` that the CJK index's
  // watermark has passed since it was last read.
  [[nodiscard]] Result<int64_t> ReadRowsAbove(db::Database& db, Tables& tables, int64_t from);
  void StoreRow(Tables& tables, int64_t id, Facts facts, const db::Statement& st);
  [[nodiscard]] Status CatchUpCjkLengths(db::Database& db, int64_t from);
  std::atomic<int64_t> highest_{0};
  mutable std::mutex scopes_mu_;
  std::map<std::string, uint32_t, std::less<>> scope_ids_;  // guarded by scopes_mu_
};

// How many records of a full-text index (the word index by default; also the CJK index) hold a
// word, remembered per word with the highest rowid it was counted at. A newer snapshot adds the
// matching rows written since (records are only ever added), which walks only those; counting
// from scratch walks the word's whole doclist. An older snapshot cannot see the rows in
// between, so it counts from scratch (and is not remembered over the newer count). Every answer
// is exact for the caller's snapshot.
class WordCounts {
 public:
  explicit WordCounts(std::string index = "records_fts");

  // The count for `word` in `db`'s current snapshot, whose highest record is `highest`; nullopt
  // when the vocabulary does not hold the word as written (e.g. a non-ASCII word the tokenizer
  // folds). `db` must have the temp.<index>_vocab table (fts5vocab 'row'). `settled`: every
  // record up to `highest` that belongs in the index is in it. The CJK index is not settled
  // while its back-fill has records left (rows are then added below `highest`, which the
  // remembered count would never see): the count is then read from the vocabulary and not
  // remembered. A word the vocabulary does not hold is remembered as absent for a snapshot
  // with the same highest record only; a newer one asks the vocabulary again.
  [[nodiscard]] Result<std::optional<int64_t>> Get(db::Database& db, const std::string& word,
                                                   int64_t highest, bool settled = true);
  // The same for the prefix query `"stem"*`: how many records hold a token starting with
  // `stem`. The vocabulary cannot tell (a record holding two such tokens counts once), so a
  // first count walks the matching doclists; later snapshots add the rows since, as for words.
  [[nodiscard]] Result<int64_t> GetPrefix(db::Database& db, const std::string& stem,
                                          int64_t highest, bool settled = true);

  static constexpr size_t kMaxWords = 50000;  // then it starts again from empty
  // Forgets every count (records were deleted: a count as of a highest record no longer holds).
  void Clear();

 private:
  // `key` names the entry (a prefix's ends in '*', which no token holds); `match` is its
  // quoted FTS5 query.
  Result<std::optional<int64_t>> Count(db::Database& db, const std::string& key,
                                       const std::string& match, bool prefix, int64_t highest,
                                       bool settled);
  const std::string index_;
  const std::string count_since_sql_;  // the word's rows in a range of rowids
  const std::string vocabulary_sql_;   // the word's document count in the vocabulary
  struct Entry {
    int64_t documents = 0;
    int64_t as_of = 0;    // the highest rowid when counted
    bool absent = false;  // the vocabulary did not hold it as of as_of (asked again after)
  };
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> words_;  // guarded by mu_
};

// Each word's postings in the word index (the rows that hold it, ascending, and how often each
// does), remembered per word as of the snapshot they were walked in, so that tmcra_rank walks a
// word's doclist through FTS5 once and not on every recall that searches it. Records are never
// changed and a snapshot whose highest record is H holds exactly the rows up to H, so postings
// walked at H' >= H, cut at H, are exact for H (a forget deletes records, and clears the cache
// with no recall running: memory/admin.cc); for a newer snapshot CatchUp adds the rows
// written since (or tmcra_rank walks the word afresh), replacing the older postings. At most
// `max_bytes` are kept: past it, the words found or put least recently are dropped (postings
// larger than the whole cache are never kept). Shared by every connection of the process.
class PostingsCache {
 public:
  struct Postings {
    std::vector<int64_t> rows;
    std::vector<uint32_t> counts;  // occurrences in each row
    int64_t as_of = 0;             // the highest record of the snapshot walked
  };
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t words = 0;
    size_t bytes = 0;
    uint64_t caught_up = 0;  // postings brought up to a newer snapshot by CatchUp
  };

  explicit PostingsCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  PostingsCache(const PostingsCache&) = delete;
  PostingsCache& operator=(const PostingsCache&) = delete;

  // `word`'s postings walked in a snapshot at least as new as one whose highest record is
  // `highest` (the caller leaves out the rows above it), or nullptr.
  std::shared_ptr<const Postings> Find(std::string_view word, int64_t highest);
  // Remembers `postings` for `word` unless as new or newer ones are held; older ones are
  // dropped even when `postings` is larger than the whole cache. True when it was kept.
  bool Put(const std::string& word, std::shared_ptr<const Postings> postings);
  // Brings the held postings of `words` that an older snapshot walked up to `db`'s current
  // snapshot, whose highest record is `highest`: the rows written since are added from a
  // rowid-range search of the word index (tmcra_occurrences counts them as the walk does),
  // which reads only those. `documents` holds each word's document count in this snapshot (as
  // tmcra_rank's): when more rows were added than were held (a bulk import), the word is left
  // for tmcra_rank to walk, which is faster per row than SQL. `db` must have RegisterBm25's
  // functions. Words not held are left for tmcra_rank to walk as well.
  [[nodiscard]] Status CatchUp(db::Database& db, const std::vector<std::string>& words,
                               const std::vector<int64_t>& documents, int64_t highest);
  Stats stats() const;
  // Forgets every word's postings (records were deleted: postings as of a highest record no
  // longer hold).
  void Clear();

 private:
  static size_t Bytes(const std::string& word, const Postings& p) {
    return 2 * word.size() + p.rows.capacity() * sizeof(int64_t) +
           p.counts.capacity() * sizeof(uint32_t) + 160;
  }
  struct Held {
    std::shared_ptr<const Postings> postings;
    std::list<std::string>::iterator use;  // its place in uses_
  };
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, Held, std::less<>> words_;  // guarded by mu_
  std::list<std::string> uses_;  // words_' keys, the most recently used first; guarded by mu_
  Stats stats_;                  // guarded by mu_
};

// tmcra_rank's optional last argument (sqlite3_bind_pointer, type kRankPostingsPointer): the
// query's words, one per phrase in query order, whose postings `cache` holds for the caller's
// snapshot (its highest record `highest`).
struct RankPostings {
  PostingsCache* cache = nullptr;
  const std::vector<std::string>* words = nullptr;
  int64_t highest = 0;
};
inline constexpr const char* kRankPostingsPointer = "tmcra_rank_postings";

// A row ranked by tmcra_rank.
struct RankedRow {
  int64_t rowid = 0;
  double score = 0;  // as tmcra_bm25: below 0, lower is better
};
inline constexpr const char* kRankedRowsPointer = "tmcra_ranked_rows";

// Registers tmcra_bm25, tmcra_sized_bm25, tmcra_rank and tmcra_occurrences on `db`; `facts`
// must outlive `db`.
[[nodiscard]] Status RegisterBm25(db::Database& db, const RowFacts* facts);

}  // namespace tmcra::memory
