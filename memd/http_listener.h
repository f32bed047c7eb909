// The connection layer of tmcra-memd: one event-loop thread holds every connection (the TLS
// handshake, reading request heads and bodies, writing answers), and a fixed pool of worker
// threads answers complete requests. A connection costs a descriptor and its buffers, never a
// thread, so clients that send slowly cannot take the server from the others.
//
// What a peer may hold, before any key is checked (docs/memd.md, "Connections"):
//   - time: the TLS handshake and a request head must arrive within head_timeout of the
//     connection's start (or of its first byte after an answer; an idle keep-alive connection
//     waits keep_alive_seconds); a body within body_timeout plus a second per 16 KiB declared;
//     an answer must be taken within write_timeout plus a second per 16 KiB. Past it the
//     connection is closed.
//   - room: a head of at most kMaxHeadBytes (431), a body within max_body_bytes (413).
//   - number: at most max_connections in all and max_connections_per_address from one address
//     (0: no per-address cap). A new connection past a cap takes the place of the connection
//     that has waited longest for its head (a handshake or head in progress first, then an idle
//     keep-alive one); when every connection has a request in progress, the new one is closed.
//
// Requests on one connection are answered in order, one at a time: bytes that follow a request
// (pipelining) wait in the connection's buffer and are read as the next request once the
// answer is written, so no request runs that nobody waits for.
//
// Stop(): from then on a new request is answered 503 once its body is in; the requests whose
// head came before finish and their answers are written (up to kDrainLimit); then Serve
// returns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "memd/http_message.h"
#include "memd/server_rules.h"

namespace tmcra::memd {

// What the listener asks of the application.
class HttpApp {
 public:
  virtual ~HttpApp() = default;
  // The answer to a complete request (head and body). Runs on a worker thread, several at once.
  virtual HttpResponse Answer(const HttpRequest& request) = 0;
  // The answer to a request refused by the connection layer (400, 408, 411, 413, 414, 415,
  // 431, 503, 505): `status`, its error code and message. Runs on the loop thread: no store
  // access, nothing slow. `head` may hold only what could be parsed.
  virtual HttpResponse Refusal(const HttpRequest& head, int status, std::string_view code,
                               std::string_view message) = 0;
};

struct ListenerOptions {
  ListenAddress listen;
  std::string tls_cert_file;  // PEM chain; empty together with tls_key_file: plain HTTP
  std::string tls_key_file;
  size_t max_body_bytes = 2 * 1024 * 1024;
  int workers = 16;
  int max_connections = 512;
  int max_connections_per_address = 64;  // 0: no cap per address
  int head_timeout_seconds = 10;
  int body_timeout_seconds = 30;
  int write_timeout_seconds = 10;
  int keep_alive_seconds = 5;
  int max_requests_per_connection = 1000;
};

// Counters, for the tests and the stop's log line.
struct ListenerStats {
  uint64_t accepted = 0;
  uint64_t evicted = 0;    // closed to make room for a new connection
  uint64_t refused = 0;    // new connections closed at once: no room
  uint64_t timed_out = 0;  // closed past a deadline
  uint64_t requests = 0;   // answers written
};

class HttpListener {
 public:
  HttpListener(ListenerOptions options, HttpApp& app);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Loads the TLS material (when configured), binds and listens; returns the bound port (the
  // chosen one for port 0). Connections wait in the listen backlog from here on.
  [[nodiscard]] Result<int> Bind();
  // Runs the loop and the workers until Stop() has drained; then closes every connection.
  [[nodiscard]] Status Serve();
  // Asks the loop to drain and return (see above). Thread-safe; returns at once.
  void Stop();
  bool tls() const;
  ListenerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::memd
