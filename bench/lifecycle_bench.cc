// lifecycle_bench: the two C++ halves of the turn-lifecycle benchmark (bench/run_lifecycle.sh
// runs them together with bench/lifecycle_latency.mjs, which times the MCP calls).
//
//   lifecycle_bench floor    --file PATH [--iterations N] [--warmup W] [--payload BYTES]
//   lifecycle_bench delivery --dir DIR [--items N] [--recall-bytes B] [--timeout SECONDS]
//                            [--remote URL --key-file F --ca CA [--verify-store MEMORY_DB]]
//
// floor: the physical floor of a durable write on this disk. A fresh SQLite file opened through
//   base (WAL, synchronous=FULL, as memory.db and outbox.sqlite3 are), then N times
//   BEGIN IMMEDIATE; INSERT one row of BYTES; COMMIT, each timed (about one fdatasync of the WAL).
//
// delivery: background delivery throughput. Fills DIR/outbox.sqlite3 with N pending turn items
//   (one bulk transaction: setup, not timed) next to an empty embedded store DIR/memory.db, then
//   wires queue::DeliveryService + tools::MemoryApiSender + api::EmbeddedMemoryApi exactly as
//   src/app/app_wiring.cc does, starts background delivery and times it until every item is
//   succeeded (or dead-lettered). Checks afterwards that the store holds every message once.
//   --recall-bytes stores a prepared recall of about B bytes with each item, as a turn committed
//   after tmcra_turn_prepare has (the default 0 is an item as tmcra_ingest enqueues it).
//   --remote: the memory is a tmcra-memd (or any Memory API) over HTTPS instead: an
//   api::HttpMemoryApi with the options src/app/app_wiring.cc gives it in remote mode (service
//   mode, the default timeout and attempts, CA = --ca, the key read from --key-file, which must
//   not be readable by group or others; never from argv; no connection guard, which checks
//   settings this driver does not have). DIR then holds only the outbox. The store check reads
//   --verify-store (the server's memory.db, opened through the engine without its worker) when
//   given; without it only the outbox's counts are checked.
//
// Each prints one JSON object on stdout. Nothing here asserts a figure; see docs/benchmarks.md.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/canonical_json.h"
#include "base/process_owner.h"
#include "base/sqlite_db.h"
#include "bench/bench_stats.h"
#include "queue/delivery.h"
#include "queue/outbox.h"
#include "src/api/embedded_memory_api.h"
#include "src/api/http_memory_api.h"
#include "src/tools/outbox_sender.h"

using json = nlohmann::json;
using tmcra::bench::Clock;
using tmcra::bench::CpuSeconds;
using tmcra::bench::Median;
using tmcra::bench::Ms;
using tmcra::bench::Rank;

namespace {

int Fail(const std::string& what, const tmcra::Error& e) {
  std::cerr << what << ": " << e.ToString() << "\n";
  return 1;
}

std::map<std::string, std::string> Args(int argc, char** argv, int first) {
  std::map<std::string, std::string> out;
  for (int i = first; i + 1 < argc; i += 2) out[argv[i]] = argv[i + 1];
  return out;
}

std::string Get(const std::map<std::string, std::string>& args, const std::string& key,
                const std::string& fallback) {
  auto it = args.find(key);
  return it == args.end() ? fallback : it->second;
}

// ---- floor ---------------------------------------------------------------------------------

int Floor(const std::map<std::string, std::string>& args) {
  const std::string file = Get(args, "--file", "");
  const int iterations = std::stoi(Get(args, "--iterations", "300"));
  const int warmup = std::stoi(Get(args, "--warmup", "20"));
  const size_t payload_bytes = std::stoul(Get(args, "--payload", "1024"));
  if (file.empty()) {
    std::cerr << "floor: --file is required\n";
    return 2;
  }
  for (const std::string& f : {file, file + "-wal", file + "-shm"}) std::filesystem::remove(f);
  auto db = tmcra::db::Database::Open({file});  // WAL, synchronous=FULL
  if (!db) return Fail("open", db.error());
  if (auto s = (*db)->Exec("CREATE TABLE t(id INTEGER PRIMARY KEY, payload TEXT NOT NULL)"); !s) {
    return Fail("create", s.error());
  }
  auto mode = (*db)->Prepare("PRAGMA synchronous");
  if (!mode || !mode->Step()) return 1;
  const int64_t synchronous = mode->Int(0);  // 2 = FULL
  const std::string payload(payload_bytes, 'x');
  std::vector<double> samples;
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto start = Clock::now();
    auto tx = tmcra::db::Transaction::Immediate(**db);  // BEGIN IMMEDIATE
    if (!tx) return Fail("begin", tx.error());
    auto insert = (*db)->Prepare("INSERT INTO t(payload) VALUES(?)");
    if (!insert) return Fail("prepare", insert.error());
    insert->Bind(1, payload);
    if (auto s = insert->Run(); !s) return Fail("insert", s.error());
    if (auto s = tx->Commit(); !s) return Fail("commit", s.error());
    if (i >= warmup) samples.push_back(Ms(Clock::now() - start));
  }
  db->reset();
  for (const std::string& f : {file, file + "-wal", file + "-shm"}) std::filesystem::remove(f);
  std::cout << json{{"kind", "floor"},
                    {"file", file},
                    {"synchronous", synchronous},
                    {"payload_bytes", payload_bytes},
                    {"iterations", iterations},
                    {"p50_ms", Median(samples)},
                    {"p99_ms", Rank(samples, 99)},
                    {"min_ms", Rank(samples, 0)},
                    {"max_ms", Rank(samples, 100)},
                    {"samples_ms", samples}}
                   .dump()
            << std::endl;
  return 0;
}

