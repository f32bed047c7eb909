#include "memd/mcp_endpoint.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/ids.h"
#include "src/mcp/jsonrpc.h"

namespace tmcra::memd {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The JSON-RPC error a transport refusal carries (the TS SDK's servers answer so too).
constexpr int kTransportError = -32000;
constexpr int kSessionNotFound = -32001;
// Calls waiting for a runner at most; past it a tools/call is answered 503.
constexpr size_t kMaxQueuedCalls = 256;
// Resuming GETs that may wait at once (each holds a worker thread); past it a GET answers at
// once with the stream's event, and the client comes back after the retry delay.
constexpr int kMaxWaitingResumes = 4;
// POSTs of tools/call that may wait for their answer at once (each holds a worker thread); past
// it a call's POST ends at once with the event the client resumes from (2025-11-25), or, for a
// client of an earlier version (whose POST must carry the answer), is refused 503 before it runs.
constexpr int kMaxWaitingCalls = 4;
// Tool calls of one key running or queued at once; past it a call is refused 429.
constexpr int kMaxCallsPerKey = 8;
// How long a POST of a client before 2025-11-25 waits for its answer at most.
constexpr std::chrono::minutes kLegacyCallLimit{10};
// The first version whose clients resume a POST's stream that ends before its answer.
constexpr std::string_view kResumableVersion = "2025-11-25";

HttpResponse Answer(int status, const std::string& content_type, std::string body) {
  HttpResponse res;
  res.status = status;
  if (!content_type.empty()) res.Set("Content-Type", content_type);
  res.body = std::move(body);
  return res;
}

HttpResponse RpcAnswer(int status, const json& message) {
  return Answer(status, "application/json", mcp::Serialize(message));
}

HttpResponse TransportError(int status, const std::string& message, int code = kTransportError) {
  return RpcAnswer(status, mcp::MakeError(nullptr, code, message));
}

HttpResponse TooManyCalls() {
  HttpResponse res =
      TransportError(429, "Too Many Requests: this key has " + std::to_string(kMaxCallsPerKey) +
                              " tool calls in progress; retry");
  res.Set("Retry-After", "1");
  return res;
}

// One SSE event: an id, the retry delay when given, and `data` (one line: JSON-RPC text has no
// raw newline).
std::string Event(const std::string& id, int retry_ms, const std::string& data) {
  std::string out = "id: " + id + "\n";
  if (retry_ms >= 0) out += "retry: " + std::to_string(retry_ms) + "\n";
  out += "data: " + data + "\n\n";
  return out;
}

HttpResponse EventStream(std::string events) {
  HttpResponse res = Answer(200, "text/event-stream", std::move(events));
  res.Set("Cache-Control", "no-cache");
  return res;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return text;
}

// Whether an Accept header admits `type` (its exact media type or */*, or no header at all).
bool Accepts(const HttpRequest& req, std::string_view type) {
  const std::string* accept = req.Find("Accept");
  if (accept == nullptr) return true;
  const std::string value = Lower(*accept);
  return value.find(type) != std::string::npos || value.find("*/*") != std::string::npos;
}

bool IsJsonContent(const HttpRequest& req) {
  const std::string type = Lower(req.Get("Content-Type"));
  return type.rfind("application/json", 0) == 0;
}

// A tool's context over HTTP: the session's version, cancelled by the client
// (notifications/cancelled) or when the server stops, and no elicitation (the server sends no
// requests of its own here).
class HttpCallContext final : public mcp::ToolContext {
 public:
  HttpCallContext(std::string version, const std::atomic<bool>& cancelled,
                  const std::atomic<bool>& stopping)
      : version_(std::move(version)), cancelled_(cancelled), stopping_(stopping) {}
  std::string protocol_version() const override { return version_; }
  bool cancelled() const override { return cancelled_.load() || stopping_.load(); }
  bool can_elicit() const override { return false; }
  Result<mcp::ElicitResponse> Elicit(const std::string&, const json&,
                                     std::chrono::milliseconds) override {
    return Error::Unavailable("the client did not declare the elicitation capability");
  }

 private:
  std::string version_;
  const std::atomic<bool>& cancelled_;
  const std::atomic<bool>& stopping_;
};

// A tools/call handed to a runner: the POST waits on it, and if it gives up first, names the
// stream the answer goes to.
struct PendingCall {
  std::atomic<bool> cancelled{false};  // by the client
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string message;  // the serialized answer, once done
  std::string stream;   // set when the POST ended before the answer
  std::string key_id;   // the caller's, whose stream it is
};

// A fixed set of threads running tool calls from a bounded queue.
class Runners {
 public:
  explicit Runners(int count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~Runners() { Stop(); }
  // false when the queue is full.
  bool Submit(std::function<void()> work) {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() >= kMaxQueuedCalls) return false;
    queue_.push_back(std::move(work));
    cv_.notify_one();
    return true;
  }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        work();
      } catch (const std::exception& e) {
        spdlog::error("mcp: a tool call failed: {}", e.what());
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

// One holder of a counted place (a waiting POST or GET): the count with it, given back at the end.
class Counted {
 public:
  explicit Counted(std::atomic<int>& counter)
      : counter_(counter), count_(counter.fetch_add(1) + 1) {}
  ~Counted() { counter_.fetch_sub(1); }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  int count() const { return count_; }

 private:
  std::atomic<int>& counter_;
  int count_;
};

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  for (const auto& item : list) {
    if (strcasecmp(item.c_str(), value.c_str()) == 0) return true;
  }
  return false;
}

// "<stream>:<n>" of a Last-Event-ID.
bool SplitEventId(const std::string& id, std::string* stream, std::string* n) {
  const size_t colon = id.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *stream = id.substr(0, colon);
  *n = id.substr(colon + 1);
  return true;
}

}  // namespace

struct McpEndpoint::Impl {
  McpEndpointOptions options;
  SessionSigner signer;
  ToolsFor tools_for;
  StreamStore streams;
  std::atomic<bool> stopping{false};
  std::atomic<int> waiting_resumes{0};
  std::atomic<int> waiting_calls{0};
  std::atomic<int> inline_calls{0};
  std::mutex calls_mu;
  std::map<std::string, int> calls_per_key;                       // guarded by calls_mu
  std::map<std::string, std::weak_ptr<PendingCall>> cancellable;  // guarded by calls_mu
  Runners runners;

