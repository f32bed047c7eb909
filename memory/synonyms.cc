#include "memory/synonyms.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace tmcra::memory {

namespace {

// The table in pieces, each a whole number of sorted lines "word TAB related...".
constexpr std::string_view kPieces[] = {
#include "memory/synonyms_data.inc"
};

// `piece`'s first word.
std::string_view FirstWord(std::string_view piece) { return piece.substr(0, piece.find('\t')); }

// The line of `word`'s related words in `piece` ("" when it has none), by binary search over
// its lines.
std::string_view LookupIn(std::string_view piece, std::string_view word) {
  size_t lo = 0;
  size_t hi = piece.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const size_t start = mid == 0 ? 0 : piece.rfind('\n', mid - 1) + 1;
    const size_t tab = piece.find('\t', start);
    const size_t end = piece.find('\n', start);
    if (tab == std::string_view::npos || end == std::string_view::npos) return {};
    const std::string_view key = piece.substr(start, tab - start);
    if (key == word) return piece.substr(tab + 1, end - tab - 1);
    if (key < word) {
      lo = end + 1;
    } else {
      hi = start;
    }
  }
  return {};
}

// The line of `word`'s related words in the table, or "".
std::string_view Lookup(std::string_view word) {
  // The last piece whose first word is not after `word`.
  const auto* after = std::upper_bound(
      std::begin(kPieces), std::end(kPieces), word,
      [](std::string_view w, std::string_view piece) { return w < FirstWord(piece); });
  if (after == std::begin(kPieces)) return {};
  return LookupIn(*(after - 1), word);
}

// `word` and the base forms WordNet's detachment rules give for nouns, verbs and adjectives.
std::vector<std::string> BaseForms(const std::string& word) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {"ses", "s"}, {"xes", "x"}, {"zes", "z"}, {"ches", "ch"}, {"shes", "sh"}, {"men", "man"},
      {"ies", "y"}, {"s", ""},    {"es", "e"},  {"es", ""},     {"ed", "e"},    {"ed", ""},
      {"ing", "e"}, {"ing", ""},  {"er", ""},   {"est", ""},    {"er", "e"},    {"est", "e"}};
  std::vector<std::string> out{word};
  for (const auto& [suffix, ending] : kRules) {
    if (word.size() <= suffix.size() + 1 || !word.ends_with(suffix)) continue;
    std::string base = word.substr(0, word.size() - suffix.size()) + std::string(ending);
    if (std::find(out.begin(), out.end(), base) == out.end()) out.push_back(std::move(base));
  }
  // A doubled final consonant before -ed/-ing ("stopped" -> "stop").
  for (std::string_view suffix : {"ed", "ing"}) {
    const size_t n = word.size() - std::min(word.size(), suffix.size());
    if (word.ends_with(suffix) && n >= 3 && word[n - 1] == word[n - 2]) {
      out.push_back(word.substr(0, n - 1));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> RelatedWords(const std::string& word, size_t limit) {
  std::vector<std::string> out;
  for (const std::string& base : BaseForms(word)) {
    const std::string_view line = Lookup(base);
    if (line.empty()) continue;
    if (base != word && std::find(out.begin(), out.end(), base) == out.end()) out.push_back(base);
    size_t at = 0;
    while (at < line.size() && out.size() < limit) {
      size_t end = line.find(' ', at);
      if (end == std::string_view::npos) end = line.size();
      std::string related(line.substr(at, end - at));
      if (related != word && std::find(out.begin(), out.end(), related) == out.end()) {
        out.push_back(std::move(related));
      }
      at = end + 1;
    }
  }
  if (out.size() > limit) out.resize(limit);
  return out;
}

size_t RelatedWordsTableSize() {
  size_t lines = 0;
  for (const std::string_view piece : kPieces) {
    lines += static_cast<size_t>(std::count(piece.begin(), piece.end(), '\n'));
  }
  return lines;
}

}  // namespace tmcra::memory
