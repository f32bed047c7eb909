#include "memd/memd_server.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <optional>

#include "base/identifiers.h"
#include "base/ids.h"
#include "base/json_writer.h"
#include "memory/engine.h"
#include "src/api/api_status.h"

namespace tmcra::memd {

namespace {

// One request as the application sees it: the request, its id, and what its answer carries.
struct Call {
  const HttpRequest& req;
  std::string request_id;
  bool gzip = false;   // the policy allows gzip for this peer (ServerOptions::gzip)
  std::string key_id;  // for the access log
};

// How long a client is asked to wait before retrying when the store cannot write.
constexpr int kStorageRetrySeconds = 5;

Call StartCall(const HttpRequest& req, GzipPolicy gzip) {
  Call call{req, {}, false, {}};
  // A proxy on the same host (it says so with X-Forwarded-For or Forwarded) relays to clients
  // elsewhere: auto compresses for it.
  call.gzip = gzip == GzipPolicy::kAlways ||
              (gzip == GzipPolicy::kAuto && (!IsLoopbackPeer(req.remote_addr) ||
                                             req.Has("X-Forwarded-For") || req.Has("Forwarded")));
  const std::string client_id = req.Get("X-Request-ID");
  call.request_id = IsValidRequestId(client_id) ? client_id : UuidV4();
  return call;
}

HttpResponse JsonAnswer(const Call& call, int status, const json& body) {
  HttpResponse res;
  res.status = status;
  res.request_id = call.request_id;
  if (!call.key_id.empty()) res.log_note = " key=" + call.key_id;
  std::string text = DumpJson(body);  // = body.dump(-1, ' ', false, replace), faster
  res.Set(std::string(api::kFeaturesHeader), std::string(api::kFeaturePromptOnlySnapshot));
  res.Set("Content-Type", "application/json");
  if (call.gzip && text.size() >= kGzipMinimumBytes &&
      AcceptsGzip(call.req.Get("Accept-Encoding"))) {
    if (auto gz = Gzip(text)) {
      text = std::move(*gz);
      res.Set("Content-Encoding", "gzip");
      res.Set("Vary", "Accept-Encoding");
    }
  }
  res.Set("x-request-id", call.request_id);
  res.body = std::move(text);
  return res;
}

HttpResponse ApiError(const Call& call, int status, std::string_view code, std::string_view message,
                      std::string_view details_json = {}, double retry_after = -1) {
  HttpResponse res = JsonAnswer(
      call, status, ErrorBody(code, message, call.request_id, details_json, retry_after));
  if (retry_after >= 0) res.Set("Retry-After", std::to_string(static_cast<int>(retry_after)));
  return res;
}

// The answer to an error of the memory: its own HTTP status, or 503 for a store that is busy or
// cannot write, or 500; the store's own text stays in the log.
HttpResponse ErrorAnswer(const Call& call, const Error& error) {
  if (!error.api_code.empty()) {
    const int status = api::HttpStatusFor(error.code);
    const bool throttled = status == 429 || status == 503;
    return ApiError(call, status, error.api_code, error.message, error.details_json,
                    throttled ? 1 : -1);
  }
  spdlog::error("request {}: {}", call.request_id, LogSafe(error.ToString(), 1000));
  if (error.code == Errc::kStorageFull) {
    return ApiError(call, 503, "unavailable",
                    "the memory store cannot write (its disk is full); retry", {},
                    kStorageRetrySeconds);
  }
  if (error.code == Errc::kUnavailable || error.code == Errc::kTimeout) {
    return ApiError(call, 503, "unavailable", "the memory store is busy; retry", {}, 1);
  }
  return ApiError(call, 500, "internal_error", "internal error");
}

std::optional<std::string> Header(const HttpRequest& req, const char* name) {
  const std::string* value = req.Find(name);
  if (value == nullptr) return std::nullopt;
  return *value;
}

enum class Endpoint {
  kHealthz,
  kReadyz,
  kRecall,
  kIngest,
  kIngestBatch,
  kJob,
  kJobBatch,
  kEvidence,
  kFeedback,
  kScopes,  // maintenance (docs/memd.md, "Maintenance endpoints")
  kForget,
  kExport,
  kImport,
  kMcp  // the MCP endpoint (memd/mcp_endpoint.h): GET, POST and DELETE
};

struct Route {
  Endpoint endpoint;
  const char* method;
  std::string scope;  // scope routes
  std::string id;     // job id or memory id
};

std::optional<Route> MatchRoute(const std::vector<std::string>& s) {
  if (s.size() == 1 && s[0] == "healthz") return Route{Endpoint::kHealthz, "GET", {}, {}};
  if (s.size() == 1 && s[0] == "readyz") return Route{Endpoint::kReadyz, "GET", {}, {}};
  if (s.size() == 1 && s[0] == "mcp") return Route{Endpoint::kMcp, "POST", {}, {}};
  if (s.size() == 2 && s[0] == "v1" && s[1] == "scopes") {
    return Route{Endpoint::kScopes, "GET", {}, {}};
  }
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
  if (s.size() == 4 && s[3] == "forget") return Route{Endpoint::kForget, "POST", scope, {}};
  if (s.size() == 4 && s[3] == "export") return Route{Endpoint::kExport, "GET", scope, {}};
  if (s.size() == 4 && s[3] == "import") return Route{Endpoint::kImport, "POST", scope, {}};
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
    case Endpoint::kIngestBatch:
    case Endpoint::kImport:
      return kPermWrite;
    case Endpoint::kForget:
      return kPermDelete;
    case Endpoint::kExport:
      return kPermExport;
    case Endpoint::kFeedback:
      return kPermFeedback;
    default:
      return kPermRead;
  }
}

// Whether `key` may read a job (its scope_name is one of the key's scopes).
bool JobVisibleTo(const json& job, const ApiKey& key) {
  const auto it = job.find("scope_name");
  return !job.is_object() || it == job.end() || !it->is_string() ||
         key.AllowsScope(it->get<std::string>());
}

}  // namespace

