// The HTTP(S) front of tmcra-memd: TMCRA's Memory API (docs/contract.md §1.4) over one
// api::MemoryApi (the embedded engine), with the hosted service's middleware behaviour:
//
//   POST /v1/scopes/{scope}/recall                  200  memory:read
//   POST /v1/scopes/{scope}/ingest                  202  memory:write
//   POST /v1/scopes/{scope}/ingest/batch            202  memory:write
//   GET  /v1/jobs/{job_id}                          200  memory:read (and the job's scope)
//   POST /v1/jobs/batch                             200  memory:read (and each job's scope;
//                                                        ours, not TMCRA's)
//   GET  /v1/scopes/{scope}/memory-graph/nodes/{memory_id}/evidence?limit=N
//                                                   200  memory:read
//   POST /v1/scopes/{scope}/feedback                201  memory:feedback (+ memory:write to
//                                                        correct)
//   GET  /healthz, /readyz                          200  anonymous
//   GET, POST, DELETE /mcp                               the MCP endpoint (memd/mcp_endpoint.h):
//                                                        Host and Origin, then any valid key or
//                                                        OAuth access token
//   /.well-known/oauth-*, /register, /authorize, /token, /revoke
//                                                        the OAuth server (memd/oauth.h), once
//                                                        the concurrency slot is taken
//
// Order of checks: 411 (POST without Content-Length, or chunked), 413 (over the body limit),
// 429 (concurrency limit, Retry-After: 1), 404/405 (route), 401 (bearer key), 403 (permission),
// 422 (scope name), 403 (key limited to other scopes), 422 invalid_usage_attribution, 422
// validation_error (body), then the engine's own answers. Every answer carries x-request-id;
// errors use the envelope of §1.3. Bodies of 1024 bytes or more are gzipped for clients that
// accept it. A store that cannot write (a full disk, a read-only file system) is a retryable
// 503 with Retry-After, and /readyz answers 503 until a write succeeds again.
//
// The connections themselves (TLS, reading requests, deadlines, caps, pipelining) are
// HttpListener's (http_listener.h); this module is the application on top of it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/result.h"
#include "memd/http_listener.h"
#include "memd/key_store.h"
#include "memd/mcp_endpoint.h"
#include "memd/oauth.h"
#include "memd/server_rules.h"
#include "src/api/memory_api.h"

namespace tmcra::memd {

enum class GzipPolicy { kAuto, kAlways, kNever };

struct ServerOptions {
  ListenAddress listen;
  std::string tls_cert_file;  // PEM chain; empty together with tls_key_file: plain HTTP
  std::string tls_key_file;
  size_t max_body_bytes = 2 * 1024 * 1024;
  int max_concurrency = 8;  // requests in progress at once; more are answered 429
  int threads = 16;         // worker threads answering complete requests
  // What a peer may hold before any key is checked (http_listener.h).
  int max_connections = 512;
  int max_connections_per_address = 64;  // 0: no cap per address
  int head_timeout_seconds = 10;         // the TLS handshake and a request head
  int request_timeout_seconds = 30;      // a body, plus a second per 16 KiB declared
  int keep_alive_seconds = 5;
  // Gzip for answers of 1024 bytes or more to clients that accept it: kAuto compresses unless
  // the peer is a loopback address that is not a proxy (no X-Forwarded-For or Forwarded
  // header), where compression costs CPU at both ends and saves no bandwidth; kAlways and
  // kNever as named.
  GzipPolicy gzip = GzipPolicy::kAuto;
};

class Server {
 public:
  Server(ServerOptions options, KeyStore& keys);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads the TLS material (when configured) and binds the listening socket; returns the bound
  // port (the chosen one for port 0). Connections queue from here on.
  [[nodiscard]] Result<int> Bind();
  // Serves until Stop(): returns once every request in progress has been answered (up to
  // kDrainLimit) and every connection is closed.
  [[nodiscard]] Status Serve(api::MemoryApi& memory);
  // Serves the MCP endpoint at /mcp (else /mcp is 404). REQUIRES: before Serve; `endpoint`
  // outlives the server.
  void ServeMcp(McpEndpoint& endpoint);
  // Serves the OAuth authorization server's paths (memd/oauth.h), and takes its access tokens at
  // /mcp besides the keys. REQUIRES: before Serve; `oauth` outlives the server.
  void ServeOAuth(OAuthServer& oauth);
  // Stops: new requests are answered 503 (connection closed), the requests in progress finish
  // and write their answers, then Serve returns. Returns at once; thread-safe (not
  // async-signal-safe: call it from a normal thread).
  void Stop();
  bool tls() const;
  ListenerStats connection_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::memd
