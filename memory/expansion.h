// Query expansion: the other word forms and related words a recall also searches in the word
// index, each with a weight below the words asked.
//
//   stem     the forms the stem index files under a query word's stem (memory/stems.h):
//            "deployments" -> "deploy", "deployed", "deployment"; weight kStemWeight
//   synonym  English synonyms and related words (memory/synonyms.h) and their forms:
//            "physician" -> "doctor", "doctors"; weight kSynonymWeight
//
// A form's document count for ranking is at least its query word's, so its IDF is at most the
// word's and, with the lower weight, a record holding the word asked ranks above one holding
// only another form. Bounded: at most kStemFormsPerWord forms per word, kRelatedPerWord related
// words per word and kFormsPerRelated forms of each, and recall keeps at most kMaxExpansions
// within its postings budget (recall.cc).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "base/sqlite_db.h"
#include "memory/bm25.h"

namespace tmcra::memory {

inline constexpr double kStemWeight = 0.7;
inline constexpr double kSynonymWeight = 0.45;
inline constexpr int kStemFormsPerWord = 12;
inline constexpr size_t kRelatedPerWord = 8;
inline constexpr int kFormsPerRelated = 4;
inline constexpr size_t kMaxExpansions = 24;

struct Expansion {
  std::string form;    // as the word index holds it
  std::string of;      // the query word it comes from
  std::string signal;  // "stem" or "synonym"
  double weight = 1.0;
};

struct ExpansionOptions {
  std::string language = "auto";  // EngineOptions::stem_language
  bool synonyms = true;
};

// The expansions of `words` (a query's words, in order), none of which is one of `words`,
// first come first: every word's stem forms, then its related words. `db` must be in the
// recall's snapshot.
[[nodiscard]] Result<std::vector<Expansion>> ExpandWords(db::Database& db,
                                                         const std::vector<std::string>& words,
                                                         const ExpansionOptions& options);

// The expansions a recall searches, with what tmcra_rank needs of them.
struct ChosenExpansions {
  std::vector<Expansion> chosen;
  std::vector<std::string> forms;
  std::vector<int64_t> documents;  // each form's own document count, for the postings cache
  std::string rank_items;          // "df*w,..." in order (memory/bm25.h), or ""
};

// Chooses from `all` the forms some record holds: the higher weights first, rarest first
// within a weight, at most kMaxExpansions whose postings fit `budget`. `words` and
// `word_documents` are the words the recall searches and their counts (ChooseWords); `counts`
// gives the forms' counts in the snapshot whose newest record is `highest`.
[[nodiscard]] Result<ChosenExpansions> ChooseExpansions(db::Database& db, WordCounts& counts,
                                                        int64_t highest,
                                                        const std::vector<Expansion>& all,
                                                        const std::vector<std::string>& words,
                                                        const std::vector<int64_t>& word_documents,
                                                        int64_t budget);

// Which of "word", "stem" and "synonym" found a record whose word-index tokens are `tokens`:
// one of `words`, or a form `chosen` holds with that signal.
std::vector<std::string> WordSignals(const std::vector<std::string>& tokens,
                                     const std::vector<std::string>& words,
                                     const std::vector<Expansion>& chosen);

}  // namespace tmcra::memory
