// paraphrase_bench: recall of questions asked in other words (docs/recall.md).
//
//   paraphrase_bench [--messages N] [--facts F] [--dir DIR] [--seed S]
//
// Builds one corpus of N messages (default 12000) with F planted facts (default 320) and
// asks, of the same store, three question sets under three engine configurations:
//   configurations: "lexical" (no stems, no synonyms: recall as before the stem index),
//                   "stems" (stem index), "stems+synonyms" (stem index and WordNet expansion)
//   question sets:  "stem"     each content word of the question shares only a Snowball stem
//                              with its fact's word ("deployments" for "deployed")
//                   "synonym"  each content word is related to its fact's word only through
//                              WordNet ("physician" for "doctor", "prescribe" for
//                              "prescription")
//                   "control"  the question uses the fact's own words
// A fact is "Remember for project P: <f1>, <f2> and <f3>." with three concept words; its
// question is "what about the <q1> <q2> <q3>?" (stop words around the concept words). Every
// concept pair is checked with the engine's own stemmer and table before use (pairs that do not
// hold are dropped and counted), and every question is checked to share no content word with
// its fact. Each fact also has distractors in other sessions: two each holding one of the
// question's own words and one other of the fact's concept words, and a third holding two of
// the question's own words; filler fills the rest.
// Reports evidence-hit@8 (a returned window holds the fact's record) per set and
// configuration, and recall latency p50, as one JSON object. Nothing here asserts a figure.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "memory/engine.h"
#include "memory/stems.h"
#include "memory/synonyms.h"

using json = nlohmann::json;
using tmcra::memory::RelatedWords;
using tmcra::memory::Stem;

namespace {

struct Pair {
  std::string fact;      // the word in the fact
  std::string question;  // the word the question asks with
};

// Candidate pairs; each is checked (CheckStemPair, CheckSynonymPair) before use.
const std::vector<Pair> kStemCandidates = {
    {"deployed", "deployments"},
    {"migrated", "migration"},
    {"configured", "configuration"},
    {"connecting", "connection"},
    {"installed", "installation"},
    {"tested", "testing"},
    {"failing", "failed"},
    {"compiled", "compiling"},
    {"optimized", "optimizing"},
    {"rotated", "rotation"},
    {"encrypted", "encryption"},
    {"authenticated", "authentication"},
    {"scheduled", "scheduling"},
    {"validated", "validation"},
    {"documented", "documentation"},
    {"refactored", "refactoring"},
    {"indexed", "indexing"},
    {"cached", "caching"},
    {"logged", "logging"},
    {"archived", "archiving"},
    {"merged", "merging"},
    {"released", "releases"},
    {"upgraded", "upgrading"},
    {"monitored", "monitoring"},
    {"measured", "measurements"},
    {"benchmarked", "benchmarks"},
    {"profiled", "profiling"},
    {"throttled", "throttling"},
    {"rendered", "rendering"},
    {"parsed", "parsing"},
    {"serialized", "serialization"},
    {"compressed", "compression"},
    {"replicated", "replication"},
    {"partitioned", "partitions"},
    {"imported", "importing"},
    {"exported", "exports"},
    {"bundled", "bundling"},
    {"signed", "signing"},
    {"reviewed", "reviews"},
    {"approved", "approval"},
    {"rejected", "rejections"},
    {"invoiced", "invoices"},
    {"billed", "billing"},
    {"printed", "printing"},
    {"uploaded", "uploads"},
    {"downloaded", "downloads"},
    {"queued", "queues"},
    {"crashed", "crashes"},
    {"restarted", "restarting"},
    {"shipped", "shipping"},
    {"packaged", "packaging"},
    {"translated", "translations"},
    {"localized", "localization"},
    {"licensed", "licensing"},
    {"trained", "training"},
    {"clustered", "clusters"},
    {"hosted", "hosting"},
    {"notified", "notifications"},
    {"audited", "audits"},
    {"provisioned", "provisioning"},
};

const std::vector<Pair> kSynonymCandidates = {
    {"doctor", "physician"},  {"prescription", "prescribe"},
    {"car", "automobile"},    {"purchase", "buy"},
    {"begin", "start"},       {"mistake", "error"},
    {"invoice", "bill"},      {"fast", "quick"},
    {"large", "big"},         {"reply", "answer"},
    {"close", "shut"},        {"repair", "fix"},
    {"velocity", "speed"},    {"job", "task"},
    {"lawyer", "attorney"},   {"sofa", "couch"},
    {"difficult", "hard"},    {"student", "pupil"},
    {"assist", "help"},       {"erase", "delete"},
    {"enormous", "huge"},     {"argument", "quarrel"},
    {"allow", "permit"},      {"film", "movie"},
    {"apartment", "flat"},    {"fall", "autumn"},
    {"vacation", "holiday"},  {"garbage", "trash"},
    {"sick", "ill"},          {"commence", "begin"},
    {"finish", "end"},        {"select", "choose"},
    {"pail", "bucket"},       {"rock", "stone"},
    {"present", "gift"},      {"store", "shop"},
    {"payment", "pay"},       {"hire", "employ"},
    {"wage", "salary"},       {"forecast", "prediction"},
    {"journey", "trip"},      {"author", "writer"},
    {"supper", "dinner"},     {"rapid", "speedy"},
    {"illness", "disease"},   {"medicine", "medication"},
    {"permission", "permit"}, {"instructor", "teacher"},
    {"chief", "boss"},        {"mend", "repair"},
    {"discard", "dispose"},   {"verify", "confirm"},
    {"cellar", "basement"},   {"attempt", "try"},
    {"remedy", "cure"},       {"automobile", "car"},
    {"infant", "baby"},       {"rubbish", "garbage"},
    {"depart", "leave"},      {"ocean", "sea"},
    {"photograph", "photo"},  {"telephone", "phone"},
    {"physician", "doctor"},  {"obtain", "get"},
    {"inquire", "ask"},       {"dwelling", "house"},
    {"cash", "money"},        {"coach", "trainer"},
    {"lecture", "talk"},      {"journal", "diary"},
    {"shore", "beach"},       {"sum", "total"},
    {"route", "path"},        {"precise", "exact"},
    {"hazard", "danger"},
};

bool CheckStemPair(const Pair& p) {
  const std::string a = Stem("english", p.fact);
  return p.fact != p.question && !a.empty() && a == Stem("english", p.question);
}

bool CheckSynonymPair(const Pair& p) {
  if (p.fact == p.question || Stem("english", p.fact) == Stem("english", p.question)) return false;
  for (const auto& r : RelatedWords(p.question, 8)) {
    if (r == p.fact || Stem("english", r) == Stem("english", p.fact)) return true;
  }
  return false;
}

const std::set<std::string>& StopWords() {
  static const std::set<std::string> words = {"what", "about", "the", "for", "and", "remember"};
  return words;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  for (char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
      w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!w.empty()) {
      out.push_back(w);
      w.clear();
    }
  }
  return out;
}

