#include "memory/bm25.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memory/cjk.h"
#include "memory/query.h"

namespace tmcra::memory {

namespace {

struct QueryData {
  std::vector<double> idf;         // per phrase
  std::vector<int64_t> documents;  // per phrase: how many rows hold it
  double avgdl = 0;
};

void FreeQueryData(void* p) { delete static_cast<QueryData*>(p); }

// Mirrors fts5Bm25GetData: N and the total size from the index, IDF per phrase.
// `name` (the SQL function's) starts every error message.
int LoadQueryData(const char* name, const Fts5ExtensionApi* api, Fts5Context* fts,
                  sqlite3_value* counts, std::unique_ptr<QueryData>* out, std::string* error) {
  sqlite3_int64 rows = 0;
  sqlite3_int64 tokens = 0;
  int rc = api->xRowCount(fts, &rows);
  if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &tokens);
  if (rc != SQLITE_OK) return rc;
  auto data = std::make_unique<QueryData>();
  data->avgdl = static_cast<double>(tokens) / static_cast<double>(rows);
  const int phrases = api->xPhraseCount(fts);
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(counts));
  std::string list = text == nullptr ? "" : text;
  size_t pos = 0;
  while (pos <= list.size() && !list.empty()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(pos, end - pos);
    char* stop = nullptr;
    const long long hits = std::strtoll(item.c_str(), &stop, 10);
    double weight = 1.0;
    if (*stop == '*') weight = std::strtod(stop + 1, &stop);
    if (item.empty() || *stop != '\0' || hits < 0 || !(weight > 0.0 && weight <= 1.0)) {
      *error = std::string(name) + ": bad document count '" + item + "'";
      return SQLITE_ERROR;
    }
    double idf = std::log((static_cast<double>(rows) - static_cast<double>(hits) + 0.5) /
                          (static_cast<double>(hits) + 0.5));
    if (!(idf > 0.0)) idf = 1e-6;  // as bm25() clamps; NaN too, should a count ever exceed N
    data->idf.push_back(idf * weight);
    data->documents.push_back(hits);
    pos = end + 1;
  }
  if (static_cast<int>(data->idf.size()) != phrases) {
    *error = std::string(name) + ": " + std::to_string(data->idf.size()) + " document counts for " +
             std::to_string(phrases) + " phrases";
    return SQLITE_ERROR;
  }
  *out = std::move(data);
  return SQLITE_OK;
}

void ResultLoadError(sqlite3_context* ctx, int rc, const std::string& error) {
  if (!error.empty()) {
    sqlite3_result_error(ctx, error.c_str(), -1);
  } else {
    sqlite3_result_error_code(ctx, rc);
  }
}

// How often phrase `phrase` occurs in the current row (its position list's length). The one
// count every function here uses, so a walk, a catch-up and a row's score agree.
int PhraseOccurrences(const Fts5ExtensionApi* api, Fts5Context* fts, int phrase, uint32_t* n) {
  Fts5PhraseIter it;
  int column = 0;
  int offset = 0;
  *n = 0;
  int rc = api->xPhraseFirst(fts, phrase, &it, &column, &offset);
  while (rc == SQLITE_OK && column >= 0) {
    ++*n;
    api->xPhraseNext(fts, &it, &column, &offset);
  }
  return rc;
}

// BM25 of a row from its phrase frequencies, as bm25() adds it up (k1 = 1.2, b = 0.75, phrases
// in query order). Both functions below score through here, so they agree to the last bit.
double Bm25Score(const QueryData& data, const double* freq, double length) {
  constexpr double k1 = 1.2;
  constexpr double b = 0.75;
  double score = 0.0;
  for (size_t i = 0; i < data.idf.size(); ++i) {
    if (freq[i] == 0.0) continue;  // its term is +0.0, which leaves the sum as it is
    score +=
        data.idf[i] * ((freq[i] * (k1 + 1.0)) / (freq[i] + k1 * (1 - b + b * length / data.avgdl)));
  }
  return -1.0 * score;
}

