// HttpMemoryApi against a real misbehaving HTTPS server (tests/support/fault_server.mjs, run as
// a Node process): the exact requests, the status matrix (H1), transport faults (H2),
// Retry-After (H3), TLS (H5), size and stall caps (H6), proxies (H7), invalid bodies (H8),
// secret hygiene (S1), SSLKEYLOGFILE (S3) and path/header injection (S5) of
// docs/reliability.md §5.
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/version.h"
#include "queue/delivery.h"
#include "src/api/api_status.h"
#include "src/api/http_memory_api.h"
#include "src/config/url.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

using namespace std::chrono_literals;
using json = nlohmann::json;
using ms = std::chrono::milliseconds;
using tmcra::Errc;
using tmcra::Error;
using tmcra::Result;
using tmcra::api::HttpMemoryApi;
using tmcra::api::HttpOptions;
using tmcra::testing::Subprocess;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kKey = "tmcra_CANARYID." + kSecret;

// ------------------------------------------------------------------------------------------
// The fault server, a real process.

class FaultServer {
 public:
  FaultServer() : proc_({TMCRA_NODE_BIN, TMCRA_FAULT_SERVER}) {
    auto line = proc_.ReadLine(30s);
    if (!line) FAIL("the fault server did not start: " << proc_.Stderr());
    info_ = json::parse(*line);
    REQUIRE(info_["ready"] == true);
  }
  ~FaultServer() {
    proc_.CloseStdin();  // it removes its certificate directory and exits
    (void)proc_.Wait(5s);
  }

  int Port(const std::string& listener) const { return info_["ports"][listener].get<int>(); }
  std::string Ca() const { return info_["ca"]; }
  std::string OtherCa() const { return info_["other_ca"]; }
  std::string Https(const std::string& listener = "tls") const {
    return "https://127.0.0.1:" + std::to_string(Port(listener));
  }
  std::string Http() const { return "http://127.0.0.1:" + std::to_string(Port("plain")); }

  json Command(json cmd) {
    proc_.WriteLine(cmd.dump());
    auto line = proc_.ReadLine(10s);
    REQUIRE(line);
    json answer = json::parse(*line);
    REQUIRE(answer["ok"] == true);
    return answer;
  }
  void Script(const json& actions, const std::string& listener = "tls") {
    Command({{"cmd", "script"}, {"listener", listener}, {"actions", actions}});
  }
  void Default(const json& action, const std::string& listener = "tls") {
    Command({{"cmd", "default"}, {"listener", listener}, {"action", action}});
  }
  json Requests(const std::string& listener = "tls") {
    json out = json::array();
    const json ledger = Command({{"cmd", "ledger"}});
    for (const auto& r : ledger["requests"]) {
      if (r["listener"] == listener) out.push_back(r);
    }
    return out;
  }
  json AllRequests() { return Command({{"cmd", "ledger"}})["requests"]; }
  json Stats() { return Command({{"cmd", "stats"}}); }
  int Tcp(const std::string& listener) { return Stats()["connections"][listener]["tcp"]; }

 private:
  Subprocess proc_;
  json info_;
};

// ------------------------------------------------------------------------------------------

std::optional<std::string> Header(const json& request, const std::string& name) {
  for (const auto& h : request["headers"]) {
    if (h[0] == name) return h[1].get<std::string>();
  }
  return std::nullopt;
}

int HeaderCount(const json& request, const std::string& name) {
  int n = 0;
  for (const auto& h : request["headers"]) n += h[0] == name ? 1 : 0;
  return n;
}

// Points fd 1 at a file for a while: nothing libcurl does may reach stdout (the JSON-RPC
// channel of tmcra-mcp).
class StdoutTrap {
 public:
  explicit StdoutTrap(const std::string& path) {
    std::fflush(stdout);
    saved_ = dup(1);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(fd, 1);
    close(fd);
  }
  ~StdoutTrap() { Restore(); }
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
    saved_ = -1;
  }

 private:
  int saved_ = -1;
};

// Every log line of the test goes to a string, at trace level.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string Text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

bool HoldsSecret(const std::string& text) {
  if (text.find(kKey) != std::string::npos || text.find(kSecret) != std::string::npos) return true;
  for (size_t i = 0; i + 8 <= kSecret.size(); ++i) {  // any 8-byte piece of the secret
    if (text.find(kSecret.substr(i, 8)) != std::string::npos) return true;
  }
  return false;
}

// The error of a failed call, checked for secrets.
template <typename T>
Error ErrorOf(const Result<T>& result) {
  REQUIRE_FALSE(result);
  const Error& e = result.error();
  CHECK_FALSE(HoldsSecret(e.message));
  CHECK_FALSE(HoldsSecret(e.details_json));
  CHECK_FALSE(HoldsSecret(e.api_code));
  return e;
}

struct Recorder {
  std::mutex mu;
  std::vector<ms> sleeps;
  std::vector<ms> Take() {
    std::lock_guard lock(mu);
    return std::exchange(sleeps, {});
  }
};

HttpOptions Options(const FaultServer& fs, const std::shared_ptr<Recorder>& rec) {
  HttpOptions o;
  o.base_url = fs.Https();
  o.api_key = kKey;
  o.ca_file = fs.Ca();
  o.total_timeout = 5s;
  o.seed = 7;
  o.sleep = [rec](ms delay) {
    std::lock_guard lock(rec->mu);
    rec->sleeps.push_back(delay);
  };
  return o;
}

std::unique_ptr<HttpMemoryApi> Make(HttpOptions options) {
  auto created = HttpMemoryApi::Create(std::move(options));
  if (!created) FAIL(created.error().message);
  return std::move(*created);
}

// Sets (or unsets) environment variables for one scope, restoring them afterwards.
class EnvGuard {
 public:
  void Set(const std::string& name, const std::optional<std::string>& value) {
    if (saved_.count(name) == 0) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

void ClearProxyEnv(EnvGuard& env) {
  for (const char* name :
       {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
        "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE"}) {
    env.Set(name, std::nullopt);
  }
}

int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

const json kRecallBody = {
    {"query", "what did we decide"}, {"evidence_mode", "auto"}, {"max_windows", 8}};
const json kIngestBody = {{"session_id", "s1"},
                          {"messages", json::array({{{"message_id", "m1"},
                                                     {"role", "user"},
                                                     {"content", "caf\xc3\xa9"},
                                                     {"timestamp", "2026-11-30T00:00:00Z"}}})},
                          {"consistency", "eventual"},
                          {"slow_policy", "auto"},
                          {"metadata", {{"integration", "mcp"}}}};
const json kJob = {
    {"job_id", "job-1"},    {"tenant_id", "t"},    {"scope_name", "p"},
    {"job_type", "ingest"}, {"status", "pending"}, {"attempts", 0},
    {"created_at", 1.0},    {"updated_at", 1.0},   {"status_url", "https://x/v1/jobs/job-1"}};

json Answer(int status, const json& body = json::object()) {
  return {{"status", status}, {"json", body}};
}

json Envelope(const std::string& code, const std::string& message = "") {
  json error = {{"code", code}, {"request_id", "req_env"}};
  if (!message.empty()) error["message"] = message;
  return {{"error", error}};
}

tmcra::api::IngestOptions Key(const std::string& key,
                              std::optional<std::string> agent = std::nullopt) {
  tmcra::api::IngestOptions options;
  options.idempotency_key = key;
  options.agent_id = std::move(agent);
  return options;
}

// Arbitrary bytes for the fixture's "body_hex".
std::string Hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += kDigits[byte >> 4];
    out += kDigits[byte & 0x0f];
  }
  return out;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// What every test here starts with: a clean environment without proxies, a scripted server,
// and a recorder of the client's retry decisions.
struct ClientTest {
  EnvGuard env;
  bool proxies_cleared = (ClearProxyEnv(env), true);  // before the server starts
  FaultServer fs;
  std::shared_ptr<Recorder> rec = std::make_shared<Recorder>();
};

}  // namespace