  Impl(McpEndpointOptions o, std::string secret, ToolsFor t, KeyStore& keys)
      : options(std::move(o)),
        signer(std::move(secret)),
        tools_for(std::move(t)),
        streams(keys),
        runners(std::max(1, options.runners)) {}

  HttpResponse Post(const HttpRequest& req, const ApiKey& key);
  HttpResponse Get(const HttpRequest& req, const ApiKey& key);
  // The session a request names, or the answer refusing it.
  std::optional<HttpResponse> FindSession(const HttpRequest& req, const ApiKey& key,
                                          McpSession* session) const;
  HttpResponse Initialize(const json& id, const json& params, const ApiKey& key);
  HttpResponse Request(const json& message, const McpSession& session, const ApiKey& key);
  HttpResponse CallTool(const json& id, const json& params, const McpSession& session,
                        const ApiKey& key);
  // The serialized answer of one call (a JSON-RPC error if it threw).
  std::string RunTool(const mcp::ToolSet& tools, const mcp::ToolSet::Tool& tool, const json& id,
                      const json& arguments, const std::string& version,
                      const std::atomic<bool>& cancelled);
  // A call that never waits, on this thread: answered as REST answers, with no hand-off.
  HttpResponse CallInline(const mcp::ToolSet& tools, const mcp::ToolSet::Tool& tool, const json& id,
                          const json& arguments, const std::string& version);
  void RunCall(const std::shared_ptr<PendingCall>& pending,
               std::shared_ptr<const mcp::ToolSet> tools, const mcp::ToolSet::Tool* tool,
               const json& id, const json& arguments, const std::string& version);
  // A place among the key's kMaxCallsPerKey calls, and its return.
  bool Admit(const std::string& key_id);
  void Release(const std::string& key_id);
  // Queues `work`; once it ran, the key's place is given back and `cancel_key` forgotten.
  bool Submit(const std::string& key_id, const std::string& cancel_key,
              const std::shared_ptr<PendingCall>& pending, std::function<void()> work);
  void Cancel(const McpSession& session, const ApiKey& key, const json& params);
  HttpResponse AwaitCall(const std::shared_ptr<PendingCall>& pending, const ApiKey& key,
                         const std::string& version, const Counted& waiting);
  HttpResponse Resume(const std::string& last_event_id, const ApiKey& key);
};

McpEndpoint::McpEndpoint(McpEndpointOptions options, std::string session_secret, ToolsFor tools_for,
                         KeyStore& keys)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(session_secret),
                                   std::move(tools_for), keys)) {}