// tmcra_bm25(records_fts, 'df1,df2,...'): one row's score. tmcra_sized_bm25 registers it with
// no RowFacts (nullptr): the row's length always comes from FTS5.
void Bm25(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* ctx, int argc,
          sqlite3_value** argv) {
  const auto* facts = static_cast<const RowFacts*>(api->xUserData(fts));
  const char* name = facts != nullptr ? "tmcra_bm25" : "tmcra_sized_bm25";
  if (argc != 1) {
    sqlite3_result_error(ctx, (std::string(name) + ": expects the document counts").c_str(), -1);
    return;
  }
  const sqlite3_int64 rowid = api->xRowid(fts);
  // The row's entry is most often not in the CPU cache: start loading it.
  if (facts != nullptr) facts->Prefetch(rowid);
  auto* data = static_cast<QueryData*>(api->xGetAuxdata(fts, 0));
  if (data == nullptr) {
    std::unique_ptr<QueryData> loaded;
    std::string error;
    int rc = LoadQueryData(name, api, fts, argv[0], &loaded, &error);
    if (rc != SQLITE_OK) return ResultLoadError(ctx, rc, error);
    // Kept for the query's other rows; FTS5 frees it (and frees it at once on failure).
    data = loaded.release();
    rc = api->xSetAuxdata(fts, data, FreeQueryData);
    if (rc != SQLITE_OK) return ResultLoadError(ctx, rc, "");
  }
  const size_t phrases = data->idf.size();
  double freq_small[16] = {};
  std::vector<double> freq_large;
  double* freq = freq_small;
  if (phrases > 16) {
    freq_large.assign(phrases, 0.0);
    freq = freq_large.data();
  }
  // Each phrase's occurrences in this row, phrase by phrase. bm25() counts the same instances
  // through xInst, which first merges every phrase's position list into one list ordered by
  // position (allocating as it grows); counting needs no order.
  int rc = SQLITE_OK;
  for (size_t p = 0; rc == SQLITE_OK && p < phrases; ++p) {
    uint32_t n = 0;
    rc = PhraseOccurrences(api, fts, static_cast<int>(p), &n);
    freq[p] = n;
  }
  double length = 0;
  if (rc == SQLITE_OK) {
    if (const auto row = facts != nullptr ? facts->Get(rowid) : std::nullopt) {
      length = static_cast<double>(row->length);
    } else {
      int tokens = 0;
      rc = api->xColumnSize(fts, -1, &tokens);
      length = tokens;
    }
  }
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  sqlite3_result_double(ctx, Bm25Score(*data, freq, length));
}

using Postings = PostingsCache::Postings;

int CollectPostings(const Fts5ExtensionApi* api, Fts5Context* fts, void* user) {
  auto* out = static_cast<Postings*>(user);
  uint32_t n = 0;
  if (int rc = PhraseOccurrences(api, fts, 0, &n); rc != SQLITE_OK) return rc;
  out->rows.push_back(api->xRowid(fts));
  out->counts.push_back(n);
  return SQLITE_OK;
}

