// memory_bench: the memory engine on a synthetic conversation corpus.
//
//   memory_bench --messages N [--dir DIR] [--questions Q] [--batch B] [--seed S]
//                [--export FILE] [--language en|ja] [--reuse 1]
//                [--stem-language auto|none|SNOWBALL] [--synonyms 0|1]
//
// Generates sessions of user/assistant turns; one user turn per session plants a fact
// ("The backup window for cluster tango-417 is 03:40 UTC."), and a paraphrased question that
// shares words with it is kept ("When is the backup window of cluster tango-417?"). Reports, as
// one JSON object on stdout:
//   ingest throughput (messages/s: ingest calls plus the jobs that index them, in batches of B),
//   recall latency p50/p99 over Q questions, store size, peak RSS, and evidence-hit@8 (a
//   returned window holds the planted fact's record).
// --export writes the corpus and questions as JSON lines, for running another server on them.
// --reuse 1 opens the store an earlier run with the same options left in --dir, ingests nothing,
// and times the work left for the worker (reuse_pending_seconds: e.g. the CJK index's back-fill
// after a schema migration).
// --language ja writes the corpus in Japanese, without spaces: filler of two-kanji words joined
// by particles, facts ("覚えておいてください:計画北川の期限はカモメ-4821です。") and questions
// that share only two-character words with them, in another order and with other particles
// ("北川計画における期限を教えて?"): the case the CJK index is for (memory/cjk.h). It also
// times queries of lone Han characters (lone_han_recall_*: half of Q, one character or four).
// --stem-language none --synonyms 0 runs the engine without the stem index and query expansion
// (memory/stems.h, memory/expansion.h), for the side-by-side of their cost.
// Nothing here asserts a figure; see docs/benchmarks.md.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "memory/engine.h"

using json = nlohmann::json;

namespace {

struct Options {
  long messages = 10000;
  std::string dir;
  int questions = 200;
  int batch = 1000;
  unsigned seed = 42;
  std::string export_file;
  bool reuse = false;  // keep an existing store from an earlier run with the same seed
  bool japanese = false;
  std::string stem_language = "auto";
  bool synonyms = true;
};

struct Fact {
  std::string session;
  std::string message_id;
  std::string statement;
  std::string question;
  std::string value;
};

const char* kSyllables[] = {"ka", "lo", "mi",  "ren", "ta",  "vo", "shi", "pa", "dor", "el",
                            "qu", "ni", "zan", "bu",  "tor", "ve", "ru",  "sa", "fen", "gi"};
const char* kAttributes[][2] = {
    {"backup window", "When is the backup window of"},
    {"on-call owner", "Who is the on-call owner for"},
    {"deploy region", "Which deploy region does"},
    {"database port", "What database port does"},
    {"retention period", "How long is the retention period of"},
    {"release codename", "What release codename was chosen for"},
    {"budget limit", "What is the budget limit of"},
    {"api rate limit", "What api rate limit applies to"},
};
const char* kKinds[] = {"cluster", "service", "project", "pipeline", "tenant", "gateway"};

const char* kKanji[] = {
    "東", "京", "大", "阪", "北", "南", "西", "山", "川", "田", "中", "本", "日", "月", "火",
    "水", "木", "金", "土", "上", "下", "左", "右", "前", "後", "時", "間", "分", "年", "国",
    "人", "会", "社", "電", "気", "車", "道", "駅", "店", "学", "校", "先", "生", "新", "古",
    "長", "高", "安", "白", "黒", "赤", "青", "花", "海", "空", "雨", "雪", "風", "森", "林",
    "石", "村", "町", "市", "県", "区", "部", "課", "室", "所", "場", "物", "品", "食", "飲",
    "読", "書", "話", "語", "文", "字", "数", "計", "画", "開", "発", "運", "用", "管", "理",
    "設", "定", "保", "存", "期", "限", "担", "当", "地", "域", "番", "号", "予", "算", "名",
    "称", "記", "録", "方", "法", "問", "題", "答", "案", "色", "形", "音", "楽", "図", "表"};
const char* kParticles[] = {"の", "は", "を", "に", "で", "が", "と", "も", "から", "まで"};
const char* kKana[] = {"カ", "モ", "メ", "サ", "ク", "ラ", "ト", "リ", "ノ", "ハ", "ネ", "ミ"};
const char* kAttributesJa[] = {"期限", "担当", "地域", "番号", "予算", "名称", "記録", "方法"};
const char* kKindsJa[] = {"計画", "部署", "施設", "回線", "系統", "窓口"};

class Generator {
 public:
  Generator(unsigned seed, bool japanese) : rng_(seed), japanese_(japanese) {
    for (int i = 0; i < 3000; ++i) {
      vocabulary_.push_back(japanese ? Kanji2() : Word(2 + static_cast<int>(rng_() % 3)));
    }
  }