McpEndpoint::~McpEndpoint() {
  Stop();
  impl_->runners.Stop();
}

void McpEndpoint::Stop() {
  impl_->stopping = true;
  impl_->streams.WakeAll();
}

std::optional<HttpResponse> McpEndpoint::CheckOrigin(const HttpRequest& req) const {
  const auto& o = impl_->options;
  if (!o.allowed_hosts.empty() && !Contains(o.allowed_hosts, req.Get("Host"))) {
    spdlog::info("mcp: 403 for Host {}", LogSafe(req.Get("Host")));
    return TransportError(403, "Forbidden: this server does not answer for that Host");
  }
  const std::string* origin = req.Find("Origin");
  if (origin == nullptr || Contains(o.own_origins, *origin) ||
      Contains(o.allowed_origins, *origin)) {
    return std::nullopt;
  }
  spdlog::info("mcp: 403 for Origin {}", LogSafe(*origin));
  return TransportError(403, "Forbidden: requests from this Origin are not allowed");
}

std::optional<HttpResponse> McpEndpoint::Preflight(const HttpRequest& req) const {
  if (req.method != "OPTIONS") return std::nullopt;
  HttpResponse res = Answer(204, "", "");
  res.Set("Access-Control-Allow-Methods", "GET, POST, DELETE");
  res.Set("Access-Control-Allow-Headers",
          "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, "
          "Last-Event-ID");
  res.Set("Access-Control-Max-Age", "600");
  AllowOrigin(req, res);
  return res;
}

void McpEndpoint::AllowOrigin(const HttpRequest& req, HttpResponse& res) const {
  const std::string* origin = req.Find("Origin");
  if (origin == nullptr) return;  // CheckOrigin let it through: it is one of ours
  res.Set("Access-Control-Allow-Origin", *origin);
  res.Set("Access-Control-Expose-Headers", "Mcp-Session-Id");
  res.Set("Vary", "Origin");
}

HttpResponse McpEndpoint::Handle(const HttpRequest& req, const ApiKey& key) {
  if (req.method == "POST") return impl_->Post(req, key);
  if (req.method == "GET" || req.method == "HEAD") return impl_->Get(req, key);
  HttpResponse res = TransportError(405, "Method Not Allowed: sessions end with their key");
  res.Set("Allow", "GET, POST");
  return res;
}

HttpResponse McpEndpoint::Impl::Post(const HttpRequest& req, const ApiKey& key) {
  if (!Accepts(req, "application/json") && !Accepts(req, "text/event-stream")) {
    return TransportError(406, "Not Acceptable: accept application/json and text/event-stream");
  }
  if (!IsJsonContent(req)) {
    return TransportError(415, "Unsupported Media Type: the body must be application/json");
  }
  mcp::ParsedLine parsed = mcp::ParseLine(req.body);
  if (parsed.error_code != 0) return TransportError(400, parsed.error_message, parsed.error_code);
  const json& message = parsed.value;
  if (!message.is_object()) {
    return TransportError(400, "Invalid Request: one JSON-RPC message per POST, no batches",
                          mcp::rpc::kInvalidRequest);
  }
  const auto method = message.find("method");
  const auto id = message.find("id");
  if (method != message.end() && *method == "initialize" && id != message.end()) {
    return Initialize(*id, message.value("params", json::object()), key);
  }
  McpSession session;
  if (auto refused = FindSession(req, key, &session)) return std::move(*refused);
  // A notification or a response (to nothing: this server asks nothing) is taken as it is.
  if (method == message.end() || id == message.end()) {
    if (method != message.end() && *method == "notifications/cancelled" &&
        !parsed.number_out_of_range) {
      Cancel(session, key, message.value("params", json::object()));
    }
    return Answer(202, "", "");
  }
  if (parsed.number_out_of_range) {
    return RpcAnswer(
        200, mcp::MakeError(mcp::IsValidRequestId(*id) ? *id : json(), mcp::rpc::kInvalidParams,
                            "Invalid params: " + mcp::PathText("", parsed.number_paths.at(0)) +
                                ": number out of range"));
  }
  return Request(message, session, key);
}

