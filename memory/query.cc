#include "memory/query.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>

#include "base/utf8.h"
#include "memory/cjk.h"

namespace tmcra::memory {

namespace {

constexpr std::string_view kStopWords[] = {
    "a",     "about", "an",    "and",    "any",    "are",  "as",    "at",   "be",    "been", "but",
    "by",    "can",   "could", "did",    "do",     "does", "for",   "from", "had",   "has",  "have",
    "how",   "i",     "if",    "in",     "into",   "is",   "it",    "its",  "me",    "my",   "of",
    "on",    "or",    "our",   "please", "should", "so",   "that",  "the",  "their", "them", "then",
    "there", "these", "they",  "this",   "to",     "us",   "was",   "we",   "were",  "what", "when",
    "where", "which", "who",   "why",    "will",   "with", "would", "you",  "your"};

bool IsSeparator(uint32_t cp) {
  if (cp < 0x80) {
    return !((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
             cp == '_');
  }
  return (cp >= 0x2000 && cp <= 0x206f) ||  // general punctuation
         (cp >= 0x3000 && cp <= 0x3003) ||  // ideographic space and marks
         (cp >= 0x3008 && cp <= 0x3011) ||  // CJK brackets
         (cp >= 0xff01 && cp <= 0xff0f) || (cp >= 0xff1a && cp <= 0xff20) ||
         (cp >= 0xff3b && cp <= 0xff40) || (cp >= 0xff5b && cp <= 0xff65) || cp == 0x00a0 ||
         cp == 0xfeff;
}

std::vector<std::pair<uint32_t, std::string>> CodePoints(std::string_view text) {
  std::vector<std::pair<uint32_t, std::string>> out;
  const std::string valid = SanitizeUtf8(text);
  for (size_t i = 0; i < valid.size();) {
    const auto c = static_cast<unsigned char>(valid[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(valid[i + k]) & 0x3fu);
    out.emplace_back(cp, valid.substr(i, n));
    i += n;
  }
  return out;
}

std::string JoinOr(const std::vector<std::string>& terms) {
  std::string out;
  for (const auto& t : terms) {
    if (!out.empty()) out += " OR ";
    out += QuoteTerm(t);
  }
  return out;
}

}  // namespace

std::string QuoteTerm(const std::string& term) {
  std::string out = "\"";
  for (char c : term) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  out.push_back('"');
  return out;
}

std::string SearchTerms::WordMatch() const { return JoinOr(words); }
std::string SearchTerms::TrigramMatch() const { return JoinOr(trigrams); }
std::string SearchTerms::CjkMatch() const {
  std::string out = JoinOr(cjk_bigrams);
  for (const auto& p : cjk_prefixes) {
    if (!out.empty()) out += " OR ";
    out += QuoteTerm(p) + "*";
  }
  return out;
}

SearchTerms ParseQuery(const std::string& query) {
  SearchTerms terms;
  std::set<std::string> seen_words;
  std::set<std::string> seen_trigrams;
  std::set<std::string> seen_cjk;
  const auto add_cjk = [&](std::vector<std::string>& list, std::string term) {
    if (terms.cjk_bigrams.size() + terms.cjk_prefixes.size() < 96 && seen_cjk.insert(term).second) {
      list.push_back(std::move(term));
    }
  };
  const auto flush = [&](std::vector<std::pair<uint32_t, std::string>>& word) {
    if (word.empty()) return;
    bool ascii = true;
    std::string text;
    for (const auto& [cp, bytes] : word) {
      ascii = ascii && cp < 0x80;
      text +=
          cp < 0x80 ? std::string(1, static_cast<char>(std::tolower(static_cast<int>(cp)))) : bytes;
    }
    const bool stop = ascii && std::find(std::begin(kStopWords), std::end(kStopWords), text) !=
                                   std::end(kStopWords);
    const bool too_short = ascii && text.size() < 2 && !(text[0] >= '0' && text[0] <= '9');
    if (!stop && !too_short && terms.words.size() < 32 && seen_words.insert(text).second) {
      terms.words.push_back(text);
    }
    if (!ascii && word.size() >= 3) {
      for (size_t i = 0; i + 3 <= word.size() && terms.trigrams.size() < 96; ++i) {
        std::string gram = word[i].second + word[i + 1].second + word[i + 2].second;
        if (seen_trigrams.insert(gram).second) terms.trigrams.push_back(gram);
      }
    }
    for (size_t i = 0; i < word.size();) {  // the word's runs of CJK code points
      if (!IsCjk(word[i].first)) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < word.size() && IsCjk(word[end].first)) ++end;
      // A lone kana or Hangul syllable is mostly a particle, found in most records: only a lone
      // Han character is searched alone (memory/cjk.h).
      const uint32_t cp = word[i].first;
      const bool han = (cp >= 0x3005 && cp <= 0x3007) || (cp >= 0x3400 && cp <= 0x4dbf) ||
                       (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0xf900 && cp <= 0xfaff) ||
                       (cp >= 0x20000 && cp <= 0x323af);
      if (end - i == 1 && han && terms.cjk_prefixes.size() < 4) {
        add_cjk(terms.cjk_prefixes, word[i].second);
      }
      for (size_t k = i; k + 1 < end; ++k) {
        add_cjk(terms.cjk_bigrams, word[k].second + word[k + 1].second);
      }
      i = end;
    }
    word.clear();
  };
  std::vector<std::pair<uint32_t, std::string>> word;
  for (auto& cp : CodePoints(query)) {
    if (IsSeparator(cp.first)) {
      flush(word);
    } else {
      word.push_back(std::move(cp));
    }
  }
  flush(word);
  if (!terms.cjk_bigrams.empty()) terms.cjk_prefixes.clear();  // lone characters: only alone
  return terms;
}

}  // namespace tmcra::memory
