// Vectors at scale (docs/recall.md "Vectors", docs/benchmarks.md "Vectors"): what 384-dimension
// vectors cost in store and memory per N messages, and recall latency through the HNSW graph
// against exact search over the same vectors, in one run.
//
//   vector_bench --messages 100000 --dims 384 --queries 300 --dir DIR
//
// The embedder is the benchmark's own, in process and instant (so the figures are the engine's,
// not a model's): each message belongs to one of 1000 topics, and its vector is the topic's
// direction plus noise of its own, as texts on one subject cluster in a real model's space.
// A query is a topic's direction plus fresh noise. Steps, one JSON line at the end:
//   1. ingest N messages (no embedder): store bytes before vectors;
//   2. embed them all through the engine's embedding thread: store bytes after, throughput;
//   3. recall with exact vector search (threshold above N) and with the graph (built first,
//      its build time reported), alternating three rounds of `queries` each: p50/p95, and how
//      many of the exact search's vector hits the graph's hits hold (recall@20);
//   4. the process's resident memory before and after the vectors were loaded and graphed.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "memory/engine.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kTopics = 1000;

struct Options {
  long messages = 100000;
  size_t dims = 384;
  int queries = 300;
  std::string dir = "/tmp/tmcra-vector-bench";
};

std::vector<float> Direction(uint64_t seed, size_t dims) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(dims);
  for (auto& x : v) x = normal(rng);
  return v;
}