// tmcra_occurrences(records_fts): how often the query's first phrase occurs in the row, counted
// as CollectPostings counts it (PostingsCache::CatchUp adds rows with it).
void Occurrences(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* ctx, int argc,
                 sqlite3_value** /*argv*/) {
  if (argc != 0) {
    sqlite3_result_error(ctx, "tmcra_occurrences: expects no argument", -1);
    return;
  }
  uint32_t n = 0;
  if (int rc = PhraseOccurrences(api, fts, 0, &n); rc != SQLITE_OK) {
    return sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_result_int64(ctx, n);
}

// tmcra_rank's arguments after the document counts.
struct RankArgs {
  const RankPostings* source = nullptr;  // the postings cache bound last, or nullptr
  bool cjk = false;                      // rows are ranked by their lengths in the CJK index
  std::vector<RankedRow>* out = nullptr;
  sqlite3_int64 limit = 0;
  uint32_t scope = 0;
};

// Reads tmcra_rank's arguments into `args`; false, with the result set to an error, when they
// are not what it takes.
bool ReadRankArgs(sqlite3_context* ctx, int argc, sqlite3_value** argv, RankArgs& args) {
  args.source =
      argc == 5
          ? static_cast<const RankPostings*>(sqlite3_value_pointer(argv[4], kRankPostingsPointer))
          : nullptr;
  const auto* lengths = argc == 5 && args.source == nullptr
                            ? reinterpret_cast<const char*>(sqlite3_value_text(argv[4]))
                            : nullptr;
  args.cjk = lengths != nullptr && std::string_view(lengths) == "cjk";
  if ((argc != 4 && argc != 5) || (argc == 5 && !args.cjk && args.source == nullptr)) {
    sqlite3_result_error(ctx,
                         "tmcra_rank: expects the document counts, a scope id, a limit, a "
                         "pointer, and optionally 'cjk' or the postings",
                         -1);
    return false;
  }
  args.out =
      static_cast<std::vector<RankedRow>*>(sqlite3_value_pointer(argv[3], kRankedRowsPointer));
  args.limit = sqlite3_value_int64(argv[2]);
  if (args.out == nullptr || args.limit < 0) {
    sqlite3_result_error(ctx, "tmcra_rank: no result vector bound, or a negative limit", -1);
    return false;
  }
  args.scope = static_cast<uint32_t>(sqlite3_value_int64(argv[1]));
  return true;
}

// Each phrase's postings into `lists`, and in `ends` how many of them are at or below the
// snapshot: taken from `source`'s cache when it holds them (its rows above the snapshot left
// out), else walked once through FTS5 (and put in the cache, with a `source`). An SQLite code.
int GatherPostings(const Fts5ExtensionApi* api, Fts5Context* fts, const QueryData& data,
                   const RankPostings* source, std::vector<std::shared_ptr<const Postings>>& lists,
                   std::vector<size_t>& ends) {
  int rc = SQLITE_OK;
  for (size_t p = 0; rc == SQLITE_OK && p < lists.size(); ++p) {
    if (source != nullptr) {
      lists[p] = source->cache->Find((*source->words)[p], source->highest);
      if (lists[p] != nullptr) {
        const auto& rows = lists[p]->rows;
        ends[p] = static_cast<size_t>(std::upper_bound(rows.begin(), rows.end(), source->highest) -
                                      rows.begin());
        continue;
      }
    }
    auto walked = std::make_shared<Postings>();
    const auto expected = static_cast<size_t>(std::min<int64_t>(data.documents[p], 1 << 20));
    walked->rows.reserve(expected);
    walked->counts.reserve(expected);
    rc = api->xQueryPhrase(fts, static_cast<int>(p), walked.get(), CollectPostings);
    if (rc != SQLITE_OK) break;
    ends[p] = walked->rows.size();
    if (source != nullptr) {
      walked->as_of = source->highest;
      source->cache->Put((*source->words)[p], walked);
    }
    lists[p] = std::move(walked);
  }
  return rc;
}

// Merges `lists` (each cut at its `ends`) by rowid, each row once with every phrase's frequency
// in it, and adds the score of each row of scope `scope` to `scored`. False when the rows cannot
// be ranked here: a matching row that `facts` does not hold, or whose length is not known, or a
// score that is not a number.
bool ScoreRows(const RowFacts* facts, const QueryData& data,
               const std::vector<std::shared_ptr<const Postings>>& lists,
               const std::vector<size_t>& ends, uint32_t scope, bool cjk,
               std::vector<RankedRow>& scored) {
  constexpr size_t kAhead = 8;
  const size_t phrases = lists.size();
  std::vector<size_t> at(phrases, 0);
  std::vector<double> freq(phrases, 0.0);
  for (;;) {
    int64_t rowid = INT64_MAX;
    for (size_t p = 0; p < phrases; ++p) {
      if (at[p] < ends[p]) rowid = std::min(rowid, lists[p]->rows[at[p]]);
    }
    if (rowid == INT64_MAX) break;
    for (size_t p = 0; p < phrases; ++p) {
      const Postings& list = *lists[p];
      if (at[p] < ends[p] && list.rows[at[p]] == rowid) {
        freq[p] = list.counts[at[p]];
        ++at[p];
        if (at[p] + kAhead < ends[p]) facts->Prefetch(list.rows[at[p] + kAhead]);
      } else {
        freq[p] = 0.0;
      }
    }
    const auto row = facts->Get(rowid);
    if (!row) return false;  // a row this copy does not hold: the caller ranks another way
    if (row->scope != scope) continue;
    const uint32_t length = cjk ? facts->CjkLength(rowid).value_or(0) : row->length;
    if (length == 0) return false;  // a matching row without a known length: ranked another way
    const double score = Bm25Score(data, freq.data(), static_cast<double>(length));
    if (std::isnan(score)) return false;
    scored.push_back(RankedRow{rowid, score});
  }
  return true;
}

// Moves the best `limit` of `scored` into `out`: best first, equal scores newest row first.
// Returns how many.
size_t KeepBest(std::vector<RankedRow>& scored, sqlite3_int64 limit, std::vector<RankedRow>& out) {
  const size_t keep = std::min(scored.size(), static_cast<size_t>(limit));
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(keep),
                    scored.end(), [](const RankedRow& a, const RankedRow& b) {
                      if (a.score != b.score) return a.score < b.score;
                      return a.rowid > b.rowid;
                    });
  scored.resize(keep);
  out = std::move(scored);
  return keep;
}

