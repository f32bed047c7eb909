#include "src/api/http_memory_api.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "base/identifiers.h"
#include "base/version.h"
#include "src/api/api_status.h"
#include "src/api/http_wire.h"
#include "src/api/retry_policy.h"
#include "src/config/libcurl.h"
#include "src/config/url.h"

#if LIBCURL_VERSION_NUM < 0x075500
#error "HttpMemoryApi needs libcurl 7.85 or newer (CURLOPT_PROTOCOLS_STR)"
#endif

namespace tmcra::api {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = 256 * 1024;  // the whole header section of one answer
// Connections kept for reuse: background delivery has up to five requests in flight (four job
// polls beside a batch), and a tool call may come at the same time.
constexpr size_t kMaxIdleHandles = 6;
constexpr auto kBatchUnsupportedMemory = std::chrono::minutes(10);
constexpr std::string_view kAgentIdRule = "^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}$";

// ---------------------------------------------------------------------------------------------
// One transfer's collected answer. The callbacks never throw (they run inside libcurl).

// A header name as the header callback stores it.
std::string LowerName(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether one of a header's values, a comma-separated list, names `feature`.
bool ListsFeature(const std::vector<std::string>& values, std::string_view feature) {
  for (const auto& value : values) {
    std::string_view rest(value);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (item == feature) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return false;
}

struct Exchange {
  size_t body_limit = 0;
  std::string body;
  bool body_too_large = false;
  std::vector<std::pair<std::string, std::string>> headers;  // of the final answer
  size_t header_bytes = 0;
  bool headers_too_large = false;
  bool connected = false;  // the request was about to be sent on an established connection

  // The stall rule: once the answer has begun, fewer than `min_bytes_per_window` bytes in a
  // window of `window` abandons it (the server's think time before the first byte is bounded
  // by the total timeout only, as in the contract's single timeout).
  std::chrono::steady_clock::duration window{};
  curl_off_t min_bytes_per_window = 0;
  bool answer_started = false;
  std::chrono::steady_clock::time_point window_start;
  curl_off_t window_progress = 0;
  bool stalled = false;

  std::vector<std::string> Values(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [key, value] : headers) {
      if (key == name) out.push_back(value);
    }
    return out;
  }
  std::string First(std::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return {};
  }
};

size_t OnBody(char* data, size_t size, size_t count, void* user) noexcept {
  auto* ex = static_cast<Exchange*>(user);
  const size_t bytes = size * count;
  if (bytes > ex->body_limit - ex->body.size()) {
    ex->body_too_large = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  try {
    ex->body.append(data, bytes);
  } catch (...) {
    ex->body_too_large = true;
    return 0;
  }
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) noexcept {
  auto* ex = static_cast<Exchange*>(user);
  const size_t bytes = size * count;
  ex->header_bytes += bytes;
  if (!ex->answer_started) {
    ex->answer_started = true;
    ex->window_start = Clock::now();
    ex->window_progress = 0;
  }
  if (ex->header_bytes > kMaxHeaderBytes) {
    ex->headers_too_large = true;
    return 0;
  }
  std::string_view line(data, bytes);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.substr(0, 5) == "HTTP/") {  // a new answer (an interim 1xx came before): start over
    ex->headers.clear();
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return bytes;
  try {
    std::string name = LowerName(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    ex->headers.emplace_back(std::move(name), std::string(value));
  } catch (...) {
    ex->headers_too_large = true;
    return 0;
  }
  return bytes;
}

int OnPrereq(void* user, char*, char*, int, int) noexcept {
  static_cast<Exchange*>(user)->connected = true;
  return CURL_PREREQFUNC_OK;
}

// Called by libcurl at least about once a second during a transfer, and whenever data moves.
int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t) noexcept {
  auto* ex = static_cast<Exchange*>(user);
  if (!ex->answer_started || ex->window <= Clock::duration::zero()) return 0;
  const auto now = Clock::now();
  if (now - ex->window_start < ex->window) return 0;
  const curl_off_t progress = static_cast<curl_off_t>(ex->header_bytes) + dlnow;
  if (progress - ex->window_progress < ex->min_bytes_per_window) {
    ex->stalled = true;
    return 1;  // aborts the transfer (CURLE_ABORTED_BY_CALLBACK)
  }
  ex->window_start = now;
  ex->window_progress = progress;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The libcurl functions this file calls. libcurl is loaded at run time, by Create (src/config/
// libcurl.h): a tmcra-mcp with embedded memory never loads it. Every call below goes through
// Curl(), which Create has filled before any handle exists.

struct CurlFunctions {
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_version_info) version_info = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_perform) easy_perform = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_reset) easy_reset = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
};

Result<CurlFunctions> ResolveCurlFunctions() {
  CurlFunctions f;
  for (Status s : {config::ResolveLibcurl(f.global_init, "curl_global_init"),
                   config::ResolveLibcurl(f.version_info, "curl_version_info"),
                   config::ResolveLibcurl(f.easy_init, "curl_easy_init"),
                   config::ResolveLibcurl(f.easy_setopt, "curl_easy_setopt"),
                   config::ResolveLibcurl(f.easy_perform, "curl_easy_perform"),
                   config::ResolveLibcurl(f.easy_getinfo, "curl_easy_getinfo"),
                   config::ResolveLibcurl(f.easy_reset, "curl_easy_reset"),
                   config::ResolveLibcurl(f.easy_cleanup, "curl_easy_cleanup"),
                   config::ResolveLibcurl(f.easy_strerror, "curl_easy_strerror"),
                   config::ResolveLibcurl(f.slist_append, "curl_slist_append"),
                   config::ResolveLibcurl(f.slist_free_all, "curl_slist_free_all")}) {
    if (!s) return s.error();
  }
  return f;
}

// Resolved once per process; an error (libcurl missing or too old) is kept and returned again.
const Result<CurlFunctions>& LoadedCurl() {
  static const Result<CurlFunctions> loaded = ResolveCurlFunctions();
  return loaded;
}

// Only after Create has succeeded (it checks LoadedCurl()).
const CurlFunctions& Curl() { return *LoadedCurl(); }

struct SlistDeleter {
  void operator()(curl_slist* list) const { Curl().slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

struct EasyDeleter {
  void operator()(CURL* h) const { Curl().easy_cleanup(h); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;

// Sets options in sequence, remembering the first failure.
class Setter {
 public:
  explicit Setter(CURL* h) : h_(h) {}
  template <class T>
  Setter& operator()(CURLoption option, T value) {
    if (rc_ == CURLE_OK) rc_ = Curl().easy_setopt(h_, option, value);
    return *this;
  }
  CURLcode rc() const { return rc_; }

 private:
  CURL* h_;
  CURLcode rc_ = CURLE_OK;
};

std::once_flag g_curl_once;
CURLcode g_curl_init = CURLE_FAILED_INIT;

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

struct Request {
  std::string_view what;  // "recall", ..., for messages and logs
  bool post = false;
  std::string path;                  // escaped, "/v1/..."
  std::string body;                  // JSON text (POST)
  std::vector<std::string> headers;  // per-request "Name: value"
  int expected_status = 200;
  ElidedMember* elide = nullptr;       // a recall's evidence read but not built (RecallOptions)
  std::string* request_id = nullptr;   // set to a successful answer's x-request-id
  bool* prompt_only_listed = nullptr;  // set to whether it listed kFeaturePromptOnlySnapshot
  // The attribution headers (part of the service's idempotency hash): "mcp" and the configured
  // integration id unless an ingest passes on other values.
  std::string client_platform = "mcp";
  std::optional<std::string> integration_id;
};

// What one attempt produced.
struct AttemptResult {
  AttemptOutcome outcome;
  std::optional<Error> error;  // when it did not succeed
  json value;                  // when it did
};

bool IsTlsVerificationCode(CURLcode code) {
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
      return true;
    default:
      return false;
  }
}

bool IsLocalSetupCode(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_FAILED_INIT:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_FUNCTION_NOT_FOUND:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
      return true;
    default:
      return false;
  }
}

// An optional endpoint (ingest/batch, jobs/batch) that a memory may not have: once it answers
// 404, 405 or 501 (not an unreadable body), that is remembered for kBatchUnsupportedMemory,
// during which calls to it are answered with the same error and no request. (Other refusals
// are not remembered: a caller falls back for that call, at the cost of the one request.)
class MissingEndpoint {
 public:
  // The remembered error, while it holds.
  std::optional<Error> Known() {
    std::lock_guard lock(mu_);
    if (until_ && Clock::now() < *until_) return error_;
    return std::nullopt;
  }
  // `result` of a call to the endpoint (`name`), or the kBatchNotSupported error it meant.
  template <typename T>
  Result<T> Note(Result<T> result, std::string_view name, std::string_view instead) {
    if (result) return result;
    const Errc kind = result.error().code;
    if ((kind != Errc::kNotFound && kind != Errc::kUnimplemented) ||
        !IsServiceAnswer(result.error())) {
      return result;
    }
    Error error{Errc::kNotFound, false,
                "the Memory API has no " + std::string(name) + " endpoint (HTTP " +
                    std::to_string(HttpStatusFor(kind)) + "); " + std::string(instead) + " (" +
                    result.error().message + ")"};
    error.api_code = std::string(kBatchNotSupported);
    std::lock_guard lock(mu_);
    until_ = Clock::now() + kBatchUnsupportedMemory;
    error_ = error;
    return error;
  }

 private:
  std::mutex mu_;
  std::optional<Clock::time_point> until_;  // guarded by mu_
  std::optional<Error> error_;              // guarded by mu_
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct HttpMemoryApi::Impl {
  HttpOptions options;
  std::string base;       // without trailing '/'
  std::string protocols;  // "https" or "http"
  std::vector<std::string> secrets;
  std::string authorization;  // "Authorization: Bearer <key>"
  std::string user_agent;
  std::string ca_file;
  std::string ca_dir;
  std::chrono::milliseconds connect_timeout{10000};

  std::mutex pool_mu;
  std::vector<CURL*> idle;  // guarded by pool_mu

  std::mutex rng_mu;
  std::mt19937_64 rng;  // guarded by rng_mu

  // A tmcra-memd said it keeps the snapshot under prompt_only (kFeaturesHeader).
  std::atomic<bool> prompt_only_snapshot{false};
  MissingEndpoint ingest_batch;  // POST /v1/scopes/{scope}/ingest/batch
  MissingEndpoint jobs_batch;    // POST /v1/jobs/batch (tmcra-memd's)

  ~Impl() {
    for (CURL* h : idle) Curl().easy_cleanup(h);
  }

  Easy Acquire() {
    {
      std::lock_guard lock(pool_mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return Easy(h);
      }
    }
    return Easy(Curl().easy_init());
  }

  void Release(Easy handle) {
    if (!handle) return;
    // Drop every pointer into the finished request (callback data, headers, body, error
    // buffer); the connections, DNS cache and TLS state stay with the handle.
    Curl().easy_reset(handle.get());
    std::lock_guard lock(pool_mu);
    if (idle.size() < kMaxIdleHandles) idle.push_back(handle.release());
  }

  double JitterUnit() {
    std::lock_guard lock(rng_mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }

  std::string Scrub(std::string text) const { return wire::Redact(std::move(text), secrets); }

  Error Scrubbed(Error error) const {
    error.message = Scrub(std::move(error.message));
    error.details_json = Scrub(std::move(error.details_json));
    return error;
  }

  // The options every transfer of ours has (the request's own come on top).
  CURLcode Common(CURL* h, Exchange& ex, char* errbuf) const {
    Setter set(h);
    set(CURLOPT_PROTOCOLS_STR, protocols.c_str())(CURLOPT_REDIR_PROTOCOLS_STR, protocols.c_str())(
        CURLOPT_FOLLOWLOCATION, 0L)(CURLOPT_MAXREDIRS, 0L)(CURLOPT_NOSIGNAL, 1L)(
        CURLOPT_VERBOSE, 0L)(CURLOPT_ERRORBUFFER, errbuf)(CURLOPT_WRITEFUNCTION, &OnBody)(
        CURLOPT_WRITEDATA, static_cast<void*>(&ex))(CURLOPT_HEADERFUNCTION, &OnHeader)(
        CURLOPT_HEADERDATA, static_cast<void*>(&ex))(CURLOPT_PREREQFUNCTION, &OnPrereq)(
        CURLOPT_PREREQDATA, static_cast<void*>(&ex))(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L)(
        CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()))(
        CURLOPT_SSL_VERIFYPEER, 1L)(CURLOPT_SSL_VERIFYHOST, 2L)(
        CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2))
        // No TLS session resumption: every new connection verifies the certificate chain again
        // (a resumed session would skip it), so the connection lifetime bounds how long a
        // certificate checked once is trusted.
        (CURLOPT_SSL_SESSIONID_CACHE, 0L)(CURLOPT_TCP_KEEPALIVE, 1L)(
            CURLOPT_MAXLIFETIME_CONN, static_cast<long>(options.max_connection_lifetime.count()));
    if (!ca_file.empty()) set(CURLOPT_CAINFO, ca_file.c_str());
    if (!ca_dir.empty()) set(CURLOPT_CAPATH, ca_dir.c_str());
    // Local mode never goes through a proxy; service mode takes the proxy variables
    // (https_proxy, HTTPS_PROXY, ALL_PROXY, NO_PROXY) from the environment, as libcurl does.
    if (options.local_mode) set(CURLOPT_PROXY, "");
    return set.rc();
  }

  Error TransportError(CURLcode code, const char* errbuf, bool connected,
                       bool stalled = false) const {
    std::string detail =
        stalled ? "the answer slowed below " + std::to_string(options.low_speed_limit) +
                      " bytes/s for " + std::to_string(options.low_speed_time.count()) + " s"
        : errbuf != nullptr && errbuf[0] != '\0' ? std::string(errbuf)
                                                 : std::string(Curl().easy_strerror(code));
    detail = wire::SafeText(Scrub(std::move(detail)), 500);
    detail += " [curl " + std::to_string(static_cast<int>(code)) + "]";
    if (connected) {
      // Whatever failed once the request was on its way (a reset, a timeout, an HTTP/0.9 or
      // otherwise unreadable answer, even a local failure), the server may have received it.
      Error error{
          code == CURLE_OPERATION_TIMEDOUT || stalled ? Errc::kTimeout : Errc::kUnavailable, true,
          "TMCRA transport error (outcome unknown: the request may have been received): " + detail};
      error.api_code = std::string(kTransportInDoubt);
      return error;
    }
    if (IsTlsVerificationCode(code)) {
      Error error{Errc::kUnavailable, false,
                  "TLS verification of the Memory API failed, nothing was sent: " + detail +
                      " (check the server certificate, or ca_file / SSL_CERT_FILE)"};
      error.api_code = std::string(kTlsVerificationFailed);
      return error;
    }
    if (IsLocalSetupCode(code)) {
      Error error = Error::Internal("the HTTP client could not run the request: " + detail);
      error.api_code = std::string(kClientSetupError);
      return error;
    }
    Error error = Error::Unavailable("TMCRA transport error (request not sent): " + detail);
    error.api_code = std::string(kTransportNotSent);
    return error;
  }

  // An attempt that could not be set up: the client's own failure, never sent.
  static AttemptResult SetupFailure(AttemptResult result, std::string message) {
    result.outcome.kind = AttemptKind::kFatal;
    Error error = Error::Internal(std::move(message));
    error.api_code = std::string(kClientSetupError);
    result.error = std::move(error);
    return result;
  }

  // The request's headers into `headers`; false when one could not be added (out of memory).
  bool AddHeaders(const Request& req, Slist& headers) const {
    const auto add = [&](const std::string& line) {
      curl_slist* next = Curl().slist_append(headers.get(), line.c_str());
      if (next != nullptr) {
        (void)headers.release();
        headers.reset(next);
      }
      return next != nullptr;
    };
    bool ok = add(authorization) && add("X-TMCRA-Client-Platform: " + req.client_platform);
    if (req.integration_id) ok = ok && add("X-TMCRA-Integration-ID: " + *req.integration_id);
    for (const auto& line : req.headers) ok = ok && add(line);
    if (req.post) ok = ok && add("Content-Type: application/json");
    return ok && add("Expect:");  // never wait for 100-continue
  }

  // Sets up handle `h` for `req`: URL, headers, limits, progress watch and body.
  CURLcode Configure(CURL* h, const Request& req, const std::string& url, curl_slist* headers,
                     Exchange& ex, char* errbuf) const {
    ex.body_limit = options.max_response_bytes;
    ex.window = options.low_speed_time;
    ex.min_bytes_per_window =
        static_cast<curl_off_t>(options.low_speed_limit) * options.low_speed_time.count();
    CURLcode rc = Common(h, ex, errbuf);
    Setter set(h);
    set(CURLOPT_URL, url.c_str())(CURLOPT_HTTPHEADER, headers)(
        CURLOPT_USERAGENT, user_agent.c_str())(CURLOPT_HTTP_VERSION,
                                               static_cast<long>(CURL_HTTP_VERSION_1_1))(
        CURLOPT_ACCEPT_ENCODING, "gzip")(CURLOPT_TIMEOUT_MS,
                                         static_cast<long>(options.total_timeout.count()))(
        CURLOPT_NOPROGRESS, 0L)(CURLOPT_XFERINFOFUNCTION, &OnProgress)(CURLOPT_XFERINFODATA,
                                                                       static_cast<void*>(&ex))(
        CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_response_bytes));
    if (req.post) {
      // A fixed-size body: Content-Length is always sent, never chunked (the service answers
      // 411 without it).
      set(CURLOPT_POST, 1L)(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()))(
          CURLOPT_POSTFIELDS, req.body.c_str());
    } else {
      set(CURLOPT_HTTPGET, 1L);
    }
    return rc == CURLE_OK ? set.rc() : rc;
  }

  AttemptResult RunOnce(const Request& req) {
    AttemptResult result;
    result.outcome.expected_status = req.expected_status;
    Easy h = Acquire();
    if (!h) return SetupFailure(std::move(result), "the HTTP client could not create a handle");
    Slist headers;
    const bool headers_ok = AddHeaders(req, headers);
    Exchange ex;
    char errbuf[CURL_ERROR_SIZE] = {0};
    const CURLcode rc = Configure(h.get(), req, base + req.path, headers.get(), ex, errbuf);
    if (rc != CURLE_OK || !headers_ok) {
      Release(std::move(h));
      return SetupFailure(std::move(result),
                          std::string("the HTTP client could not be configured: ") +
                              (headers_ok ? Curl().easy_strerror(rc) : "out of memory"));
    }
    const CURLcode code = Curl().easy_perform(h.get());
    long status = 0;
    Curl().easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
    Release(std::move(h));  // before `headers`, `ex` and `errbuf` go away
    return ReadAnswer(req, std::move(result), ex, code, status, errbuf);
  }

  // What a performed attempt came to: a transport failure, an answer we do not take, or the
  // expected answer's JSON object.
  AttemptResult ReadAnswer(const Request& req, AttemptResult result, Exchange& ex, CURLcode code,
                           long status, const char* errbuf) {
    // Redacted before it is cut (a cut key would no longer be recognised).
    const std::string request_id = wire::SafeText(Scrub(ex.First("x-request-id")), 128);
    const bool too_large =
        ex.body_too_large || ex.headers_too_large || code == CURLE_FILESIZE_EXCEEDED;
    const bool answered = status >= 100 && (code == CURLE_OK || too_large);

    if (!answered) {
      result.outcome.kind = ex.connected ? AttemptKind::kInDoubt
                            : IsTlsVerificationCode(code) || IsLocalSetupCode(code)
                                ? AttemptKind::kFatal
                                : AttemptKind::kNotSent;
      result.error = TransportError(code, errbuf, ex.connected, ex.stalled);
      return result;
    }
    const int http_status = static_cast<int>(status);
    result.outcome.status = http_status;
    if (http_status != req.expected_status) {
      // An answer we do not take: its status decides (an oversize error body is ignored).
      result.outcome.kind = AttemptKind::kAnswered;
      result.outcome.retry_after = ex.Values("retry-after");
      const std::string body = too_large ? std::string() : Scrub(std::move(ex.body));
      result.error = wire::ApiError(http_status, body, request_id, secrets);
      return result;
    }
    if (too_large) {
      result.outcome.kind = AttemptKind::kFatal;
      result.error = TooLargeError(http_status, request_id);
      return result;
    }
    auto parsed = wire::ParseResponseObject(ex.body, http_status, request_id, req.elide);
    if (!parsed) {
      result.outcome.kind = AttemptKind::kFatal;
      result.error = parsed.error();
      return result;
    }
    result.outcome.kind = AttemptKind::kAnswered;
    result.value = std::move(*parsed);
    if (req.request_id != nullptr) *req.request_id = request_id;
    NoteFeatures(req, ex);
    return result;
  }

  Error TooLargeError(int http_status, const std::string& request_id) const {
    Error error = Error::Protocol(
        "TMCRA returned an answer larger than " + std::to_string(options.max_response_bytes) +
        " bytes with HTTP " + std::to_string(http_status) +
        (request_id.empty() ? std::string() : " (request id " + request_id + ")"));
    error.api_code = std::string(kResponseTooLarge);
    return error;
  }

  // The features the answer's header lists (kFeaturesHeader): prompt-only snapshots.
  void NoteFeatures(const Request& req, const Exchange& ex) {
    const bool listed =
        ListsFeature(ex.Values(LowerName(kFeaturesHeader)), kFeaturePromptOnlySnapshot);
    if (req.prompt_only_listed != nullptr) *req.prompt_only_listed = listed;
    if (listed && !prompt_only_snapshot.load(std::memory_order_relaxed)) {
      prompt_only_snapshot.store(true, std::memory_order_relaxed);
    }
  }

  // One logical request: attempts, retries and sleeps per retry_policy.h.
  Result<json> Execute(const Request& req) {
    bool earlier_reached = false;  // an attempt reached the server (answered or in doubt)
    for (int attempt = 1;; ++attempt) {
      if (options.before_attempt) {
        Status guard = options.before_attempt();
        if (!guard) return Blocked(guard.error(), earlier_reached);
      }
      AttemptResult result = RunOnce(req);
      const RetryStep step =
          NextStep(result.outcome, attempt, options.max_attempts,
                   result.outcome.kind == AttemptKind::kAnswered ? 0.0 : JitterUnit());
      if (step.reason == RetryStep::Reason::kSuccess) {
        spdlog::debug("memory API {} {}: HTTP {} (attempt {})", req.post ? "POST" : "GET", req.what,
                      result.outcome.status, attempt);
        return std::move(result.value);
      }
      Error error = Scrubbed(result.error.value_or(Error::Internal("request failed")));
      if (result.outcome.kind == AttemptKind::kInDoubt ||
          result.outcome.kind == AttemptKind::kAnswered) {
        earlier_reached = true;
      }
      if (step.retry) {
        spdlog::warn("memory API {}: attempt {}/{} failed ({}); retrying in {} ms ({})", req.what,
                     attempt, options.max_attempts, error.ToString(), step.delay.count(),
                     ReasonName(step.reason));
        Sleep(step.delay);
        continue;
      }
      if (error.api_code == kTransportNotSent && earlier_reached) {
        // This attempt never left, but an earlier one reached the server (a 500 or 504 may
        // even have been applied): the call's outcome is unknown.
        error.api_code = std::string(kTransportInDoubt);
        error.message += " (an earlier attempt reached the server; the outcome is unknown)";
      }
      spdlog::debug("memory API {}: {} after {} attempt(s)", req.what, error.ToString(), attempt);
      return error;
    }
  }

  // The connection guard stopped the call. That is no refusal of what is sent (whatever error
  // the guard gave, e.g. an invalid config file read while the app rewrites it): the call is
  // blocked (kPermissionDenied, so delivery keeps the write pending), and when an earlier
  // attempt reached the server, its outcome is unknown.
  Error Blocked(const Error& guard, bool earlier_reached) const {
    Error error{Errc::kPermissionDenied, false, Scrub(guard.message)};
    error.api_code = std::string(earlier_reached ? kTransportInDoubt : kConnectionBlocked);
    if (earlier_reached) {
      error.message += " (an earlier attempt reached the server; the outcome is unknown)";
    }
    return error;
  }

  void Sleep(std::chrono::milliseconds delay) const {
    if (options.sleep) {
      options.sleep(delay);  // every pause, even 0 ms, so tests see the whole schedule
    } else if (delay > std::chrono::milliseconds(0)) {
      std::this_thread::sleep_for(delay);
    }
  }

  // The attribution of an ingest: what the caller passes on, else ours.
  Status Attribute(const IngestOptions& call, Request& req) const {
    req.integration_id = call.integration_id ? call.integration_id : options.integration_id;
    if (call.client_platform) {
      if (Status s = wire::CheckHeaderValue(*call.client_platform, "client_platform");
          !s || call.client_platform->empty()) {
        return s ? Status(Error::Invalid("client_platform: must not be empty")) : s;
      }
      req.client_platform = *call.client_platform;
    }
    if (req.integration_id && !IsValidIntegrationId(*req.integration_id)) {
      return Error::Invalid("integration_id: must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$");
    }
    return Ok();
  }

  Request Make(std::string_view what, bool post, std::string path, std::string body,
               std::vector<std::string> headers, int expected_status) const {
    Request req;
    req.what = what;
    req.post = post;
    req.path = std::move(path);
    req.body = std::move(body);
    req.headers = std::move(headers);
    req.expected_status = expected_status;
    req.integration_id = options.integration_id;
    return req;
  }

  // X-TMCRA-Agent-ID for a call: its own id, else the configured default.
  Result<std::vector<std::string>> AgentHeader(const std::optional<std::string>& call_agent) const {
    const std::optional<std::string>& agent =
        call_agent && !call_agent->empty() ? call_agent : options.default_agent_id;
    if (!agent) return std::vector<std::string>{};
    if (!IsValidAgentId(*agent)) {
      return Error::Invalid("agent_id: must match " + std::string(kAgentIdRule));
    }
    return std::vector<std::string>{"X-TMCRA-Agent-ID: " + *agent};
  }
};

namespace {

Result<std::string> BodyText(const json& body) {
  if (!body.is_object()) return Error::Invalid("request body: must be a JSON object");
  try {
    return body.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const std::exception&) {
    return Error::Invalid("request body: holds text that is not valid UTF-8");
  }
}

Status CheckKey(std::string_view key, std::string_view field) {
  if (key.empty()) return Error::Invalid(std::string(field) + ": required");
  return wire::CheckHeaderValue(key, field);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

namespace {

// libcurl's OpenSSL backend opens SSLKEYLOGFILE when it initialises (curl_global_init) and
// then writes every session key to it, so this refuses before anything is initialised. Local
// mode too: it has no TLS keys to leak, but the file would still be created (as src/config
// decides too).
Status CheckKeyLog(const HttpOptions& options) {
  if (!Env("SSLKEYLOGFILE")) return Ok();
  if (!options.allow_keylog) {
    return Error::Invalid(
        "SSLKEYLOGFILE is set: the HTTPS client refuses to start, because libcurl would write "
        "the TLS session keys to that file (unset it, or allow it explicitly for debugging)");
  }
  spdlog::warn(
      "SSLKEYLOGFILE is set and allowed: TLS session keys of the Memory API "
      "connections are written to it");
  return Ok();
}

// The options' own rules: a sendable key, valid ids, positive limits.
Status CheckOptions(const HttpOptions& options) {
  if (options.api_key.empty()) return Error::Invalid("api_key: required");
  if (Status s = wire::CheckHeaderValue(options.api_key, "api_key"); !s) return s.error();
  if (options.integration_id && !IsValidIntegrationId(*options.integration_id)) {
    return Error::Invalid("integration_id: must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$");
  }
  if (options.default_agent_id && !IsValidAgentId(*options.default_agent_id)) {
    return Error::Invalid("default_agent_id: must match " + std::string(kAgentIdRule));
  }
  if (options.max_attempts < 1 || options.max_attempts > 100) {
    return Error::Invalid("max_attempts: must be between 1 and 100");
  }
  if (options.total_timeout <= std::chrono::milliseconds(0)) {
    return Error::Invalid("total_timeout: must be positive");
  }
  if (options.connect_timeout && *options.connect_timeout <= std::chrono::milliseconds(0)) {
    return Error::Invalid("connect_timeout: must be positive");
  }
  if (options.max_response_bytes == 0)
    return Error::Invalid("max_response_bytes: must be positive");
  if (options.low_speed_limit < 0 || options.low_speed_time.count() < 0) {
    return Error::Invalid("low_speed_limit, low_speed_time: must not be negative");
  }
  return Ok();
}

// libcurl loaded, initialised once per process, and recent enough.
Status InitCurl() {
  if (const auto& curl = LoadedCurl(); !curl) return curl.error();
  std::call_once(g_curl_once, [] { g_curl_init = Curl().global_init(CURL_GLOBAL_DEFAULT); });
  if (g_curl_init != CURLE_OK) return Error::Internal("libcurl could not be initialised");
  const curl_version_info_data* info = Curl().version_info(CURLVERSION_NOW);
  if (info == nullptr || info->version_num < 0x075500) {
    return Error::Internal("libcurl 7.85 or newer is required");
  }
  return Ok();
}

}  // namespace

Result<std::unique_ptr<HttpMemoryApi>> HttpMemoryApi::Create(HttpOptions options) {
  TMCRA_RETURN_IF_ERROR(CheckKeyLog(options));
  TMCRA_RETURN_IF_ERROR(CheckOptions(options));
  TMCRA_RETURN_IF_ERROR(InitCurl());

  // The base URL, by the configuration's own rules (libcurl's parser, no credentials, query or
  // fragment; https in service mode, numeric loopback http in local mode).
  auto base = config::ValidateBaseUrl(options.base_url, options.local_mode, "base_url");
  if (!base) return base.error();

  auto impl = std::make_unique<Impl>();
  impl->base = base->url;
  impl->protocols = base->scheme;
  impl->secrets = wire::SecretsOf(options.api_key);
  impl->authorization = "Authorization: Bearer " + options.api_key;
  impl->user_agent = std::string(kProductName) + "/" + kVersion;
  impl->connect_timeout = options.connect_timeout.value_or(
      std::min<std::chrono::milliseconds>(std::chrono::seconds(10), options.total_timeout));
  impl->ca_file = options.ca_file;
  impl->ca_dir = options.ca_dir;
  if (!options.local_mode) {  // trust_env: the OpenSSL variables, as Python's client honours
    if (impl->ca_file.empty()) impl->ca_file = Env("SSL_CERT_FILE").value_or("");
    if (impl->ca_dir.empty()) impl->ca_dir = Env("SSL_CERT_DIR").value_or("");
  }
  impl->rng.seed(options.seed != 0 ? options.seed : std::random_device{}());
  impl->options = std::move(options);

  spdlog::info("memory API client: {} mode, {}", impl->options.local_mode ? "local" : "service",
               impl->base);
  return std::unique_ptr<HttpMemoryApi>(new HttpMemoryApi(std::move(impl)));
}

HttpMemoryApi::HttpMemoryApi(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpMemoryApi::~HttpMemoryApi() = default;

Result<json> HttpMemoryApi::Recall(std::string_view scope, const json& body,
                                   const RecallOptions& options) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  auto agent = impl_->AgentHeader(options.agent_id);
  if (!agent) return agent.error();
  const bool prompt_only = options.structured_evidence_unused &&
                           impl_->prompt_only_snapshot.load() && body.is_object() &&
                           !body.contains("response_projection");
  auto text = BodyText(prompt_only ? PromptOnlyBody(body) : body);
  if (!text) return text.error();
  const std::string path = "/v1/scopes/" + config::QuoteSegment(scope) + "/recall";
  Request req = impl_->Make("recall", true, path, std::move(*text), *agent, 200);
  req.elide = options.elide_evidence;
  bool listed = false;
  req.prompt_only_listed = &listed;
  auto answer = impl_->Execute(req);
  if (!prompt_only || !answer || listed) return answer;
  // The server no longer says it keeps the snapshot (another one behind the same URL): its
  // evidence may be {} and the receipt's watermarks lost. Forgotten, and asked again as
  // TMCRA's client asks (a recall is only a read).
  impl_->prompt_only_snapshot.store(false);
  spdlog::info("memory API: the answer did not list {}; recalls ask for the full answer again",
               kFeaturePromptOnlySnapshot);
  auto full = BodyText(body);  // (the reader resets the ElidedMember's outputs)
  if (!full) return full.error();
  Request again = impl_->Make("recall", true, path, std::move(*full), std::move(*agent), 200);
  again.elide = options.elide_evidence;
  return impl_->Execute(again);
}

Result<json> HttpMemoryApi::Ingest(std::string_view scope, const json& body,
                                   const IngestOptions& options) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  if (Status s = CheckKey(options.idempotency_key, "idempotency_key"); !s) return s.error();
  auto headers = impl_->AgentHeader(options.agent_id);
  if (!headers) return headers.error();
  auto text = BodyText(body);
  if (!text) return text.error();
  headers->push_back("Idempotency-Key: " + options.idempotency_key);
  Request req = impl_->Make("ingest", true, "/v1/scopes/" + config::QuoteSegment(scope) + "/ingest",
                            std::move(*text), std::move(*headers), 202);
  if (Status s = impl_->Attribute(options, req); !s) return s.error();
  return impl_->Execute(req);
}

Result<json> HttpMemoryApi::IngestBatch(std::string_view scope, const json& body,
                                        const IngestOptions& options) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  auto headers = impl_->AgentHeader(options.agent_id);
  if (!headers) return headers.error();
  auto text = BodyText(body);
  if (!text) return text.error();
  if (auto known = impl_->ingest_batch.Known()) return *known;  // known missing: no request
  Request req = impl_->Make("ingest batch", true,
                            "/v1/scopes/" + config::QuoteSegment(scope) + "/ingest/batch",
                            std::move(*text), std::move(*headers), 202);
  if (Status s = impl_->Attribute(options, req); !s) return s.error();
  return impl_->ingest_batch.Note(impl_->Execute(req), "ingest/batch", "send the items one by one");
}

Result<std::vector<Result<json>>> HttpMemoryApi::GetJobs(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return std::vector<Result<json>>{};
  if (job_ids.size() > kMaxJobsPerBatch) {
    return Error::Invalid("job_ids: at most " + std::to_string(kMaxJobsPerBatch) + " at once");
  }
  json ids = json::array();
  for (const auto& id : job_ids) {
    if (Status s = wire::CheckPathSegment(id, "job_id"); !s) return s.error();
    ids.push_back(id);
  }
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  auto text = BodyText(json{{"job_ids", std::move(ids)}});
  if (!text) return text.error();
  if (auto known = impl_->jobs_batch.Known()) return *known;  // known missing: no request
  Request req =
      impl_->Make("jobs batch", true, "/v1/jobs/batch", std::move(*text), std::move(*headers), 200);
  std::string request_id;
  req.request_id = &request_id;
  auto answer =
      impl_->jobs_batch.Note(impl_->Execute(req), "jobs/batch", "ask for the jobs one by one");
  if (!answer) return answer.error();
  return wire::ReadJobsBatch(*answer, job_ids, request_id, impl_->secrets);
}

Result<json> HttpMemoryApi::GetJob(std::string_view job_id) {
  if (Status s = wire::CheckPathSegment(job_id, "job_id"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  Request req = impl_->Make("job", false, "/v1/jobs/" + config::QuoteSegment(job_id), {},
                            std::move(*headers), 200);
  return impl_->Execute(req);
}

Result<json> HttpMemoryApi::Evidence(std::string_view scope, std::string_view memory_id,
                                     int limit) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  if (Status s = wire::CheckPathSegment(memory_id, "memory_id"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  Request req =
      impl_->Make("evidence", false,
                  "/v1/scopes/" + config::QuoteSegment(scope) + "/memory-graph/nodes/" +
                      config::QuoteSegment(memory_id) + "/evidence?limit=" + std::to_string(limit),
                  {}, std::move(*headers), 200);
  return impl_->Execute(req);
}

Result<json> HttpMemoryApi::Feedback(std::string_view scope, const json& body,
                                     const FeedbackOptions& options) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  if (Status s = CheckKey(options.idempotency_key, "idempotency_key"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  auto text = BodyText(body);
  if (!text) return text.error();
  headers->push_back("Idempotency-Key: " + options.idempotency_key);
  Request req =
      impl_->Make("feedback", true, "/v1/scopes/" + config::QuoteSegment(scope) + "/feedback",
                  std::move(*text), std::move(*headers), 201);
  return impl_->Execute(req);
}

namespace {

// A maintenance call's answer: a 404, 405 or 501 means the memory has no such endpoint (none
// of these calls answers not-found otherwise: an unknown scope has nothing to forget or export).
Result<json> Maintained(Result<json> answer, const std::string& call) {
  if (!answer &&
      (answer.error().code == Errc::kUnimplemented || answer.error().code == Errc::kNotFound)) {
    return Error::Api(Errc::kUnimplemented, "not_supported",
                      "this memory offers no " + call +
                          ": TMCRA's hosted service exposes no deletion, export or import of "
                          "stored memory; nothing was changed");
  }
  return answer;
}

}  // namespace

Result<json> HttpMemoryApi::ScopeStats() {
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  Request req = impl_->Make("stats", false, "/v1/scopes", {}, std::move(*headers), 200);
  return Maintained(impl_->Execute(req), "memory stats");
}

Result<json> HttpMemoryApi::Forget(std::string_view scope, const json& body) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  auto text = BodyText(body);
  if (!text) return text.error();
  Request req = impl_->Make("forget", true, "/v1/scopes/" + config::QuoteSegment(scope) + "/forget",
                            std::move(*text), std::move(*headers), 200);
  return Maintained(impl_->Execute(req), "forget");
}

Status HttpMemoryApi::Export(std::string_view scope,
                             const std::function<Status(const json& line)>& sink) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  Request req =
      impl_->Make("export", false, "/v1/scopes/" + config::QuoteSegment(scope) + "/export", {},
                  std::move(*headers), 200);
  TMCRA_ASSIGN_OR_RETURN(const json answer, Maintained(impl_->Execute(req), "export"));
  const auto lines = answer.find("lines");
  if (lines == answer.end() || !lines->is_array()) {
    return Error::Protocol("export: the answer has no list of lines");
  }
  for (const json& line : *lines) TMCRA_RETURN_IF_ERROR(sink(line));
  return Ok();
}

Result<json> HttpMemoryApi::Import(std::string_view scope, const json& lines) {
  if (Status s = wire::CheckPathSegment(scope, "scope"); !s) return s.error();
  auto headers = impl_->AgentHeader(std::nullopt);
  if (!headers) return headers.error();
  auto text = BodyText(json{{"lines", lines}});
  if (!text) return text.error();
  Request req = impl_->Make("import", true, "/v1/scopes/" + config::QuoteSegment(scope) + "/import",
                            std::move(*text), std::move(*headers), 200);
  return Maintained(impl_->Execute(req), "import");
}

json HttpMemoryApi::Describe() const {
  return json{{"mode", impl_->options.local_mode ? "local" : "service"}, {"endpoint", impl_->base}};
}

Result<json> HttpMemoryApi::Stats() {
  if (impl_->options.before_attempt) {
    Status guard = impl_->options.before_attempt();
    if (!guard) return impl_->Blocked(guard.error(), /*earlier_reached=*/false);
  }
  // A handle of its own: a connect-only connection cannot serve requests afterwards.
  Easy h(Curl().easy_init());
  if (!h) return Error::Internal("the HTTP client could not create a handle");
  Exchange ex;
  ex.body_limit = 0;
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = impl_->base + "/";
  CURLcode rc = impl_->Common(h.get(), ex, errbuf);
  Setter set(h.get());
  set(CURLOPT_URL, url.c_str())(CURLOPT_CONNECT_ONLY, 1L)(
      CURLOPT_TIMEOUT_MS, static_cast<long>(impl_->connect_timeout.count()));
  if (rc == CURLE_OK) rc = set.rc();
  if (rc != CURLE_OK) {
    Error error = Error::Internal(std::string("the HTTP client could not be configured: ") +
                                  Curl().easy_strerror(rc));
    error.api_code = std::string(kClientSetupError);
    return error;
  }
  const CURLcode code = Curl().easy_perform(h.get());
  if (code != CURLE_OK) return impl_->Scrubbed(impl_->TransportError(code, errbuf, false));
  curl_off_t micros = 0;
  const bool tls = impl_->protocols == "https";
  Curl().easy_getinfo(h.get(), tls ? CURLINFO_APPCONNECT_TIME_T : CURLINFO_CONNECT_TIME_T, &micros);
  return json{{"endpoint", impl_->base},
              {"checked", tls ? "tls_handshake" : "tcp_connect"},
              {"connect_ms", static_cast<int64_t>(micros / 1000)}};
}

}  // namespace tmcra::api
