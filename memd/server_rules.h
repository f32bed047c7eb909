// The request and response rules of tmcra-memd that need no socket: attribution headers, path
// segments, JSON bodies, the error envelope, gzip, request ids and --listen addresses. Pure
// functions, tested on their own (tests/unit/memd/server_rules_test.cc).
//
// The identifier grammars are a private copy of the service's (docs/contract.md §1.5); the
// client side keeps its own in src/config/identifiers.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/identifiers.h"
#include "base/json_depth.h"
#include "base/result.h"
#include "src/api/memory_api.h"

namespace tmcra::memd {

using json = nlohmann::json;

// Bodies nested deeper than this are refused before they are parsed (as tmcra-mcp does on stdin).
inline constexpr int kMaxJsonDepth = 64;

// X-TMCRA-Client-Platform values the service accepts.
bool IsKnownClientPlatform(std::string_view platform);
// The grammars of X-TMCRA-Agent-ID, X-TMCRA-Integration-ID, X-Request-ID and scope names are
// base/identifiers.h's, shared with the client.

// The attribution headers of one request, std::nullopt when absent.
struct Attribution {
  std::optional<std::string> client_platform;
  std::optional<std::string> integration_id;
  std::optional<std::string> agent_id;
};
// 422 invalid_usage_attribution naming the first header that breaks its rule.
Status ValidateAttribution(const Attribution& attribution);

// 422 validation_error for a scope path parameter that is not a valid scope name.
Error InvalidScopeError();

// The request body as a JSON object, or 422 validation_error with pydantic-style details:
// an empty body ("missing"), a Content-Type other than JSON, nesting deeper than kMaxJsonDepth,
// anything that is not JSON (invalid UTF-8, NaN, trailing bytes: "json_invalid"), a number that
// no double holds (1e400: "finite_number", its loc naming where it is) and a top-level value
// that is not an object ("model_attributes_type").
Result<json> ParseBodyObject(std::string_view body, std::string_view content_type);

// The body of POST /v1/jobs/batch (tmcra-memd's own endpoint): {"job_ids": [...]}, 1..
// kMaxJobsPerBatch distinct strings of 1..kMaxJobIdBytes bytes, and no other member. Anything
// else is 422 validation_error naming the field ("job_ids.3: ...") with pydantic-style details.
using api::kMaxJobsPerBatch;
inline constexpr size_t kMaxJobIdBytes = 1024;  // what tmcra-mcp may put into a path segment
Result<std::vector<std::string>> ParseJobIds(const json& body);
// One entry of its answer {"jobs": [entry, ...]}: {"job_id", "status_code": 200, "job": JobView}
// for a job, {"job_id", "status_code", "error": {the error envelope's members}} for an error
// that has an HTTP status (`request_id` in its envelope).
json JobsBatchEntry(const std::string& job_id, const Result<json>& job,
                    std::string_view request_id);

// Deepest nesting of arrays and objects in `text` (brackets outside strings), stopping at
// limit + 1.
inline int NestingDepth(std::string_view text, int limit) { return JsonNestingDepth(text, limit); }

// The raw path of a request target split at '/', each segment percent-decoded; std::nullopt
// when a %-escape is malformed. "/v1/jobs/x?limit=1" -> {"v1", "jobs", "x"}.
std::optional<std::vector<std::string>> SplitTargetPath(std::string_view target);

// The service's error body (docs/contract.md §1.3):
//   {"error": {"code", "message", "request_id", "details", "retry_after_seconds"}}
// `details_json` is JSON text (empty: null); retry_after_seconds < 0: null.
json ErrorBody(std::string_view code, std::string_view message, std::string_view request_id,
               std::string_view details_json = {}, double retry_after_seconds = -1);
// The middleware's early rejections (411, 413) carry only {"error": {"code", "request_id"}}.
json EarlyErrorBody(std::string_view code, std::string_view request_id);

// True when an Accept-Encoding header admits gzip (a "gzip" or "*" coding without q=0).
bool AcceptsGzip(std::string_view accept_encoding);
// True for a peer address (as the socket reports it) in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
bool IsLoopbackPeer(std::string_view address);
// `bytes` as a gzip member (zlib, default level).
Result<std::string> Gzip(std::string_view bytes);
// Responses at least this large are compressed when the client accepts gzip (as the service's
// GZip middleware does).
inline constexpr size_t kGzipMinimumBytes = 1024;
// How long Server::Stop() waits for the requests in progress to write their answers.
inline constexpr std::chrono::seconds kDrainLimit{10};

// --listen HOST:PORT, [IPV6]:PORT, or :PORT / PORT (host 127.0.0.1). Ports 0..65535.
struct ListenAddress {
  std::string host = "127.0.0.1";
  int port = 0;
  // The URL origin for this address: scheme://host:port, IPv6 hosts in brackets.
  std::string Origin(std::string_view scheme, int bound_port) const;
};
Result<ListenAddress> ParseListen(std::string_view text);

}  // namespace tmcra::memd