// "topic T item I": the topic's direction plus noise seeded by the whole text.
class TopicEmbedder final : public tmcra::memory::Embedder {
 public:
  explicit TopicEmbedder(size_t dims) : dims_(dims) {}
  const std::string& model() const override { return model_; }
  tmcra::Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts,
                                                       std::chrono::milliseconds,
                                                       const std::atomic<bool>*) override {
    std::vector<std::vector<float>> out;
    for (const auto& t : texts) {
      const size_t at =
          t.find("topic ") != std::string::npos ? t.find("topic ") + 6 : t.find("subject ") + 8;
      const uint64_t topic = std::strtoull(t.c_str() + at, nullptr, 10);
      std::vector<float> v = Direction(topic + 1, dims_);
      const auto noise = Direction(std::hash<std::string>{}(t), dims_);
      for (size_t i = 0; i < dims_; ++i) v[i] += 0.8f * noise[i];
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  std::string model_ = "topic-bench";
  size_t dims_;
};

long RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

std::unique_ptr<tmcra::memory::Engine> Open(const std::string& path,
                                            std::shared_ptr<tmcra::memory::Embedder> embedder,
                                            size_t ann_threshold) {
  tmcra::memory::EngineOptions o;
  o.path = path;
  o.start_worker = false;
  o.embedder = std::move(embedder);
  o.embed_start_ms = 0;
  o.embed_batch = 64;
  o.ann_threshold = ann_threshold;
  o.vector_min_similarity = -1;  // every query gets its 20 nearest
  auto e = tmcra::memory::Engine::Open(o);
  if (!e) {
    std::cerr << e.error().ToString() << "\n";
    std::exit(1);
  }
  return std::move(*e);
}

void Ingest(tmcra::memory::Engine& e, long messages) {
  json items = json::array();
  int key = 0;
  const auto flush = [&] {
    if (items.empty()) return;
    if (!e.IngestBatch("bench", {{"items", items}}, {})) std::exit(1);
    if (!e.RunPendingJobs()) std::exit(1);
    items = json::array();
  };
  for (long i = 0; i < messages; i += 20) {
    json m = json::array();
    for (long j = i; j < std::min(messages, i + 20); ++j) {
      m.push_back({{"message_id", "m" + std::to_string(j)},
                   {"role", "user"},
                   {"content", "note about topic " + std::to_string(j % kTopics) + " item " +
                                   std::to_string(j)},
                   {"timestamp", "2026-01-01T00:00:00Z"}});
    }
    items.push_back({{"session_id", "s" + std::to_string(i / 20)},
                     {"messages", m},
                     {"idempotency_key", "bench-key-" + std::to_string(++key)}});
    if (items.size() == 100) flush();
  }
  flush();
}

json Embeddings(tmcra::memory::Engine& e) { return e.Stats()->ToJson()["embeddings"]; }

int64_t LiveBytes(tmcra::memory::Engine& e) { return e.Stats()->live_bytes; }

// Waits until `done` holds of the embedding figures; returns the seconds waited.
double WaitFor(tmcra::memory::Engine& e, const std::function<bool(const json&)>& done) {
  const auto start = Clock::now();
  while (!done(Embeddings(e))) std::this_thread::sleep_for(std::chrono::seconds(1));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Timed {
  std::vector<double> ms;
  std::vector<std::set<std::string>> hits;
};

// Each query: a topic's direction with fresh noise, as text the embedder reads ("topic T q K").
void RunQueries(tmcra::memory::Engine& e, int queries, int round, Timed& out) {
  for (int q = 0; q < queries; ++q) {
    const std::string query =
        "subject " + std::to_string((q * 37) % kTopics) + " ask" + std::to_string(q);
    const auto start = Clock::now();
    auto r = e.Recall("bench", {{"query", query}, {"debug", true}});
    out.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!r) std::exit(1);
    std::set<std::string> ids;
    const json similarity =
        (*r)["debug"].value("vector", json::object()).value("similarity", json::object());
    for (const auto& [id, s] : similarity.items()) ids.insert(id);
    if (round == 0) out.hits.push_back(std::move(ids));
  }
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--messages") o.messages = std::atol(argv[i + 1]);
    if (a == "--dims") o.dims = static_cast<size_t>(std::atol(argv[i + 1]));
    if (a == "--queries") o.queries = std::atoi(argv[i + 1]);
    if (a == "--dir") o.dir = argv[i + 1];
  }
  std::filesystem::remove_all(o.dir);
  std::filesystem::create_directories(o.dir);
  const std::string path = o.dir + "/memory.db";
  json out{{"bench", "vector_bench"}, {"messages", o.messages}, {"dims", o.dims}};
  {
    auto plain = Open(path, nullptr, 0);
    Ingest(*plain, o.messages);
    out["store_bytes_without_vectors"] = LiveBytes(*plain);
  }
  Timed lexical;  // the floor: the same queries without vectors
  {
    auto plain = Open(path, nullptr, 0);
    RunQueries(*plain, o.queries, 1, lexical);
  }
  auto embedder = std::make_shared<TopicEmbedder>(o.dims);
  const long rss_before = RssKb();
  auto exact = Open(path, embedder, static_cast<size_t>(o.messages) * 10);
  out["embed_seconds"] = WaitFor(*exact, [](const json& f) { return f["backlog"] == 0; });
  out["store_bytes_with_vectors"] = LiveBytes(*exact);
  auto graphed = Open(path, embedder, 1000);
  Timed warm;
  RunQueries(*exact, 1, 1, warm);    // loads the exact copy
  RunQueries(*graphed, 1, 1, warm);  // loads the graph's copy; the thread builds the graph
  const long rss_loaded = RssKb();
  out["graph_build_seconds"] =
      WaitFor(*graphed, [&](const json& f) { return f["graphed"] == o.messages; });
  out["rss_kb_before_vectors"] = rss_before;
  out["rss_kb_two_copies_loaded"] = rss_loaded;
  out["rss_kb_with_graph"] = RssKb();
  Timed a;
  Timed b;
  for (int round = 0; round < 3; ++round) {
    RunQueries(*exact, o.queries, round, a);
    RunQueries(*graphed, o.queries, round, b);
  }
  double overlap = 0;
  for (size_t q = 0; q < a.hits.size(); ++q) {
    size_t common = 0;
    for (const auto& id : b.hits[q]) common += a.hits[q].count(id);
    overlap += a.hits[q].empty() ? 1.0 : double(common) / double(a.hits[q].size());
  }
  out["lexical_p50_ms"] = Percentile(lexical.ms, 50);
  out["exact_p50_ms"] = Percentile(a.ms, 50);
  out["exact_p95_ms"] = Percentile(a.ms, 95);
  out["graph_p50_ms"] = Percentile(b.ms, 50);
  out["graph_p95_ms"] = Percentile(b.ms, 95);
  out["graph_recall_at_20"] = overlap / double(a.hits.size());
  std::cout << out.dump() << std::endl;
  return 0;
}