// ------------------------------------------------------------------------------------------

TEST_CASE_METHOD(ClientTest, "the five endpoints send exactly the contract's requests", "[http]") {
  LogCapture logs;
  auto o = Options(fs, rec);
  o.integration_id = "ci-1";
  o.default_agent_id = "agent-default";
  auto api = Make(o);

  const json recall_answer = {
      {"query_id", "api_1"}, {"scope_name", "p"}, {"padding", std::string(4000, 'x')}};
  fs.Script(
      json::array({{{"status", 200}, {"json", recall_answer}, {"gzip", true}},  // gzip is decoded
                   Answer(202, kJob),
                   Answer(202, {{"scope_name", "p"}, {"jobs", json::array({kJob})}}),
                   Answer(200, kJob),
                   Answer(200, {{"items", json::array()}}),
                   Answer(201, {{"feedback_id", "f1"}})}));

  tmcra::testing::TempDir dir;
  StdoutTrap trap(dir.File("stdout"));
  auto recall = api->Recall("p", kRecallBody, {"agent-call"});
  REQUIRE(recall);
  CHECK(*recall == recall_answer);
  auto ingest = api->Ingest("p", kIngestBody, Key("key-00000001"));
  REQUIRE(ingest);
  CHECK((*ingest)["job_id"] == "job-1");
  const json batch_body = {{"items", json::array({kIngestBody})}};
  auto batch = api->IngestBatch("p", batch_body, Key("", "agent-batch"));
  REQUIRE(batch);
  REQUIRE(api->GetJob("job-1"));
  REQUIRE(api->Evidence("p", "mem-1", 25));
  const json feedback_body = {{"rating", "incorrect"},
                              {"action", "ignore"},
                              {"memory_ids", json::array({"mem-1"})},
                              {"query_id", nullptr}};
  REQUIRE(api->Feedback("p", feedback_body, {"fbkey-0001"}));
  fs.Script(json::array(
      {{{"status", 500}, {"body", "<html>oops</html>"}}, {{"status", 200}, {"body", "not json"}}}));
  auto o1 = o;
  o1.max_attempts = 1;
  CHECK_FALSE(Make(o1)->Recall("p", kRecallBody, {}));
  CHECK_FALSE(Make(o1)->Recall("p", kRecallBody, {}));
  trap.Restore();
  CHECK(std::filesystem::file_size(dir.File("stdout")) == 0);  // not one byte on stdout

  json reqs = fs.Requests();
  REQUIRE(reqs.size() == 8);
  reqs.erase(reqs.begin() + 6, reqs.end());
  for (const auto& r : reqs) {
    INFO(r["raw_head"].get<std::string>());
    CHECK(Header(r, "authorization") == "Bearer " + kKey);
    CHECK(HeaderCount(r, "authorization") == 1);
    CHECK(Header(r, "user-agent") == std::string("tmcra-mcp/") + tmcra::kVersion);
    CHECK(Header(r, "x-tmcra-client-platform") == "mcp");
    CHECK(Header(r, "x-tmcra-integration-id") == "ci-1");
    CHECK(Header(r, "accept-encoding") == "gzip");
    CHECK_FALSE(Header(r, "expect"));
    CHECK_FALSE(Header(r, "transfer-encoding"));
    CHECK(r["conn"] == reqs[0]["conn"]);  // one kept-alive connection
  }
  CHECK(reqs[0]["method"] == "POST");
  CHECK(reqs[0]["target"] == "/v1/scopes/p/recall");
  CHECK(Header(reqs[0], "x-tmcra-agent-id") == "agent-call");
  CHECK(Header(reqs[0], "content-type") == "application/json");
  CHECK(reqs[0]["body"] == kRecallBody.dump());
  CHECK(Header(reqs[0], "content-length") == std::to_string(kRecallBody.dump().size()));
  CHECK_FALSE(Header(reqs[0], "idempotency-key"));

  CHECK(reqs[1]["target"] == "/v1/scopes/p/ingest");
  CHECK(Header(reqs[1], "x-tmcra-agent-id") == "agent-default");
  CHECK(Header(reqs[1], "idempotency-key") == "key-00000001");
  CHECK(json::parse(reqs[1]["body"].get<std::string>()) == kIngestBody);

  CHECK(reqs[2]["target"] == "/v1/scopes/p/ingest/batch");
  CHECK(Header(reqs[2], "x-tmcra-agent-id") == "agent-batch");
  CHECK_FALSE(Header(reqs[2], "idempotency-key"));
  CHECK(reqs[2]["body"] == batch_body.dump());

  CHECK(reqs[3]["method"] == "GET");
  CHECK(reqs[3]["target"] == "/v1/jobs/job-1");
  CHECK(reqs[3]["body_len"] == 0);
  CHECK_FALSE(Header(reqs[3], "content-type"));
  CHECK(Header(reqs[3], "x-tmcra-agent-id") == "agent-default");

  CHECK(reqs[4]["method"] == "GET");
  CHECK(reqs[4]["target"] == "/v1/scopes/p/memory-graph/nodes/mem-1/evidence?limit=25");

  CHECK(reqs[5]["method"] == "POST");
  CHECK(reqs[5]["target"] == "/v1/scopes/p/feedback");
  CHECK(Header(reqs[5], "idempotency-key") == "fbkey-0001");
  CHECK(reqs[5]["body"] == feedback_body.dump());

  CHECK(api->Describe() == json{{"mode", "service"}, {"endpoint", fs.Https()}});
  CHECK(rec->Take().empty());
  CHECK_FALSE(HoldsSecret(logs.Text()));
}