std::optional<HttpResponse> McpEndpoint::Impl::FindSession(const HttpRequest& req,
                                                           const ApiKey& key,
                                                           McpSession* session) const {
  const std::string* id = req.Find("Mcp-Session-Id");
  if (id == nullptr) {
    return TransportError(400, "Bad Request: Mcp-Session-Id header is required");
  }
  auto found = signer.Verify(*id, static_cast<int64_t>(NowSeconds()));
  if (!found || found->key_id != key.key_id) {
    return TransportError(404, "Session not found", kSessionNotFound);
  }
  const std::string* version = req.Find("MCP-Protocol-Version");
  if (version != nullptr && !mcp::IsSupportedVersion(*version)) {
    return TransportError(400,
                          "Bad Request: unsupported MCP-Protocol-Version " + LogSafe(*version));
  }
  *session = std::move(*found);
  return std::nullopt;
}

HttpResponse McpEndpoint::Impl::Initialize(const json& id, const json& params, const ApiKey& key) {
  if (!mcp::IsValidRequestId(id)) {
    return TransportError(400, "Invalid Request: id must be a string or an integer",
                          mcp::rpc::kInvalidRequest);
  }
  if (!params.is_object() || !params.contains("protocolVersion") ||
      !params["protocolVersion"].is_string()) {
    return RpcAnswer(200,
                     mcp::MakeError(id, mcp::rpc::kInvalidParams,
                                    "Invalid params: params.protocolVersion must be a string"));
  }
  mcp::Negotiation negotiation = mcp::Negotiate(options.identity, params);
  McpSession session{key.key_id, negotiation.version, negotiation.elicitation,
                     static_cast<int64_t>(NowSeconds()), UuidV4()};
  HttpResponse res = RpcAnswer(200, mcp::MakeResult(id, std::move(negotiation.result)));
  res.Set("Mcp-Session-Id", signer.Issue(session));
  return res;
}

HttpResponse McpEndpoint::Impl::Request(const json& message, const McpSession& session,
                                        const ApiKey& key) {
  const json& id = message["id"];
  const auto jsonrpc = message.find("jsonrpc");
  if (!mcp::IsValidRequestId(id) || jsonrpc == message.end() || *jsonrpc != "2.0" ||
      !message["method"].is_string()) {
    return RpcAnswer(
        200, mcp::MakeError(mcp::IsValidRequestId(id) ? id : json(), mcp::rpc::kInvalidRequest,
                            "Invalid Request: jsonrpc must be \"2.0\", method a "
                            "string and id a string or an integer"));
  }
  const std::string method = message["method"].get<std::string>();
  const json params = message.value("params", json::object());
  if (method == "ping") return RpcAnswer(200, mcp::MakeResult(id, json::object()));
  if (!params.is_object()) {
    return RpcAnswer(200, mcp::MakeError(id, mcp::rpc::kInvalidParams,
                                         "Invalid params: params must be an object"));
  }
  if (method == "tools/list") {
    if (auto cursor = params.find("cursor"); cursor != params.end() && !cursor->is_null()) {
      return RpcAnswer(
          200, mcp::MakeError(id, mcp::rpc::kInvalidParams, "Invalid params: unknown cursor"));
    }
    return RpcAnswer(200, mcp::MakeResult(id, tools_for(key)->List(session.version)));
  }
  if (method == "tools/call") return CallTool(id, params, session, key);
  return RpcAnswer(200,
                   mcp::MakeError(id, mcp::rpc::kMethodNotFound, "Method not found: " + method));
}

