// The stem index: every word form the word index holds, under its Snowball stem, so that a
// recall can search the other forms of a query word's stem ("deployments" also searches
// "deploy", "deployed", "deploying").
//
// Forms are the word index's own tokens (FTS5's unicode61 tokenizer with remove_diacritics 2,
// which this module runs through FTS5's C API on the caller's connection): lower-case, without
// diacritics. A form is stemmed as it is held, so "créé" and "cree" have one stem. Tokens with
// a CJK code point are not stemmed (the CJK index serves them), nor are tokens with a digit.
// A form that is its own stem ("deploy") is not filed: the stem is searched as a word too, and
// most one-off tokens (names, identifiers) are their own stems, so the table stays small.
//
// A record's language: with the option `language` set to a Snowball language, every record and
// query is stemmed in it; with "auto" (the default) each record's language is detected from its
// stop words (DetectLanguage), falling back to English, and a query's likewise. The table holds
// (stem, form) pairs whatever the language, so a form stemmed in two languages appears under
// both stems. "none" turns stemming off (neither written nor searched).
//
// The table is written in the ingest job's transaction for new records; the records stored
// before it existed are added by the engine's worker in batches (EngineImpl::RepairStemIndex)
// up to the watermark 'word_stems' of index_watermarks. A forget deletes the pairs of forms no
// record holds any more (PruneForms).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"

struct Fts5Tokenizer;
struct fts5_tokenizer;

namespace tmcra::memory {

// The word index's tokenizer, opened on one connection (FTS5's unicode61, remove_diacritics 2).
class WordTokenizer {
 public:
  [[nodiscard]] static Result<WordTokenizer> Open(db::Database& db);
  WordTokenizer(WordTokenizer&& other) noexcept;
  WordTokenizer& operator=(WordTokenizer&&) = delete;
  WordTokenizer(const WordTokenizer&) = delete;
  ~WordTokenizer();

  // `text`'s tokens in order, as the word index holds them.
  std::vector<std::string> Tokens(std::string_view text) const;

 private:
  WordTokenizer(fts5_tokenizer* api, Fts5Tokenizer* tokenizer) : api_(api), tokenizer_(tokenizer) {}
  fts5_tokenizer* api_ = nullptr;
  Fts5Tokenizer* tokenizer_ = nullptr;
};

// Whether `language` is "auto", "none" or a Snowball language this build has.
bool IsStemLanguage(std::string_view language);
// The Snowball languages this build has, in libstemmer's order.
std::vector<std::string> StemmerLanguages();

// The language of `tokens` among those with a stop-word list here (English, German, French,
// Spanish, Italian, Portuguese, Dutch, Swedish, Danish, Norwegian, Finnish, Russian): the one
// with the most stop words among them, at least `min_hits`; else `fallback`.
std::string DetectLanguage(const std::vector<std::string>& tokens, std::string_view fallback,
                           int min_hits = 2);

// `form`'s stem in `language` (a Snowball name), or "" when it is not stemmed (CJK, a digit,
// longer than 64 bytes, or an unknown language).
std::string Stem(std::string_view language, const std::string& form);

// The language to stem `tokens` in under the option `configured` ("auto" or a Snowball name);
// "" for "none".
std::string LanguageFor(const std::vector<std::string>& tokens, std::string_view configured,
                        int min_hits);

// Forms whose pairs this process knows are in the table, so that ingest inserts only new ones.
// Cleared when the table's generation (bumped by every prune) moves.
class KnownForms {
 public:
  // Writes the (stem, form) pairs of `tokens` (stemmed in `language`) not yet known, in the
  // caller's transaction. New forms are remembered by Remember once the transaction commits.
  [[nodiscard]] Status Write(db::Database& db, const std::vector<std::string>& tokens,
                             const std::string& language, std::vector<std::string>& added);
  void Remember(const std::vector<std::string>& added);
  // Forgets every form when `generation` differs from the one last seen.
  void Sync(int64_t generation);

  static constexpr size_t kMaxForms = 500000;  // then it starts again from empty

 private:
  std::mutex mu_;
  std::unordered_set<std::string> known_;  // language + '\x1f' + form; guarded by mu_
  int64_t generation_ = -1;                // guarded by mu_
};

// The stem table's generation (maintenance row 'stem_generation'; 0 without one).
[[nodiscard]] Result<int64_t> StemGeneration(db::Database& db);
// The stem index's watermark: every record at or below it has its pairs in the table.
[[nodiscard]] Result<int64_t> StemWatermark(db::Database& db);

// Deletes the pairs of `forms` that the word index no longer holds and bumps the generation.
// `db` must have temp.records_fts_vocab. Returns how many pairs went.
[[nodiscard]] Result<int64_t> PruneForms(db::Database& db,
                                         const std::unordered_set<std::string>& forms);

// The forms filed under `stem`, at most `limit`.
[[nodiscard]] Result<std::vector<std::string>> FormsOf(db::Database& db, const std::string& stem,
                                                       int limit);

}  // namespace tmcra::memory