TEST_CASE_METHOD(ClientTest, "H1: statuses, retries and redirects", "[http][h1]") {
  LogCapture logs;
  auto api = Make(Options(fs, rec));

  const std::vector<int> final_statuses{200, 201, 204, 400, 401, 402, 403,
                                        404, 409, 410, 411, 413, 422, 501};
  const std::vector<int> retryable{408, 425, 429, 500, 502, 503, 504};
  size_t seen = 0;
  for (int round = 0; round < 3; ++round) {
    for (int status : final_statuses) {
      INFO("status " << status);
      const json body = status == 409  ? Envelope(round == 0 ? "conflict" : "idempotency_conflict")
                        : status < 300 ? kJob  // a good body with the wrong 2xx
                                       : Envelope("some_code", "refused");
      fs.Script(json::array(
          {status == 204 ? json{{"status", 204}, {"body", ""}} : Answer(status, body)}));
      const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
      CHECK(e.code == tmcra::api::KindForStatus(status));
      CHECK_FALSE(e.retryable);
      CHECK(fs.Requests().size() == ++seen);  // exactly one request: never retried
      CHECK(rec->Take().empty());
      if (status == 409) {
        CHECK(e.api_code == (round == 0 ? "conflict" : "idempotency_conflict"));
      }
      if (status == 401) CHECK(e.code == Errc::kPermissionDenied);
      if (status == 200 || status == 201 || status == 204) CHECK(e.api_code == "http_error");
    }
    for (int status : retryable) {
      INFO("status " << status);
      fs.Script(json::array({Answer(status, Envelope("busy")), Answer(status, Envelope("busy")),
                             Answer(status, Envelope("busy"))}));
      const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
      CHECK(e.code == tmcra::api::KindForStatus(status));
      CHECK(e.api_code == "busy");
      CHECK(e.retryable);
      seen += 3;
      CHECK(fs.Requests().size() == seen);
      CHECK(rec->Take() == std::vector<ms>{200ms, 400ms});
    }
  }
  // Redirects are never followed, whatever the target.
  const std::string target = "127.0.0.1:" + std::to_string(fs.Port("target"));
  for (int status : {301, 302, 303, 307, 308}) {
    for (const std::string& location : std::vector<std::string>{
             "http://" + target + "/v1/scopes/p/recall", "https://" + target + "/",
             std::string("file:///etc/passwd"), std::string("/v1/other")}) {
      INFO(status << " to " << location);
      fs.Script(
          json::array({{{"status", status}, {"headers", {{"Location", location}}}, {"body", ""}}}));
      const Error e = ErrorOf(api->Recall("p", kRecallBody, {}));
      CHECK(e.code == tmcra::api::KindForStatus(status));
      CHECK_FALSE(e.retryable);
      CHECK(e.message.find("redirects are not followed") != std::string::npos);
      CHECK(fs.Requests().size() == ++seen);
    }
  }
  CHECK(fs.Tcp("target") == 0);  // the redirect target saw no connection at all
  CHECK(rec->Take().empty());
  CHECK_FALSE(HoldsSecret(logs.Text()));
}

TEST_CASE_METHOD(ClientTest, "H3: Retry-After from a real server, clamped or replaced by backoff",
                 "[http][h3]") {
  auto api = Make(Options(fs, rec));
  const std::vector<std::pair<json, ms>> cases{
      {json::array({"0"}), 0ms},
      {json::array({"5"}), 5000ms},
      {json::array({"30"}), 30000ms},
      {json::array({"31"}), 30000ms},
      {json::array({"2.5"}), 2500ms},
      {json::array({"99999999999999999999"}), 30000ms},
      {json::array({"-1"}), 200ms},
      {json::array({"abc"}), 200ms},
      {json::array({"1e9"}), 200ms},
      {json::array({"Wed, 21 Oct 2015 07:28:00 GMT"}), 200ms},
      {json::array({"Fri, 31 Dec 2100 23:59:59 GMT"}), 200ms},
      {json::array({"Thu, 99 Foo 2015 99:99:99 GMT"}), 200ms},
      {json::array({"5", "5"}), 200ms},  // duplicated
      {json::array(), 200ms},            // absent (429 quota_exceeded sends none)
  };
  for (const auto& [values, expected] : cases) {
    INFO("Retry-After " << values.dump());
    json headers = json::array();
    for (const auto& v : values) headers.push_back({"Retry-After", v});
    fs.Script(
        json::array({{{"status", 429}, {"headers", headers}, {"json", Envelope("rate_limited")}},
                     Answer(202, kJob)}));
    REQUIRE(api->Ingest("p", kIngestBody, Key("key-00000001")));
    CHECK(rec->Take() == std::vector<ms>{expected});
  }
  // A Retry-After on a status outside the retry set changes nothing.
  fs.Script(json::array({{{"status", 400}, {"headers", {{"Retry-After", "1"}}}, {"body", ""}}}));
  CHECK(ErrorOf(api->Recall("p", kRecallBody, {})).code == tmcra::Errc::kInvalidArgument);
  CHECK(rec->Take().empty());
}