// ---- delivery ------------------------------------------------------------------------------

std::string Filler(size_t i, size_t words) {
  static const char* kWords[] = {"the",      "backup", "window",    "cluster", "deploy",
                                 "region",   "owner",  "retention", "budget",  "release",
                                 "codename", "limit",  "service",   "gateway", "pipeline",
                                 "tenant",   "please", "remember"};
  std::string s;
  for (size_t w = 0; w < words; ++w) {
    if (!s.empty()) s += ' ';
    s += kWords[(i * 7 + w * 13) % std::size(kWords)];
  }
  return s + " #" + std::to_string(i) + ".";
}

// N pending items as tmcra_turn_commit stores them (two messages, per-message and request
// metadata), in one transaction: the outbox's own Enqueue commits each item durably (one fsync
// each), which would make the setup take minutes and is not what is measured.
tmcra::Status FillOutbox(const std::string& path, int items, size_t recall_bytes) {
  {
    auto created = tmcra::queue::Outbox::Open(path);  // the schema, exactly as the server has it
    if (!created) return created.error();
  }
  auto db = tmcra::db::Database::Open({path});
  if (!db) return db.error();
  auto tx = tmcra::db::Transaction::Immediate(**db);
  if (!tx) return tx.error();
  auto insert = (*db)->Prepare(
      "INSERT INTO ingest_queue(item_id, scope_name, session_id, messages_json, consistency, "
      "slow_policy, idempotency_key, metadata_json, agent_id, recall_receipt_json, state, "
      "attempts, created_at, updated_at, next_attempt_at) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, 'pending', 0, ?, ?, 0)");
  if (!insert) return insert.error();
  // A turn committed after tmcra_turn_prepare carries its prepared recall (tens of kB with
  // evidence); items enqueued by tmcra_ingest carry none.
  std::string recall;
  if (recall_bytes > 0) {
    json records = json::array();
    size_t size = 0;
    for (size_t r = 0; size < recall_bytes; ++r) {
      records.push_back({{"record_id", "rec_" + std::to_string(r)},
                         {"role", "user"},
                         {"content", Filler(r, 40)}});
      size += records.back().dump().size();
    }
    recall = tmcra::CanonicalJson(json{{"query_id", "q_bench"},
                                       {"scope_name", "bench"},
                                       {"evidence", {{"windows", {{{"records", records}}}}}}});
  }
  const json metadata{
      {"integration", "mcp"}, {"integration_version", "bench"}, {"scope_sharing", "shared"}};
  for (int i = 0; i < items; ++i) {
    const auto n = static_cast<size_t>(i);
    const std::string ts = tmcra::queue::NowIsoformat();
    const json messages =
        json::array({{{"message_id", "u" + std::to_string(i)},
                      {"role", "user"},
                      {"content", "User asks: " + Filler(n, 24 + n % 16)},
                      {"timestamp", "2026-11-30T00:00:00Z"},
                      {"metadata", {{"actor_role", "user"}}}},
                     {{"message_id", "a" + std::to_string(i)},
                      {"role", "assistant"},
                      {"content", "Assistant answers: " + Filler(n + 1, 40 + n % 32)},
                      {"timestamp", "2026-11-30T00:00:01Z"},
                      {"metadata", {{"actor_role", "assistant"}}}}});
    char item_id[64];
    std::snprintf(item_id, sizeof item_id, "mcp-item-bench%08d", i);
    insert->Bind(1, std::string(item_id))
        .Bind(2, "bench")
        .Bind(3, "bench-session-" + std::to_string(i / 20))
        .Bind(4, tmcra::CanonicalJson(messages))
        .Bind(5, "read_your_writes")
        .Bind(6, "auto")
        .Bind(7, "bench-delivery-key-" + std::to_string(i))
        .Bind(8, tmcra::CanonicalJson(metadata));
    if (recall.empty()) {
      insert->BindNull(9);
    } else {
      insert->Bind(9, recall);
    }
    insert->Bind(10, ts).Bind(11, ts);
    if (auto s = insert->Run(); !s) return s;
    insert->Reset();
  }
  return tx->Commit();
}