// Filler vocabulary: everyday engineering words, dropped where they touch a concept word's stem
// or its related words (so that filler never answers a question).
std::vector<std::string> FillerWords(const std::vector<Pair>& pairs) {
  const std::vector<std::string> base = {
      "function", "variable", "branch",   "commit",   "pointer",  "module",  "header",  "library",
      "compiler", "thread",   "mutex",    "socket",   "buffer",   "vector",  "string",  "integer",
      "boolean",  "template", "macro",    "kernel",   "process",  "signal",  "handler", "callback",
      "promise",  "future",   "lambda",   "closure",  "iterator", "stream",  "channel", "packet",
      "router",   "gateway",  "proxy",    "column",   "table",    "schema",  "query",   "cursor",
      "record",   "field",    "widget",   "button",   "layout",   "margin",  "padding", "border",
      "pixel",    "sprint",   "ticket",   "estimate", "roadmap",  "meeting", "standup", "retro",
      "laptop",   "monitor",  "keyboard", "mouse",    "cable",    "adapter", "charger", "coffee",
      "lunch",    "weather",  "morning",  "evening",  "weekend",  "office",  "tensor",  "gradient",
      "epoch",    "batch",    "neuron",   "weights",  "dataset",  "yaml",    "json",    "toml",
      "regex",    "unicode",  "encoding", "locale",   "quota",    "budget",  "invoice", "refund",
      "ledger",   "account",  "balance",  "green",    "purple",   "orange",  "silver",  "golden",
      "crimson",  "violet"};
  std::set<std::string> touched;
  for (const auto& p : pairs) {
    for (const auto& w : {p.fact, p.question}) {
      touched.insert(Stem("english", w));
      for (const auto& r : RelatedWords(w, 12)) touched.insert(Stem("english", r));
    }
  }
  std::vector<std::string> out;
  for (const auto& w : base) {
    if (!touched.count(Stem("english", w))) out.push_back(w);
  }
  return out;
}