TEST_CASE_METHOD(ClientTest,
                 "H2: transport faults end in bounded time, classified not-sent or in-doubt",
                 "[http][h2]") {
  LogCapture logs;
  auto o = Options(fs, rec);
  o.total_timeout = 1s;
  o.max_attempts = 1;
  auto api = Make(o);
  const std::string job = kJob.dump();

  struct Case {
    std::string name;
    json action;
    bool timeout;
  };
  const std::vector<Case> in_doubt{
      {"reset before the answer", {{"fault", "reset_before_head"}}, false},
      {"closed before the answer", {{"fault", "close_before_head"}}, false},
      {"reset after the head",
       {{"status", 202}, {"body", job}, {"fault", "reset_after_head"}},
       false},
      {"reset during the body",
       {{"status", 202}, {"body", job}, {"fault", "reset_mid_body"}},
       false},
      {"truncated body",
       {{"status", 202}, {"body", job}, {"fault", "truncate"}, {"truncate_at", 5}},
       false},
      {"Content-Length larger than the body",
       {{"status", 202}, {"body", job}, {"content_length", job.size() + 100}, {"close", true}},
       false},
      {"chunked body cut short",
       {{"status", 202}, {"body", job}, {"framing", "chunked"}, {"fault", "truncate"}},
       false},
      {"garbage instead of a status line", {{"raw", "HELLO\r\n\r\n"}}, false},
      {"stall (no answer)", {{"fault", "stall"}}, true},
      {"answer later than the timeout", {{"status", 202}, {"body", job}, {"delay_ms", 3000}}, true},
  };
  for (const auto& c : in_doubt) {
    INFO(c.name);
    fs.Script(json::array({c.action}));
    const auto start = std::chrono::steady_clock::now();
    const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
    const double elapsed = Seconds(std::chrono::steady_clock::now() - start);
    CHECK(elapsed < 2.5);  // total timeout (1 s) + margin
    CHECK(e.api_code == "transport_error");
    CHECK(e.retryable);
    CHECK(!tmcra::api::IsServiceAnswer(e));
    CHECK(e.message.find("outcome unknown") != std::string::npos);
    CHECK(e.code == (c.timeout ? Errc::kTimeout : Errc::kUnavailable));
  }
  // A reset after a complete answer is no fault: the answer was whole.
  fs.Script(json::array({{{"status", 202}, {"body", job}, {"fault", "reset_after_body"}}}));
  {
    auto whole = api->Ingest("p", kIngestBody, Key("key-00000001"));
    CHECK(whole);
    if (!whole) WARN(whole.error().message);
  }

  // Not sent: nothing listens; a TLS handshake that fails.
  for (const std::string& url : std::vector<std::string>{
           "https://127.0.0.1:" + std::to_string(ClosedPort()), fs.Https("target")}) {
    INFO(url);
    auto o2 = o;
    o2.base_url = url;
    auto api2 = Make(o2);
    const auto start = std::chrono::steady_clock::now();
    const Error e = ErrorOf(api2->Recall("p", kRecallBody, {}));
    CHECK(Seconds(std::chrono::steady_clock::now() - start) < 2.5);
    CHECK(e.api_code == "transport_not_sent");
    CHECK(e.code == Errc::kUnavailable);
    CHECK(e.retryable);
    CHECK(e.message.find("not sent") != std::string::npos);
  }

  // With retries: same key, same bytes, backoff with jitter in [b, b + 50 ms).
  auto o3 = Options(fs, rec);
  o3.total_timeout = 1s;
  auto api3 = Make(o3);
  const size_t before = fs.Requests().size();
  fs.Script(json::array({{{"fault", "reset_before_head"}},
                         {{"fault", "reset_mid_body"}, {"status", 202}, {"body", job}},
                         Answer(202, kJob)}));
  REQUIRE(api3->Ingest("p", kIngestBody, Key("key-00000002")));
  const json reqs = fs.Requests();
  REQUIRE(reqs.size() == before + 3);
  for (size_t i = before; i < reqs.size(); ++i) {
    CHECK(Header(reqs[i], "idempotency-key") == "key-00000002");
    CHECK(reqs[i]["body_sha256"] == reqs[before]["body_sha256"]);
  }
  const auto sleeps = rec->Take();
  REQUIRE(sleeps.size() == 2);
  CHECK(sleeps[0] >= 200ms);
  CHECK(sleeps[0] < 250ms);
  CHECK(sleeps[1] >= 400ms);
  CHECK(sleeps[1] < 450ms);

  // libcurl itself sends a request once more, on a fresh connection, when a kept-alive
  // connection turns out dead before any answer byte: the server may see it twice (harmless:
  // the same key and bytes), and it is not one of our attempts (no pause).
  fs.Script(json::array({{{"fault", "close_before_head"}}, Answer(202, kJob)}));
  REQUIRE(api3->Ingest("p", kIngestBody, Key("key-00000003")));
  CHECK(fs.Requests().size() == before + 5);
  CHECK(rec->Take().empty());

  auto api4 = Make(o3);  // a fresh connection for every attempt from here
  fs.Script(json::array({{{"fault", "close_before_head"}},
                         {{"fault", "close_before_head"}},
                         {{"fault", "close_before_head"}}}));
  const Error e = ErrorOf(api4->Ingest("p", kIngestBody, Key("key-00000003")));
  CHECK(e.api_code == "transport_error");
  CHECK(fs.Requests().size() == before + 8);
  CHECK(rec->Take().size() == 2);

  // In doubt stays in doubt: attempt 1 is reset after it was received, attempts 2 and 3 find
  // nothing listening (not sent). The call is still reported in doubt.
  auto o5 = o3;
  int guard_calls = 0;
  o5.before_attempt = [&]() -> tmcra::Status {
    if (++guard_calls == 2) fs.Command({{"cmd", "close"}, {"listener", "tls"}});
    return tmcra::Ok();
  };
  fs.Script(json::array({{{"fault", "reset_before_head"}}}));
  const Error doubt = ErrorOf(Make(o5)->Ingest("p", kIngestBody, Key("key-00000004")));
  CHECK(guard_calls == 3);
  CHECK(fs.Requests().size() == before + 9);
  CHECK(doubt.api_code == "transport_error");
  CHECK(doubt.retryable);
  CHECK(doubt.message.find("an earlier attempt reached the server") != std::string::npos);
  CHECK_FALSE(HoldsSecret(logs.Text()));
}

TEST_CASE_METHOD(ClientTest,
                 "H5: certificates that do not verify stop the request before it is sent",
                 "[http][h5]") {
  LogCapture logs;

  struct Case {
    std::string name;
    std::string listener;
    bool other_ca;
  };
  for (const Case& c : {Case{"untrusted CA", "tls", true}, Case{"expired", "expired", false},
                        Case{"wrong host", "wronghost", false}}) {
    INFO(c.name);
    auto o = Options(fs, rec);
    o.base_url = fs.Https(c.listener);
    if (c.other_ca) o.ca_file = fs.OtherCa();
    auto api = Make(o);
    const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
    CHECK(e.api_code == "tls_verification_failed");
    CHECK_FALSE(e.retryable);
    CHECK(e.message.find("[curl 60]") != std::string::npos);
    CHECK(rec->Take().empty());              // not retried
    CHECK(fs.Requests(c.listener).empty());  // no HTTP request reached the server
    const Error stats = ErrorOf(api->Stats());
    CHECK(stats.api_code == "tls_verification_failed");
  }
  // The custom CA verifies; so does SSL_CERT_FILE in service mode when no ca_file is given.
  auto o = Options(fs, rec);
  auto api = Make(o);
  auto stats = api->Stats();
  REQUIRE(stats);
  CHECK((*stats)["checked"] == "tls_handshake");
  CHECK(fs.Requests().empty());  // Stats sends no HTTP request (and so no credential)
  REQUIRE(api->Recall("p", kRecallBody, {}));

  o.ca_file.clear();
  env.Set("SSL_CERT_FILE", fs.Ca());
  REQUIRE(Make(o)->Recall("p", kRecallBody, {}));
  env.Set("SSL_CERT_FILE", std::nullopt);  // the system bundle does not know our CA
  CHECK(ErrorOf(Make(o)->Recall("p", kRecallBody, {})).api_code == "tls_verification_failed");
  CHECK(fs.Requests().size() == 2);

  // No plain http in service mode, no https in local mode.
  o.base_url = fs.Http();
  auto refused = HttpMemoryApi::Create(o);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("base_url") == 0);
  o.base_url = fs.Https();
  o.local_mode = true;
  CHECK_FALSE(HttpMemoryApi::Create(o));
  CHECK_FALSE(HoldsSecret(logs.Text()));
}