  std::string Kanji2() {
    return std::string(kKanji[rng_() % std::size(kKanji)]) + kKanji[rng_() % std::size(kKanji)];
  }

  std::string Word(int syllables) {
    std::string w;
    for (int i = 0; i < syllables; ++i) w += kSyllables[rng_() % std::size(kSyllables)];
    return w;
  }

  std::string Filler(int words) {
    std::string s;
    if (japanese_) {
      for (int i = 0; i < words; ++i) {
        s += vocabulary_[Zipf()];
        s += i + 1 < words ? kParticles[rng_() % std::size(kParticles)] : "です";
      }
      return s + "。";
    }
    for (int i = 0; i < words; ++i) {
      if (!s.empty()) s += ' ';
      s += vocabulary_[Zipf()];
    }
    s += '.';
    return s;
  }

  Fact MakeFact(const std::string& session, const std::string& message_id) {
    if (japanese_) return MakeFactJa(session, message_id);
    const auto& attr = kAttributes[rng_() % std::size(kAttributes)];
    const std::string entity = std::string(kKinds[rng_() % std::size(kKinds)]) + " " + Word(2) +
                               "-" + std::to_string(100 + rng_() % 900);
    const std::string value = Word(3) + "-" + std::to_string(rng_() % 10000);
    Fact f;
    f.session = session;
    f.message_id = message_id;
    f.value = value;
    f.statement =
        "Please remember: the " + std::string(attr[0]) + " for " + entity + " is " + value + ".";
    f.question = std::string(attr[1]) + " " + entity + "?";
    return f;
  }

  Fact MakeFactJa(const std::string& session, const std::string& message_id) {
    const std::string attr = kAttributesJa[rng_() % std::size(kAttributesJa)];
    const std::string kind = kKindsJa[rng_() % std::size(kKindsJa)];
    const std::string entity = Kanji2();
    std::string value;
    for (int i = 0; i < 3; ++i) value += kKana[rng_() % std::size(kKana)];
    value += "-" + std::to_string(rng_() % 10000);
    Fact f;
    f.session = session;
    f.message_id = message_id;
    f.value = value;
    f.statement = "覚えておいてください:" + kind + entity + "の" + attr + "は" + value + "です。";
    f.question = entity + kind + "における" + attr + "を教えて?";
    return f;
  }

  std::mt19937& rng() { return rng_; }

 private:
  size_t Zipf() {
    // A skewed pick: common words often, rare words seldom, like real text.
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    return std::min(
        vocabulary_.size() - 1,
        static_cast<size_t>(std::pow(u, 3.0) * static_cast<double>(vocabulary_.size())));
  }

