#include "memory/server/server.h"

// httplib is compiled by Debian with OpenSSL, zlib and brotli (its pkg-config Cflags define
// CPPHTTPLIB_OPENSSL_SUPPORT, CPPHTTPLIB_ZLIB_SUPPORT and CPPHTTPLIB_BROTLI_SUPPORT for us).
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <fcntl.h>
#include <unistd.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "memory/engine.h"
#include "memory/server/connection_pool.h"
#include "src/common/ids.h"
#include "src/common/json_writer.h"

namespace tmcra::memd {

namespace {

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;
using HandlerResponse = httplib::Server::HandlerResponse;

// What we know about the request a connection thread is serving. httplib runs a connection's
// requests one after another on one pool thread, from the pre-routing handler to the logger, so
// a thread-local is the request's context.
struct RequestContext {
  bool active = false;
  std::string request_id;
  Clock::time_point start;
  // The counters this request is counted in: the concurrency limit's (from Handle until its
  // answer is made, post-routing) and the requests Stop() waits for (from pre-routing until its
  // answer is written, the logger).
  std::atomic<int>* slot = nullptr;
  std::atomic<int>* counted = nullptr;
  bool close_after = false; // close the connection after this answer (a body left unread)
  bool shutting_down = false;  // arrived after Stop(): answered 503
  std::string logged_method;   // the request's method when the answer changed it (HEAD)
  std::string key_id;       // for the access log
  bool gzip = false;        // the policy allows gzip for this peer (ServerOptions::gzip)
};
thread_local RequestContext t_ctx;

// Gives back the request's concurrency slot, if it holds one.
void ReleaseSlot() {
  if (t_ctx.slot != nullptr) {
    t_ctx.slot->fetch_sub(1);
    t_ctx.slot = nullptr;
  }
}

// The request's answer is written: it no longer holds a slot nor delays Stop().
void EndRequest() {
  ReleaseSlot();
  if (t_ctx.counted != nullptr) {
    t_ctx.counted->fetch_sub(1);
    t_ctx.counted = nullptr;
  }
}

// httplib's Request is a mutable object of its connection loop; handlers see it const. We change
// two things: the path used for httplib's own routing (we route on the raw target ourselves) and
// the Connection header, which is how httplib decides to answer "Connection: close".
Request& Mutable(const Request& req) { return const_cast<Request&>(req); }

// The path the pre-routing handler gives every request it has seen (httplib routes only this;
// Handle routes the raw target).
constexpr const char* kRoutedPath = "/_";

// True when t_ctx is this request's: BeginContext has run for it (in the pre-routing handler,
// or the error handler for an answer httplib makes before routing); a context left over from
// an earlier request on this thread, whose logger did not run, is not.
bool OwnContext(const Request& req) { return t_ctx.active && req.path == kRoutedPath; }

// Starts `req`'s context on this thread and marks the request as having one (OwnContext).
void BeginContext(const Request& req, GzipPolicy gzip) {
  Mutable(req).path = kRoutedPath;
  EndRequest();  // the logger ends a request; this only guards against a path that skipped it
  t_ctx = RequestContext{};
  t_ctx.active = true;
  // A proxy on the same host (it says so with X-Forwarded-For or Forwarded) relays to clients
  // elsewhere: auto compresses for it.
  t_ctx.gzip = gzip == GzipPolicy::kAlways ||
               (gzip == GzipPolicy::kAuto &&
                (!IsLoopbackPeer(req.remote_addr) || req.has_header("X-Forwarded-For") ||
                 req.has_header("Forwarded")));
  t_ctx.start = Clock::now();
  const std::string client_id = req.get_header_value("X-Request-ID");
  t_ctx.request_id = IsSaneRequestId(client_id) ? client_id : UuidV4();
}

// The raw path of the target without the query, printable ASCII only, for logs.
std::string LogPath(const Request& req) {
  std::string out;
  for (char c : req.target.substr(0, req.target.find('?'))) {
    if (out.size() >= 200) {
      out += "...";
      break;
    }
    out.push_back(c > 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

void SendJson(const Request& req, Response& res, int status, const json& body) {
  std::string text = DumpJson(body);  // = body.dump(-1, ' ', false, replace), faster
  res.status = status;
  res.set_header(std::string(api::kFeaturesHeader), std::string(api::kFeaturePromptOnlySnapshot));
  if (t_ctx.gzip && text.size() >= kGzipMinimumBytes && AcceptsGzip(req.get_header_value("Accept-Encoding"))) {
    if (auto gz = Gzip(text)) {
      text = std::move(*gz);
      res.set_header("Content-Encoding", "gzip");
      res.set_header("Vary", "Accept-Encoding");
    }
  }
  const bool close = t_ctx.close_after;
  if (close) {
    Request& r = Mutable(req);
    r.headers.erase("Connection");
    r.headers.emplace("Connection", "close");
  }
  if (close) {
    // A sized content provider that returns false after the whole body: httplib then closes
    // the connection, which we want when part of the request body was never read. httplib
    // calls no provider for HEAD (so the connection would stay open, and the unread body be
    // read as the next request): such a HEAD is answered as a GET, body included.
    if (req.method == "HEAD") {
      t_ctx.logged_method = "HEAD";
      Mutable(req).method = "GET";
    }
    auto shared = std::make_shared<std::string>(std::move(text));
    res.set_content_provider(shared->size(), "application/json",
                             [shared](size_t offset, size_t length, httplib::DataSink& sink) {
                               sink.write(shared->data() + offset, length);
                               return false;
                             });
    return;
  }
  // A plain body: httplib writes it whole even once its listener is closed (it skips a content
  // provider then), so an answer in progress at SIGTERM arrives complete. httplib would gzip a
  // plain application/json body itself when the request accepts gzip: the compression is
  // decided above, so the request's Accept-Encoding is dropped first.
  Mutable(req).headers.erase("Accept-Encoding");
  res.body = std::move(text);
  res.set_header("Content-Type", "application/json");
}

void SendApiError(const Request& req, Response& res, int status, std::string_view code,
                  std::string_view message, std::string_view details_json = {},
                  double retry_after = -1) {
  if (retry_after >= 0) {
    res.set_header("Retry-After", std::to_string(static_cast<int>(retry_after)));
  }
  SendJson(req, res, status, ErrorBody(code, message, t_ctx.request_id, details_json, retry_after));
}

void SendError(const Request& req, Response& res, const Error& error) {
  if (error.http_status != 0) {
    const bool throttled = error.http_status == 429 || error.http_status == 503;
    SendApiError(req, res, error.http_status, error.api_code, error.message, error.details_json,
                 throttled ? 1 : -1);
    return;
  }
  spdlog::error("request {}: {}", t_ctx.request_id, error.ToString());
  if (error.code == Errc::kUnavailable || error.code == Errc::kTimeout) {
    SendApiError(req, res, 503, "unavailable", "the memory store is busy; retry", {}, 1);
  } else {
    SendApiError(req, res, 500, "internal_error", "internal error");
  }
}

void SendEarly(const Request& req, Response& res, int status, std::string_view code) {
  SendJson(req, res, status, EarlyErrorBody(code, t_ctx.request_id));
}

std::string_view ErrorCodeForStatus(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 411: return "content_length_required";
    case 413: return "request_too_large";
    case 414: return "uri_too_long";
    case 415: return "unsupported_media_type";
    case 416: return "range_not_satisfiable";
    case 500: return "internal_error";
    case 503: return "unavailable";
    default: return "http_error";
  }
}

std::string_view StatusText(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "HTTP error";
  }
}

std::optional<uint64_t> ParseContentLength(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::string> Header(const Request& req, const char* name) {
  if (!req.has_header(name)) return std::nullopt;
  return req.get_header_value(name);
}

enum class Endpoint { kHealthz, kReadyz, kRecall, kIngest, kIngestBatch, kJob, kJobBatch,
                      kEvidence, kFeedback };

struct Route {
  Endpoint endpoint;
  const char* method;
  std::string scope;  // scope routes
  std::string id;     // job id or memory id
};

std::optional<Route> MatchRoute(const std::vector<std::string>& s) {
  if (s.size() == 1 && s[0] == "healthz") return Route{Endpoint::kHealthz, "GET", {}, {}};
  if (s.size() == 1 && s[0] == "readyz") return Route{Endpoint::kReadyz, "GET", {}, {}};
  if (s.size() < 3 || s[0] != "v1") return std::nullopt;
  // Job ids are "job_<hex>": no job is called "batch".
  if (s[1] == "jobs" && s.size() == 3 && s[2] == "batch") {
    return Route{Endpoint::kJobBatch, "POST", {}, {}};
  }
  if (s[1] == "jobs" && s.size() == 3 && !s[2].empty()) {
    return Route{Endpoint::kJob, "GET", {}, s[2]};
  }
  if (s[1] != "scopes" || s.size() < 4) return std::nullopt;
  const std::string& scope = s[2];
  if (s.size() == 4 && s[3] == "recall") return Route{Endpoint::kRecall, "POST", scope, {}};
  if (s.size() == 4 && s[3] == "ingest") return Route{Endpoint::kIngest, "POST", scope, {}};
  if (s.size() == 4 && s[3] == "feedback") return Route{Endpoint::kFeedback, "POST", scope, {}};
  if (s.size() == 5 && s[3] == "ingest" && s[4] == "batch") {
    return Route{Endpoint::kIngestBatch, "POST", scope, {}};
  }
  if (s.size() == 7 && s[3] == "memory-graph" && s[4] == "nodes" && !s[5].empty() &&
      s[6] == "evidence") {
    return Route{Endpoint::kEvidence, "GET", scope, s[5]};
  }
  return std::nullopt;
}

const char* PermissionFor(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kIngest:
    case Endpoint::kIngestBatch: return kPermWrite;
    case Endpoint::kFeedback: return kPermFeedback;
    default: return kPermRead;
  }
}

// SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server
// bind the same port and share its connections.
void ReuseAddressOnly(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// ---- What a TLS connection may send before its next request is routed -----------------------
//
// cpp-httplib 0.11 reads a request's head with no limit on its header lines or on a line still
// being read (SECURITY.md, "Known limitations"). Under TLS every record passes OpenSSL's message
// callback, on the connection's own thread, before httplib sees its bytes: the callback counts
// what arrives once the connection's first handshake is done (every record from then on,
// post-handshake messages included), and the connection gets, in turn:
//   - 64 KiB for a request's head;
//   - once the head is in (pre-routing), its declared body four times over (a record's length
//     includes the cipher's overhead, up to about 80 bytes: a body sent in records of 30 bytes
//     or more fits), plus 64 KiB;
//   - once the body is in (Handle), 64 KiB for the next head again.
// A connection past its allowance is reset and never read again.
constexpr int64_t kHeadAllowance = 64 * 1024;
constexpr int64_t kBodyFactor = 4;

struct TlsAllowance {
  const SSL* ssl = nullptr;  // the connection counted (this thread serves one at a time)
  int64_t left = 0;
  bool shut = false;
};
thread_local TlsAllowance t_allowance;

// On the SSL object itself: set once its first handshake is done (a new SSL, even at an address
// an earlier one had, starts without it; a client cannot clear it).
int g_established_index = -1;
char g_established_mark = 1;

// ---- How long a TLS connection may take to send a request -----------------------------------
//
// A connection holds one of httplib's threads for its whole life, and its reads time out only
// when nothing at all arrives for the read timeout: a client sending a byte every few seconds
// holds a thread for as long as it likes, and a few such clients hold them all. Every TLS
// connection is registered (by its first record) with a deadline for what it is sending: its
// handshake and first head, a body, the next head after an answer. A watchdog thread resets a
// connection past its deadline (shutdown() wakes the thread blocked in its read). A connection
// leaves the registry when OpenSSL frees its SSL object (the ex_data free callback), which
// httplib does before it closes the descriptor, so the watchdog never touches a descriptor
// number that has been reused.
struct Deadline {
  int fd = -1;
  Clock::time_point at;  // Clock::time_point::max(): none (a request is being answered)
};
std::mutex g_deadlines_mu;
std::unordered_map<const SSL*, Deadline> g_deadlines;  // guarded by g_deadlines_mu
int g_registered_index = -1;
char g_registered_mark = 1;
std::atomic<int> g_request_timeout_seconds{30};
std::atomic<int> g_keep_alive_seconds{5};  // an idle connection's wait before its next head

void ForgetConnection(void* parent, void*, CRYPTO_EX_DATA*, int, long, void*) {  // NOLINT
  std::lock_guard lock(g_deadlines_mu);
  g_deadlines.erase(static_cast<const SSL*>(parent));
}

// The deadline of the connection this thread serves: `seconds` from now, or none.
void SetDeadline(const SSL* ssl, std::optional<std::chrono::seconds> seconds) {
  if (ssl == nullptr) return;
  std::lock_guard lock(g_deadlines_mu);  // (a std::mutex that cannot fail here)
  auto it = g_deadlines.find(ssl);
  if (it == g_deadlines.end()) return;
  it->second.at = seconds ? Clock::now() + *seconds : Clock::time_point::max();
}

std::chrono::seconds RequestTimeout() {
  return std::chrono::seconds(g_request_timeout_seconds.load());
}

// After an answer: the keep-alive wait for the next request, then its head.
std::chrono::seconds NextHeadTimeout() {
  return std::chrono::seconds(g_keep_alive_seconds.load() + g_request_timeout_seconds.load());
}

// Resets every connection past its deadline, looking four times a second, until `stop`. The
// descriptors are acted on under the lock (an entry leaves the map before its descriptor is
// closed); the log line comes after it.
void WatchDeadlines(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const auto now = Clock::now();
    int reset_count = 0;
    {
      std::lock_guard lock(g_deadlines_mu);
      for (auto& [ssl, deadline] : g_deadlines) {
        if (deadline.at > now) continue;
        deadline.at = Clock::time_point::max();  // once
        const linger reset{1, 0};
        setsockopt(deadline.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        shutdown(deadline.fd, SHUT_RDWR);
        ++reset_count;
      }
    }
    if (reset_count > 0) {
      spdlog::warn("{} TLS connection(s) took longer than {} s to send a request: reset",
                   reset_count, g_request_timeout_seconds.load());
    }
  }
}
// Opened once (with TLS): the descriptor a reset connection's number is pointed at.
int g_devnull = -1;

void OnTlsMessage(int write_p, int, int content_type, const void* buf, size_t len, SSL* ssl,
                  void*) {
  if (write_p != 0 || content_type != SSL3_RT_HEADER || len < SSL3_RT_HEADER_LENGTH) return;
  if (SSL_get_ex_data(ssl, g_registered_index) == nullptr &&  // its first record
      SSL_set_ex_data(ssl, g_registered_index, &g_registered_mark) == 1) {
    try {  // nothing may throw out of OpenSSL's callback
      std::lock_guard lock(g_deadlines_mu);
      g_deadlines[ssl] = Deadline{SSL_get_fd(ssl), Clock::now() + RequestTimeout()};
    } catch (...) {
      // Out of memory: this connection goes unwatched (its reads still time out).
    }
  }
  if (SSL_get_ex_data(ssl, g_established_index) == nullptr) {
    if (!SSL_is_init_finished(ssl)) return;  // the first handshake: OpenSSL bounds it
    SSL_set_ex_data(ssl, g_established_index, &g_established_mark);
    t_allowance = TlsAllowance{ssl, kHeadAllowance, false};
  } else if (t_allowance.ssl != ssl) {
    t_allowance = TlsAllowance{ssl, kHeadAllowance, false};  // not expected: one per thread
  }
  const auto* header = static_cast<const unsigned char*>(buf);
  t_allowance.left -= (static_cast<int64_t>(header[3]) << 8) | header[4];
  if (t_allowance.left < 0 && !t_allowance.shut) {
    t_allowance.shut = true;
    spdlog::warn("a TLS connection sent more than its request allows (64 KiB of head, its "
                 "declared body): reset");
    // The socket is reset at once (no linger: the peer's writes fail instead of filling
    // buffers), and its descriptor number now names /dev/null, where every further read of
    // OpenSSL and httplib ends (a shutdown() would still let recv() return what the kernel
    // had queued, megabytes). Writes go nowhere.
    const int fd = SSL_get_fd(ssl);
    const linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (dup2(g_devnull, fd) < 0) shutdown(fd, SHUT_RDWR);  // the next best thing
  }
}

// Sets up the above for an SSL_CTX: false when it cannot be (no ex_data index, no /dev/null).
bool BoundTlsConnections(SSL_CTX& ctx) {
  static const bool ready = [] {
    g_established_index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    g_registered_index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &ForgetConnection);
    g_devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    return g_established_index >= 0 && g_registered_index >= 0 && g_devnull >= 0;
  }();
  if (!ready) return false;
  SSL_CTX_set_options(&ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_msg_callback(&ctx, &OnTlsMessage);
  return true;
}

// A declared body length, capped (at 1 TiB) so that the sums below cannot overflow.
int64_t CappedBody(uint64_t body_bytes) {
  return static_cast<int64_t>(std::min<uint64_t>(body_bytes, uint64_t{1} << 40));
}

// The allowance for what comes next on this thread's TLS connection: `bytes` of body (in
// records of any size from 30 bytes), then a head.
void GrantTlsAllowance(uint64_t body_bytes) {
  if (t_allowance.ssl == nullptr) return;  // plain HTTP (--local, loopback only)
  t_allowance.left = kHeadAllowance + kBodyFactor * CappedBody(body_bytes);
}

// The deadline for the body of a request whose head is in (none when it has no body): the
// request timeout plus a second per 16 KiB.
void BodyDeadline(uint64_t body_bytes) {
  SetDeadline(t_allowance.ssl,
              RequestTimeout() + std::chrono::seconds(CappedBody(body_bytes) / 16384));
}

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// The listen backlog (nginx's default on Linux; the kernel caps it at net.core.somaxconn).
constexpr int kListenBacklog = 511;

// httplib's task queue over a ConnectionPool that Server::Stop() can release.
class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  explicit BoundedTaskQueue(std::shared_ptr<ConnectionPool> pool) : pool_(std::move(pool)) {}
  void enqueue(std::function<void()> fn) override { pool_->Enqueue(std::move(fn)); }
  void shutdown() override { pool_->Shutdown(); }

 private:
  std::shared_ptr<ConnectionPool> pool_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  KeyStore& keys;
  std::unique_ptr<httplib::Server> http;
  socket_t listen_fd = -1;  // httplib's listening socket (seen by the socket-options hook)
  std::mutex pool_mu;
  std::shared_ptr<ConnectionPool> pool;  // guarded by pool_mu; made when the accept loop starts
  api::MemoryApi* memory = nullptr;
  std::atomic<int> in_flight{0};  // requests holding a concurrency slot
  std::atomic<int> requests{0};   // requests seen by pre-routing and not yet answered
  std::atomic<bool> stopping{false};

  Impl(ServerOptions o, KeyStore& k) : options(std::move(o)), keys(k) {}

  void Configure();
  HandlerResponse PreRouting(const Request& req, Response& res);
  void Handle(const Request& req, Response& res);
  void HandleReady(const Request& req, Response& res);
  void HandleEndpoint(const Request& req, Response& res, const Route& route, const ApiKey& key);
  HandlerResponse OnError(const Request& req, Response& res);
};

void Server::Impl::Configure() {
  httplib::Server& s = *http;
  const size_t threads = static_cast<size_t>(std::max(1, options.threads));
  const size_t queued = static_cast<size_t>(std::max(1, options.max_queued_connections));
  s.new_task_queue = [this, threads, queued] {
    auto made = std::make_shared<ConnectionPool>(threads, queued);
    {
      std::lock_guard lock(pool_mu);
      pool = made;
      if (stopping.load()) made->Release();
    }
    return new BoundedTaskQueue(std::move(made));
  };
  s.set_socket_options([this](socket_t sock) {
    ReuseAddressOnly(sock);
    listen_fd = sock;
  });
  s.set_tcp_nodelay(true);
  // A client keeps its connection for this many requests, then makes a new one (a full TLS
  // handshake: our client resumes no session). nginx's default since 1.19.10; at 100, one recall
  // in a hundred paid the handshake.
  s.set_keep_alive_max_count(1000);
  s.set_keep_alive_timeout(options.keep_alive_seconds);
  s.set_read_timeout(options.read_timeout_seconds, 0);
  s.set_write_timeout(options.read_timeout_seconds, 0);
  s.set_payload_max_length(options.max_body_bytes);
  s.set_pre_routing_handler(
      [this](const Request& req, Response& res) { return PreRouting(req, res); });
  // Runs before the pre-routing handler. Over the limit, httplib answers at once (the error
  // handler writes the 413 and closes the connection) without reading the body.
  s.set_expect_100_continue_handler([this](const Request& req, Response& res) {
    auto length = ParseContentLength(req.get_header_value("Content-Length"));
    if (!length || *length <= options.max_body_bytes) return 100;
    res.status = 413;  // httplib writes res.status, not the value returned here
    return 413;
  });
  // Every path is routed by Handle from the raw target; httplib only sees "/_" (set in
  // PreRouting), which keeps its std::regex away from long paths.
  auto handler = [this](const Request& req, Response& res) { Handle(req, res); };
  s.Get(kRoutedPath, handler);
  s.Post(kRoutedPath, handler);
  s.Put(kRoutedPath, handler);
  s.Patch(kRoutedPath, handler);
  s.Delete(kRoutedPath, handler);
  s.Options(kRoutedPath, handler);
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const Request& req, Response& res) { return OnError(req, res); }));
  s.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      spdlog::error("request {}: unhandled exception: {}", t_ctx.request_id, e.what());
    } catch (...) {
      spdlog::error("request {}: unhandled exception", t_ctx.request_id);
    }
    SendApiError(req, res, 500, "internal_error", "internal error");
  });
  s.set_post_routing_handler([this](const Request& req, Response& res) {
    if (!OwnContext(req)) BeginContext(req, options.gzip);
    res.set_header("x-request-id", t_ctx.request_id);
    // The answer is made: its slot is free before it is written, so a client that sends its
    // next request as soon as it has this answer never finds its own slot still taken.
    ReleaseSlot();
  });
  // httplib calls the logger once the answer has been written (or failed to be).
  s.set_logger([](const Request& req, const Response& res) {
    const auto ms = std::chrono::duration<double, std::milli>(Clock::now() - t_ctx.start).count();
    spdlog::info("{} {} {} {} {:.1f} ms{}{}", t_ctx.request_id,
                 t_ctx.logged_method.empty() ? req.method : t_ctx.logged_method, LogPath(req),
                 res.status, ms, t_ctx.key_id.empty() ? "" : " key=", t_ctx.key_id);
    EndRequest();
    SetDeadline(t_allowance.ssl, NextHeadTimeout());  // the keep-alive wait, then the next head
    t_ctx.active = false;
  });
}