TEST_CASE_METHOD(ClientTest, "H6: answer size caps and stalls", "[http][h6]") {
  auto o = Options(fs, rec);
  o.max_response_bytes = 64 * 1024;
  o.max_attempts = 1;
  o.total_timeout = 10s;
  o.low_speed_time = 1s;
  auto api = Make(o);

  const auto too_large = [&](const json& action) {
    INFO(action.dump().substr(0, 200));
    fs.Script(json::array({action}));
    const auto start = std::chrono::steady_clock::now();
    const Error e = ErrorOf(api->Recall("p", kRecallBody, {}));
    CHECK(Seconds(std::chrono::steady_clock::now() - start) < 3.0);
    CHECK(e.api_code == "response_too_large");
    CHECK(e.code == Errc::kProtocol);
    CHECK_FALSE(e.retryable);
  };
  too_large({{"status", 200}, {"body", "x"}, {"repeat", 1024 * 1024}});
  too_large(
      {{"status", 200}, {"body", "{}"}, {"content_length", 1000000000000LL}, {"close", true}});
  too_large({{"status", 200}, {"fault", "endless"}});
  too_large({{"status", 200}, {"json", {{"a", std::string(1024 * 1024, ' ')}}}, {"gzip", true}});
  json flood = json::array();
  for (int i = 0; i < 300; ++i)
    flood.push_back({"X-Flood-" + std::to_string(i), std::string(1000, 'f')});
  too_large({{"status", 200}, {"headers", flood}, {"body", "{}"}});

  // Exactly at the cap is fine.
  const std::string at_cap = "{\"a\":\"" + std::string(64 * 1024 - 8, 'x') + "\"}";
  REQUIRE(at_cap.size() == 64 * 1024);
  fs.Script(json::array({{{"status", 200}, {"body", at_cap}}}));
  CHECK(api->Recall("p", kRecallBody, {}));

  // An oversize error body does not hide its status: 503 is retried.
  auto o2 = o;
  o2.max_attempts = 2;
  auto api2 = Make(o2);
  fs.Script(json::array(
      {{{"status", 503}, {"body", "x"}, {"repeat", 1024 * 1024}}, Answer(200, {{"ok", true}})}));
  CHECK(api2->Recall("p", kRecallBody, {}));
  CHECK(rec->Take() == std::vector<ms>{200ms});

  // A drip (1 byte every 3 s) is abandoned after about low_speed_time ...
  fs.Script(json::array(
      {{{"status", 200}, {"body", "{\"a\":1}"}, {"fault", "drip"}, {"drip_ms", 3000}}}));
  auto start = std::chrono::steady_clock::now();
  const Error drip = ErrorOf(api->Recall("p", kRecallBody, {}));
  const double drip_seconds = Seconds(std::chrono::steady_clock::now() - start);
  CHECK(drip_seconds > 0.9);
  CHECK(drip_seconds < 2.9);
  CHECK(drip.api_code == "transport_error");
  CHECK(drip.code == Errc::kTimeout);
  CHECK(drip.message.find("slowed below") != std::string::npos);
  // ... while a server that thinks longer than that before answering is waited for.
  fs.Script(json::array({{{"status", 200}, {"body", "{\"a\":1}"}, {"delay_ms", 2000}}}));
  start = std::chrono::steady_clock::now();
  CHECK(api->Recall("p", kRecallBody, {}));
  CHECK(Seconds(std::chrono::steady_clock::now() - start) >= 1.9);
}

TEST_CASE_METHOD(ClientTest,
                 "H7: proxies from the environment in service mode, never in local mode",
                 "[http][h7]") {
  const std::string proxy = "http://127.0.0.1:" + std::to_string(fs.Port("proxy"));

  env.Set("https_proxy", proxy);
  REQUIRE(Make(Options(fs, rec))->Recall("p", kRecallBody, {}));
  json log = fs.Stats()["proxy"];
  REQUIRE(log.size() == 1);
  CHECK(log[0]["line"] == "CONNECT 127.0.0.1:" + std::to_string(fs.Port("tls")) + " HTTP/1.1");
  for (const auto& h : log[0]["headers"]) {
    CHECK(h[0] != "authorization");
    CHECK(h[0] != "proxy-authorization");
    CHECK_FALSE(HoldsSecret(h[1].get<std::string>()));
  }
  // The request itself went through the tunnel, with its credential inside TLS.
  REQUIRE(fs.Requests().size() == 1);
  CHECK(fs.Requests()[0]["has_authorization"] == true);

  env.Set("https_proxy", std::nullopt);
  env.Set("HTTPS_PROXY", proxy);
  REQUIRE(Make(Options(fs, rec))->Recall("p", kRecallBody, {}));
  CHECK(fs.Stats()["proxy"].size() == 2);

  env.Set("NO_PROXY", "127.0.0.1");  // honoured
  REQUIRE(Make(Options(fs, rec))->Recall("p", kRecallBody, {}));
  CHECK(fs.Stats()["proxy"].size() == 2);
  env.Set("NO_PROXY", std::nullopt);
  env.Set("HTTPS_PROXY", std::nullopt);

  env.Set("HTTP_PROXY", proxy);  // upper-case HTTP_PROXY is never used (and not for https)
  env.Set("http_proxy", proxy);  // http_proxy is for http:// URLs only
  REQUIRE(Make(Options(fs, rec))->Recall("p", kRecallBody, {}));
  CHECK(fs.Tcp("proxy") == 2);

  // Local mode: no proxy whatever the environment says.
  env.Set("ALL_PROXY", proxy);
  env.Set("all_proxy", proxy);
  auto o = Options(fs, rec);
  o.base_url = fs.Http();
  o.local_mode = true;
  o.ca_file.clear();
  auto local = Make(o);
  REQUIRE(local->Recall("p", kRecallBody, {}));
  REQUIRE(local->Stats());
  CHECK(fs.Requests("plain").size() == 1);
  CHECK(fs.Tcp("proxy") == 2);
  CHECK(local->Describe() == json{{"mode", "local"}, {"endpoint", fs.Http()}});
  CHECK((*local->Stats())["checked"] == "tcp_connect");
}

TEST_CASE_METHOD(ClientTest,
                 "H8: an answer with the expected status is used only if it is one JSON object",
                 "[http][h8]") {
  auto api = Make(Options(fs, rec));  // 3 attempts: proves none of these is retried

  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "[";
  std::vector<json> actions;
  for (const std::string& body : std::vector<std::string>{"",
                                                          "{",
                                                          "{\"job_id\":\"j\"",
                                                          "{\"a\":1}}",
                                                          "{\"a\":1} trailing",
                                                          "{\"a\":1}{}",
                                                          "{'a':1}",
                                                          "{a:1}",
                                                          "{\"a\":1,}",
                                                          "{\"a\":01}",
                                                          "{\"a\":NaN}",
                                                          "{\"a\":Infinity}",
                                                          "{\"a\":1e400}",
                                                          "{\"a\":\"\x01\"}",
                                                          "{\"a\":\"\xff\"}",
                                                          "{\"a\":\"\xc3\x28\"}",
                                                          "{\"a\":\"\xed\xa0\x80\"}",
                                                          "{\"a\":\"\\ud800\"}",
                                                          "{\"a\":\"\\x41\"}",
                                                          "\xef\xbb\xbf{\"job_id\":\"j\"}",
                                                          "{\"a\":1,\"a\":2}",
                                                          "{\"o\":{\"k\":1,\"k\":1}}",
                                                          std::string("{\"a\":1}\0garbage", 15),
                                                          "[]",
                                                          "[{\"job_id\":\"j\"}]",
                                                          "\"job\"",
                                                          "42",
                                                          "null",
                                                          "true",
                                                          "<html>OK</html>",
                                                          "OK",
                                                          deep,
                                                          "{\"a\":\"unterminated}",
                                                          "{\"a\":-Infinity}",
                                                          "{\"a\":.5}",
                                                          "{\"a\":+1}",
                                                          "{\"a\":[1,]}",
                                                          "{\"a\":\"\\udc00\"}",
                                                          "{\"a\":\"tab\there\"}",
                                                          "{\"a\":\"\xc0\xaf\"}",
                                                          "  ",
                                                          "{\"a\":true}\x1e",
                                                          std::string("\x1f\x8b\x08\x00", 4)}) {
    actions.push_back({{"status", 202}, {"body_hex", Hex(body)}});
  }
  // Invalid bodies gzip-encoded or chunked, and a good body that a Content-Length of 0 hides.
  actions.push_back({{"status", 202}, {"body", "{\"a\":"}, {"gzip", true}});
  actions.push_back({{"status", 202}, {"body", "[1,2,3]"}, {"gzip", true}});
  actions.push_back({{"status", 202}, {"body", "not json"}, {"framing", "chunked"}});
  actions.push_back({{"status", 202}, {"body", "not json"}, {"framing", "close"}});
  actions.push_back(
      {{"status", 202}, {"body", "{\"a\":1}"}, {"content_length", 0}, {"close", true}});
  REQUIRE(actions.size() >= 45);

  size_t seen = 0;
  for (const auto& action : actions) {
    INFO(action.dump().substr(0, 120));
    fs.Script(json::array({action}));
    const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
    CHECK(e.code == Errc::kProtocol);
    CHECK(e.api_code == "invalid_json_response");
    CHECK(e.message.find("HTTP 202") != std::string::npos);
    CHECK_FALSE(e.retryable);
    CHECK(fs.Requests().size() == ++seen);
  }
  // The wrong status, even with a perfect body and even a 2xx, is an error.
  for (int status : {200, 201, 204}) {
    fs.Script(json::array({Answer(status, kJob)}));
    const Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
    CHECK(e.api_code == "http_error");
    CHECK(e.message == "TMCRA returned HTTP " + std::to_string(status));
    CHECK(fs.Requests().size() == ++seen);
  }
  // A body that claims gzip but is not: undecodable, so the outcome is unknown.
  auto o = Options(fs, rec);
  o.max_attempts = 1;
  fs.Script(json::array(
      {{{"status", 202}, {"headers", {{"Content-Encoding", "gzip"}}}, {"json", kJob}}}));
  const Error e = ErrorOf(Make(o)->Ingest("p", kIngestBody, Key("key-00000001")));
  CHECK(e.api_code == "transport_error");
  CHECK(rec->Take().empty());
  SUCCEED("checked " << seen + 1 << " invalid answers");
}

