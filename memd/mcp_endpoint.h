// tmcra-memd's MCP endpoint: the Streamable HTTP transport (MCP 2025-03-26 to 2025-11-25) at
// /mcp, serving tmcra-mcp's tools (memd/mcp_tools.h), each call bound to the caller's key
// (docs/remote-mcp.md).
//
//   POST   /mcp  one JSON-RPC message. initialize begins a session: its answer carries
//                Mcp-Session-Id (memd/mcp_session.h), which every later request sends. A
//                notification or a response: 202, no body. A request: 200 application/json with
//                its answer; a tools/call that outlasts `answer_within` is answered 200
//                text/event-stream with one event (an id, empty data, a retry delay) and the
//                stream ends; the call runs on, and its answer is kept in the store
//                (memd/mcp_streams.h), for a GET to any memd on it.
//   GET    /mcp  with Last-Event-ID: the rest of that stream (the call's answer when it is
//                ready, else after `answer_within` the same event again). Without: 405, as the
//                transport allows a server that sends nothing unasked.
//   DELETE /mcp  405: a session ends with its key (revoked) or after kSessionLifetime.
//
// Checks, in order: Host and Origin (403: DNS rebinding, pages of other sites; CheckOrigin,
// before any credential), then memd_server's authentication (401), Accept (406), Content-Type
// (415), a JSON-RPC message (400 with a JSON-RPC error), a session for anything but initialize
// (400 without one, 404 for one that is no longer valid), MCP-Protocol-Version (400 when
// unsupported). A JSON-RPC error of a request is answered 200, as the transport does.
//
// A page of an allowed origin gets CORS answers: OPTIONS (before any credential) and the
// Access-Control-* headers on every answer.
//
// Limits: a call of a tool that may wait (ToolSpec::may_wait) runs on one of `runners` threads,
// others on the request's thread (up to `inline_calls` at once, then on the runners too); a key has
// at most 8 running or queued (429); at most 4 POSTs and 4 GETs wait for answers at once (past it a
// 2025-11-25 client's stream ends at once and it resumes; an earlier client's call is refused 503,
// as its POST must carry the answer and may wait up to 10 minutes). notifications/cancelled stops
// the named call at its next check.
//
// Batches (JSON arrays) are refused (-32600): the current protocol has none, and 2025-03-26
// clients do not send them over HTTP. The server sends no requests of its own (no
// elicitation over HTTP): tmcra_feedback then asks for its confirmation in its result.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memd/http_message.h"
#include "memd/key_store.h"
#include "memd/mcp_session.h"
#include "memd/mcp_streams.h"
#include "src/mcp/tool_set.h"

namespace tmcra::memd {

struct McpEndpointOptions {
  mcp::ServerIdentity identity;
  // How long a POST waits for a tool's answer, and a GET for a stream's, before ending its
  // stream with one event for the client to resume from.
  std::chrono::milliseconds answer_within{20000};
  // The delay before a client resumes, in the event's `retry` field.
  int retry_ms = 100;
  // Origins a browser page may call from (exactly "scheme://host[:port]"), besides the server's
  // own (`own_origins`). A request without Origin is not a page's and passes.
  std::vector<std::string> allowed_origins;
  std::vector<std::string> own_origins;
  // Host header values accepted (host or host:port, case-insensitive); empty: any. memd fills it
  // from --public-url, and with the loopback names when it listens on a loopback address.
  std::vector<std::string> allowed_hosts;
  int runners = 16;  // threads running the calls of tools that may wait (ToolSpec::may_wait)
  // Calls of tools that never wait run on the request's own thread, as REST requests do, this
  // many at once (more go to the runners).
  int inline_calls = 8;
};

class McpEndpoint {
 public:
  // The tools a key is offered.
  using ToolsFor = std::function<std::shared_ptr<const mcp::ToolSet>(const ApiKey&)>;
  // `keys` keeps the answers of calls that outlast their POST (memd/mcp_streams.h); it outlives
  // the endpoint.
  McpEndpoint(McpEndpointOptions options, std::string session_secret, ToolsFor tools_for,
              KeyStore& keys);
  ~McpEndpoint();
  McpEndpoint(const McpEndpoint&) = delete;
  McpEndpoint& operator=(const McpEndpoint&) = delete;

  // 403 for a Host or Origin the endpoint does not serve (before any credential is read);
  // nothing when the request may go on.
  std::optional<HttpResponse> CheckOrigin(const HttpRequest& req) const;
  // The answer to a CORS preflight (OPTIONS) of an origin CheckOrigin let through; nothing for
  // another method.
  std::optional<HttpResponse> Preflight(const HttpRequest& req) const;
  // The answer to an authenticated request of `key` (GET, POST or DELETE /mcp).
  HttpResponse Handle(const HttpRequest& req, const ApiKey& key);
  // The CORS headers of an answer to a page of an allowed origin (nothing without Origin).
  void AllowOrigin(const HttpRequest& req, HttpResponse& res) const;
  // Ends the waits (the server is stopping); returns at once. The destructor waits for the
  // tool calls that run.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::memd