HandlerResponse Server::Impl::PreRouting(const Request& req, Response& res) {
  BeginContext(req, options.gzip);  // httplib now routes every request to kRoutedPath
  Mutable(req).ranges.clear();  // a JSON API answers whole bodies
  // Counted before `stopping` is looked at: Stop() sets `stopping`, then waits for the count to
  // reach 0, so every request is answered before the listener closes (with 503 if it saw
  // `stopping`).
  t_ctx.counted = &requests;
  requests.fetch_add(1);
  // While stopping, a new request is answered 503 by Handle, once httplib has read its body
  // (the checks below bound it), so the connection stays in step.
  t_ctx.shutting_down = stopping.load();
  // Answered before any of the body is read, and the connection closed after the answer (what
  // is left of the body would otherwise be read as the next request).
  const auto refuse = [&](int status, std::string_view code, std::string_view message) {
    t_ctx.close_after = true;
    if (status == 411 || status == 413) {
      SendEarly(req, res, status, code);
    } else {
      SendApiError(req, res, status, code, message);
    }
    return HandlerResponse::Handled;
  };
  // Chunked (or any other transfer coding): this httplib reads such a body without a size
  // limit, so it is refused unread, whatever the method.
  if (req.has_header("Transfer-Encoding")) {
    return refuse(411, "content_length_required", "");
  }
  // A compressed body would be inflated by httplib past the body limit (which it checks on the
  // compressed length); our clients never compress what they send.
  if (req.has_header("Content-Encoding") &&
      strcasecmp(req.get_header_value("Content-Encoding").c_str(), "identity") != 0) {
    return refuse(415, "unsupported_media_type", "Content-Encoding is not supported");
  }
  if (req.get_header_value_count("Content-Length") > 1) {
    return refuse(400, "bad_request", "more than one Content-Length");
  }
  std::optional<uint64_t> length;
  if (req.has_header("Content-Length")) {
    length = ParseContentLength(req.get_header_value("Content-Length"));
    if (!length) return refuse(400, "bad_request", "invalid Content-Length");
  }
  GrantTlsAllowance(length.value_or(0));
  BodyDeadline(length.value_or(0));
  const bool with_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (!with_body && req.method != "DELETE" && length && *length > 0) {
    // httplib does not read the body of a GET, HEAD or OPTIONS: its bytes would be taken for the
    // next request on the connection.
    return refuse(400, "bad_request", "this method takes no body");
  }
  if (with_body && !length) {
    return refuse(411, "content_length_required", "");
  }
  if (length && *length > options.max_body_bytes) {
    // Up to twice the limit, httplib reads and drops the body, then answers 413 (OnError): the
    // client, still sending, reads the answer instead of a reset connection. Beyond that we
    // answer at once and close.
    t_ctx.close_after = true;
    if (*length <= 2 * static_cast<uint64_t>(options.max_body_bytes)) {
      return HandlerResponse::Unhandled;
    }
    return refuse(413, "request_too_large", "");
  }
  return HandlerResponse::Unhandled;
}