TEST_CASE_METHOD(ClientTest, "S1: the API key never appears in an error or a log", "[http][s1]") {
  LogCapture logs;
  auto o = Options(fs, rec);
  o.max_attempts = 2;
  auto api = Make(o);
  const json echo = {{"error",
                      {{"code", "unauthorized"},
                       {"message", "invalid key " + kKey + " (secret " + kSecret + ")"},
                       {"request_id", "req-" + kKey},
                       {"details", {{"authorization", "Bearer " + kKey}}}}}};
  fs.Script(json::array(
      {{{"status", 401},
        {"headers", {{"x-request-id", kKey}, {"WWW-Authenticate", "Bearer"}}},
        {"json", echo}},
       {{"status", 503}, {"headers", {{"x-request-id", kSecret}}}, {"json", echo}},
       {{"status", 503}, {"json", echo}},
       {{"status", 202}, {"headers", {{"x-request-id", kKey}}}, {"body", "not json " + kKey}}}));
  Error e = ErrorOf(api->Recall("p", kRecallBody, {}));
  CHECK(e.code == tmcra::Errc::kPermissionDenied);
  CHECK(e.message.find("[REDACTED]") != std::string::npos);
  CHECK(e.details_json.find("[REDACTED]") != std::string::npos);
  e = ErrorOf(api->Recall("p", kRecallBody, {}));
  CHECK(e.code == tmcra::Errc::kUnavailable);
  e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
  CHECK(e.api_code == "invalid_json_response");
  // Transport and TLS failures, and refused options.
  auto bad = o;
  bad.ca_file = fs.OtherCa();
  ErrorOf(Make(bad)->Recall("p", kRecallBody, {}));
  bad = o;
  bad.base_url = "https://127.0.0.1:" + std::to_string(ClosedPort());
  ErrorOf(Make(bad)->Recall("p", kRecallBody, {}));
  bad = o;
  bad.api_key = kKey + "\r\nX-Injected: 1";
  auto refused = HttpMemoryApi::Create(bad);
  REQUIRE_FALSE(refused);
  CHECK_FALSE(HoldsSecret(refused.error().message));
  bad = o;
  bad.base_url = "https://user:" + kKey + "@127.0.0.1:1";
  refused = HttpMemoryApi::Create(bad);
  REQUIRE_FALSE(refused);
  CHECK_FALSE(HoldsSecret(refused.error().message));
  CHECK(fs.Requests().size() == 4);
  const std::string text = logs.Text();
  CHECK(text.find("memory API") != std::string::npos);  // the retries were logged ...
  CHECK_FALSE(HoldsSecret(text));                       // ... without the key
}

TEST_CASE_METHOD(ClientTest,
                 "S5: ids are escaped or refused and every request stays under the base path",
                 "[http][s5]") {
  auto o = Options(fs, rec);
  o.base_url = fs.Https() + "/prefix/";
  auto api = Make(o);
  fs.Default(Answer(200, {{"ok", true}}));

  const std::vector<std::string> escaped{"../x",   "..%2f",       "a/b",  "a?b=1",
                                         "a#frag", "%2e%2e",      "%00",  "a b",
                                         "...",    "caf\xc3\xa9", "a\\b", std::string(1000, 'z')};
  const std::vector<std::string> refused{"",
                                         ".",
                                         "..",
                                         "a\r\nX-Injected: 1",
                                         "a\nb",
                                         std::string("a\0b", 3),
                                         std::string(10 * 1024, 'k')};
  size_t sent = 0;
  for (const auto& id : escaped) {
    INFO(id.substr(0, 40));
    REQUIRE(api->Recall(id, kRecallBody, {}));
    REQUIRE(api->GetJob(id));
    REQUIRE(api->Evidence("p", id, 25));
    sent += 3;
    const json reqs = fs.Requests();
    REQUIRE(reqs.size() == sent);
    const std::string q = tmcra::config::QuoteSegment(id);
    CHECK(reqs[sent - 3]["target"] == "/prefix/v1/scopes/" + q + "/recall");
    CHECK(reqs[sent - 2]["target"] == "/prefix/v1/jobs/" + q);
    CHECK(reqs[sent - 1]["target"] ==
          "/prefix/v1/scopes/p/memory-graph/nodes/" + q + "/evidence?limit=25");
  }
  for (const auto& id : refused) {
    INFO(id.substr(0, 40));
    Error e = ErrorOf(api->Recall(id, kRecallBody, {}));
    CHECK(e.code == Errc::kInvalidArgument);
    CHECK(e.message.rfind("scope: ", 0) == 0);
    e = ErrorOf(api->GetJob(id));
    CHECK(e.message.rfind("job_id: ", 0) == 0);
    e = ErrorOf(api->Evidence("p", id, 25));
    CHECK(e.message.rfind("memory_id: ", 0) == 0);
  }
  // Header values: agent ids by the service's grammar, keys without control characters.
  for (const std::string& agent : std::vector<std::string>{"a\r\nX-Injected: 1", "a b", "-lead",
                                                           std::string(201, 'a'), "a\nb"}) {
    Error e = ErrorOf(api->Recall("p", kRecallBody, {agent}));
    CHECK(e.message.rfind("agent_id: ", 0) == 0);
    e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001", agent)));
    CHECK(e.message.rfind("agent_id: ", 0) == 0);
  }
  for (const std::string& key :
       std::vector<std::string>{"k\r\nX-Injected: 1", std::string("k\0k", 3), std::string("")}) {
    CHECK(ErrorOf(api->Ingest("p", kIngestBody, Key(key))).message.rfind("idempotency_key: ", 0) ==
          0);
    CHECK(ErrorOf(api->Feedback("p", kRecallBody, {key})).message.rfind("idempotency_key: ", 0) ==
          0);
  }
  // Default ids are checked when the client is made.
  auto bad = o;
  bad.default_agent_id = "x\r\ny";
  CHECK_FALSE(HttpMemoryApi::Create(bad));
  bad = o;
  bad.integration_id = "bad id";
  CHECK_FALSE(HttpMemoryApi::Create(bad));

  const json all = fs.AllRequests();
  CHECK(all.size() == sent);
  for (const auto& r : all) {
    const std::string target = r["target"];
    CHECK(target.rfind("/prefix/v1/", 0) == 0);
    CHECK(target.find("/../") == std::string::npos);
    CHECK(HeaderCount(r, "x-injected") == 0);
    const std::string head = r["raw_head"];
    CHECK(head.find('\r') == std::string::npos);  // lines split on CRLF: no stray CR inside
  }
}