int Delivery(const std::map<std::string, std::string>& args) {
  const std::string dir = Get(args, "--dir", "");
  const int items = std::stoi(Get(args, "--items", "10000"));
  const double timeout = std::stod(Get(args, "--timeout", "900"));
  const size_t recall_bytes = std::stoul(Get(args, "--recall-bytes", "0"));
  if (dir.empty()) {
    std::cerr << "delivery: --dir is required\n";
    return 2;
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string outbox_path = dir + "/outbox.sqlite3";
  const auto fill_start = Clock::now();
  if (auto s = FillOutbox(outbox_path, items, recall_bytes); !s) {
    return Fail("fill the outbox", s.error());
  }
  const double fill_ms = Ms(Clock::now() - fill_start);

  // As src/app/app_wiring.cc wires them: embedded, or remote (HttpMemoryApi).
  const std::string remote = Get(args, "--remote", "");
  std::unique_ptr<tmcra::api::MemoryApi> memory_owner;
  if (remote.empty()) {
    tmcra::memory::EngineOptions engine;
    engine.path = dir + "/memory.db";
    memory_owner = std::make_unique<tmcra::api::EmbeddedMemoryApi>(std::move(engine));
  } else {
    std::string key;
    if (!tmcra::bench::ReadKeyFile(Get(args, "--key-file", ""), &key)) return 2;
    tmcra::api::HttpOptions http;  // the defaults are src/config's (timeout 60 s, 3 attempts)
    http.base_url = remote;
    http.api_key = std::move(key);
    http.local_mode = false;  // an https:// URL is service mode, as src/config decides
    http.ca_file = Get(args, "--ca", "");
    auto client = tmcra::api::HttpMemoryApi::Create(std::move(http));
    if (!client) return Fail("create the HTTPS client", client.error());
    memory_owner = std::move(*client);
  }
  tmcra::api::MemoryApi& memory = *memory_owner;
  // Embedded: opens the store. Remote: a TLS handshake with full verification (no request).
  if (auto stats = memory.Stats(); !stats) return Fail("open the memory", stats.error());
  tmcra::tools::MemoryApiSender sender(memory);
  tmcra::queue::DeliveryOptions options;
  options.path = outbox_path;
  options.owner = tmcra::NewProcessOwnerId();
  options.poll_parallelism = remote.empty() ? 1 : 4;  // as app_wiring.cc
  options.jobs_per_poll = remote.empty() ? 1 : tmcra::queue::kMaxJobsPerPoll;
  // app_wiring's gate allows every item without a captured memory-control policy; these
  // items have none.
  tmcra::queue::DeliveryService service(options, sender,
                                        [](const tmcra::queue::Item&) { return true; });
  // The clock's own connection, counting only the items not yet finished (a range of the state
  // index that shrinks as delivery goes on: counting every state, 10,000 index entries every
  // 20 ms, took a tenth of a CPU from the delivery it measures; Outbox::GetCounts also scans
  // the table for the oldest item and the last error). An item is pending, submitted, succeeded
  // or dead-lettered (the table's CHECK), so none unfinished means all finished.
  auto watcher = tmcra::db::Database::Open({outbox_path});
  if (!watcher) return Fail("open the outbox", watcher.error());
  auto count_states = (*watcher)->Prepare(
      "SELECT state, COUNT(*) FROM ingest_queue WHERE state IN ('pending', 'submitted') "
      "GROUP BY state");
  if (!count_states) return Fail("prepare", count_states.error());
  const auto read_counts = [&]() -> tmcra::Result<tmcra::queue::Counts> {
    tmcra::queue::Counts c;
    count_states->Reset();
    for (;;) {
      auto row = count_states->Step();
      if (!row) return row.error();
      if (!*row) return c;
      const std::string state = count_states->Text(0);
      const int64_t n = count_states->Int(1);
      if (state == tmcra::queue::kPending) c.pending = n;
      if (state == tmcra::queue::kSubmitted) c.submitted = n;
    }
  };

  const auto start = Clock::now();
  const double cpu_start = CpuSeconds();
  service.Start();
  double accepted_ms = -1;  // every item submitted (accepted by the memory)
  double done_ms = -1;      // every item succeeded or dead-lettered
  tmcra::queue::Counts counts;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto c = read_counts();
    if (!c) return Fail("counts", c.error());
    counts = *c;
    const double now = Ms(Clock::now() - start);
    if (accepted_ms < 0 && counts.pending == 0) accepted_ms = now;
    if (counts.pending == 0 && counts.submitted == 0) {
      done_ms = now;
      break;
    }
    if (now > timeout * 1000) break;
  }
  service.Stop();
  const double cpu_seconds = CpuSeconds() - cpu_start;  // delivery, plus the 20 ms polls
  if (auto full = tmcra::queue::Outbox::Open(outbox_path); full) {
    if (auto c = (*full)->GetCounts(); c) counts = *c;  // with the last error, if any
  }
  // The store's figures: the embedded store itself, or the server's file when it is given.
  tmcra::Result<json> stats = json(nullptr);
  if (remote.empty()) {
    stats = memory.Stats();
  } else if (const std::string verify = Get(args, "--verify-store", ""); !verify.empty()) {
    tmcra::memory::EngineOptions engine;
    engine.path = verify;
    engine.start_worker = false;
    tmcra::api::EmbeddedMemoryApi server_store(std::move(engine));
    stats = server_store.Stats();
  }
  if (!stats) return Fail("stats", stats.error());
  const json report{
      {"kind", "delivery"},
      {"memory", remote.empty() ? json("embedded") : json(memory.Describe())},
      {"items", items},
      {"messages_per_item", 2},
      {"recall_bytes_per_item", recall_bytes},
      {"fill_ms", fill_ms},
      {"cpu_seconds", cpu_seconds},
      {"timed_out", done_ms < 0},
      {"accepted_seconds", accepted_ms / 1000},
      {"delivered_seconds", done_ms / 1000},
      {"accepted_items_per_second", accepted_ms > 0 ? items / (accepted_ms / 1000) : 0},
      {"delivered_items_per_second", done_ms > 0 ? items / (done_ms / 1000) : 0},
      {"succeeded", counts.succeeded},
      {"dead_letter", counts.dead_letter},
      {"last_error", counts.last_error ? json(*counts.last_error) : json(nullptr)},
      {"store", *stats},
  };
  std::cout << report.dump() << std::endl;
  const bool complete = done_ms >= 0 && counts.succeeded == items &&
                        (stats->is_null() || (*stats)["records"] == 2 * items);
  if (!complete) std::cerr << "delivery: not every item was delivered exactly once\n";
  return complete ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto args = Args(argc, argv, 2);
  if (mode == "floor") return Floor(args);
  if (mode == "delivery") return Delivery(args);
  std::cerr << "usage: lifecycle_bench floor --file PATH [--iterations N] [--warmup W] "
               "[--payload BYTES]\n"
               "       lifecycle_bench delivery --dir DIR [--items N] [--recall-bytes B] "
               "[--timeout SECONDS]\n"
               "                                [--remote URL --key-file F --ca CA "
               "[--verify-store MEMORY_DB]]\n";
  return 2;
}