struct Server::Impl final : HttpApp {
  ServerOptions options;
  KeyStore& keys;
  std::unique_ptr<HttpListener> listener;
  api::MemoryApi* memory = nullptr;
  McpEndpoint* mcp = nullptr;
  OAuthServer* oauth = nullptr;
  std::atomic<int> in_flight{0};  // requests holding a concurrency slot

  Impl(ServerOptions o, KeyStore& k) : options(std::move(o)), keys(k) {}

  HttpResponse Answer(const HttpRequest& req) override;
  HttpResponse Refusal(const HttpRequest& head, int status, std::string_view code,
                       std::string_view message) override;
  HttpResponse Route(Call& call);
  HttpResponse Authorized(Call& call, const struct Route& route);
  // The key of the request's bearer token, or the answer refusing it (401, or 503 when the key
  // store cannot be read).
  // `oauth_tokens`: an OAuth access token is taken too (at /mcp), and a 401 names the
  // resource metadata.
  std::optional<HttpResponse> Authenticate(Call& call, std::optional<ApiKey>& key,
                                           bool oauth_tokens = false);
  std::optional<HttpResponse> HandleOAuth(Call& call);
  HttpResponse HandleMcp(Call& call);
  HttpResponse HandleReady(const Call& call);
  HttpResponse HandleEndpoint(Call& call, const struct Route& route, const ApiKey& key);
  HttpResponse HandleMaintenance(Call& call, const struct Route& route, const json& body,
                                 const ApiKey& key);
  HttpResponse HandleJobBatch(Call& call, const json& body, const ApiKey& key);
  HttpResponse HandleEvidence(Call& call, const struct Route& route);
};

HttpResponse Server::Impl::Refusal(const HttpRequest& head, int status, std::string_view code,
                                   std::string_view message) {
  const Call call = StartCall(head, options.gzip);
  if (status == 411 || status == 413) {
    return JsonAnswer(call, status, EarlyErrorBody(code, call.request_id));
  }
  const std::string text =
      message.empty() ? std::string(ReasonPhrase(status)) : std::string(message);
  return ApiError(call, status, code, text, {}, status == 503 ? 1 : -1);
}

