#include "memory/stems.h"

#include <libstemmer.h>
#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "memory/cjk.h"

namespace tmcra::memory {

namespace {

// Frequent function words per language, as the word index holds them (no diacritics), chosen
// to overlap little between languages.
struct StopList {
  const char* language;
  std::vector<std::string_view> words;
};

const std::vector<StopList>& StopLists() {
  static const std::vector<StopList> lists = {
      {"english", {"the", "and", "is", "are",  "was",   "of",  "to", "with", "that", "this",
                   "it",  "for", "on", "what", "which", "how", "we", "you",  "did",  "does"}},
      {"german", {"der", "die", "das", "und", "ist", "nicht", "mit", "ein",   "eine",   "den",
                  "auf", "wir", "ich", "sie", "es",  "zu",    "von", "wurde", "welche", "wie"}},
      {"french", {"le",   "la",  "les", "et",  "est",  "des",  "une", "un",   "du", "dans",
                  "pour", "pas", "que", "qui", "nous", "vous", "sur", "avec", "ce", "quel"}},
      {"spanish", {"el",  "los", "las",  "y",    "es",   "del",   "una", "por",  "para",  "con",
                   "que", "se",  "como", "pero", "esta", "hemos", "fue", "cual", "donde", "muy"}},
      {"italian",
       {"il",    "lo",  "gli",     "e",      "di",    "che",  "non",   "per", "una",  "sono",
        "della", "con", "abbiamo", "questo", "quale", "come", "anche", "nel", "alla", "stato"}},
      {"portuguese", {"o",   "os",  "as",  "e",    "do",  "da",  "dos",  "das",  "em",  "um",
                      "uma", "nao", "com", "para", "que", "foi", "qual", "como", "nos", "voce"}},
      {"dutch", {"de",  "het", "een",  "en",  "is",   "niet",  "van", "dat",  "op",  "te",
                 "wij", "ik",  "zijn", "met", "voor", "welke", "hoe", "werd", "ook", "maar"}},
      {"swedish", {"och", "att", "det", "som", "en",   "pa",     "ar",  "inte", "med", "for",
                   "jag", "vi",  "av",  "har", "till", "vilken", "hur", "var",  "den", "om"}},
      {"danish", {"og",  "at", "det", "som", "en",  "pa",      "er",      "ikke", "med", "for",
                  "jeg", "vi", "af",  "har", "til", "hvilken", "hvordan", "var",  "den", "hvad"}},
      {"norwegian", {"og",  "at", "det", "som", "en",  "pa",      "er",      "ikke", "med", "for",
                     "jeg", "vi", "av",  "har", "til", "hvilken", "hvordan", "var",  "den", "hva"}},
      {"finnish", {"ja",  "on", "ei", "se", "etta",  "oli", "ovat", "mita", "kun",  "niin",
                   "han", "me", "te", "he", "mutta", "jos", "kuin", "tama", "mika", "miten"}},
      {"russian", {"и",  "в",  "не", "на",  "что", "с",   "как", "это",  "по",    "но",
                   "мы", "вы", "он", "она", "они", "для", "был", "была", "какои", "где"}},
  };
  return lists;
}

// One stemmer per language and thread: a Snowball stemmer is not safe to share.
class Stemmers {
 public:
  sb_stemmer* For(std::string_view language) {
    auto it = stemmers_.find(language);
    if (it != stemmers_.end()) return it->second.get();
    sb_stemmer* made = sb_stemmer_new(std::string(language).c_str(), "UTF_8");
    stemmers_.emplace(std::string(language), Owned(made));
    return made;
  }

