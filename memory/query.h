// Turning a recall query into full-text searches.
//
// Words: maximal runs of letters and digits (any non-ASCII code point that is not punctuation
// counts as a letter), lower-cased, without English stop words; each becomes a quoted FTS5
// string, OR-ed, for the word index (unicode61, diacritics removed, so "resume" finds "résumé").
// Trigrams: every three-code-point window of each non-ASCII word (CJK text has no spaces, so a
// whole Japanese sentence is one "word"); OR-ed for the trigram index.
// CJK terms (memory/cjk.h): every two-code-point window of each run of CJK code points, or, in
// a query without such a window, each lone Han character (at most 4) as a prefix query; OR-ed
// for the CJK index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmcra::memory {

struct SearchTerms {
  std::vector<std::string> words;  // distinct, in query order, at most 32
  // Per word, how many records of the word index hold it (set by the recall's word choice from
  // the index's vocabulary; -1 where unknown, e.g. a non-ASCII word the tokenizer folds).
  std::vector<int64_t> word_documents;
  std::vector<std::string> trigrams;     // distinct, at most 96
  std::vector<std::string> cjk_bigrams;  // distinct
  // Per bigram, or per prefix when there are no bigrams, how many records of the CJK index
  // hold it (set by the recall's choice of terms, which keeps only terms some record holds).
  std::vector<int64_t> cjk_documents;
  std::vector<std::string> cjk_prefixes;  // distinct lone Han characters, at most 4; only
                                          // without bigrams
  std::string WordMatch() const;          // "w1" OR "w2" ..., empty when no words
  std::string TrigramMatch() const;
  std::string CjkMatch() const;  // "b1" OR ... OR "p1"* ..., empty when no CJK terms
};

SearchTerms ParseQuery(const std::string& query);

// `term` as an FTS5 string: in double quotes, each double quote doubled.
std::string QuoteTerm(const std::string& term);

}  // namespace tmcra::memory
