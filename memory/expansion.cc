#include "memory/expansion.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "memory/stems.h"
#include "memory/synonyms.h"

namespace tmcra::memory {

namespace {

// Collects expansions, each form once and never one of the query's words.
class Collector {
 public:
  explicit Collector(const std::vector<std::string>& words) : seen_(words.begin(), words.end()) {}
  void Add(std::string form, const std::string& of, const char* signal, double weight) {
    if (!seen_.insert(form).second) return;
    out_.push_back(Expansion{std::move(form), of, signal, weight});
  }
  std::vector<Expansion> Take() { return std::move(out_); }

 private:
  std::set<std::string> seen_;
  std::vector<Expansion> out_;
};

// `word` as the word index holds it (one token), or "" when it is not one token.
std::string Folded(const WordTokenizer& tokenizer, const std::string& word) {
  auto tokens = tokenizer.Tokens(word);
  return tokens.size() == 1 ? std::move(tokens[0]) : std::string();
}

Status AddStemForms(db::Database& db, const std::string& language, const std::string& form,
                    const std::string& of, const char* signal, double weight, int limit,
                    Collector& out) {
  const std::string stem = Stem(language, form);
  if (stem.empty()) return Ok();
  out.Add(stem, of, signal, weight);  // the stem as a word: forms that are their own stem
  TMCRA_ASSIGN_OR_RETURN(const auto forms, FormsOf(db, stem, limit));
  for (const auto& f : forms) out.Add(f, of, signal, weight);
  return Ok();
}

}  // namespace

Result<std::vector<Expansion>> ExpandWords(db::Database& db, const std::vector<std::string>& words,
                                           const ExpansionOptions& options) {
  if (words.empty() || options.language == "none") return std::vector<Expansion>{};
  TMCRA_ASSIGN_OR_RETURN(WordTokenizer tokenizer, WordTokenizer::Open(db));
  std::vector<std::string> folded;
  for (const auto& w : words) folded.push_back(Folded(tokenizer, w));
  const std::string language = LanguageFor(folded, options.language, 1);
  Collector out(folded);
  for (size_t i = 0; i < words.size(); ++i) {
    if (folded[i].empty()) continue;
    TMCRA_RETURN_IF_ERROR(AddStemForms(db, language, folded[i], words[i], "stem", kStemWeight,
                                       kStemFormsPerWord, out));
  }
  if (options.synonyms && language == "english") {
    for (size_t i = 0; i < words.size(); ++i) {
      if (folded[i].empty()) continue;
      for (const auto& related : RelatedWords(folded[i], kRelatedPerWord)) {
        out.Add(related, words[i], "synonym", kSynonymWeight);
        TMCRA_RETURN_IF_ERROR(AddStemForms(db, language, related, words[i], "synonym",
                                           kSynonymWeight, kFormsPerRelated, out));
      }
    }
  }
  return out.Take();
}

Result<ChosenExpansions> ChooseExpansions(db::Database& db, WordCounts& counts, int64_t highest,
                                          const std::vector<Expansion>& all,
                                          const std::vector<std::string>& words,
                                          const std::vector<int64_t>& word_documents,
                                          int64_t budget) {
  struct Candidate {
    const Expansion* e;
    int64_t df;
  };
  std::vector<Candidate> held;
  for (const Expansion& e : all) {
    TMCRA_ASSIGN_OR_RETURN(const auto df, counts.Get(db, e.form, highest));
    if (df && *df > 0) held.push_back(Candidate{&e, *df});
  }
  std::stable_sort(held.begin(), held.end(), [](const Candidate& a, const Candidate& b) {
    if (a.e->weight != b.e->weight) return a.e->weight > b.e->weight;
    return a.df < b.df;
  });
  ChosenExpansions out;
  int64_t postings = 0;
  for (const Candidate& c : held) {
    if (out.chosen.size() >= kMaxExpansions || postings + c.df > budget) continue;
    postings += c.df;
    // The IDF is at most the query word's (when it is searched): never above the word asked.
    int64_t rank_df = c.df;
    for (size_t i = 0; i < words.size() && i < word_documents.size(); ++i) {
      if (words[i] == c.e->of) rank_df = std::max(rank_df, word_documents[i]);
    }
    if (!out.rank_items.empty()) out.rank_items += ',';
    char weight[32];
    std::snprintf(weight, sizeof weight, "%.3f", c.e->weight);
    out.rank_items += std::to_string(rank_df) + "*" + weight;
    out.chosen.push_back(*c.e);
    out.forms.push_back(c.e->form);
    out.documents.push_back(c.df);
  }
  return out;
}

std::vector<std::string> WordSignals(const std::vector<std::string>& tokens,
                                     const std::vector<std::string>& words,
                                     const std::vector<Expansion>& chosen) {
  const std::set<std::string> held(tokens.begin(), tokens.end());
  std::vector<std::string> out;
  const auto add = [&](const std::string& signal) {
    if (std::find(out.begin(), out.end(), signal) == out.end()) out.push_back(signal);
  };
  for (const auto& w : words) {
    if (held.count(w)) add("word");
  }
  for (const auto& e : chosen) {
    if (held.count(e.form)) add(e.signal);
  }
  return out;
}

}  // namespace tmcra::memory
