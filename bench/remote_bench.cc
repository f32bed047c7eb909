// remote_bench: the plain-libcurl halves of the remote-memory benchmark (bench/run_remote.sh
// runs them with bench/remote_latency.mjs, which times tmcra-mcp's tools against the floor).
//
//   remote_bench body       --query TEXT
//   remote_bench floor      --url URL --key-file F --ca CA --scope S --questions FILE
//                           [--iterations N] [--warmup W] [--offset K] [--pause-us P]
//   remote_bench throughput --url URL --key-file F --ca CA --scope S --questions FILE
//                           [--clients C] [--seconds T] [--warmup W] [--write-every-ms N]
//
// body: prints the recall request body tmcra_recall sends a tmcra-memd for TEXT
//   (src/tools/memory_tools.cc, RecallForTool: {"query", "evidence_mode": "auto",
//   "max_windows": 8}, plus "response_projection": "prompt_only" once an answer has listed
//   tmcra-memd's prompt-only-snapshot feature,
//   serialised as HttpMemoryApi's BodyText does: nlohmann's compact dump, keys sorted).
//   remote_latency.mjs compares it byte for byte with what a real tmcra-mcp sends through a
//   logging proxy.
//
// floor: the cost of one recall over HTTPS with nothing in between. One easy handle reused
//   (keep-alive), HTTP/1.1, TLS 1.2+ verified against CA, the same request line, headers and
//   body as HttpMemoryApi sends (Authorization, X-TMCRA-Client-Platform: mcp, Content-Type,
//   Accept-Encoding: gzip, no Expect, no TLS session cache), N timed POST
//   /v1/scopes/S/recall: perform() issued -> whole (decoded) body received. Question i of the
//   timed loop is questions[(K + i) % Q]. The answer is checked for status 200, not parsed.
//   With --pause-us P, the driver sleeps P microseconds before each request, outside the clock:
//   tmcra-memd then waits between requests as long as it does behind a slower client (a
//   diagnostic of what an idle gap costs its next answer; remote_latency.mjs, "paced floor").
//
// throughput: C threads, each with its own keep-alive handle, POST recalls for T seconds after
//   W untimed warm-up requests each (so every connection is open when the clock starts);
//   thread t asks questions[(t * 7919 + i) % Q]. Reports recalls/s (answers with status 200
//   divided by the timed window), per-request latency p50/p99 and every non-200 status. With
//   --write-every-ms N, one more thread POSTs /v1/scopes/S/ingest every N ms during the window
//   (one user message per session, a question of the set as its text, a new Idempotency-Key
//   each), as a live server takes turns while it answers recalls; its statuses are reported.
//
// The API key is read from F, which must not be readable by group or others; never from argv.
// Each mode prints one JSON object on stdout. Nothing here asserts a figure.
#include <curl/curl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_stats.h"
#include "src/common/version.h"

using json = nlohmann::json;
using tmcra::bench::Clock;
using tmcra::bench::CpuSeconds;
using tmcra::bench::Median;
using tmcra::bench::Ms;
using tmcra::bench::Rank;

namespace {

std::map<std::string, std::string> Args(int argc, char** argv, int first) {
  std::map<std::string, std::string> out;
  for (int i = first; i + 1 < argc; i += 2) out[argv[i]] = argv[i + 1];
  return out;
}

std::string Get(const std::map<std::string, std::string>& args, const std::string& key,
                const std::string& fallback = "") {
  auto it = args.find(key);
  return it == args.end() ? fallback : it->second;
}

// The body tmcra_recall sends a tmcra-memd (RecallForTool, then HttpMemoryApi::Recall, which
// asks for the prompt evidence only once an answer of the server has said it keeps the
// snapshot: the warm-up calls see to that).
std::string RecallBody(const std::string& query) {
  const json body{{"query", query},
                  {"evidence_mode", "auto"},
                  {"max_windows", 8},
                  {"response_projection", "prompt_only"}};
  return body.dump(-1, ' ', false, json::error_handler_t::strict);
}

bool ReadQuestions(const std::string& path, std::vector<std::string>* out) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("question") && j["question"].is_string()) {
      out->push_back(j["question"].get<std::string>());
    }
  }
  if (out->empty()) std::cerr << "--questions " << path << ": no {\"question\": ...} lines\n";
  return !out->empty();
}

size_t OnBody(char* data, size_t size, size_t count, void* user) noexcept {
  try {
    static_cast<std::string*>(user)->append(data, size * count);
  } catch (...) {
    return 0;
  }
  return size * count;
}

struct Target {
  std::string url;         // https://host:port/v1/scopes/<scope>/recall
  std::string ingest_url;  // https://host:port/v1/scopes/<scope>/ingest
  std::string authorization;
  std::string ca;
};