// tmcra_rank(records_fts, 'df1,df2,...', scope_id, limit, pointer), see bm25.h. The rows it
// ranks are the union of the phrases' rows: right for recall's MATCH, an OR of quoted words,
// and not for AND or NEAR queries.
void Rank(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* ctx, int argc,
          sqlite3_value** argv) {
  const auto* facts = static_cast<const RowFacts*>(api->xUserData(fts));
  RankArgs args;
  if (!ReadRankArgs(ctx, argc, argv, args)) return;
  std::unique_ptr<QueryData> data;
  std::string error;
  int rc = LoadQueryData("tmcra_rank", api, fts, argv[0], &data, &error);
  if (rc != SQLITE_OK) return ResultLoadError(ctx, rc, error);
  // Each phrase's doclist, walked once (or not at all, when the cache holds it). Rows of every
  // scope come through here; the scope is checked while merging, where the next rows are known
  // and their entries can be prefetched.
  const size_t phrases = data->idf.size();
  const RankPostings* source = args.source;
  if (source != nullptr &&
      (source->cache == nullptr || source->words == nullptr || source->words->size() != phrases)) {
    sqlite3_result_error(ctx, "tmcra_rank: the postings do not name one word per phrase", -1);
    return;
  }
  std::vector<std::shared_ptr<const Postings>> lists(phrases);
  std::vector<size_t> ends(phrases, 0);  // a cached list's rows above the snapshot are left out
  rc = GatherPostings(api, fts, *data, source, lists, ends);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  std::vector<RankedRow> scored;
  if (!ScoreRows(facts, *data, lists, ends, args.scope, args.cjk, scored)) {
    sqlite3_result_null(ctx);  // the caller ranks another way
    return;
  }
  const size_t keep = KeepBest(scored, args.limit, *args.out);
  sqlite3_result_int64(ctx, static_cast<sqlite3_int64>(keep));
}

}  // namespace

struct RowFacts::Tables {
  std::atomic<Facts*> chunks[kChunks];
  std::atomic<uint32_t*> sessions[kChunks];  // per chunk of chunks, set before it
  std::atomic<double*> occurred[kChunks];    // the same, for occurred_at
  // Per chunk of chunks, made (zeroed) when a row of it first has CJK text; a row of a chunk
  // without one has none. Atomic: a row's length goes from 0 to its length when the CJK
  // index's back-fill reaches a row read before (EngineImpl::RepairCjkIndex), while readers read.
  std::atomic<std::atomic<uint32_t>*> cjk_lengths[kChunks];
};

RowFacts::RowFacts() = default;

RowFacts::~RowFacts() {
  Tables* t = tables_.load(std::memory_order_relaxed);
  if (t == nullptr) return;
  for (size_t i = 0; i < kChunks; ++i) {
    delete[] t->chunks[i].load(std::memory_order_relaxed);
    delete[] t->sessions[i].load(std::memory_order_relaxed);
    delete[] t->occurred[i].load(std::memory_order_relaxed);
    delete[] t->cjk_lengths[i].load(std::memory_order_relaxed);
  }
}

std::optional<uint32_t> RowFacts::CjkLength(int64_t rowid) const {
  if (!Get(rowid)) return std::nullopt;  // checks the range and that the row is held
  const Tables* t = tables_.load(std::memory_order_acquire);  // not null: Get found the row
  const std::atomic<uint32_t>* chunk =
      t->cjk_lengths[static_cast<size_t>(rowid >> kChunkBits)].load(std::memory_order_acquire);
  if (chunk == nullptr) return 0u;
  return chunk[static_cast<size_t>(rowid & (kChunkSize - 1))].load(std::memory_order_relaxed);
}