  std::mt19937 rng_;
  bool japanese_ = false;
  std::vector<std::string> vocabulary_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

int64_t FileBytes(const std::string& path) {
  int64_t total = 0;
  for (const std::string& f : {path, path + "-wal"}) {
    struct stat st {};
    if (stat(f.c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

std::string Timestamp(long index) {
  // One message per 30 s from 2026-01-01, so sessions are ordered in time.
  const long seconds = 1767225600L + index * 30;
  const time_t t = seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--messages")
      o.messages = std::stol(v);
    else if (k == "--dir")
      o.dir = v;
    else if (k == "--questions")
      o.questions = std::stoi(v);
    else if (k == "--batch")
      o.batch = std::stoi(v);
    else if (k == "--seed")
      o.seed = static_cast<unsigned>(std::stoul(v));
    else if (k == "--export")
      o.export_file = v;
    else if (k == "--reuse")
      o.reuse = v == "1";
    else if (k == "--language" && (v == "en" || v == "ja"))
      o.japanese = v == "ja";
    else if (k == "--stem-language")
      o.stem_language = v;
    else if (k == "--synonyms")
      o.synonyms = v == "1";
    else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  if (o.dir.empty()) o.dir = "/tmp/tmcra-memory-bench-" + std::to_string(o.messages);
  if (!o.reuse) std::filesystem::remove_all(o.dir);
  const std::string path = o.dir + "/memory.db";

  tmcra::memory::EngineOptions options;
  options.path = path;
  options.start_worker = false;  // jobs run in the timed loop below, on this thread
  options.stem_language = o.stem_language;
  options.synonyms = o.synonyms;
  auto opened = tmcra::memory::Engine::Open(options);
  if (!opened) {
    std::cerr << opened.error().ToString() << "\n";
    return 1;
  }
  auto& engine = **opened;

  Generator gen(o.seed, o.japanese);
  std::vector<Fact> facts;
  std::ofstream exported;
  if (!o.export_file.empty()) exported.open(o.export_file);
  constexpr int kTurnsPerSession = 20;
  const std::string scope = "bench";
  long produced = 0;
  long session_index = 0;
  double ingest_seconds = 0;
  // Each session is one ingest item; items go in batches of about B messages
  // (POST /ingest/batch: at most 100 items), and the jobs that index them run right after.
  json items = json::array();
  size_t items_messages = 0;
  int key_counter = 0;
  const auto flush = [&]() -> bool {
    if (items.empty()) return true;
    if (o.reuse) {
      items = json::array();
      items_messages = 0;
      return true;
    }
    tmcra::memory::IngestContext context;
    const auto start = std::chrono::steady_clock::now();
    auto r = engine.IngestBatch(scope, {{"items", items}}, context);
    auto ran = engine.RunPendingJobs();
    ingest_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    items = json::array();
    items_messages = 0;
    if (!r || !ran) {
      std::cerr << "ingest failed: " << (r ? ran.error().ToString() : r.error().ToString()) << "\n";
      return false;
    }
    return true;
  };
  while (produced < o.messages) {
    const std::string session = "session-" + std::to_string(session_index);
    const int fact_turn = static_cast<int>(gen.rng()() % (kTurnsPerSession / 2)) * 2;
    json messages = json::array();
    for (int t = 0; t < kTurnsPerSession && produced < o.messages; ++t, ++produced) {
      std::string id = "m";  // (not "m" + to_string: g++ 12 warns falsely, -Wrestrict)
      id += std::to_string(t);
      std::string text;
      if (t == fact_turn) {
        facts.push_back(gen.MakeFact(session, id));
        text = facts.back().statement;
      } else {
        text = gen.Filler(8 + static_cast<int>(gen.rng()() % 24));
      }
      const json message{{"message_id", id},
                         {"role", t % 2 == 0 ? "user" : "assistant"},
                         {"content", text},
                         {"timestamp", Timestamp(produced)}};
      if (exported) exported << json{{"session_id", session}, {"message", message}}.dump() << "\n";
      messages.push_back(message);
    }
    items_messages += messages.size();
    items.push_back({{"session_id", session},
                     {"messages", std::move(messages)},
                     {"idempotency_key", "bench-key-" + std::to_string(key_counter++)}});
    if (items_messages >= static_cast<size_t>(o.batch) || items.size() >= 100) {
      if (!flush()) return 1;
    }
    ++session_index;
  }
  if (!flush()) return 1;
  // A reused store may hold work left for the worker (e.g. the CJK index's back-fill after a
  // schema migration): timed apart, as the worker would do it in the background.
  double pending_seconds = 0;
  if (o.reuse) {
    const auto pending_start = std::chrono::steady_clock::now();
    auto pending = engine.RunPendingJobs();
    pending_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_start).count();
    if (!pending) {
      std::cerr << "pending work failed: " << pending.error().ToString() << "\n";
      return 1;
    }
  }
  // The worker of a running engine compacts the indexes once it has no job left
  // (memory/compaction.h); this engine has no worker, so it is done here, timed apart.
  const auto compact_start = std::chrono::steady_clock::now();
  auto compacted = engine.CompactIndexes();
  const double compact_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compact_start).count();
  if (!compacted) {
    std::cerr << "compaction failed: " << compacted.error().ToString() << "\n";
    return 1;
  }

  // Questions: a fixed sample of the planted facts.
  std::vector<Fact> sample = facts;
  std::shuffle(sample.begin(), sample.end(), gen.rng());
  if (static_cast<int>(sample.size()) > o.questions)
    sample.resize(static_cast<size_t>(o.questions));
  if (exported) {
    for (const auto& f : sample) {
      exported << json{{"question", f.question},
                       {"answer", f.value},
                       {"session_id", f.session},
                       {"message_id", f.message_id}}
                      .dump()
               << "\n";
    }
  }
  std::vector<double> latencies;
  int hits = 0;
  for (const auto& f : sample) {
    const auto start = std::chrono::steady_clock::now();
    auto r = engine.Recall(scope, {{"query", f.question}, {"max_windows", 8}});
    latencies.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (!r) {
      std::cerr << "recall failed: " << r.error().ToString() << "\n";
      return 1;
    }
    bool hit = false;
    for (const auto& w : (*r)["evidence"]["windows"]) {
      for (const auto& rec : w["records"]) {
        hit = hit || (rec["session_id"] == f.session && rec["message_id"] == f.message_id);
      }
    }
    hits += hit ? 1 : 0;
  }
  // Japanese only: queries made of lone Han characters, which the engine searches as prefixes
  // ("日"*): one character, or four separated by spaces, drawn from the corpus's own text (so a
  // common character comes up as often as it is common). Latency only; no hit is defined.
  std::vector<double> lone_latencies;
  if (o.japanese) {
    std::mt19937 lone_rng(o.seed + 1);
    const auto draw = [&] {
      for (;;) {
        const std::string text = gen.Filler(8);
        const size_t at = (lone_rng() % (text.size() / 3)) * 3;
        const auto lead = static_cast<unsigned char>(text[at]);
        if (lead >= 0xE4 && lead <= 0xE9) return text.substr(at, 3);  // U+4E00..U+9FFF
      }
    };
    for (int q = 0; q < 2 * o.questions / 4; ++q) {
      std::string query = draw();
      if (q % 2 == 1) {
        for (int k = 0; k < 3; ++k) query += " " + draw();
      }
      const auto start = std::chrono::steady_clock::now();
      auto r = engine.Recall(scope, {{"query", query}, {"max_windows", 8}});
      lone_latencies.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      if (!r) {
        std::cerr << "recall failed: " << r.error().ToString() << "\n";
        return 1;
      }
    }
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  json report{
      {"messages", o.messages},
      {"stem_language", o.stem_language},
      {"synonyms", o.synonyms},
      {"language", o.japanese ? "ja" : "en"},
      {"sessions", session_index},
      {"batch", o.batch},
      {"ingest_seconds", ingest_seconds},
      {"ingest_messages_per_second", static_cast<double>(o.messages) / ingest_seconds},
      {"compact_seconds", compact_seconds},
      {"reuse_pending_seconds", pending_seconds},
      {"compact_steps", *compacted},
      {"questions", sample.size()},
      {"recall_p50_ms", Percentile(latencies, 0.50)},
      {"recall_p99_ms", Percentile(latencies, 0.99)},
      {"recall_max_ms", Percentile(latencies, 1.0)},
      {"evidence_hit_at_8",
       sample.empty() ? 0.0 : static_cast<double>(hits) / static_cast<double>(sample.size())},
      {"store_bytes", FileBytes(path)},
      {"peak_rss_kib", usage.ru_maxrss},
  };
  if (!lone_latencies.empty()) {
    report["lone_han_queries"] = lone_latencies.size();
    report["lone_han_recall_p50_ms"] = Percentile(lone_latencies, 0.50);
    report["lone_han_recall_p99_ms"] = Percentile(lone_latencies, 0.99);
  }
  std::cout << report.dump() << std::endl;
  return 0;
}