HandlerResponse Server::Impl::OnError(const Request& req, Response& res) {
  if (res.has_header("Content-Type")) return HandlerResponse::Unhandled;  // one of ours
  // httplib answers some requests (URI too long, an unreadable request line, 413 to
  // Expect: 100-continue) before the pre-routing handler: they start their own context here,
  // which the post-routing handler and the logger keep (its request id is the one in the body).
  if (!OwnContext(req)) BeginContext(req, options.gzip);
  const int status = res.status;
  const std::string_view code = ErrorCodeForStatus(status);
  // An error of httplib's own (a body it could not read, a multipart body without a boundary,
  // a request it could not parse): what is left of the request may still be on the
  // connection, so it is closed after the answer.
  t_ctx.close_after = true;
  if (status == 411 || status == 413) {
    SendEarly(req, res, status, code);
  } else {
    SendApiError(req, res, status, code, StatusText(status));
  }
  return HandlerResponse::Handled;
}

void Server::Impl::Handle(const Request& req, Response& res) {
  GrantTlsAllowance(0);  // the body is in: what comes next is the next head
  SetDeadline(t_allowance.ssl, std::nullopt);  // our time, not the client's
  if (t_ctx.shutting_down) {
    // A plain body (not the closing content provider, which httplib skips once its listener
    // is closed): the answer arrives whole even then. "Connection: close" asks the client to
    // go; the server's connection loop ends with the listener anyway.
    Request& r = Mutable(req);
    r.headers.erase("Connection");
    r.headers.emplace("Connection", "close");
    SendApiError(req, res, 503, "unavailable", "shutting down", {}, 1);
    return;
  }
  auto segments = SplitTargetPath(req.target);
  std::optional<Route> route;
  if (segments) route = MatchRoute(*segments);
  const bool health =
      route && (route->endpoint == Endpoint::kHealthz || route->endpoint == Endpoint::kReadyz);
  if (!health) {
    // The slot is taken once the body has been read (a slow upload holds a connection thread,
    // not a slot) and given back when the answer is made (post-routing).
    t_ctx.slot = &in_flight;
    if (in_flight.fetch_add(1) >= options.max_concurrency) {
      ReleaseSlot();
      SendApiError(req, res, 429, "rate_limited", "too many requests in progress; retry", {}, 1);
      return;
    }
  }
  if (!route) {
    SendApiError(req, res, 404, "not_found", "Not Found");
    return;
  }
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  if (method != route->method) {
    res.set_header("Allow", route->method);
    SendApiError(req, res, 405, "method_not_allowed", "Method Not Allowed");
    return;
  }
  if (route->endpoint == Endpoint::kHealthz) {
    SendJson(req, res, 200, json{{"status", "ok"}});
    return;
  }
  if (route->endpoint == Endpoint::kReadyz) {
    HandleReady(req, res);
    return;
  }

  // Authentication: Authorization: Bearer tmcra_<key_id>.<secret>
  const std::string authorization = req.get_header_value("Authorization");
  std::string token;
  if (authorization.size() > 7 && strncasecmp(authorization.c_str(), "Bearer ", 7) == 0) {
    token = authorization.substr(7);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
    while (!token.empty() && token.back() == ' ') token.pop_back();
  }
  auto unauthorized = [&](const std::string& why) {
    spdlog::info("request {}: 401 ({})", t_ctx.request_id, why);
    res.set_header("WWW-Authenticate", "Bearer");
    SendApiError(req, res, 401, "unauthorized", "a valid API key is required (Authorization: Bearer)");
  };
  if (token.empty()) {
    unauthorized(authorization.empty() ? "no Authorization header" : "not a bearer token");
    return;
  }
  auto outcome = keys.Authenticate(token);
  if (!outcome) {
    SendError(req, res, outcome.error());
    return;
  }
  if (!outcome->key) {
    unauthorized(outcome->reason);
    return;
  }
  const ApiKey& key = *outcome->key;
  t_ctx.key_id = key.key_id;
  const char* permission = PermissionFor(route->endpoint);
  if (!key.Has(permission)) {
    SendApiError(req, res, 403, "forbidden", std::string(permission) + " is required");
    return;
  }
  if (route->endpoint != Endpoint::kJob && route->endpoint != Endpoint::kJobBatch) {
    if (!memory::IsValidScopeName(route->scope)) {
      const Error e = InvalidScopeError();
      SendApiError(req, res, 422, e.api_code, e.message, e.details_json);
      return;
    }
    if (!key.AllowsScope(route->scope)) {
      SendApiError(req, res, 403, "forbidden", "the API key is not valid for this scope");
      return;
    }
  }
  HandleEndpoint(req, res, *route, key);
}