void RowFacts::SetCjkLength(int64_t rowid, uint32_t length) {
  if (rowid <= 0 || static_cast<uint64_t>(rowid >> kChunkBits) >= kChunks) return;
  auto& slot = owned_tables_->cjk_lengths[static_cast<size_t>(rowid >> kChunkBits)];
  std::atomic<uint32_t>* lengths = slot.load(std::memory_order_relaxed);
  if (lengths == nullptr) {
    lengths = new std::atomic<uint32_t>[kChunkSize]();  // zeroed before it is published
    slot.store(lengths, std::memory_order_release);
  }
  lengths[static_cast<size_t>(rowid & (kChunkSize - 1))].store(length, std::memory_order_relaxed);
}

uint32_t RowFacts::HashSession(std::string_view session_id) {
  uint32_t h = 2166136261u;
  for (const char c : session_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::optional<uint32_t> RowFacts::SessionHash(int64_t rowid) const {
  if (!Get(rowid)) return std::nullopt;  // checks the range and that the row is held
  const Tables* t = tables_.load(std::memory_order_acquire);  // not null: Get found the row
  const uint32_t* chunk =
      t->sessions[static_cast<size_t>(rowid >> kChunkBits)].load(std::memory_order_acquire);
  if (chunk == nullptr) return std::nullopt;
  return chunk[static_cast<size_t>(rowid & (kChunkSize - 1))];
}

std::optional<double> RowFacts::OccurredAt(int64_t rowid) const {
  if (!Get(rowid)) return std::nullopt;  // checks the range and that the row is held
  const Tables* t = tables_.load(std::memory_order_acquire);  // not null: Get found the row
  const double* chunk =
      t->occurred[static_cast<size_t>(rowid >> kChunkBits)].load(std::memory_order_acquire);
  if (chunk == nullptr) return std::nullopt;
  return chunk[static_cast<size_t>(rowid & (kChunkSize - 1))];
}

void RowFacts::Prefetch(int64_t rowid) const {
  if (rowid <= 0 || rowid > highest()) return;
  const Tables* t = tables_.load(std::memory_order_acquire);
  if (t == nullptr) return;
  const Facts* chunk =
      t->chunks[static_cast<size_t>(rowid >> kChunkBits)].load(std::memory_order_acquire);
  if (chunk != nullptr) __builtin_prefetch(chunk + static_cast<size_t>(rowid & (kChunkSize - 1)));
}

std::optional<RowFacts::Facts> RowFacts::Get(int64_t rowid) const {
  if (rowid <= 0 || rowid > highest()) return std::nullopt;
  const Tables* t = tables_.load(std::memory_order_acquire);
  if (t == nullptr) return std::nullopt;
  const Facts* chunk =
      t->chunks[static_cast<size_t>(rowid >> kChunkBits)].load(std::memory_order_acquire);
  if (chunk == nullptr) return std::nullopt;
  const Facts f = chunk[static_cast<size_t>(rowid & (kChunkSize - 1))];
  if (f.length == kMissing) return std::nullopt;
  return f;
}

std::optional<uint32_t> RowFacts::ScopeId(std::string_view scope) const {
  std::lock_guard lock(scopes_mu_);
  auto it = scope_ids_.find(scope);
  if (it == scope_ids_.end()) return std::nullopt;
  return it->second;
}

Status RowFacts::CatchUp(db::Database& db) {
  std::lock_guard lock(write_mu_);
  if (!owned_tables_) {
    owned_tables_ = std::make_unique<Tables>();  // every slot null
    tables_.store(owned_tables_.get(), std::memory_order_release);
  }
  const int64_t from = highest_.load(std::memory_order_relaxed);
  TMCRA_ASSIGN_OR_RETURN(const int64_t top, ReadRowsAbove(db, *owned_tables_, from));
  if (top > from) highest_.store(top, std::memory_order_release);
  return CatchUpCjkLengths(db, from);
}

Result<int64_t> RowFacts::ReadRowsAbove(db::Database& db, Tables& tables, int64_t from) {
  TMCRA_ASSIGN_OR_RETURN(
      auto st,
      db.Prepare("SELECT r.event_seq, r.scope_name, d.sz, r.session_id, c.sz, r.occurred_at "
                 "FROM records r "
                 "JOIN records_fts_docsize d ON d.id = r.event_seq "
                 "LEFT JOIN records_cjk_docsize c ON c.id = r.event_seq "
                 "WHERE r.event_seq > ? ORDER BY r.event_seq"));
  st.Bind(1, from);
  int64_t top = from;
  std::string last_scope;
  uint32_t last_scope_id = 0;
  bool have_scope = false;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) break;
    const int64_t id = st.Int(0);
    if (id <= 0 || static_cast<uint64_t>(id >> kChunkBits) >= kChunks) continue;
    const std::string scope = st.Text(1);
    const std::string blob = st.Text(2);
    uint64_t size = 0;
    size_t at = 0;
    if (!db::ReadVarint(blob, at, size) || size >= kMissing) {
      continue;  // not held: ranked the slow way
    }
    if (!have_scope || scope != last_scope) {
      std::lock_guard scopes(scopes_mu_);
      auto [it, added] = scope_ids_.try_emplace(scope, static_cast<uint32_t>(scope_ids_.size()));
      last_scope = scope;
      last_scope_id = it->second;
      have_scope = true;
    }
    StoreRow(tables, id, Facts{static_cast<uint32_t>(size), last_scope_id}, st);
    top = id;
  }
  return top;
}