// The concurrency slot of one request: taken unless it is a health check, given back when the
// answer is made.
class Slot {
 public:
  Slot(std::atomic<int>& in_flight, bool take) : counter_(take ? &in_flight : nullptr) {
    if (counter_ != nullptr) count_ = counter_->fetch_add(1) + 1;
  }
  ~Slot() {
    if (counter_ != nullptr) counter_->fetch_sub(1);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  int count() const { return count_; }

 private:
  std::atomic<int>* counter_;
  int count_ = 0;
};

HttpResponse Server::Impl::Answer(const HttpRequest& req) {
  Call call = StartCall(req, options.gzip);
  return Route(call);
}

HttpResponse Server::Impl::Route(Call& call) {
  const HttpRequest& req = call.req;
  auto segments = SplitTargetPath(req.target);
  std::optional<struct Route> route;
  if (segments) route = MatchRoute(*segments);
  const bool health =
      route && (route->endpoint == Endpoint::kHealthz || route->endpoint == Endpoint::kReadyz);
  // /mcp has its own limits (memd/mcp_endpoint.h): its waits would hold a slot for long.
  if (route && route->endpoint == Endpoint::kMcp) return HandleMcp(call);
  const Slot slot(in_flight, !health);
  if (!health && slot.count() > options.max_concurrency) {
    return ApiError(call, 429, "rate_limited", "too many requests in progress; retry", {}, 1);
  }
  if (auto answered = HandleOAuth(call)) return std::move(*answered);
  if (!route) return ApiError(call, 404, "not_found", "Not Found");
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  if (method != route->method) {
    HttpResponse res = ApiError(call, 405, "method_not_allowed", "Method Not Allowed");
    res.Set("Allow", route->method);
    return res;
  }
  if (route->endpoint == Endpoint::kHealthz) return JsonAnswer(call, 200, json{{"status", "ok"}});
  if (route->endpoint == Endpoint::kReadyz) return HandleReady(call);
  return Authorized(call, *route);
}

// Authentication (Authorization: Bearer tmcra_<key_id>.<secret>).
std::optional<HttpResponse> Server::Impl::Authenticate(Call& call, std::optional<ApiKey>& key,
                                                       bool oauth_tokens) {
  const std::string authorization = call.req.Get("Authorization");
  std::string token;
  if (authorization.size() > 7 && strncasecmp(authorization.c_str(), "Bearer ", 7) == 0) {
    token = authorization.substr(7);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
    while (!token.empty() && token.back() == ' ') token.pop_back();
  }
  auto unauthorized = [&](const std::string& why) {
    spdlog::info("request {}: 401 ({})", call.request_id, LogSafe(why));
    HttpResponse res =
        ApiError(call, 401, "unauthorized", "a valid API key is required (Authorization: Bearer)");
    res.Set("WWW-Authenticate", oauth_tokens && oauth != nullptr
                                    ? oauth->Challenge(/*invalid_token=*/!token.empty())
                                    : std::string("Bearer"));
    return res;
  };
  if (token.empty()) {
    return unauthorized(authorization.empty() ? "no Authorization header" : "not a bearer token");
  }
  if (oauth_tokens && oauth != nullptr && OAuthServer::IsAccessToken(token)) {
    auto granted = oauth->Authenticate(token);
    if (!granted) return ErrorAnswer(call, granted.error());
    if (!*granted) return unauthorized("unknown, expired or revoked access token");
    key = std::move(*granted);
    call.key_id = LogSafe(key->key_id, 64) + " (oauth)";
    return std::nullopt;
  }
  auto outcome = keys.Authenticate(token);
  if (!outcome) return ErrorAnswer(call, outcome.error());
  if (!outcome->key) return unauthorized(outcome->reason);
  key = std::move(outcome->key);
  call.key_id = LogSafe(key->key_id, 64);
  return std::nullopt;
}

// The permission and the scope of an authenticated request.
HttpResponse Server::Impl::Authorized(Call& call, const struct Route& route) {
  std::optional<ApiKey> authenticated;
  if (auto refused = Authenticate(call, authenticated)) return std::move(*refused);
  const ApiKey& key = *authenticated;
  const char* permission = PermissionFor(route.endpoint);
  if (!key.Has(permission)) {
    return ApiError(call, 403, "forbidden", std::string(permission) + " is required");
  }
  if (route.endpoint != Endpoint::kJob && route.endpoint != Endpoint::kJobBatch &&
      route.endpoint != Endpoint::kScopes) {
    if (!IsValidScope(route.scope)) {
      const Error e = InvalidScopeError();
      return ApiError(call, 422, e.api_code, e.message, e.details_json);
    }
    if (!key.AllowsScope(route.scope)) {
      return ApiError(call, 403, "forbidden", "the API key is not valid for this scope");
    }
  }
  return HandleEndpoint(call, route, key);
}

// The OAuth authorization server's paths, when it is served.
std::optional<HttpResponse> Server::Impl::HandleOAuth(Call& call) {
  if (oauth == nullptr) return std::nullopt;
  auto res = oauth->Handle(call.req);
  if (!res) return std::nullopt;
  res->request_id = call.request_id;
  res->Set("x-request-id", call.request_id);
  return res;
}

// /mcp: Host and Origin first, then the key, then the endpoint's own checks and answer.
HttpResponse Server::Impl::HandleMcp(Call& call) {
  if (mcp == nullptr) return ApiError(call, 404, "not_found", "Not Found");
  HttpResponse res;
  std::optional<ApiKey> key;
  if (auto refused = mcp->CheckOrigin(call.req)) {
    res = std::move(*refused);
  } else if (auto preflight = mcp->Preflight(call.req)) {
    res = std::move(*preflight);
  } else if (auto unauthorized = Authenticate(call, key, /*oauth_tokens=*/true)) {
    res = std::move(*unauthorized);
    mcp->AllowOrigin(call.req, res);
  } else {
    res = mcp->Handle(call.req, *key);
    mcp->AllowOrigin(call.req, res);
  }
  res.request_id = call.request_id;
  if (!call.key_id.empty()) res.log_note = " key=" + call.key_id;
  res.Set("x-request-id", call.request_id);
  return res;
}

HttpResponse Server::Impl::HandleReady(const Call& call) {
  if (memory == nullptr) return ApiError(call, 503, "unavailable", "shutting down", {}, 1);
  // The store answers reads, and writes when the last write failed (a full disk).
  auto probe = memory->Ready();
  if (probe) return JsonAnswer(call, 200, json{{"status", "ready"}});
  spdlog::warn("readyz: {}", LogSafe(probe.error().ToString(), 1000));
  const bool full = probe.error().code == Errc::kStorageFull;
  return ApiError(call, 503, "unavailable",
                  full ? "the memory store cannot write (its disk is full)"
                       : "the memory store is not available",
                  {}, full ? kStorageRetrySeconds : 1);
}

HttpResponse Server::Impl::HandleEndpoint(Call& call, const struct Route& route,
                                          const ApiKey& key) {
  const HttpRequest& req = call.req;
  Attribution attribution{Header(req, "X-TMCRA-Client-Platform"),
                          Header(req, "X-TMCRA-Integration-ID"), Header(req, "X-TMCRA-Agent-ID")};
  if (auto s = ValidateAttribution(attribution); !s) return ErrorAnswer(call, s.error());
  const bool has_body =
      route.endpoint == Endpoint::kRecall || route.endpoint == Endpoint::kIngest ||
      route.endpoint == Endpoint::kIngestBatch || route.endpoint == Endpoint::kJobBatch ||
      route.endpoint == Endpoint::kFeedback || route.endpoint == Endpoint::kForget ||
      route.endpoint == Endpoint::kImport;
  json body;
  if (has_body) {
    auto parsed = ParseBodyObject(req.body, req.Get("Content-Type"));
    if (!parsed) return ErrorAnswer(call, parsed.error());
    body = std::move(*parsed);
  }
  auto reply = [&](Result<json> result, int status) {
    if (!result) return ErrorAnswer(call, result.error());
    return JsonAnswer(call, status, *result);
  };
  switch (route.endpoint) {
    case Endpoint::kRecall: {
      api::RecallOptions recall;
      recall.agent_id = attribution.agent_id;
      return reply(memory->Recall(route.scope, body, recall), 200);
    }
    case Endpoint::kIngest:
    case Endpoint::kIngestBatch: {
      api::IngestOptions ingest;
      ingest.idempotency_key = req.Get("Idempotency-Key");
      ingest.agent_id = attribution.agent_id;
      // The service records a request without the header as a plain REST call.
      ingest.client_platform = attribution.client_platform.value_or("rest");
      ingest.integration_id = attribution.integration_id;
      return reply(route.endpoint == Endpoint::kIngest
                       ? memory->Ingest(route.scope, body, ingest)
                       : memory->IngestBatch(route.scope, body, ingest),
                   202);
    }
    case Endpoint::kFeedback: {
      auto action = body.find("action");
      if (action != body.end() && action->is_string() && *action == "correct" &&
          !key.Has(kPermWrite)) {
        return ApiError(call, 403, "forbidden", "memory:write is required to save a correction");
      }
      api::FeedbackOptions feedback;
      feedback.idempotency_key = req.Get("Idempotency-Key");
      return reply(memory->Feedback(route.scope, body, feedback), 201);
    }
    case Endpoint::kJob: {
      auto job = memory->GetJob(route.id);
      if (job && !JobVisibleTo(*job, key)) {
        return ApiError(call, 403, "forbidden", "the API key is not valid for this job's scope");
      }
      return reply(std::move(job), 200);
    }
    case Endpoint::kJobBatch:
      return HandleJobBatch(call, body, key);
    case Endpoint::kEvidence:
      return HandleEvidence(call, route);
    case Endpoint::kScopes:
    case Endpoint::kForget:
    case Endpoint::kExport:
    case Endpoint::kImport:
      return HandleMaintenance(call, route, body, key);
    default:
      return ApiError(call, 404, "not_found", "Not Found");
  }
}

// The scopes' figures (only the scopes the key may act on), forget, export and import: the
// engine's maintenance calls (memory/engine.h) behind their permissions.
HttpResponse Server::Impl::HandleMaintenance(Call& call, const struct Route& route,
                                             const json& body, const ApiKey& key) {
  switch (route.endpoint) {
    case Endpoint::kScopes: {
      auto stats = memory->ScopeStats();
      if (!stats) return ErrorAnswer(call, stats.error());
      json visible = json::array();
      for (const json& scope : (*stats)["scopes"]) {
        if (key.AllowsScope(scope.value("scope_name", ""))) visible.push_back(scope);
      }
      (*stats)["scopes"] = std::move(visible);
      return JsonAnswer(call, 200, *stats);
    }
    case Endpoint::kForget: {
      auto done = memory->Forget(route.scope, body);
      if (done)
        spdlog::info("request {}: forget in {}: {} records", call.request_id, LogSafe(route.scope),
                     done->value("records", 0));
      return done ? JsonAnswer(call, 200, *done) : ErrorAnswer(call, done.error());
    }
    case Endpoint::kExport: {
      json lines = json::array();
      auto exported = memory->Export(route.scope, [&lines](const json& line) {
        lines.push_back(line);
        return Ok();
      });
      if (!exported) return ErrorAnswer(call, exported.error());
      return JsonAnswer(call, 200, json{{"scope_name", route.scope}, {"lines", std::move(lines)}});
    }
    default: {
      auto lines = body.find("lines");
      auto added = memory->Import(route.scope, lines == body.end() ? json() : *lines);
      return added ? JsonAnswer(call, 200, *added) : ErrorAnswer(call, added.error());
    }
  }
}

HttpResponse Server::Impl::HandleJobBatch(Call& call, const json& body, const ApiKey& key) {
  auto ids = ParseJobIds(body);
  if (!ids) return ErrorAnswer(call, ids.error());
  auto jobs = memory->GetJobs(*ids);
  if (jobs && jobs->size() != ids->size()) jobs = Error::Internal("GetJobs: not one result per id");
  if (!jobs) return ErrorAnswer(call, jobs.error());
  json entries = json::array();
  for (size_t i = 0; i < ids->size(); ++i) {
    Result<json>& job = (*jobs)[i];
    if (!job && job.error().api_code.empty()) {
      // A busy store is the whole request's 503 (Retry-After); any other failure is this
      // job's 500, so one unreadable job holds back no other.
      const Errc code = job.error().code;
      if (code == Errc::kUnavailable || code == Errc::kTimeout || code == Errc::kStorageFull) {
        return ErrorAnswer(call, job.error());
      }
      spdlog::error("request {}: job {}: {}", call.request_id, LogSafe((*ids)[i]),
                    LogSafe(job.error().ToString(), 1000));
      job = Error::Api(Errc::kInternal, "internal_error", "internal error");
    }
    // As GET /v1/jobs/{id} answers 403 for a job of a scope the key may not read.
    if (job && !JobVisibleTo(*job, key)) {
      job = Error::Api(Errc::kPermissionDenied, "forbidden",
                       "the API key is not valid for this job's scope");
    }
    entries.push_back(JobsBatchEntry((*ids)[i], job, call.request_id));
  }
  return JsonAnswer(call, 200, json{{"jobs", std::move(entries)}});
}

HttpResponse Server::Impl::HandleEvidence(Call& call, const struct Route& route) {
  int limit = 10;
  if (auto text = call.req.Query("limit")) {
    auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), limit);
    if (text->empty() || ec != std::errc() || ptr != text->data() + text->size()) {
      json details = json::array(
          {{{"loc", {"query", "limit"}},
            {"msg", "Input should be a valid integer, unable to parse string as an integer"},
            {"type", "int_parsing"}}});
      return ApiError(call, 422, "validation_error", "limit: Input should be a valid integer",
                      details.dump());
    }
  }
  if (call.req.Query("cursor")) {
    // This server never hands out a cursor (every page is complete: next_cursor is null).
    json details = json::array(
        {{{"loc", {"query", "cursor"}}, {"msg", "Invalid cursor"}, {"type", "value_error"}}});
    return ApiError(call, 422, "validation_error", "cursor: Invalid cursor", details.dump());
  }
  if (!memory) return ApiError(call, 503, "unavailable", "shutting down", {}, 1);
  auto evidence = memory->Evidence(route.scope, route.id, limit);
  if (!evidence) return ErrorAnswer(call, evidence.error());
  return JsonAnswer(call, 200, *evidence);
}