 private:
  struct Free {
    void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
  };
  using Owned = std::unique_ptr<sb_stemmer, Free>;
  std::map<std::string, Owned, std::less<>> stemmers_;
};

bool Stemmable(const std::string& form) {
  if (form.empty() || form.size() > 64) return false;
  bool letter = false;
  for (size_t i = 0; i < form.size();) {
    const auto c = static_cast<unsigned char>(form[i]);
    if (c < 0x80) {
      if (c >= '0' && c <= '9') return false;  // "v2", "sha256": names, not words
      letter = true;
      ++i;
      continue;
    }
    const size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
    uint32_t cp = n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (size_t k = 1; k < n && i + k < form.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(form[i + k]) & 0x3fu);
    }
    if (IsCjk(cp)) return false;
    letter = true;
    i += n;
  }
  return letter;
}

int CollectToken(void* ctx, int /*flags*/, const char* token, int n, int /*start*/, int /*end*/) {
  static_cast<std::vector<std::string>*>(ctx)->emplace_back(token, static_cast<size_t>(n));
  return SQLITE_OK;
}

fts5_api* Fts5Api(sqlite3* db) {
  fts5_api* api = nullptr;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr", nullptr);
    sqlite3_step(st);
  }
  sqlite3_finalize(st);
  return api;
}

}  // namespace

Result<WordTokenizer> WordTokenizer::Open(db::Database& db) {
  fts5_api* api = Fts5Api(db.handle());
  if (api == nullptr) return Error{Errc::kInternal, false, "FTS5 is not available"};
  void* user = nullptr;
  auto* methods = new fts5_tokenizer{};
  if (api->xFindTokenizer(api, "unicode61", &user, methods) != SQLITE_OK) {
    delete methods;
    return Error{Errc::kInternal, false, "FTS5 has no unicode61 tokenizer"};
  }
  const char* args[] = {"remove_diacritics", "2"};
  Fts5Tokenizer* tokenizer = nullptr;
  if (methods->xCreate(user, args, 2, &tokenizer) != SQLITE_OK) {
    delete methods;
    return Error{Errc::kInternal, false, "FTS5's unicode61 tokenizer could not be made"};
  }
  return WordTokenizer(methods, tokenizer);
}

WordTokenizer::WordTokenizer(WordTokenizer&& other) noexcept
    : api_(std::exchange(other.api_, nullptr)),
      tokenizer_(std::exchange(other.tokenizer_, nullptr)) {}

WordTokenizer::~WordTokenizer() {
  if (api_ != nullptr && tokenizer_ != nullptr) api_->xDelete(tokenizer_);
  delete api_;
}

std::vector<std::string> WordTokenizer::Tokens(std::string_view text) const {
  std::vector<std::string> out;
  api_->xTokenize(tokenizer_, &out, FTS5_TOKENIZE_DOCUMENT, text.data(),
                  static_cast<int>(text.size()), CollectToken);
  return out;
}

std::vector<std::string> StemmerLanguages() {
  std::vector<std::string> out;
  for (const char** name = sb_stemmer_list(); *name != nullptr; ++name) out.emplace_back(*name);
  return out;
}

bool IsStemLanguage(std::string_view language) {
  if (language == "auto" || language == "none") return true;
  const auto all = StemmerLanguages();
  return std::find(all.begin(), all.end(), language) != all.end();
}

std::string DetectLanguage(const std::vector<std::string>& tokens, std::string_view fallback,
                           int min_hits) {
  // Each stop word's languages, as bits in the order of StopLists().
  static const auto* const kLanguagesOf = [] {
    auto* map = new std::unordered_map<std::string_view, uint32_t>;
    const auto& lists = StopLists();
    for (size_t i = 0; i < lists.size(); ++i) {
      for (const auto word : lists[i].words) (*map)[word] |= uint32_t{1} << i;
    }
    return map;
  }();
  const auto& lists = StopLists();
  std::vector<int> hits(lists.size(), 0);
  for (const auto& t : tokens) {
    const auto it = kLanguagesOf->find(t);
    if (it == kLanguagesOf->end()) continue;
    for (size_t i = 0; i < lists.size(); ++i) hits[i] += static_cast<int>((it->second >> i) & 1u);
  }
  std::string best(fallback);
  int best_hits = min_hits - 1;
  for (size_t i = 0; i < lists.size(); ++i) {
    if (hits[i] > best_hits) {
      best = lists[i].language;
      best_hits = hits[i];
    }
  }
  return best;
}

std::string LanguageFor(const std::vector<std::string>& tokens, std::string_view configured,
                        int min_hits) {
  if (configured == "none") return "";
  if (configured != "auto") return std::string(configured);
  return DetectLanguage(tokens, "english", min_hits);
}