void RowFacts::StoreRow(Tables& tables, int64_t id, Facts facts, const db::Statement& st) {
  auto& slot = tables.chunks[static_cast<size_t>(id >> kChunkBits)];
  auto& session_slot = tables.sessions[static_cast<size_t>(id >> kChunkBits)];
  auto& occurred_slot = tables.occurred[static_cast<size_t>(id >> kChunkBits)];
  Facts* chunk = slot.load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    session_slot.store(new uint32_t[kChunkSize](), std::memory_order_release);
    // Not zeroed: only a held row's time is read, and a page is touched once a row is.
    occurred_slot.store(new double[kChunkSize], std::memory_order_release);
    chunk = new Facts[kChunkSize];
    for (int64_t i = 0; i < kChunkSize; ++i) chunk[i].length = kMissing;
    slot.store(chunk, std::memory_order_release);
  }
  // Written before highest_ is published (by CatchUp), like the facts.
  session_slot.load(std::memory_order_relaxed)[static_cast<size_t>(id & (kChunkSize - 1))] =
      HashSession(st.Text(3));
  occurred_slot.load(std::memory_order_relaxed)[static_cast<size_t>(id & (kChunkSize - 1))] =
      st.Double(5);
  if (!st.IsNull(4)) {
    uint64_t cjk_size = 0;
    size_t cjk_at = 0;
    if (db::ReadVarint(st.Text(4), cjk_at, cjk_size) && cjk_size < kMissing) {
      SetCjkLength(id, static_cast<uint32_t>(cjk_size));
    }
  }
  chunk[static_cast<size_t>(id & (kChunkSize - 1))] = facts;
}

// Rows read before without a row in the CJK index may have been given one since, by its
// back-fill (records stored before it existed, or written by an earlier build): those the
// watermark has passed since it was last read. (Rows read just now are read as of this
// snapshot, in which every row at or below the watermark is indexed.)
Status RowFacts::CatchUpCjkLengths(db::Database& db, int64_t from) {
  TMCRA_ASSIGN_OR_RETURN(const int64_t watermark, CjkWatermark(db));
  if (watermark <= cjk_through_) return Ok();
  TMCRA_ASSIGN_OR_RETURN(
      auto lengths, db.Prepare("SELECT id, sz FROM records_cjk_docsize WHERE id > ? AND id <= ?"));
  lengths.Bind(1, cjk_through_).Bind(2, std::min(watermark, from));
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, lengths.Step());
    if (!row) break;
    uint64_t size = 0;
    size_t at = 0;
    if (lengths.Int(0) <= highest() && db::ReadVarint(lengths.Text(1), at, size) &&
        size < kMissing) {
      SetCjkLength(lengths.Int(0), static_cast<uint32_t>(size));
    }
  }
  cjk_through_ = watermark;
  return Ok();
}

