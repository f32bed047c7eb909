// Build-time tool: reads WordNet 3.0's database (Debian's wordnet-base, /usr/share/wordnet) and
// writes the compact table memory/synonyms.cc searches: one line per English word, sorted,
//   word TAB related1 SPACE related2 ... NEWLINE
// as a C++ raw string literal. A word's related words are, for each of its two most frequent
// senses per part of speech, the other one-word lemmas of the sense's synset (synonyms), then
// the words its derivationally related forms point at ("prescribe" -> "prescription"); at
// most 12, lower-case letters only (the word index splits words at hyphens and digits).
// The table is written in pieces of under 32 KiB (a string literal longer than 64 KiB is past
// what compilers must accept), each a whole number of lines.
//
// Usage: synonyms_gen WORDNET_DIR OUTPUT_FILE
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kSensesPerPos = 2;
constexpr size_t kMaxRelated = 12;

struct Pointer {
  char pos = 'n';
  long offset = 0;
  int source = 0;  // word number in this synset (0: the whole synset)
  int target = 0;
};

struct Synset {
  std::vector<std::string> words;
  std::vector<Pointer> derived;  // '+' pointers
};

char PosOf(const std::string& file_pos) {
  return file_pos == "noun" ? 'n' : file_pos == "verb" ? 'v' : file_pos == "adj" ? 'a' : 'r';
}

// A lemma as WordNet writes it, lower-cased, with "(a)"-style markers cut; "" when it is not
// one word of letters and hyphens.
std::string Lemma(std::string word) {
  if (const auto paren = word.find('('); paren != std::string::npos) word.resize(paren);
  for (char& c : word) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!(c >= 'a' && c <= 'z')) return "";  // the word index splits words at hyphens
  }
  return word.size() >= 2 ? word : "";
}

void ReadData(const std::string& dir, const std::string& pos,
              std::map<std::pair<char, long>, Synset>& out) {
  std::ifstream in(dir + "/data." + pos);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ') continue;  // the licence header
    std::istringstream s(line);
    long offset = 0;
    std::string lex, type, count_hex;
    s >> offset >> lex >> type >> count_hex;
    Synset synset;
    const long words = std::stol(count_hex, nullptr, 16);
    for (long i = 0; i < words; ++i) {
      std::string word, lex_id;
      s >> word >> lex_id;
      synset.words.push_back(Lemma(word));
    }
    int pointers = 0;
    s >> pointers;
    for (int i = 0; i < pointers; ++i) {
      std::string symbol, target_pos, st;
      long target = 0;
      s >> symbol >> target >> target_pos >> st;
      if (symbol != "+") continue;
      Pointer p;
      p.pos = target_pos[0] == 's' ? 'a' : target_pos[0];
      p.offset = target;
      p.source = std::stoi(st.substr(0, 2), nullptr, 16);
      p.target = std::stoi(st.substr(2, 2), nullptr, 16);
      synset.derived.push_back(p);
    }
    out[{PosOf(pos), offset}] = std::move(synset);
  }
}

// Adds the related words of `lemma` in `synset` (its word number there found by name).
void AddRelated(const std::string& lemma, const Synset& synset,
                const std::map<std::pair<char, long>, Synset>& data,
                std::vector<std::string>& related) {
  int number = 0;
  for (size_t i = 0; i < synset.words.size(); ++i) {
    if (synset.words[i] == lemma) number = static_cast<int>(i) + 1;
  }
  const auto add = [&](const std::string& w) {
    if (!w.empty() && w != lemma && std::find(related.begin(), related.end(), w) == related.end())
      related.push_back(w);
  };
  for (const auto& w : synset.words) add(w);
  for (const Pointer& p : synset.derived) {
    if (p.source != 0 && p.source != number) continue;
    auto it = data.find({p.pos, p.offset});
    if (it == data.end() || p.target < 1 || p.target > static_cast<int>(it->second.words.size()))
      continue;
    add(it->second.words[static_cast<size_t>(p.target) - 1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: synonyms_gen WORDNET_DIR OUTPUT_FILE\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<std::string> parts = {"noun", "verb", "adj", "adv"};
  std::map<std::pair<char, long>, Synset> data;
  for (const auto& pos : parts) ReadData(dir, pos, data);
  if (data.empty()) {
    std::cerr << "synonyms_gen: no WordNet data in " << dir << "\n";
    return 1;
  }
  std::map<std::string, std::vector<std::string>> table;
  for (const auto& pos : parts) {
    std::ifstream in(dir + "/index." + pos);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == ' ') continue;
      std::istringstream s(line);
      std::string word, p;
      size_t synsets = 0, pointer_kinds = 0;
      s >> word >> p >> synsets >> pointer_kinds;
      const std::string lemma = Lemma(word);
      std::string skip;
      for (size_t i = 0; i < pointer_kinds; ++i) s >> skip;
      size_t sense_count = 0, tagged = 0;
      s >> sense_count >> tagged;
      auto& related = table[lemma];
      for (size_t i = 0; i < synsets && i < kSensesPerPos; ++i) {
        long offset = 0;
        s >> offset;
        auto it = data.find({PosOf(pos), offset});
        if (!lemma.empty() && it != data.end()) AddRelated(lemma, it->second, data, related);
      }
    }
  }
  std::ofstream out(argv[2]);
  out << "// Generated by memory/synonyms_gen.cc from WordNet 3.0 (Princeton University; licence "
         "in "
         "NOTICE).\n";
  std::string piece;
  const auto flush = [&] {
    if (!piece.empty()) {
      out << "std::string_view{R\"wn(" << piece << ")wn\", " << piece.size() << "},\n";
    }
    piece.clear();
  };
  for (auto& [word, related] : table) {
    if (word.empty() || related.empty()) continue;
    if (related.size() > kMaxRelated) related.resize(kMaxRelated);
    std::string line = word + '\t';
    for (size_t i = 0; i < related.size(); ++i) line += (i ? " " : "") + related[i];
    line += '\n';
    if (piece.size() + line.size() > 32000) flush();
    piece += line;
  }
  flush();
  return out ? 0 : 1;
}