// One keep-alive client, configured as HttpMemoryApi configures its handles; it POSTs to
// `url` (the recall endpoint unless given).
class Client {
 public:
  explicit Client(const Target& target, const std::string& url = {})
      : handle_(curl_easy_init()),
        lines_{target.authorization, "X-TMCRA-Client-Platform: mcp",
               "Content-Type: application/json", "Expect:"} {
    for (const std::string& line : lines_) headers_ = curl_slist_append(headers_, line.c_str());
    const std::string agent = std::string(tmcra::kProductName) + "/" + tmcra::kVersion;
    CURL* h = handle_;
    ok_ = h != nullptr && headers_ != nullptr &&
          curl_easy_setopt(h, CURLOPT_URL, (url.empty() ? target.url : url).c_str()) ==
              CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https") == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_USERAGENT, agent.c_str()) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)) ==
              CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip") == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2)) ==
              CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_SSL_SESSIONID_CACHE, 0L) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_CAINFO, target.ca.c_str()) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_PROXY, "") == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60000L) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_WRITEDATA, static_cast<void*>(&body_)) == CURLE_OK &&
          curl_easy_setopt(h, CURLOPT_POST, 1L) == CURLE_OK;
  }
  ~Client() {
    if (handle_ != nullptr) curl_easy_cleanup(handle_);
    curl_slist_free_all(headers_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool ok() const { return ok_; }

  // POSTs `request` (kept alive by the caller until the call returns), with `extra_header`
  // (e.g. an Idempotency-Key) when given; the HTTP status, or -1 with `error` on a transport
  // failure. The decoded answer is in body().
  long Post(const std::string& request, std::string* error, const std::string& extra_header = {}) {
    body_.clear();
    curl_slist* extra = nullptr;
    if (!extra_header.empty()) {
      for (const std::string& line : lines_) extra = curl_slist_append(extra, line.c_str());
      extra = curl_slist_append(extra, extra_header.c_str());
      curl_easy_setopt(handle_, CURLOPT_HTTPHEADER, extra);
    }
    curl_easy_setopt(handle_, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.size()));
    curl_easy_setopt(handle_, CURLOPT_POSTFIELDS, request.c_str());
    const CURLcode rc = curl_easy_perform(handle_);
    if (extra != nullptr) {
      curl_easy_setopt(handle_, CURLOPT_HTTPHEADER, headers_);
      curl_slist_free_all(extra);
    }
    if (rc != CURLE_OK) {
      *error = curl_easy_strerror(rc);
      return -1;
    }
    long status = 0;
    curl_easy_getinfo(handle_, CURLINFO_RESPONSE_CODE, &status);
    long connects = 0;
    curl_easy_getinfo(handle_, CURLINFO_NUM_CONNECTS, &connects);
    connects_ += connects;
    curl_off_t wire = 0;
    curl_easy_getinfo(handle_, CURLINFO_SIZE_DOWNLOAD_T, &wire);
    wire_bytes_ = static_cast<int64_t>(wire);
    return status;
  }

  const std::string& body() const { return body_; }
  long connects() const { return connects_; }
  int64_t wire_bytes() const { return wire_bytes_; }

 private:
  CURL* handle_;
  std::vector<std::string> lines_;  // the request headers
  curl_slist* headers_ = nullptr;
  bool ok_ = false;
  std::string body_;
  long connects_ = 0;  // new connections opened (the first, then any reconnect)
  int64_t wire_bytes_ = 0;
};

bool MakeTarget(const std::map<std::string, std::string>& args, Target* target) {
  const std::string url = Get(args, "--url");
  const std::string scope = Get(args, "--scope", "bench");
  target->ca = Get(args, "--ca");
  if (url.rfind("https://", 0) != 0 || target->ca.empty()) {
    std::cerr << "--url https://HOST:PORT and --ca PEM are required\n";
    return false;
  }
  std::string key;
  if (!tmcra::bench::ReadKeyFile(Get(args, "--key-file"), &key)) return false;
  target->authorization = "Authorization: Bearer " + key;
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  target->url = base + "/v1/scopes/" + scope + "/recall";  // a bench scope: no escaping needed
  target->ingest_url = base + "/v1/scopes/" + scope + "/ingest";
  return true;
}