Server::Server(ServerOptions options, KeyStore& keys)
    : impl_(std::make_unique<Impl>(std::move(options), keys)) {}

Server::~Server() = default;

bool Server::tls() const { return !impl_->options.tls_cert_file.empty(); }

Result<int> Server::Bind() {
  const ServerOptions& o = impl_->options;
  ListenerOptions l;
  l.listen = o.listen;
  l.tls_cert_file = o.tls_cert_file;
  l.tls_key_file = o.tls_key_file;
  l.max_body_bytes = o.max_body_bytes;
  l.workers = o.threads;
  l.max_connections = o.max_connections;
  l.max_connections_per_address = o.max_connections_per_address;
  l.head_timeout_seconds = o.head_timeout_seconds;
  l.body_timeout_seconds = o.request_timeout_seconds;
  l.keep_alive_seconds = o.keep_alive_seconds;
  impl_->listener = std::make_unique<HttpListener>(std::move(l), *impl_);
  return impl_->listener->Bind();
}

Status Server::Serve(api::MemoryApi& memory) {
  if (!impl_->listener) return Error::Internal("Serve before Bind");
  impl_->memory = &memory;
  return impl_->listener->Serve();
}

void Server::ServeMcp(McpEndpoint& endpoint) { impl_->mcp = &endpoint; }

void Server::ServeOAuth(OAuthServer& oauth) { impl_->oauth = &oauth; }

void Server::Stop() {
  if (impl_->mcp != nullptr) impl_->mcp->Stop();
  if (impl_->listener) impl_->listener->Stop();
}

ListenerStats Server::connection_stats() const {
  return impl_->listener ? impl_->listener->stats() : ListenerStats{};
}

}  // namespace tmcra::memd