std::shared_ptr<const PostingsCache::Postings> PostingsCache::Find(std::string_view word,
                                                                   int64_t highest) {
  std::lock_guard lock(mu_);
  auto it = words_.find(word);
  if (it == words_.end() || it->second.postings->as_of < highest) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  uses_.splice(uses_.begin(), uses_, it->second.use);
  return it->second.postings;
}

bool PostingsCache::Put(const std::string& word, std::shared_ptr<const Postings> postings) {
  const size_t bytes = Bytes(word, *postings);
  // Postings dropped here are freed after the lock is let go (a reader may still hold them).
  std::vector<std::shared_ptr<const Postings>> dropped;
  std::lock_guard lock(mu_);
  auto it = words_.find(word);
  if (it != words_.end()) {
    if (it->second.postings->as_of >= postings->as_of) return false;  // as new, or newer
    // Older: replaced, or dropped when the newer ones do not fit (else CatchUp would copy and
    // extend the older ones on every recall, in vain).
    stats_.bytes -= Bytes(word, *it->second.postings);
    dropped.push_back(std::move(it->second.postings));
    uses_.erase(it->second.use);
    words_.erase(it);
  }
  if (bytes > max_bytes_) return false;
  while (!uses_.empty() && stats_.bytes + bytes > max_bytes_) {
    auto last = words_.find(uses_.back());
    stats_.bytes -= Bytes(last->first, *last->second.postings);
    dropped.push_back(std::move(last->second.postings));
    words_.erase(last);
    uses_.pop_back();
  }
  uses_.push_front(word);
  words_.emplace(word, Held{std::move(postings), uses_.begin()});
  stats_.bytes += bytes;
  return true;
}

Status PostingsCache::CatchUp(db::Database& db, const std::vector<std::string>& words,
                              const std::vector<int64_t>& documents, int64_t highest) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    std::shared_ptr<const Postings> held;
    {
      std::lock_guard lock(mu_);
      if (auto it = words_.find(word); it != words_.end()) held = it->second.postings;
    }
    if (held == nullptr || held->as_of >= highest) continue;
    const auto have = static_cast<int64_t>(held->rows.size());
    // The word's document count in this snapshot, or -1 when it is not known. (A plain integer,
    // not std::optional: gcc 12's -Wmaybe-uninitialized misreads the optional here.)
    const int64_t known = i < documents.size() && documents[i] >= 0 ? documents[i] : -1;
    if (known >= 0 && known - have > have) continue;
    // Sized once: the exact count when known (no regrowth, which Bytes would count twice).
    const auto want = static_cast<size_t>(std::max(known >= 0 ? known : have + 16, have));
    auto next = std::make_shared<Postings>();
    next->rows.reserve(want);
    next->counts.reserve(want);
    next->rows = held->rows;
    next->counts = held->counts;
    if (known != have) {  // rows were added since (or it is not known)
      auto st = db.Prepare(
          "SELECT rowid, tmcra_occurrences(records_fts) FROM records_fts WHERE records_fts "
          "MATCH ?1 AND rowid > ?2 AND rowid <= ?3 ORDER BY rowid");
      if (!st) return st.error();
      st->Bind(1, QuoteTerm(word)).Bind(2, held->as_of).Bind(3, highest);
      for (;;) {
        auto row = st->Step();
        if (!row) return row.error();
        if (!*row) break;
        next->rows.push_back(st->Int(0));
        next->counts.push_back(static_cast<uint32_t>(st->Int(1)));
      }
    }
    // A list whose length is not the snapshot's document count is not kept: tmcra_rank then
    // walks the word and keeps its own list. (For a word the vocabulary counted, which is every
    // word tmcra_rank ranks, the two agree.)
    if (known >= 0 && static_cast<int64_t>(next->rows.size()) != known) continue;
    next->as_of = highest;
    if (Put(word, std::move(next))) {
      std::lock_guard lock(mu_);
      ++stats_.caught_up;
    }
  }
  return Ok();
}

PostingsCache::Stats PostingsCache::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.words = words_.size();
  return s;
}

WordCounts::WordCounts(std::string index)
    : index_(std::move(index)),
      count_since_sql_("SELECT count(*) FROM " + index_ + " WHERE " + index_ +
                       " MATCH ?1 AND rowid > ?2 AND rowid <= ?3"),
      vocabulary_sql_("SELECT doc FROM temp." + index_ + "_vocab WHERE term = ?") {}