void Server::Impl::HandleReady(const Request& req, Response& res) {
  if (stopping.load() || memory == nullptr) {
    SendApiError(req, res, 503, "unavailable", "shutting down", {}, 1);
    return;
  }
  // A primary-key lookup of a job that cannot exist: the store answers, or it does not.
  auto probe = memory->GetJob("job_readyz_probe");
  if (probe || probe.error().http_status == 404) {
    SendJson(req, res, 200, json{{"status", "ready"}});
    return;
  }
  spdlog::warn("readyz: {}", probe.error().ToString());
  SendApiError(req, res, 503, "unavailable", "the memory store is not available", {}, 1);
}

void Server::Impl::HandleEndpoint(const Request& req, Response& res, const Route& route,
                                  const ApiKey& key) {
  Attribution attribution{Header(req, "X-TMCRA-Client-Platform"),
                          Header(req, "X-TMCRA-Integration-ID"), Header(req, "X-TMCRA-Agent-ID")};
  if (auto s = ValidateAttribution(attribution); !s) {
    SendError(req, res, s.error());
    return;
  }
  const bool has_body = route.endpoint == Endpoint::kRecall ||
                        route.endpoint == Endpoint::kIngest ||
                        route.endpoint == Endpoint::kIngestBatch ||
                        route.endpoint == Endpoint::kJobBatch ||
                        route.endpoint == Endpoint::kFeedback;
  json body;
  if (has_body) {
    auto parsed = ParseBodyObject(req.body, req.get_header_value("Content-Type"));
    if (!parsed) {
      SendError(req, res, parsed.error());
      return;
    }
    body = std::move(*parsed);
  }
  auto reply = [&](Result<json> result, int status) {
    if (!result) {
      SendError(req, res, result.error());
      return;
    }
    SendJson(req, res, status, *result);
  };
  switch (route.endpoint) {
    case Endpoint::kRecall: {
      api::RecallOptions recall;
      recall.agent_id = attribution.agent_id;
      reply(memory->Recall(route.scope, body, recall), 200);
      return;
    }
    case Endpoint::kIngest:
    case Endpoint::kIngestBatch: {
      api::IngestOptions ingest;
      ingest.idempotency_key = req.get_header_value("Idempotency-Key");
      ingest.agent_id = attribution.agent_id;
      // The service records a request without the header as a plain REST call.
      ingest.client_platform = attribution.client_platform.value_or("rest");
      ingest.integration_id = attribution.integration_id;
      reply(route.endpoint == Endpoint::kIngest ? memory->Ingest(route.scope, body, ingest)
                                                : memory->IngestBatch(route.scope, body, ingest),
            202);
      return;
    }
    case Endpoint::kFeedback: {
      auto action = body.find("action");
      if (action != body.end() && action->is_string() && *action == "correct" &&
          !key.Has(kPermWrite)) {
        SendApiError(req, res, 403, "forbidden", "memory:write is required to save a correction");
        return;
      }
      api::FeedbackOptions feedback;
      feedback.idempotency_key = req.get_header_value("Idempotency-Key");
      reply(memory->Feedback(route.scope, body, feedback), 201);
      return;
    }
    case Endpoint::kJob: {
      auto job = memory->GetJob(route.id);
      if (job && job->is_object() && job->contains("scope_name") &&
          (*job)["scope_name"].is_string() &&
          !key.AllowsScope((*job)["scope_name"].get<std::string>())) {
        SendApiError(req, res, 403, "forbidden", "the API key is not valid for this job's scope");
        return;
      }
      reply(std::move(job), 200);
      return;
    }
    case Endpoint::kJobBatch: {
      auto ids = ParseJobIds(body);
      if (!ids) {
        SendError(req, res, ids.error());
        return;
      }
      auto jobs = memory->GetJobs(*ids);
      if (jobs && jobs->size() != ids->size()) {
        jobs = Error::Internal("GetJobs: not one result per id");
      }
      if (!jobs) {
        SendError(req, res, jobs.error());
        return;
      }
      json entries = json::array();
      for (size_t i = 0; i < ids->size(); ++i) {
        Result<json>& job = (*jobs)[i];
        if (!job && job.error().http_status == 0) {
          // A busy store is the whole request's 503 (Retry-After: 1); any other failure is this
          // job's 500, so one unreadable job holds back no other.
          if (job.error().code == Errc::kUnavailable || job.error().code == Errc::kTimeout) {
            SendError(req, res, job.error());
            return;
          }
          spdlog::error("request {}: job {}: {}", t_ctx.request_id, (*ids)[i],
                        job.error().ToString());
          job = Error::Api(500, "internal_error", "internal error");
        }
        // As GET /v1/jobs/{id} answers 403 for a job of a scope the key may not read.
        if (job && job->is_object() && job->contains("scope_name") &&
            (*job)["scope_name"].is_string() &&
            !key.AllowsScope((*job)["scope_name"].get<std::string>())) {
          job = Error::Api(403, "forbidden", "the API key is not valid for this job's scope");
        }
        entries.push_back(JobsBatchEntry((*ids)[i], job, t_ctx.request_id));
      }
      SendJson(req, res, 200, json{{"jobs", std::move(entries)}});
      return;
    }
    case Endpoint::kEvidence: {
      int limit = 10;
      if (req.has_param("limit")) {
        const std::string text = req.get_param_value("limit");
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
        if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
          json details = json::array(
              {{{"loc", {"query", "limit"}},
                {"msg", "Input should be a valid integer, unable to parse string as an integer"},
                {"type", "int_parsing"}}});
          SendApiError(req, res, 422, "validation_error", "limit: Input should be a valid integer",
                       details.dump());
          return;
        }
      }
      if (req.has_param("cursor")) {
        // This server never hands out a cursor (every page is complete: next_cursor is null).
        json details = json::array({{{"loc", {"query", "cursor"}},
                                     {"msg", "Invalid cursor"},
                                     {"type", "value_error"}}});
        SendApiError(req, res, 422, "validation_error", "cursor: Invalid cursor", details.dump());
        return;
      }
      reply(memory->Evidence(route.scope, route.id, limit), 200);
      return;
    }
    default:
      SendApiError(req, res, 404, "not_found", "Not Found");
      return;
  }
}