TEST_CASE_METHOD(ClientTest, "S3: SSLKEYLOGFILE stops the client unless explicitly allowed",
                 "[http][s3]") {
  tmcra::testing::TempDir dir;
  const std::string keylog = dir.File("keys.log");
  env.Set("SSLKEYLOGFILE", keylog);
  auto o = Options(fs, rec);
  auto refused = HttpMemoryApi::Create(o);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("SSLKEYLOGFILE") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(keylog));
  CHECK(fs.AllRequests().empty());
  auto local = o;  // plain HTTP on loopback: no TLS keys, but libcurl would create the file
  local.base_url = fs.Http();
  local.local_mode = true;
  auto local_refused = HttpMemoryApi::Create(local);
  REQUIRE_FALSE(local_refused);
  CHECK(local_refused.error().message.find("SSLKEYLOGFILE") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(keylog));
  local.allow_keylog = true;
  REQUIRE(HttpMemoryApi::Create(local));
  CHECK(fs.AllRequests().empty());
  o.allow_keylog = true;  // a debugging session asked for it
  REQUIRE(Make(o)->Recall("p", kRecallBody, {}));
}

TEST_CASE_METHOD(ClientTest, "concurrent calls share the client safely", "[http][threads]") {
  auto api = Make(Options(fs, rec));
  fs.Default(Answer(200, {{"ok", true}}));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        if (api->Recall("p" + std::to_string(t), kRecallBody, {})) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ok == 80);
  CHECK(fs.Requests().size() == 80);
  // Connections are reused: far fewer than one per request.
  CHECK(fs.Stats()["connections"]["tls"]["tls"].get<int>() <= 16);
}

TEST_CASE_METHOD(ClientTest,
                 "the connection guard runs before every attempt and a missing batch endpoint "
                 "is recognisable",
                 "[http]") {
  auto o = Options(fs, rec);
  std::atomic<int> guard_calls{0};
  std::atomic<int> fail_at{0};
  o.before_attempt = [&]() -> tmcra::Status {
    const int call = ++guard_calls;
    if (call == fail_at) return Error::Invalid("the memory connection changed");
    return tmcra::Ok();
  };
  auto api = Make(o);
  fs.Script(json::array(
      {Answer(503, Envelope("busy")), Answer(503, Envelope("busy")), Answer(202, kJob)}));
  REQUIRE(api->Ingest("p", kIngestBody, Key("key-00000001")));
  CHECK(guard_calls == 3);

  guard_calls = 0;
  fail_at = 2;
  fs.Script(json::array({Answer(503, Envelope("busy"))}));
  Error e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
  // Not retried; kept pending by delivery (not a refusal of the content), and in doubt: the
  // first attempt's 503 came from a server that may have applied it.
  CHECK(e.message ==
        "the memory connection changed (an earlier attempt reached the server; "
        "the outcome is unknown)");
  CHECK(e.code == Errc::kPermissionDenied);
  CHECK(e.api_code == "transport_error");
  CHECK(tmcra::queue::ClassifyFailure(e, 0) == tmcra::queue::FailureAction::kHold);
  CHECK(fs.Requests().size() == 4);
  // Blocked before anything was sent.
  guard_calls = 0;
  fail_at = 1;
  e = ErrorOf(api->Ingest("p", kIngestBody, Key("key-00000001")));
  CHECK(e.message == "the memory connection changed");
  CHECK(e.code == Errc::kPermissionDenied);
  CHECK(e.api_code == "connection_blocked");
  CHECK(tmcra::queue::ClassifyFailure(e, 0) == tmcra::queue::FailureAction::kHold);
  CHECK(fs.Requests().size() == 4);
  fail_at = 0;

  // TMCRA's hosted service has no ingest/batch: 404 (or 405) becomes batch_not_supported,
  // remembered so later batches are not even sent.
  const json batch = {{"items", json::array({kIngestBody})}};
  for (const int status : {404, 405}) {
    auto fresh = Make(Options(fs, rec));
    fs.Script(json::array({Answer(status, {{"detail", "Not Found"}})}));
    const size_t before = fs.Requests().size();
    e = ErrorOf(fresh->IngestBatch("p", batch, {}));
    CHECK(e.api_code == "batch_not_supported");
    CHECK(e.code == Errc::kNotFound);
    CHECK(e.message.find("HTTP " + std::to_string(status)) != std::string::npos);
    CHECK_FALSE(e.retryable);
    e = ErrorOf(fresh->IngestBatch("p", batch, {}));
    CHECK(e.api_code == "batch_not_supported");
    CHECK(fs.Requests().size() == before + 1);
    fs.Script(json::array({Answer(202, kJob)}));
    CHECK(fresh->Ingest("p", kIngestBody, Key("key-00000001")));
  }

  // An ingest passed on from another client keeps that client's attribution headers (they are
  // part of the service's idempotency hash).
  auto passed_on = Key("key-00000005");
  passed_on.client_platform = "codex";
  passed_on.integration_id = "int-2";
  fs.Script(json::array({Answer(202, kJob)}));
  REQUIRE(api->Ingest("p", kIngestBody, passed_on));
  const json last = fs.Requests().back();
  CHECK(Header(last, "x-tmcra-client-platform") == "codex");
  CHECK(Header(last, "x-tmcra-integration-id") == "int-2");
  passed_on.integration_id = "bad id";
  CHECK(ErrorOf(api->Ingest("p", kIngestBody, passed_on)).message.rfind("integration_id: ", 0) ==
        0);
  passed_on.integration_id.reset();
  passed_on.client_platform = "a\r\nX-Injected: 1";
  CHECK(ErrorOf(api->Ingest("p", kIngestBody, passed_on)).message.rfind("client_platform: ", 0) ==
        0);
}