// One ingest every `every_ms` until `stop`: statuses counted in `statuses`.
void WriteTrickle(const Target& target, const std::vector<std::string>& questions, int every_ms,
                  const std::atomic<bool>& stop, std::map<std::string, int64_t>* statuses) {
  Client client(target, target.ingest_url);
  if (!client.ok()) {
    ++(*statuses)["setup failed"];
    return;
  }
  const std::string run = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                             Clock::now().time_since_epoch())
                                             .count());
  auto next = Clock::now();
  std::string error;
  for (int i = 0; !stop.load(); ++i) {
    // One every N ms; after a slow answer, the next goes at once but no burst follows.
    next = std::max(next + std::chrono::milliseconds(every_ms), Clock::now());
    const json body{
        {"session_id", "trickle-" + run + "-" + std::to_string(i)},
        {"messages", json::array({{{"message_id", "m0"},
                                   {"role", "user"},
                                   {"content", "A note while recalls run: " +
                                                   questions[static_cast<size_t>(i) % questions.size()]},
                                   {"timestamp", "2026-07-15T00:00:00Z"}}})}};
    const long status = client.Post(body.dump(), &error,
                                    "Idempotency-Key: bench-trickle-" + run + "-" + std::to_string(i));
    ++(*statuses)[status < 0 ? "transport: " + error : "HTTP " + std::to_string(status)];
    std::this_thread::sleep_until(next);
  }
}

// ---- floor --------------------------------------------------------------------------------

int Floor(const std::map<std::string, std::string>& args) {
  Target target;
  std::vector<std::string> questions;
  if (!MakeTarget(args, &target) || !ReadQuestions(Get(args, "--questions"), &questions)) {
    return 2;
  }
  const int iterations = std::stoi(Get(args, "--iterations", "200"));
  const int warmup = std::stoi(Get(args, "--warmup", "20"));
  const size_t offset = std::stoul(Get(args, "--offset", "0"));
  const long pause_us = std::stol(Get(args, "--pause-us", "0"));
  if (pause_us < 0 || pause_us > 1'000'000) {
    std::cerr << "floor: --pause-us 0..1000000\n";
    return 2;
  }
  // Bodies made before the loop: the floor times the transfer only.
  std::vector<std::string> bodies;
  for (const auto& q : questions) bodies.push_back(RecallBody(q));
  Client client(target);
  if (!client.ok()) {
    std::cerr << "floor: cannot set up libcurl\n";
    return 1;
  }
  std::vector<double> samples;
  std::vector<size_t> asked;
  int64_t answer_bytes = 0;
  int64_t wire_bytes = 0;
  double cpu_ms = 0;  // this process's CPU (user + system) over the timed calls
  for (int i = -warmup; i < iterations; ++i) {
    if (i == 0) cpu_ms = -CpuSeconds() * 1e3;
    // Timed call i asks question (K + i) % Q; the warm-up calls the ones just before.
    const auto count = static_cast<long>(questions.size());
    const size_t q = static_cast<size_t>(
        ((static_cast<long>(offset % questions.size()) + i) % count + count) % count);
    std::string error;
    if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    const auto start = Clock::now();
    const long status = client.Post(bodies[q], &error);
    const double ms = Ms(Clock::now() - start);
    if (status != 200) {
      std::cerr << "floor: recall answered " << status << " " << error << " "
                << client.body().substr(0, 500) << "\n";
      return 1;
    }
    if (i == -warmup && !json::accept(client.body())) {
      std::cerr << "floor: the answer is not JSON\n";
      return 1;
    }
    if (i >= 0) {
      samples.push_back(ms);
      asked.push_back(q);
      answer_bytes += static_cast<int64_t>(client.body().size());
      wire_bytes += client.wire_bytes();
    }
  }
  cpu_ms += CpuSeconds() * 1e3;
  const auto n = std::max<int64_t>(1, static_cast<int64_t>(samples.size()));
  std::cout << json{{"kind", "floor"},
                    {"cpu_ms_per_call", cpu_ms / static_cast<double>(n)},
                    {"iterations", iterations},
                    {"warmup", warmup},
                    {"pause_us", pause_us},
                    {"connections", client.connects()},
                    {"mean_answer_bytes", answer_bytes / n},
                    {"mean_wire_bytes", wire_bytes / n},
                    {"p50_ms", Median(samples)},
                    {"p99_ms", Rank(samples, 99)},
                    {"samples_ms", samples},
                    {"questions", asked}}
                   .dump()
            << std::endl;
  return 0;
}

// ---- throughput ---------------------------------------------------------------------------