HttpResponse McpEndpoint::Impl::CallTool(const json& id, const json& params,
                                         const McpSession& session, const ApiKey& key) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return RpcAnswer(200, mcp::MakeError(id, mcp::rpc::kInvalidParams,
                                         "Invalid params: params.name must be a string"));
  }
  std::shared_ptr<const mcp::ToolSet> tools = tools_for(key);
  const mcp::ToolSet::Tool* tool = tools->Find(name->get<std::string>());
  if (tool == nullptr) {
    return RpcAnswer(200, mcp::MakeError(id, mcp::rpc::kInvalidParams,
                                         "Unknown tool: " + name->get<std::string>()));
  }
  std::optional<json> arguments = mcp::ToolSet::Arguments(params);
  if (!arguments) {
    return RpcAnswer(200, mcp::MakeError(id, mcp::rpc::kInvalidParams,
                                         "Invalid params: params.arguments must be an object"));
  }
  if (!tool->spec.may_wait) {
    const Counted running(inline_calls);
    if (running.count() <= options.inline_calls) {
      if (!Admit(key.key_id)) return TooManyCalls();
      HttpResponse res = CallInline(*tools, *tool, id, *arguments, session.version);
      Release(key.key_id);
      return res;
    }
  }
  const bool resumable = session.version >= kResumableVersion;
  const Counted waiting(waiting_calls);
  if (!resumable && waiting.count() > kMaxWaitingCalls) {
    HttpResponse res = TransportError(503, "Service Unavailable: too many tool calls; retry");
    res.Set("Retry-After", "1");
    return res;
  }
  if (!Admit(key.key_id)) return TooManyCalls();
  auto pending = std::make_shared<PendingCall>();
  const std::string cancel_key = key.key_id + "|" + session.nonce + "|" + id.dump();
  const bool queued =
      Submit(key.key_id, cancel_key, pending,
             [this, pending, tools, tool, id, args = std::move(*arguments),
              version = session.version] { RunCall(pending, tools, tool, id, args, version); });
  if (!queued) {
    HttpResponse res = TransportError(503, "Service Unavailable: too many tool calls; retry");
    res.Set("Retry-After", "1");
    return res;
  }
  return AwaitCall(pending, key, session.version, waiting);
}

HttpResponse McpEndpoint::Impl::CallInline(const mcp::ToolSet& tools,
                                           const mcp::ToolSet::Tool& tool, const json& id,
                                           const json& arguments, const std::string& version) {
  const std::atomic<bool> never{false};
  return Answer(200, "application/json", RunTool(tools, tool, id, arguments, version, never));
}

bool McpEndpoint::Impl::Admit(const std::string& key_id) {
  std::lock_guard lock(calls_mu);
  int& count = calls_per_key[key_id];
  if (count >= kMaxCallsPerKey) return false;
  ++count;
  return true;
}

bool McpEndpoint::Impl::Submit(const std::string& key_id, const std::string& cancel_key,
                               const std::shared_ptr<PendingCall>& pending,
                               std::function<void()> work) {
  {
    std::lock_guard lock(calls_mu);
    cancellable[cancel_key] = pending;
  }
  auto release = [this, key_id, cancel_key] {
    {
      std::lock_guard lock(calls_mu);
      cancellable.erase(cancel_key);
    }
    Release(key_id);
  };
  const bool queued = runners.Submit([work = std::move(work), release] {
    work();
    release();
  });
  if (!queued) release();
  return queued;
}

void McpEndpoint::Impl::Release(const std::string& key_id) {
  std::lock_guard lock(calls_mu);
  if (--calls_per_key[key_id] <= 0) calls_per_key.erase(key_id);
}

// notifications/cancelled: the call of that request id in this session stops at its next check.
void McpEndpoint::Impl::Cancel(const McpSession& session, const ApiKey& key, const json& params) {
  auto request = params.is_object() ? params.find("requestId") : params.end();
  if (!params.is_object() || request == params.end()) return;
  std::lock_guard lock(calls_mu);
  auto it = cancellable.find(key.key_id + "|" + session.nonce + "|" + request->dump());
  if (it == cancellable.end()) return;
  if (auto pending = it->second.lock()) pending->cancelled = true;
}

std::string McpEndpoint::Impl::RunTool(const mcp::ToolSet& tools, const mcp::ToolSet::Tool& tool,
                                       const json& id, const json& arguments,
                                       const std::string& version,
                                       const std::atomic<bool>& cancelled) {
  try {
    HttpCallContext context(version, cancelled, stopping);
    mcp::ToolResult result = tools.Run(tool, arguments, context);
    return result.is_error ? mcp::Serialize(mcp::MakeResult(
                                 id, mcp::ToolSet::Shape(std::move(result), version)))
                           : mcp::SerializeToolResult(id, result.structured,
                                                      version >= mcp::kStructuredContentVersion);
  } catch (const std::exception& e) {
    spdlog::error("mcp: tool {} failed: {}", tool.spec.name, e.what());
    return mcp::Serialize(mcp::MakeError(id, mcp::rpc::kInternalError, "Internal error"));
  }
}

