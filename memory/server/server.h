// The HTTP(S) front of tmcra-memd: TMCRA's Memory API (tmcra-contract.md §1.4) over one
// api::MemoryApi (the embedded engine), with the hosted service's middleware behaviour:
//
//   POST /v1/scopes/{scope}/recall           200   memory:read
//   POST /v1/scopes/{scope}/ingest           202   memory:write
//   POST /v1/scopes/{scope}/ingest/batch     202   memory:write
//   GET  /v1/jobs/{job_id}                   200   memory:read (and the job's scope)
//   POST /v1/jobs/batch                      200   memory:read (and each job's scope; ours, not TMCRA's)
//   GET  /v1/scopes/{scope}/memory-graph/nodes/{memory_id}/evidence?limit=N   200 memory:read
//   POST /v1/scopes/{scope}/feedback         201   memory:feedback (+ memory:write to correct)
//   GET  /healthz, /readyz                   200   anonymous
//
// Order of checks: 411 (POST without Content-Length, or chunked), 413 (over the body limit),
// 429 (concurrency limit, Retry-After: 1), 404/405 (route), 401 (bearer key), 403 (permission),
// 422 (scope name), 403 (key limited to other scopes), 422 invalid_usage_attribution, 422
// validation_error (body), then the engine's own answers. Every answer carries x-request-id;
// errors use the envelope of §1.3. Bodies of 1024 bytes or more are gzipped for clients that
// accept it. httplib stays inside server.cc.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "memory/server/key_store.h"
#include "memory/server/server_rules.h"
#include "src/api/memory_api.h"
#include "src/common/result.h"

namespace tmcra::memd {

enum class GzipPolicy { kAuto, kAlways, kNever };

struct ServerOptions {
  ListenAddress listen;
  std::string tls_cert_file;   // PEM chain; empty together with tls_key_file: plain HTTP
  std::string tls_key_file;
  size_t max_body_bytes = 2 * 1024 * 1024;
  int max_concurrency = 8;     // requests in progress at once; more are answered 429
  int threads = 16;            // connection threads (an idle keep-alive connection holds one)
  // Accepted connections waiting for a thread; past it the server stops accepting until a
  // thread frees up (further connections wait in the kernel's listen backlog).
  int max_queued_connections = 64;
  int keep_alive_seconds = 5;  // also bounds how long shutdown waits for an idle connection
  int read_timeout_seconds = 10;
  // Over TLS, how long a connection may take to send a request's head (from its first record,
  // or from the previous answer), and a body (this, plus a second per 16 KiB declared), before
  // it is reset: a client trickling bytes under the read timeout cannot hold a connection
  // thread for longer.
  int request_timeout_seconds = 30;
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
  // Serves until Stop(): returns once the listener is closed and every request in progress has
  // been answered.
  [[nodiscard]] Status Serve(api::MemoryApi& memory);
  // Stops: new requests are answered 503 (connection closed), the requests in progress finish
  // and write their answers (up to kDrainLimit), then the listener closes. Blocks for that
  // long; thread-safe (not async-signal-safe: call it from a normal thread).
  void Stop();
  bool tls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::memd