int Throughput(const std::map<std::string, std::string>& args) {
  Target target;
  std::vector<std::string> questions;
  if (!MakeTarget(args, &target) || !ReadQuestions(Get(args, "--questions"), &questions)) {
    return 2;
  }
  const int clients = std::stoi(Get(args, "--clients", "16"));
  const double seconds = std::stod(Get(args, "--seconds", "10"));
  const int warmup = std::stoi(Get(args, "--warmup", "3"));
  const int write_every_ms = std::stoi(Get(args, "--write-every-ms", "0"));
  if (clients < 1 || clients > 1024 || seconds <= 0 || write_every_ms < 0) {
    std::cerr << "throughput: --clients 1..1024, --seconds > 0, --write-every-ms >= 0\n";
    return 2;
  }
  std::vector<std::string> bodies;
  for (const auto& q : questions) bodies.push_back(RecallBody(q));

  struct PerThread {
    std::vector<double> samples;
    std::map<std::string, int64_t> failures;  // status or transport error -> count
    long connects = 0;
    bool setup_failed = false;
  };
  std::vector<PerThread> results(static_cast<size_t>(clients));
  std::barrier ready(clients + 1);
  std::atomic<bool> stop{false};
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      PerThread& mine = results[static_cast<size_t>(t)];
      Client client(target);
      mine.setup_failed = !client.ok();
      size_t i = static_cast<size_t>(t) * 7919;
      std::string error;
      for (int w = 0; w < warmup && !mine.setup_failed; ++w) {
        if (client.Post(bodies[i++ % bodies.size()], &error) != 200) mine.setup_failed = true;
      }
      mine.samples.reserve(static_cast<size_t>(seconds * 2000));
      ready.arrive_and_wait();  // every connection open and warm
      ready.arrive_and_wait();  // the clock started
      while (!mine.setup_failed && !stop.load(std::memory_order_relaxed)) {
        const auto t0 = Clock::now();
        const long status = client.Post(bodies[i++ % bodies.size()], &error);
        const auto t1 = Clock::now();
        if (stop.load(std::memory_order_relaxed)) break;  // finished after the window
        if (status == 200) {
          mine.samples.push_back(Ms(t1 - t0));
        } else {
          ++mine.failures[status < 0 ? "transport: " + error : "HTTP " + std::to_string(status)];
        }
      }
      mine.connects = client.connects();
    });
  }
  ready.arrive_and_wait();
  start = Clock::now();
  const double cpu_start = CpuSeconds();
  ready.arrive_and_wait();
  std::map<std::string, int64_t> writes;
  std::thread writer;
  if (write_every_ms > 0) {
    writer = std::thread(
        [&] { WriteTrickle(target, questions, write_every_ms, stop, &writes); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  const double window = std::chrono::duration<double>(Clock::now() - start).count();
  const double client_cpu = CpuSeconds() - cpu_start;  // (the last requests finish after this)
  for (auto& th : threads) th.join();
  if (writer.joinable()) writer.join();

  std::vector<double> all;
  std::map<std::string, int64_t> failures;
  long connects = 0;
  int setup_failed = 0;
  json per_client = json::array();
  for (const auto& r : results) {
    all.insert(all.end(), r.samples.begin(), r.samples.end());
    for (const auto& [k, v] : r.failures) failures[k] += v;
    connects += r.connects;
    setup_failed += r.setup_failed ? 1 : 0;
    per_client.push_back(r.samples.size());
  }
  std::cout << json{{"kind", "throughput"},
                    {"clients", clients},
                    {"seconds", window},
                    {"recalls", all.size()},
                    {"recalls_per_second", static_cast<double>(all.size()) / window},
                    {"p50_ms", Median(all)},
                    {"p90_ms", Rank(all, 90)},
                    {"p99_ms", Rank(all, 99)},
                    {"max_ms", Rank(all, 100)},
                    {"failures", failures},
                    {"clients_failed_setup", setup_failed},
                    {"connections", connects},
                    {"client_cpu_seconds", client_cpu},
                    {"write_every_ms", write_every_ms},
                    {"writes", writes},
                    {"recalls_per_client", per_client}}
                   .dump()
            << std::endl;
  return setup_failed == 0 && failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const auto args = Args(argc, argv, 2);
  if (mode == "body") {
    std::cout << RecallBody(Get(args, "--query")) << std::endl;
    return 0;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  int rc = 2;
  if (mode == "floor") {
    rc = Floor(args);
  } else if (mode == "throughput") {
    rc = Throughput(args);
  } else {
    std::cerr << "usage: remote_bench body --query TEXT\n"
                 "       remote_bench floor --url URL --key-file F --ca CA --scope S "
                 "--questions FILE [--iterations N] [--warmup W] [--offset K] [--pause-us P]\n"
                 "       remote_bench throughput --url URL --key-file F --ca CA --scope S "
                 "--questions FILE [--clients C] [--seconds T] [--warmup W] "
                 "[--write-every-ms N]\n";
  }
  curl_global_cleanup();
  return rc;
}