struct Fact {
  std::string set;  // "stem" or "synonym"
  std::string session;
  std::string question;
  std::string control;
};

struct Corpus {
  json sessions = json::array();  // ingest items
  std::vector<Fact> facts;
  long messages = 0;
  std::vector<std::string> dropped_pairs;  // candidates whose relation does not hold
  int shared_words = 0;
  size_t stem_pairs = 0;
  size_t synonym_pairs = 0;  // questions sharing a content word with their fact (should be 0)
};

class Builder {
 public:
  Builder(unsigned seed, std::vector<Pair> stems, std::vector<Pair> synonyms)
      : rng_(seed), stems_(std::move(stems)), synonyms_(std::move(synonyms)) {
    std::vector<Pair> all = stems_;
    all.insert(all.end(), synonyms_.begin(), synonyms_.end());
    filler_ = FillerWords(all);
  }

  std::string Filler(int words) {
    std::string out;
    for (int i = 0; i < words; ++i) {
      out += (i ? " " : "") + filler_[rng_() % filler_.size()];
    }
    return out + ".";
  }

  // Three distinct pairs of `pairs` not used together before.
  std::vector<Pair> Triple(const std::vector<Pair>& pairs) {
    for (;;) {
      std::vector<size_t> at;
      while (at.size() < 3) {
        const size_t i = rng_() % pairs.size();
        if (std::find(at.begin(), at.end(), i) == at.end()) at.push_back(i);
      }
      std::sort(at.begin(), at.end());
      std::vector<Pair> triple{pairs[at[0]], pairs[at[1]], pairs[at[2]]};
      if (SharesAStem(triple) || !used_.insert(at).second) continue;
      return triple;
    }
  }

  // Whether a question word of `triple` shares its stem with a fact word of another pair
  // ("begin" asked for one pair and stated for another).
  static bool SharesAStem(const std::vector<Pair>& triple) {
    for (const auto& a : triple) {
      for (const auto& b : triple) {
        if (&a != &b && Stem("english", a.question) == Stem("english", b.fact)) return true;
      }
    }
    return false;
  }

  void Session(Corpus& c, const std::string& planted) {
    const std::string id = "s" + std::to_string(c.sessions.size());
    const int turns = 8;
    const int at = static_cast<int>(rng_() % turns);
    json messages = json::array();
    for (int t = 0; t < turns; ++t) {
      const std::string text =
          (t == at && !planted.empty()) ? planted : Filler(8 + static_cast<int>(rng_() % 16));
      messages.push_back({{"message_id", "m" + std::to_string(t)},
                          {"role", t % 2 == 0 ? "user" : "assistant"},
                          {"content", text},
                          {"timestamp", "2026-01-01T00:00:00Z"}});
    }
    c.messages += turns;
    c.sessions.push_back(
        {{"session_id", id}, {"idempotency_key", "bench-key-" + id}, {"messages", messages}});
    last_session_ = id;
  }

  void Plant(Corpus& c, const std::string& set, int number) {
    const auto triple = Triple(set == "stem" ? stems_ : synonyms_);
    const std::string fact = "Remember for project p" + std::to_string(number) + ": " +
                             triple[0].fact + ", " + triple[1].fact + " and " + triple[2].fact +
                             ".";
    Session(c, fact);
    Fact f{set, last_session_,
           "what about the " + triple[0].question + " " + triple[1].question + " " +
               triple[2].question + "?",
           "what about the " + triple[0].fact + " " + triple[1].fact + " " + triple[2].fact + "?"};
    const auto fact_words = Words(fact);
    for (const auto& w : Words(f.question)) {
      if (StopWords().count(w)) continue;
      if (std::find(fact_words.begin(), fact_words.end(), w) != fact_words.end()) ++c.shared_words;
    }
    c.facts.push_back(f);
    // Three distractors: two with one of the question's own words and another of the fact's
    // concept words, one with two of the question's own words.
    for (int d = 0; d < 2; ++d) {
      Session(c, Filler(4) + " " + triple[static_cast<size_t>(d)].question + " " + Filler(3) + " " +
                     triple[static_cast<size_t>(d + 1)].fact + " " + Filler(4));
    }
    Session(c, Filler(4) + " " + triple[0].question + " " + Filler(3) + " " + triple[2].question +
                   " " + Filler(4));
  }

 private:
  std::mt19937 rng_;
  std::vector<Pair> stems_;
  std::vector<Pair> synonyms_;
  std::vector<std::string> filler_;
  std::set<std::vector<size_t>> used_;
  std::string last_session_;
};