Result<std::optional<int64_t>> WordCounts::Get(db::Database& db, const std::string& word,
                                               int64_t highest, bool settled) {
  return Count(db, word, QuoteTerm(word), false, highest, settled);
}

Result<int64_t> WordCounts::GetPrefix(db::Database& db, const std::string& stem, int64_t highest,
                                      bool settled) {
  auto count = Count(db, stem + "*", QuoteTerm(stem) + "*", true, highest, settled);
  if (!count) return count.error();
  return count->value_or(0);
}

Result<std::optional<int64_t>> WordCounts::Count(db::Database& db, const std::string& key,
                                                 const std::string& match, bool prefix,
                                                 int64_t highest, bool settled) {
  std::optional<Entry> known;
  if (settled) {
    std::lock_guard lock(mu_);
    if (auto it = words_.find(key); it != words_.end()) known = it->second;
  }
  Entry entry;
  if (known && known->as_of == highest) {
    return known->absent ? std::optional<int64_t>() : std::optional<int64_t>(known->documents);
  }
  // A word the vocabulary did not hold is looked up there again in a newer snapshot: it may
  // hold it now, and counting the newer rows' matches would count what the tokenizer folds
  // to it, which the vocabulary's answer does not.
  const bool since = known && !known->absent && known->as_of < highest;
  if (since || prefix) {
    // Add the rows this snapshot holds beyond the remembered one; a prefix with nothing
    // usable remembered counts all of them (its count is not in the vocabulary).
    auto st = db.Prepare(count_since_sql_);
    if (!st) return st.error();
    st->Bind(1, match).Bind(2, since ? known->as_of : int64_t{0}).Bind(3, highest);
    auto row = st->Step();
    if (!row) return row.error();
    entry.documents = (since ? known->documents : 0) + (*row ? st->Int(0) : 0);
    entry.as_of = highest;
  } else {
    // Nothing remembered, remembered as absent from an older snapshot, or remembered from a
    // newer snapshot than the caller's (the rows in between are not visible here, so they
    // cannot be counted off). Count from the vocabulary (and remember it, absent too, only if
    // nothing newer is known).
    auto st = db.Prepare(vocabulary_sql_);
    if (!st) return st.error();
    st->Bind(1, key);
    auto row = st->Step();
    if (!row) return row.error();
    entry.absent = !*row;
    entry.documents = *row ? st->Int(0) : 0;
    entry.as_of = highest;
  }
  const auto answer =
      entry.absent ? std::optional<int64_t>() : std::optional<int64_t>(entry.documents);
  if (!settled) return answer;
  std::lock_guard lock(mu_);
  auto& slot = words_[key];
  if (slot.as_of <= entry.as_of) {
    if (words_.size() > kMaxWords) {
      words_.clear();
      words_[key] = entry;
    } else {
      slot = entry;
    }
  }
  return answer;
}

void WordCounts::Clear() {
  std::lock_guard lock(mu_);
  words_.clear();
}

void PostingsCache::Clear() {
  std::lock_guard lock(mu_);
  words_.clear();
  uses_.clear();
}

Status RegisterBm25(db::Database& db, const RowFacts* facts) {
  sqlite3* handle = db.handle();
  fts5_api* api = nullptr;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(handle, "SELECT fts5(?1)", -1, &st, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr", nullptr);
    rc = sqlite3_step(st);
    rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_OK || api == nullptr || api->iVersion < 2) {
    return Error::Internal("FTS5 is not available to register tmcra_bm25");
  }
  rc = api->xCreateFunction(api, "tmcra_bm25", const_cast<RowFacts*>(facts), Bm25, nullptr);
  if (rc == SQLITE_OK) rc = api->xCreateFunction(api, "tmcra_sized_bm25", nullptr, Bm25, nullptr);
  if (rc == SQLITE_OK) {
    rc = api->xCreateFunction(api, "tmcra_rank", const_cast<RowFacts*>(facts), Rank, nullptr);
  }
  if (rc == SQLITE_OK) {
    rc = api->xCreateFunction(api, "tmcra_occurrences", nullptr, Occurrences, nullptr);
  }
  if (rc != SQLITE_OK) return Error::Internal("could not register tmcra_bm25");
  return Ok();
}

}  // namespace tmcra::memory
