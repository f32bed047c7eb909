// HttpMemoryApi: the MemoryApi over HTTPS (libcurl), for TMCRA's hosted service ("service"
// mode) or a tmcra-memd on this machine ("local" mode). docs/http-client.md has the behaviour
// table; docs/contract.md §1 is the specification.
//
// Every call is one logical request: up to `max_attempts` attempts with the retry rules of
// retry_policy.h, the connection guard run before each attempt, and the answer checked for the
// endpoint's exact status and for being one strict JSON object (no deeper than 64 levels, at
// most `max_response_bytes` after decoding). Nothing here writes to stdout: libcurl gets a
// write callback on every transfer.
//
// Errors (Result, never exceptions):
//   - the service's answers: ErrorFromStatus(status, code, message, details_json) (api_status.h:
//     the kind from the status), retryable exactly for 408, 425, 429, 500, 502, 503, 504; 3xx is
//     never followed (an error, not retried);
//   - api_code kTransportNotSent: the request never left (DNS, connect, TLS handshake);
//     Errc::kUnavailable, retryable, safe to repeat at will;
//   - api_code kTransportInDoubt ("transport_error", the contract's code): the request may have
//     been received (timeout, reset, truncated or empty answer), in this or an earlier attempt
//     of the call; retryable, but only with the same idempotency key and bytes;
//   - api_code kTlsVerificationFailed: the server's certificate was refused; not retryable;
//   - api_code "invalid_json_response" (Errc::kProtocol) and kResponseTooLarge: the expected
//     status with an unusable body; not retried (the write may have been accepted);
//   - api_code kBatchNotSupported (Errc::kNotFound, not retryable): IngestBatch or GetJobs
//     answered 404, 405 or 501, i.e. a service without that batch endpoint (remembered for 10
//     minutes, during which the call answers so without a request); send items, or ask for
//     jobs, one by one;
//   - Errc::kInvalidArgument before anything is sent, naming the field, for ids that cannot go
//     into a URL or a header.
// No message ever holds the API key (it is scrubbed from every text that reaches an Error).
//
// Thread-safe: calls from several threads run concurrently on a small pool of libcurl handles
// (each keeps its connections alive); destroy the object only when no call is running.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "src/api/memory_api.h"

namespace tmcra::api {

// api_code values of errors this client makes itself (the service's own codes pass through).
inline constexpr std::string_view kTransportNotSent = "transport_not_sent";
inline constexpr std::string_view kTransportInDoubt = "transport_error";
// The connection guard (HttpOptions::before_attempt) stopped the call before it was sent.
inline constexpr std::string_view kConnectionBlocked = "connection_blocked";
inline constexpr std::string_view kTlsVerificationFailed = "tls_verification_failed";
inline constexpr std::string_view kResponseTooLarge = "response_too_large";
inline constexpr std::string_view kInvalidJsonResponse = "invalid_json_response";
inline constexpr std::string_view kBatchNotSupported = "batch_not_supported";
inline constexpr std::string_view kClientSetupError = "client_setup_error";

struct HttpOptions {
  // "https://host[:port][/prefix]" (service) or "http[s]://127.0.0.1:port" (local); a trailing
  // '/' is removed. No userinfo, query or fragment.
  std::string base_url;
  std::string api_key;  // secret: sent only as "Authorization: Bearer <key>"
  // Local mode (a loopback tmcra-memd): http:// allowed; proxy variables, SSL_CERT_FILE and
  // SSL_CERT_DIR ignored. Service mode: https:// only; all of them honoured.
  bool local_mode = false;
  std::optional<std::string> integration_id;    // X-TMCRA-Integration-ID
  std::optional<std::string> default_agent_id;  // X-TMCRA-Agent-ID unless a call gives one

  std::chrono::milliseconds total_timeout{60000};            // one attempt, connect included
  std::optional<std::chrono::milliseconds> connect_timeout;  // default min(10 s, total)
  // Stall rule: once the answer has begun, fewer than low_speed_limit * low_speed_time bytes
  // within low_speed_time abandons the attempt (in doubt). The server's think time before the
  // first answer byte is bounded by total_timeout alone (the contract's read timeout).
  long low_speed_limit = 1;  // bytes per second
  std::chrono::seconds low_speed_time{15};
  int max_attempts = 3;
  size_t max_response_bytes = 8u * 1024u * 1024u;     // decoded body bytes; headers capped apart
  std::chrono::seconds max_connection_lifetime{300};  // reconnect (and re-verify TLS) after

  std::string ca_file;  // CA bundle replacing the system one (e.g. a corporate proxy's root)
  std::string ca_dir;   // hashed CA directory, likewise
  // Allow SSLKEYLOGFILE (libcurl would write the TLS session keys to it, and create it even in
  // local mode, which has no TLS); otherwise Create refuses to build a client while it is set.
  bool allow_keylog = false;

  // The connection guard, run before every attempt. When it fails the call ends, not retried,
  // with kPermissionDenied (its message kept): api_code kConnectionBlocked, or
  // kTransportInDoubt when an earlier attempt reached the server.
  std::function<Status()> before_attempt;
  // Sleeps between attempts (tests inject a recorder); default std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
  uint64_t seed = 0;  // jitter; 0 = from std::random_device
};

class HttpMemoryApi final : public MemoryApi {
 public:
  // Checks the options (URL scheme for the mode, no credentials in the URL, header-safe key and
  // ids, SSLKEYLOGFILE) and initialises libcurl once per process. Never touches the network.
  [[nodiscard]] static Result<std::unique_ptr<HttpMemoryApi>> Create(HttpOptions options);
  ~HttpMemoryApi() override;
  HttpMemoryApi(const HttpMemoryApi&) = delete;
  HttpMemoryApi& operator=(const HttpMemoryApi&) = delete;

  Result<json> Recall(std::string_view scope, const json& body,
                      const RecallOptions& options) override;
  Result<json> Ingest(std::string_view scope, const json& body,
                      const IngestOptions& options) override;
  Result<json> IngestBatch(std::string_view scope, const json& body,
                           const IngestOptions& options) override;
  Result<json> GetJob(std::string_view job_id) override;
  // POST /v1/jobs/batch (tmcra-memd's; wire::ReadJobsBatch reads the answer). A memory that
  // answers 404, 405 or 501 is remembered as one without it (kBatchNotSupported, as for
  // IngestBatch).
  Result<std::vector<Result<json>>> GetJobs(const std::vector<std::string>& job_ids) override;
  Result<json> Evidence(std::string_view scope, std::string_view memory_id, int limit) override;
  Result<json> Feedback(std::string_view scope, const json& body,
                        const FeedbackOptions& options) override;

  // {"mode": "service"|"local", "endpoint": base URL} (the URL never holds credentials).
  json Describe() const override;
  // A reachability check without any HTTP request (so no credential is sent): DNS, TCP, proxy
  // tunnel and the TLS handshake with full verification, within the connect timeout. Returns
  // {"endpoint", "checked": "tls_handshake"|"tcp_connect", "connect_ms"} or the transport error.
  Result<json> Stats() override;
  // tmcra-memd's maintenance endpoints (docs/memd.md, "Maintenance endpoints"); a memory
  // without them (TMCRA's hosted service answers 404) is MemoryApi::Unavailable.
  Result<json> ScopeStats() override;
  Result<json> Forget(std::string_view scope, const json& body) override;
  Status Export(std::string_view scope,
                const std::function<Status(const json& line)>& sink) override;
  Result<json> Import(std::string_view scope, const json& lines) override;

 private:
  struct Impl;
  explicit HttpMemoryApi(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmcra::api