Corpus BuildCorpus(long messages, int facts, unsigned seed) {
  Corpus c;
  std::vector<Pair> stems;
  std::vector<Pair> synonyms;
  for (const auto& p : kStemCandidates) {
    (CheckStemPair(p) ? stems.push_back(p) : c.dropped_pairs.push_back(p.question + ">" + p.fact));
  }
  for (const auto& p : kSynonymCandidates) {
    (CheckSynonymPair(p) ? synonyms.push_back(p)
                         : c.dropped_pairs.push_back(p.question + ">" + p.fact));
  }
  c.stem_pairs = stems.size();
  c.synonym_pairs = synonyms.size();
  Builder b(seed, stems, synonyms);
  for (int i = 0; i < facts; ++i) b.Plant(c, i % 2 == 0 ? "stem" : "synonym", i);
  while (c.messages < messages) b.Session(c, "");
  return c;
}

bool Hit(const json& answer, const std::string& session) {
  for (const auto& w : answer["evidence"]["windows"]) {
    for (const auto& rec : w["records"]) {
      if (rec["session_id"] == session && rec["text"].get<std::string>().rfind("Remember", 0) == 0)
        return true;
    }
  }
  return false;
}

struct Config {
  const char* name;
  const char* stem_language;
  bool synonyms;
};

}  // namespace

int main(int argc, char** argv) {
  long messages = 12000;
  int facts = 320;
  unsigned seed = 7;
  std::string dir = "/tmp/tmcra-paraphrase-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--messages") {
      messages = std::stol(v);
    } else if (k == "--facts") {
      facts = std::stoi(v);
    } else if (k == "--dir") {
      dir = v;
    } else if (k == "--seed") {
      seed = static_cast<unsigned>(std::stoul(v));
    } else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  const Corpus corpus = BuildCorpus(messages, facts, seed);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  json report{
      {"messages", corpus.messages},           {"facts", corpus.facts.size()},
      {"dropped_pairs", corpus.dropped_pairs}, {"stem_pairs", corpus.stem_pairs},
      {"synonym_pairs", corpus.synonym_pairs}, {"questions_sharing_a_word", corpus.shared_words}};
  // One store, written once with the stem index; the configurations differ in what recall
  // searches (the stem index is read only when stemming is on).
  tmcra::memory::EngineOptions options;
  options.path = dir + "/memory.db";
  options.start_worker = false;
  {
    auto engine = tmcra::memory::Engine::Open(options);
    if (!engine) return std::cerr << engine.error().ToString() << "\n", 1;
    for (size_t i = 0; i < corpus.sessions.size(); i += 100) {
      json items = json::array();
      for (size_t k = i; k < std::min(i + 100, corpus.sessions.size()); ++k) {
        items.push_back(corpus.sessions[k]);
      }
      auto r = (*engine)->IngestBatch("bench", {{"items", items}}, {});
      auto ran = (*engine)->RunPendingJobs();
      if (!r || !ran) {
        std::cerr << "ingest failed: " << (r ? ran.error().ToString() : r.error().ToString())
                  << "\n";
        return 1;
      }
    }
  }
  const Config configs[] = {
      {"lexical", "none", false}, {"stems", "auto", false}, {"stems+synonyms", "auto", true}};
  for (const Config& config : configs) {
    options.stem_language = config.stem_language;
    options.synonyms = config.synonyms;
    auto engine = tmcra::memory::Engine::Open(options);
    if (!engine) return std::cerr << engine.error().ToString() << "\n", 1;
    json sets;
    std::vector<double> latencies;
    for (const char* set : {"stem", "synonym", "control"}) {
      int asked = 0;
      int hits = 0;
      for (const Fact& f : corpus.facts) {
        const bool control = std::string(set) == "control";
        if (!control && f.set != set) continue;
        const auto start = std::chrono::steady_clock::now();
        auto r = (*engine)->Recall("bench", {{"query", control ? f.control : f.question}});
        latencies.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
        if (!r) return std::cerr << r.error().ToString() << "\n", 1;
        ++asked;
        hits += Hit(*r, f.session) ? 1 : 0;
      }
      sets[set] = {{"questions", asked},
                   {"evidence_hit_at_8", static_cast<double>(hits) / std::max(asked, 1)}};
    }
    std::sort(latencies.begin(), latencies.end());
    sets["recall_p50_ms"] = latencies[latencies.size() / 2];
    report["configurations"][config.name] = sets;
  }
  std::cout << report.dump() << "\n";
  return 0;
}
