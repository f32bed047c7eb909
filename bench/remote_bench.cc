// remote_bench: the plain-libcurl halves of the remote-memory benchmark (bench/run_remote.sh
// runs them with bench/remote_latency.mjs, which times tmcra-mcp's tools against the floor).
//
//   remote_bench body       --query TEXT
//   remote_bench floor      --url URL --key-file F --ca CA --scope S --questions FILE
//                           [--iterations N] [--warmup W] [--offset K] [--pause-us P]
//   remote_bench alternate  --url URL --key-file F --ca CA --scope S --questions FILE
//                           --bin TMCRA_MCP [--blocks B] [--block-calls N] [--block-warmup D]
//                           [--warmup W] [--offset K] [--stdio socket|pipe]
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
// alternate: the floor and tmcra_recall through a tmcra-mcp this driver starts, in short
//   alternating blocks, from one process. tmcra-mcp (BIN) gets this process's environment
//   (remote_latency.mjs puts the URL, CA and scope there) plus TMCRA_API_KEY from F, and is
//   driven as leanly as the floor drives libcurl: stdin and stdout one socketpair each (as
//   Node's child_process gives; --stdio pipe for pipes, as Python and Rust hosts give), each
//   request one write(2), the answer read with 1 MiB reads into one fixed buffer up to its
//   newline, no event loop and nothing decoded on the clock; the clock stops when the read that
//   brings the answer line's last byte returns, as the floor's stops at the body's. After
//   initialize, notifications/initialized and tools/list (as the raw pipe's session) and W
//   warm-up calls of each, B blocks of
//   N + D calls: block b asks questions (K + b * N + i) % Q of both (the floor first in even
//   blocks, tmcra_recall first in odd ones), the first D calls of each block untimed (the
//   switch's own wake-up), so each block is as back to back as the floor alone while a drift
//   of the host's speed between blocks falls on both. The answer is checked after the clock
//   (injectable_context, no isError; the first is parsed whole). Reports both p50/p99, the
//   median of the per-call differences (same question, same block), the median of the
//   blocks' p50 differences, and tmcra-mcp's CPU per timed call (/proc/PID/stat).
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
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/version.h"
#include "bench/bench_stats.h"

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
  std::string key;  // for a tmcra-mcp child's environment (alternate), never argv
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
          curl_easy_setopt(h, CURLOPT_URL, (url.empty() ? target.url : url).c_str()) == CURLE_OK &&
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
    curl_easy_setopt(handle_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.size()));
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
  target->key = key;
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
  const std::string run = std::to_string(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
          .count());
  auto next = Clock::now();
  std::string error;
  for (int i = 0; !stop.load(); ++i) {
    // One every N ms; after a slow answer, the next goes at once but no burst follows.
    next = std::max(next + std::chrono::milliseconds(every_ms), Clock::now());
    const json body{
        {"session_id", "trickle-" + run + "-" + std::to_string(i)},
        {"messages",
         json::array({{{"message_id", "m0"},
                       {"role", "user"},
                       {"content", "A note while recalls run: " +
                                       questions[static_cast<size_t>(i) % questions.size()]},
                       {"timestamp", "2026-07-15T00:00:00Z"}}})}};
    const long status = client.Post(
        body.dump(), &error, "Idempotency-Key: bench-trickle-" + run + "-" + std::to_string(i));
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

// ---- alternate: tmcra_recall through tmcra-mcp, driven as leanly as the floor ------------

// A tmcra-mcp child on two socketpairs (or pipes); the parent writes to `to_` and reads `from_`.
class McpChild {
 public:
  McpChild() : buffer_(new char[kRead]) {}
  ~McpChild() {
    CloseFds();  // end of input: tmcra-mcp drains and exits
    if (pid_ <= 0) return;
    // A grace period for that, then SIGKILL (as tests/support/subprocess.cc does).
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) != 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  McpChild(const McpChild&) = delete;
  McpChild& operator=(const McpChild&) = delete;

  bool Start(const std::string& bin, bool pipes, const std::string& api_key) {
    // The environment, made before fork(): this process's, TMCRA_API_KEY replaced.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TMCRA_API_KEY=", 14) != 0) env.emplace_back(*e);
    }
    env.push_back("TMCRA_API_KEY=" + api_key);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const auto make = [pipes](int fds[2]) {
      return pipes ? pipe2(fds, O_CLOEXEC)
                   : socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
    };
    int in[2] = {-1, -1};
    int out[2] = {-1, -1};
    const auto close_all = [&] {
      for (int fd : {in[0], in[1], out[0], out[1]}) {
        if (fd >= 0) close(fd);
      }
    };
    if (make(in) != 0 || make(out) != 0) {
      close_all();
      return false;
    }
    pid_ = fork();
    if (pid_ < 0) {
      close_all();
      return false;
    }
    if (pid_ == 0) {
      // in[0] / out[1] are the child's (a socketpair's ends are alike; a pipe's are not). The
      // child starts with SIGPIPE's default, as a host's child does.
      signal(SIGPIPE, SIG_DFL);
      if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
      char* const argv[] = {const_cast<char*>(bin.c_str()), nullptr};
      execve(bin.c_str(), argv, envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    return true;
  }

  pid_t pid() const { return pid_; }

  bool Send(const std::string& line) {
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = write(to_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // The next line (without its newline) into `line`, and into `*end` the time the read that
  // brought its newline returned (before the line is copied out; now, for a line already read);
  // false at end of output or on an error. Reads go into one fixed 1 MiB buffer: nothing is
  // cleared on the clock, and each byte is looked at for the newline once.
  bool ReadLine(std::string* line, Clock::time_point* end = nullptr) {
    size_t nl = pending_.find('\n');
    if (nl != std::string::npos && end != nullptr) *end = Clock::now();
    while (nl == std::string::npos) {
      const ssize_t n = read(from_, buffer_.get(), kRead);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      const auto* got =
          static_cast<const char*>(std::memchr(buffer_.get(), '\n', static_cast<size_t>(n)));
      if (got != nullptr) {
        if (end != nullptr) *end = Clock::now();
        nl = pending_.size() + static_cast<size_t>(got - buffer_.get());
      }
      pending_.append(buffer_.get(), static_cast<size_t>(n));
    }
    line->assign(pending_, 0, nl);
    pending_.erase(0, nl + 1);
    return true;
  }

 private:
  static constexpr size_t kRead = 1 << 20;

  void CloseFds() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    to_ = from_ = -1;
  }

  std::unique_ptr<char[]> buffer_;
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string pending_;
};

// utime + stime of `pid` in clock ticks (/proc/PID/stat fields 14 and 15), -1 if unreadable.
long ProcessTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stol(field);
  }
  return ticks;
}

// A tools/call tmcra_recall line for `query` without its id: "{\"id\":N," + this is the line.
std::string ToolCallAfterId(const std::string& query) {
  const std::string call =
      json{{"jsonrpc", "2.0"},
           {"method", "tools/call"},
           {"params", {{"name", "tmcra_recall"}, {"arguments", {{"query", query}}}}}}
          .dump();
  return call.substr(1) + "\n";  // the members after its '{'
}

int Alternate(const std::map<std::string, std::string>& args) {
  Target target;
  std::vector<std::string> questions;
  const std::string bin = Get(args, "--bin");
  const std::string stdio = Get(args, "--stdio", "socket");
  if (!MakeTarget(args, &target) || !ReadQuestions(Get(args, "--questions"), &questions)) {
    return 2;
  }
  if (bin.empty() || (stdio != "socket" && stdio != "pipe")) {
    std::cerr << "alternate: --bin TMCRA_MCP [--stdio socket|pipe]\n";
    return 2;
  }
  const int blocks = std::stoi(Get(args, "--blocks", "40"));
  const int block_calls = std::stoi(Get(args, "--block-calls", "40"));
  const int block_warmup = std::stoi(Get(args, "--block-warmup", "3"));
  const int warmup = std::stoi(Get(args, "--warmup", "30"));
  const size_t offset = std::stoul(Get(args, "--offset", "0"));
  if (blocks < 1 || block_calls < 1 || block_warmup < 0 || warmup < 0) {
    std::cerr << "alternate: --blocks, --block-calls >= 1; --block-warmup, --warmup >= 0\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  const size_t Q = questions.size();
  std::vector<std::string> bodies;
  // tools/call lines without their id (ids are not reused within a session, as MCP asks; each
  // line is made before the clock starts).
  std::vector<std::string> calls;
  for (size_t q = 0; q < Q; ++q) {
    bodies.push_back(RecallBody(questions[q]));
    calls.push_back(ToolCallAfterId(questions[q]));
  }
  int64_t next_id = 3;
  std::string request;
  Client client(target);
  McpChild child;
  std::string line;
  if (!client.ok()) {
    std::cerr << "alternate: cannot set up libcurl\n";
    return 1;
  }
  if (!child.Start(bin, stdio == "pipe", target.key) ||
      !child.Send(json{{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "initialize"},
                       {"params",
                        {{"protocolVersion", "2025-11-25"},
                         {"capabilities", json::object()},
                         {"clientInfo", {{"name", "tmcra-remote-bench-lean"}, {"version", "1"}}}}}}
                      .dump() +
                  "\n") ||
      !child.ReadLine(&line) ||
      !child.Send(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}.dump() +
                  "\n") ||
      // As the raw pipe's session does (bench/bench_lib.mjs connectRaw).
      !child.Send(
          json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}, {"params", json::object()}}
              .dump() +
          "\n") ||
      !child.ReadLine(&line)) {
    std::cerr << "alternate: cannot start " << bin << ": " << line.substr(0, 500) << "\n";
    return 1;
  }
  bool parsed = false;
  std::string error;
  // One call of either kind; its time in ms, or < 0 on a failure (said on stderr).
  const auto floor_call = [&](size_t q) -> double {
    const auto start = Clock::now();
    const long status = client.Post(bodies[q], &error);
    const double ms = Ms(Clock::now() - start);
    if (status != 200) {
      std::cerr << "alternate: the floor's recall answered " << status << " " << error << "\n";
      return -1;
    }
    return ms;
  };
  const auto tool_call = [&](size_t q) -> double {
    request = "{\"id\":" + std::to_string(next_id++) + "," + calls[q];
    const auto start = Clock::now();
    Clock::time_point end;
    if (!child.Send(request) || !child.ReadLine(&line, &end)) {
      std::cerr << "alternate: tmcra-mcp stopped answering\n";
      return -1;
    }
    const double ms = Ms(end - start);
    const bool ok = line.find("\"injectable_context\"") != std::string::npos &&
                    line.find("\"isError\":true") == std::string::npos &&
                    (parsed || json::accept(line));
    parsed = true;
    if (!ok) {
      std::cerr << "alternate: tmcra_recall answered " << line.substr(0, 500) << "\n";
      return -1;
    }
    return ms;
  };
  for (int i = 0; i < warmup; ++i) {
    const size_t q = (offset + Q - 1 - static_cast<size_t>(i) % Q) % Q;
    if (floor_call(q) < 0 || tool_call(q) < 0) return 1;
  }
  std::vector<double> floor_ms;
  std::vector<double> tool_ms;
  std::vector<double> paired;  // tool − floor, same question, same block
  std::vector<double> block_diffs;
  std::vector<size_t> asked;
  int64_t answer_bytes = 0;
  long child_ticks = 0;  // tmcra-mcp's CPU over the timed tool calls
  double cpu_ms = 0;     // this driver's CPU over the timed calls, both kinds
  for (int b = 0; b < blocks; ++b) {
    const bool floor_first = b % 2 == 0;
    std::vector<double> block[2];  // [0] floor, [1] tool
    for (int pass = 0; pass < 2; ++pass) {
      const bool tool = (pass == 0) != floor_first;
      for (int i = -block_warmup; i < block_calls; ++i) {
        if (i == 0) {
          if (tool) child_ticks -= ProcessTicks(child.pid());
          cpu_ms -= CpuSeconds() * 1e3;
        }
        const size_t q = (offset + static_cast<size_t>(b) * static_cast<size_t>(block_calls) +
                          static_cast<size_t>(i + block_warmup)) %
                         Q;
        const double ms = tool ? tool_call(q) : floor_call(q);
        if (ms < 0) return 1;
        if (i >= 0) block[tool ? 1 : 0].push_back(ms);
        if (i >= 0 && tool) answer_bytes += static_cast<int64_t>(line.size() + 1);
        if (i >= 0 && !tool) asked.push_back(q);
      }
      if (tool) child_ticks += ProcessTicks(child.pid());
      cpu_ms += CpuSeconds() * 1e3;
    }
    for (size_t i = 0; i < block[0].size(); ++i) paired.push_back(block[1][i] - block[0][i]);
    block_diffs.push_back(Median(block[1]) - Median(block[0]));
    floor_ms.insert(floor_ms.end(), block[0].begin(), block[0].end());
    tool_ms.insert(tool_ms.end(), block[1].begin(), block[1].end());
  }
  const auto n = std::max<int64_t>(1, static_cast<int64_t>(tool_ms.size()));
  const double tick_ms = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::cout << json{{"kind", "alternate"},
                    {"stdio", stdio},
                    {"blocks", blocks},
                    {"block_calls", block_calls},
                    {"block_warmup", block_warmup},
                    {"warmup", warmup},
                    {"connections", client.connects()},
                    {"driver_cpu_ms_per_pair", cpu_ms / static_cast<double>(n)},
                    {"mcp_cpu_ms_per_call",
                     static_cast<double>(child_ticks) * tick_ms / static_cast<double>(n)},
                    {"mean_answer_bytes", answer_bytes / n},
                    {"floor",
                     {{"p50_ms", Median(floor_ms)},
                      {"p99_ms", Rank(floor_ms, 99)},
                      {"samples_ms", floor_ms}}},
                    {"tool",
                     {{"p50_ms", Median(tool_ms)},
                      {"p99_ms", Rank(tool_ms, 99)},
                      {"samples_ms", tool_ms}}},
                    {"overhead_p50_ms", Median(tool_ms) - Median(floor_ms)},
                    {"paired_median_ms", Median(paired)},
                    {"block_median_ms", Median(block_diffs)},
                    {"block_diffs_ms", block_diffs},
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
    writer = std::thread([&] { WriteTrickle(target, questions, write_every_ms, stop, &writes); });
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
  } else if (mode == "alternate") {
    rc = Alternate(args);
  } else if (mode == "throughput") {
    rc = Throughput(args);
  } else {
    std::cerr << "usage: remote_bench body --query TEXT\n"
                 "       remote_bench floor --url URL --key-file F --ca CA --scope S "
                 "--questions FILE [--iterations N] [--warmup W] [--offset K] [--pause-us P]\n"
                 "       remote_bench alternate --url URL --key-file F --ca CA --scope S "
                 "--questions FILE --bin TMCRA_MCP [--blocks B] [--block-calls N] "
                 "[--block-warmup D] [--warmup W] [--offset K] [--stdio socket|pipe]\n"
                 "       remote_bench throughput --url URL --key-file F --ca CA --scope S "
                 "--questions FILE [--clients C] [--seconds T] [--warmup W] "
                 "[--write-every-ms N]\n";
  }
  curl_global_cleanup();
  return rc;
}