std::string Stem(std::string_view language, const std::string& form) {
  if (!Stemmable(form)) return "";
  thread_local Stemmers stemmers;
  sb_stemmer* stemmer = stemmers.For(language);
  if (stemmer == nullptr) return "";
  const sb_symbol* stem = sb_stemmer_stem(stemmer, reinterpret_cast<const sb_symbol*>(form.data()),
                                          static_cast<int>(form.size()));
  if (stem == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(stem),
                     static_cast<size_t>(sb_stemmer_length(stemmer)));
}

Status KnownForms::Write(db::Database& db, const std::vector<std::string>& tokens,
                         const std::string& language, std::vector<std::string>& added) {
  if (language.empty()) return Ok();
  std::vector<std::string> fresh;
  {
    std::lock_guard lock(mu_);
    for (const auto& t : tokens) {
      std::string key = language + '\x1f' + t;
      if (known_.count(key) == 0) fresh.push_back(std::move(key));
    }
  }
  if (fresh.empty()) return Ok();
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  TMCRA_ASSIGN_OR_RETURN(auto insert,
                         db.Prepare("INSERT OR IGNORE INTO word_stems(stem, word) VALUES(?, ?)"));
  for (auto& key : fresh) {
    const std::string form = key.substr(language.size() + 1);
    const std::string stem = Stem(language, form);
    // A form that is its own stem is not filed: a search for the stem searches it as a word
    // (memory/expansion.cc), and most one-off tokens (names, hashes) are their own stems.
    if (!stem.empty() && stem != form) {
      insert.Reset();
      insert.Bind(1, stem).Bind(2, form);
      TMCRA_RETURN_IF_ERROR(insert.Run());
    }
    added.push_back(std::move(key));
  }
  return Ok();
}

void KnownForms::Remember(const std::vector<std::string>& added) {
  std::lock_guard lock(mu_);
  if (known_.size() + added.size() > kMaxForms) known_.clear();
  known_.insert(added.begin(), added.end());
}

void KnownForms::Sync(int64_t generation) {
  std::lock_guard lock(mu_);
  if (generation == generation_) return;
  known_.clear();
  generation_ = generation;
}

Result<int64_t> StemGeneration(db::Database& db) {
  return db.QueryInt("SELECT value FROM maintenance WHERE name = 'stem_generation'");
}

Result<int64_t> StemWatermark(db::Database& db) {
  return db.QueryInt("SELECT through_seq FROM index_watermarks WHERE name = 'word_stems'");
}

Result<int64_t> PruneForms(db::Database& db, const std::unordered_set<std::string>& forms) {
  TMCRA_ASSIGN_OR_RETURN(auto held,
                         db.Prepare("SELECT 1 FROM temp.records_fts_vocab WHERE term = ?"));
  TMCRA_ASSIGN_OR_RETURN(auto remove, db.Prepare("DELETE FROM word_stems WHERE word = ?"));
  int64_t removed = 0;
  for (const auto& form : forms) {
    held.Reset();
    held.Bind(1, form);
    TMCRA_ASSIGN_OR_RETURN(const bool present, held.Step());
    if (present) continue;
    remove.Reset();
    remove.Bind(1, form);
    TMCRA_RETURN_IF_ERROR(remove.Run());
    removed += db.Changes();
  }
  TMCRA_RETURN_IF_ERROR(
      db.Exec("INSERT INTO maintenance(name, value) VALUES('stem_generation', 1) "
              "ON CONFLICT(name) DO UPDATE SET value = value + 1"));
  return removed;
}

Result<std::vector<std::string>> FormsOf(db::Database& db, const std::string& stem, int limit) {
  TMCRA_ASSIGN_OR_RETURN(auto st, db.Prepare("SELECT word FROM word_stems WHERE stem = ? LIMIT ?"));
  st.Bind(1, stem).Bind(2, static_cast<int64_t>(limit));
  std::vector<std::string> out;
  for (;;) {
    TMCRA_ASSIGN_OR_RETURN(const bool row, st.Step());
    if (!row) return out;
    out.push_back(st.Text(0));
  }
}

}  // namespace tmcra::memory
