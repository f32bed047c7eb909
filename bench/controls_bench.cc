// controls_bench: what the memory-controls state costs a tool call as sessions accumulate.
//
//   controls_bench [--sessions 100,1000,10000] [--reads 50] [--dir DIR]
//
// The state file gains one row per session that ever took a turn (rows are never dropped, as in
// TMCRA), so a long-used install reads a large file on every tool call. For each size N this
// writes a state file of N session rows (the contract's shape: sha256(session_id) keys, mode,
// generation, taskId, currentTurnHash) and times, over `reads` rounds:
//   * recall_ms — ControlStore::ForRecall, what tmcra_recall reads (one read of the file:
//                 policy, task hand-off and budget);
//   * two_reads_ms — GetPolicy + BudgetChars, the two reads tmcra_recall made before ForRecall
//                 (and tmcra_turn_prepare still makes around its write);
//   * parse_ms  — ParseOrderedJsonLenient on the file's text (what a read parses with);
//   * nlohmann_parse_ms — nlohmann::ordered_json::parse on the same text, what a read used
//                 before (its inserts look each key up member by member: quadratic).
// Every sample is the median of `reads`.
// Prints one JSON object per size on stdout. Nothing is timed in the test suite.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "base/sha256.h"
#include "bench/bench_stats.h"
#include "src/controls/memory_controls.h"

namespace {

using tmcra::bench::Clock;
using tmcra::bench::Median;
using tmcra::bench::Ms;
using ojson = nlohmann::ordered_json;

std::vector<int> ParseSizes(const std::string& list) {
  std::vector<int> sizes;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) sizes.push_back(std::stoi(item));
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes_arg = "100,1000,10000";
  int reads = 50;
  std::string dir;
  if (argc % 2 == 0) {
    std::cerr << "usage: controls_bench [--sessions 100,1000,10000] [--reads 50] [--dir DIR]\n";
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--sessions")
      sizes_arg = argv[i + 1];
    else if (a == "--reads")
      reads = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::cerr << "usage: controls_bench [--sessions 100,1000,10000] [--reads 50] [--dir DIR]\n";
      return 2;
    }
  }
  bool remove_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/controls_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
    remove_dir = true;
  }
  std::filesystem::create_directories(dir);
  tmcra::controls::ControlStore store(dir);
  const std::string key = tmcra::Sha256Hex("controls_bench");
  for (const int n : ParseSizes(sizes_arg)) {
    ojson state{{"schemaVersion", 1},
                {"sessions", ojson::object()},
                {"tasks", ojson::object()},
                {"recent", ojson::array()},
                {"budgetChars", 12000}};
    auto& sessions = state["sessions"].get_ref<ojson::object_t&>();
    for (int s = 0; s < n; ++s) {
      const std::string turn = tmcra::Sha256Hex("turn-" + std::to_string(s));
      sessions.emplace_back(tmcra::Sha256Hex("session-" + std::to_string(s)),
                            ojson{{"mode", "normal"},
                                  {"generation", 1},
                                  {"taskId", nullptr},
                                  {"currentTurnHash", turn}});
    }
    const std::string text = state.dump();
    std::ofstream(dir + "/" + key + ".json") << text;
    // A recall from the newest session (its row is the last one).
    const std::string session = "session-" + std::to_string(n - 1);
    std::vector<double> recall;
    std::vector<double> two_reads;
    std::vector<double> parse;
    std::vector<double> nlohmann_parse;
    for (int r = 0; r < reads; ++r) {
      auto t00 = Clock::now();
      auto controls = store.ForRecall(key, session, "what did we decide about the schema?");
      auto t0 = Clock::now();
      auto policy = store.GetPolicy(key, session);
      auto budget = store.BudgetChars(key);
      auto t1 = Clock::now();
      if (!controls || !policy || !budget) {
        std::cerr << "controls_bench: reading the state failed\n";
        return 1;
      }
      const ojson ours = tmcra::ParseOrderedJsonLenient(text);
      auto t2 = Clock::now();
      const ojson theirs = ojson::parse(text, nullptr, false);
      auto t3 = Clock::now();
      if (ours.size() != theirs.size()) return 1;
      recall.push_back(Ms(t0 - t00));
      two_reads.push_back(Ms(t1 - t0));
      parse.push_back(Ms(t2 - t1));
      nlohmann_parse.push_back(Ms(t3 - t2));
    }
    std::cout << nlohmann::json{{"sessions", n},
                                {"state_bytes", text.size()},
                                {"reads", reads},
                                {"recall_ms_p50", Median(recall)},
                                {"two_reads_ms_p50", Median(two_reads)},
                                {"parse_ms_p50", Median(parse)},
                                {"nlohmann_parse_ms_p50", Median(nlohmann_parse)}}
                     .dump()
              << "\n";
  }
  if (remove_dir) std::filesystem::remove_all(dir);
  return 0;
}