TEST_CASE_METHOD(ClientTest,
                 "GetJobs: one POST /v1/jobs/batch, read per id; a memory without it is "
                 "remembered; an unusable answer is refused whole",
                 "[http][h8]") {
  auto api = Make(Options(fs, rec));
  const json job1 = {{"job_id", "job-1"}, {"status", "succeeded"}};
  const json answer = {{"jobs",
                        {{{"job_id", "job-1"}, {"status_code", 200}, {"job", job1}},
                         {{"job_id", "job-2"},
                          {"status_code", 404},
                          {"error", {{"code", "not_found"}, {"message", "no job " + kKey}}}}}}};
  fs.Script(json::array({Answer(200, answer)}));
  auto jobs = api->GetJobs({"job-1", "job-2"});
  REQUIRE(jobs);
  REQUIRE(jobs->size() == 2);
  REQUIRE((*jobs)[0]);
  CHECK(*(*jobs)[0] == job1);
  REQUIRE_FALSE((*jobs)[1]);
  CHECK((*jobs)[1].error().code == tmcra::Errc::kNotFound);
  CHECK((*jobs)[1].error().message.find(kSecret) == std::string::npos);
  json reqs = fs.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0]["method"] == "POST");
  CHECK(reqs[0]["target"] == "/v1/jobs/batch");
  CHECK(reqs[0]["body"] == R"({"job_ids":["job-1","job-2"]})");
  CHECK(Header(reqs[0], "content-type") == "application/json");
  CHECK_FALSE(Header(reqs[0], "idempotency-key"));

  // Refused before anything is sent: no ids is no call, too many or an id that cannot be a
  // path segment is the caller's error.
  CHECK(api->GetJobs({})->empty());
  CHECK(ErrorOf(api->GetJobs(std::vector<std::string>(101, "job-1"))).code ==
        Errc::kInvalidArgument);
  CHECK(ErrorOf(api->GetJobs({"job-1", "a\r\nb"})).message.rfind("job_id: ", 0) == 0);
  CHECK(fs.Requests().size() == 1);

  // An answer that does not match the ids: refused whole (naming the answer's request id),
  // not retried, not remembered.
  json short_answer = {{"status", 200},
                       {"json", {{"jobs", json::array({answer["jobs"][1]})}}},
                       {"headers", json::array({json::array({"x-request-id", "req-short"})})}};
  fs.Script(json::array({short_answer, Answer(200, answer)}));
  Error e = ErrorOf(api->GetJobs({"job-1", "job-2"}));
  CHECK(e.code == Errc::kProtocol);
  CHECK_FALSE(e.retryable);
  CHECK(e.message.find("req-short") != std::string::npos);
  CHECK(api->GetJobs({"job-1", "job-2"}));
  CHECK(fs.Requests().size() == 3);

  // A retryable status is retried like any call; when every attempt gets one, the last one
  // is the call's error (retryable: delivery gives it to every job of the call).
  fs.Script(json::array({Answer(503, Envelope("busy")), Answer(200, answer)}));
  CHECK(api->GetJobs({"job-1", "job-2"}));
  CHECK(fs.Requests().size() == 5);
  fs.Script(json::array({Answer(503, Envelope("busy")), Answer(503, Envelope("busy")),
                         Answer(429, Envelope("slow down"))}));
  e = ErrorOf(api->GetJobs({"job-1", "job-2"}));
  CHECK(e.code == tmcra::Errc::kRateLimited);
  CHECK(e.retryable);
  CHECK(fs.Requests().size() == 8);

  // TMCRA's hosted service has no jobs/batch (404 for the path, 405 where it takes
  // /v1/jobs/{id} as GET only): remembered, so later calls send nothing.
  for (const int status : {404, 405, 501}) {
    auto fresh = Make(Options(fs, rec));
    fs.Script(json::array({Answer(status, {{"detail", "Not Found"}})}));
    const size_t before = fs.Requests().size();
    e = ErrorOf(fresh->GetJobs({"job-1"}));
    CHECK(e.api_code == "batch_not_supported");
    CHECK(e.code == Errc::kNotFound);
    CHECK(e.code == tmcra::api::KindForStatus(status));
    CHECK_FALSE(e.retryable);
    CHECK(ErrorOf(fresh->GetJobs({"job-1"})).api_code == "batch_not_supported");
    CHECK(fs.Requests().size() == before + 1);
    // Ingest batches are another endpoint: not affected.
    fs.Script(json::array({Answer(202, {{"scope_name", "p"}, {"jobs", json::array({kJob})}})}));
    CHECK(fresh->IngestBatch("p", {{"items", json::array({kIngestBody})}}, {}));
  }
}

TEST_CASE_METHOD(ClientTest,
                 "a recall whose structured evidence is unused asks a tmcra-memd that keeps the "
                 "snapshot for the prompt evidence only",
                 "[http]") {
  auto api = Make(Options(fs, rec));
  const json answer = {{"query_id", "api_1"}, {"scope_name", "p"}};
  const auto with_features = [&](const std::string& value) {
    return json{{"status", 200},
                {"json", answer},
                {"headers", json::array({json::array({"X-TMCRA-Memd-Features", value})})}};
  };
  tmcra::api::RecallOptions unused;
  unused.structured_evidence_unused = true;
  const auto last_body = [&] {
    return json::parse(fs.Requests().back()["body"].get<std::string>());
  };

  // Not known yet: the body as given. An answer naming something else teaches nothing.
  fs.Script(json::array({with_features("jobs-batch, prompt-only-snapshots"), Answer(200, answer)}));
  REQUIRE(api->Recall("p", kRecallBody, unused));
  CHECK(last_body() == kRecallBody);
  REQUIRE(api->Recall("p", kRecallBody, unused));
  CHECK(last_body() == kRecallBody);
  // Said (in a list): from then on, prompt_only when the evidence is unused, and only then.
  fs.Script(json::array({with_features("jobs-batch, prompt-only-snapshot"),
                         with_features("prompt-only-snapshot"), Answer(200, answer)}));
  REQUIRE(api->Recall("p", kRecallBody, unused));
  CHECK(last_body() == kRecallBody);
  REQUIRE(api->Recall("p", kRecallBody, unused));
  json expected = kRecallBody;
  expected["response_projection"] = "prompt_only";
  CHECK(last_body() == expected);
  CHECK(fs.Requests().back()["body"] == expected.dump());
  REQUIRE(api->Recall("p", kRecallBody, {}));  // tmcra_turn_prepare keeps the evidence
  CHECK(last_body() == kRecallBody);

  // Another server behind the URL: a prompt_only answer that does not list the feature is
  // forgotten and the recall asked again in full, at once; later recalls go in full.
  fs.Script(json::array({Answer(200, answer), Answer(200, answer), Answer(200, answer)}));
  size_t before = fs.Requests().size();
  REQUIRE(api->Recall("p", kRecallBody, unused));
  json reqs = fs.Requests();
  REQUIRE(reqs.size() == before + 2);
  CHECK(json::parse(reqs[before]["body"].get<std::string>()) == expected);
  CHECK(json::parse(reqs[before + 1]["body"].get<std::string>()) == kRecallBody);
  REQUIRE(api->Recall("p", kRecallBody, unused));
  CHECK(last_body() == kRecallBody);

  // An answer that is not a success teaches nothing.
  auto fresh = Make(Options(fs, rec));
  json refused = with_features("prompt-only-snapshot");
  refused["status"] = 404;
  refused["json"] = Envelope("not_found");
  fs.Script(json::array({refused, Answer(200, answer)}));
  CHECK_FALSE(fresh->Recall("p", kRecallBody, unused));
  REQUIRE(fresh->Recall("p", kRecallBody, unused));
  CHECK(last_body() == kRecallBody);
}