Server::Server(ServerOptions options, KeyStore& keys)
    : impl_(std::make_unique<Impl>(std::move(options), keys)) {}

Server::~Server() = default;

bool Server::tls() const { return !impl_->options.tls_cert_file.empty(); }

Result<int> Server::Bind() {
  const ServerOptions& o = impl_->options;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Error::Invalid("--tls-cert and --tls-key go together");
  }
  if (!o.tls_cert_file.empty()) {
    struct stat st {};
    if (stat(o.tls_key_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      spdlog::warn("the TLS key file {} is readable by others (mode {:o}); chmod 600 it",
                   o.tls_key_file, st.st_mode & 0777);
    }
    std::string problem;
    auto setup = [&](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      if (!BoundTlsConnections(ctx)) {
        problem = "cannot set up TLS (an SSL ex_data index and /dev/null are needed): " +
                  OpenSslError();
        return false;
      }
      if (SSL_CTX_use_certificate_chain_file(&ctx, o.tls_cert_file.c_str()) != 1) {
        problem = "cannot load the TLS certificate " + o.tls_cert_file + ": " + OpenSslError();
        return false;
      }
      if (SSL_CTX_use_PrivateKey_file(&ctx, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        problem = "cannot load the TLS key " + o.tls_key_file + ": " + OpenSslError();
        return false;
      }
      if (SSL_CTX_check_private_key(&ctx) != 1) {
        problem = "the TLS key does not match the certificate: " + OpenSslError();
        return false;
      }
      return true;
    };
    auto server = std::make_unique<httplib::SSLServer>(setup);
    if (!server->is_valid()) {
      return Error::Invalid(problem.empty() ? "cannot set up TLS: " + OpenSslError() : problem);
    }
    impl_->http = std::move(server);
  } else {
    impl_->http = std::make_unique<httplib::Server>();
  }
  impl_->Configure();
  int port = o.listen.port;
  errno = 0;
  if (port == 0) {
    port = impl_->http->bind_to_any_port(o.listen.host);
  } else if (!impl_->http->bind_to_port(o.listen.host, port)) {
    port = -1;
  }
  if (port < 0) {
    const int err = errno;
    return Error::Unavailable("cannot listen on " + o.listen.Origin("tcp", o.listen.port) +
                              (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
  // httplib 0.11 listens with a backlog of 5. Connections beyond the threads and the queue wait
  // in that backlog (ConnectionPool), so give it room; listen() again only resizes it.
  if (impl_->listen_fd >= 0 && ::listen(impl_->listen_fd, kListenBacklog) != 0) {
    spdlog::warn("cannot raise the listen backlog to {}: {}", kListenBacklog, std::strerror(errno));
  }
  return port;
}

Status Server::Serve(api::MemoryApi& memory) {
  if (!impl_->http) return Error::Internal("Serve before Bind");
  impl_->memory = &memory;
  if (impl_->stopping.load()) return Ok();  // stopped before it started: nothing to finish
  // Over TLS, the watchdog of how long a connection takes to send a request (its settings are
  // process-wide: one TLS server per process).
  std::atomic<bool> watch_stop{false};
  std::thread watchdog;
  if (!impl_->options.tls_cert_file.empty()) {
    g_request_timeout_seconds = std::max(1, impl_->options.request_timeout_seconds);
    g_keep_alive_seconds = std::max(0, impl_->options.keep_alive_seconds);
    watchdog = std::thread([&watch_stop] { WatchDeadlines(watch_stop); });
  }
  // httplib's stop() does nothing until its accept loop runs (is_running()), which starts only
  // inside listen_after_bind: a Stop() in between (a SIGTERM right after the readiness line)
  // would be lost and the server would serve on. This thread repeats the stop once the loop
  // runs. Both sides are sequentially consistent atomics: either Stop() sees the loop running,
  // or this thread sees `stopping`.
  std::atomic<bool> listen_returned{false};
  std::thread late_stop([this, &listen_returned] {
    while (!impl_->http->is_running() && !listen_returned.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (impl_->stopping.load()) impl_->http->stop();
  });
  const bool listened = impl_->http->listen_after_bind();
  listen_returned = true;
  late_stop.join();
  watch_stop = true;
  if (watchdog.joinable()) watchdog.join();
  if (!listened) return Error::Unavailable("the listener failed");
  return Ok();
}

void Server::Stop() {
  impl_->stopping = true;
  // The requests in progress (their headers read) finish and write their answers before the
  // listener closes; new ones are answered 503 meanwhile.
  const auto deadline = Clock::now() + kDrainLimit;
  while (impl_->requests.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (impl_->http) impl_->http->stop();
  // An accept loop waiting for room in the connection queue must get to see the closed listener.
  std::lock_guard lock(impl_->pool_mu);
  if (impl_->pool) impl_->pool->Release();
}

}  // namespace tmcra::memd