void McpEndpoint::Impl::RunCall(const std::shared_ptr<PendingCall>& pending,
                                std::shared_ptr<const mcp::ToolSet> tools,
                                const mcp::ToolSet::Tool* tool, const json& id,
                                const json& arguments, const std::string& version) {
  std::string message = RunTool(*tools, *tool, id, arguments, version, pending->cancelled);
  std::string stream;
  {
    std::lock_guard lock(pending->mu);
    pending->done = true;
    pending->message = message;
    stream = pending->stream;
    pending->cv.notify_all();
  }
  if (!stream.empty()) streams.Finish(stream, pending->key_id, message);
}

HttpResponse McpEndpoint::Impl::AwaitCall(const std::shared_ptr<PendingCall>& pending,
                                          const ApiKey& key, const std::string& version,
                                          const Counted& waiting) {
  // A client of 2025-11-25 resumes a stream that ends before its answer; an earlier one cannot,
  // so its POST waits for the answer itself.
  const auto wait = version < kResumableVersion
                        ? std::chrono::duration_cast<std::chrono::milliseconds>(kLegacyCallLimit)
                    : waiting.count() > kMaxWaitingCalls ? std::chrono::milliseconds(0)
                                                         : options.answer_within;
  const auto deadline = Clock::now() + wait;
  std::unique_lock lock(pending->mu);
  while (!pending->done && !stopping.load() && Clock::now() < deadline) {
    // In slices, so that a stopping server ends the wait soon.
    pending->cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }
  if (pending->done) return Answer(200, "application/json", std::move(pending->message));
  // The call runs on: its answer goes to a stream the client resumes (GET, Last-Event-ID).
  auto opened = streams.Open(key.key_id);
  if (!opened) {
    spdlog::error("mcp: no stream for a call's answer: {}",
                  LogSafe(opened.error().ToString(), 1000));
    HttpResponse res =
        TransportError(503, "Service Unavailable: the answer cannot be kept to resume; retry");
    res.Set("Retry-After", "1");
    return res;
  }
  pending->stream = std::move(*opened);
  pending->key_id = key.key_id;
  return EventStream(Event(pending->stream + ":0", options.retry_ms, ""));
}

HttpResponse McpEndpoint::Impl::Get(const HttpRequest& req, const ApiKey& key) {
  const std::string* last = req.Find("Last-Event-ID");
  if (last == nullptr) {
    HttpResponse res = TransportError(405,
                                      "Method Not Allowed: this server sends nothing unasked; "
                                      "GET resumes a stream (Last-Event-ID)");
    res.Set("Allow", "GET, POST");
    return res;
  }
  if (!Accepts(req, "text/event-stream")) {
    return TransportError(406, "Not Acceptable: a stream is text/event-stream");
  }
  McpSession session;
  if (auto refused = FindSession(req, key, &session)) return std::move(*refused);
  return Resume(*last, key);
}

HttpResponse McpEndpoint::Impl::Resume(const std::string& last_event_id, const ApiKey& key) {
  std::string stream, n;
  if (!SplitEventId(last_event_id, &stream, &n)) {
    return TransportError(400, "Bad Request: Last-Event-ID names no stream of this server");
  }
  if (n != "0") return EventStream("");  // the answer was taken: the stream has nothing more
  const bool may_wait = waiting_resumes.fetch_add(1) < kMaxWaitingResumes;
  const auto deadline = may_wait ? Clock::now() + options.answer_within : Clock::now();
  std::string message;
  const StreamStore::Found found = streams.Wait(stream, key.key_id, deadline, &message);
  waiting_resumes.fetch_sub(1);
  if (found == StreamStore::Found::kUnknown) {
    return TransportError(404, "Not Found: no such stream (it ended, or it is another key's)");
  }
  if (found == StreamStore::Found::kPending) {
    return EventStream(Event(stream + ":0", options.retry_ms, ""));
  }
  return EventStream(Event(stream + ":1", -1, message));
}

}  // namespace tmcra::memd
