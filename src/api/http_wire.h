// The wire rules of the Memory API client that need no network: what may go into a URL path
// segment or a header (escaping and the id grammars are src/config's), the strict parse of an
// answer, the error envelope (docs/contract.md §1.3) and the scrubbing of text that reaches an
// error message. Pure functions, used by HttpMemoryApi and tested on their own.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_reader.h"
#include "base/result.h"

namespace tmcra::api::wire {

// Answers nested deeper than this are refused (the reader stops there; stdin has the same cap).
inline constexpr int kMaxResponseDepth = 64;
// A path parameter longer than this is refused: no valid scope, job or memory id comes close.
inline constexpr size_t kMaxSegmentBytes = 1024;
// Caps on what of the service's error envelope reaches an Error.
inline constexpr size_t kMaxErrorMessageBytes = 1000;
inline constexpr size_t kMaxErrorDetailsBytes = 16 * 1024;

// A path parameter we are willing to send (after config::QuoteSegment): not empty, not "." or ".."
// (which URL normalisation would turn into a different path), no CR, LF or NUL, at most
// kMaxSegmentBytes. The error names `field`, never the value.
Status CheckPathSegment(std::string_view value, std::string_view field);

// A header value we are willing to send: no control characters (so no CR/LF injection) and no
// leading or trailing space. The error names `field`, never the value.
Status CheckHeaderValue(std::string_view value, std::string_view field);

// The body of an answer with the expected status, as a JSON object. Refused (Errc::kProtocol,
// api_code "invalid_json_response", not retryable; the message names `status`): an empty body, a
// UTF-8 byte order mark, nesting deeper than kMaxResponseDepth, anything that is not strict
// JSON (invalid UTF-8, lone surrogates, NaN, trailing bytes, ...), a duplicate key in any
// object, and a top-level value other than an object. `request_id` (the x-request-id header,
// may be empty) is named in the message.
// `elide`: see ElidedMember (the same checks; the member's object comes back as {}).
Result<nlohmann::json> ParseResponseObject(std::string_view body, int status,
                                           std::string_view request_id,
                                           ElidedMember* elide = nullptr);

// The Error for an answer whose status is not the expected one (docs/contract.md §1.3):
// code = error.code or "http_error", message = error.message or "TMCRA returned HTTP <status>",
// the request id from error.request_id or the x-request-id header, details as JSON text.
// Retryable exactly for the retry set (Error::Api). Never throws, whatever the body holds.
// Every decoded text is redacted of `secrets` (Redact) before it is cut to its length limit,
// so neither a JSON-escaped echo of the key nor a cut one survives.
Error ApiError(int status, std::string_view body, std::string_view request_id_header,
               const std::vector<std::string>& secrets = {});

// The answer of POST /v1/jobs/batch (already a strict JSON object) read back into one result
// per requested id, in order:
//   {"jobs": [{"job_id": <id>, "status_code": 200, "job": {JobView}},
//             {"job_id": <id>, "status_code": 404, "error": {<the error envelope's members>}},
//             ...]}
// A job entry gives its JobView (the caller validates it as a receipt); an error entry (status
// 400..599) the Error its envelope makes, as ApiError would for that status (retryable exactly
// for the retry set; `secrets` scrubbed). Refused whole (Errc::kProtocol, api_code
// "invalid_json_response", not retryable): no "jobs" array, another number of entries than
// ids, an entry that is not an object, names another job_id than the id at its place, has no
// integer status_code of 200 or 400..599, or is 200 without a "job" object.
Result<std::vector<Result<nlohmann::json>>> ReadJobsBatch(
    const nlohmann::json& answer, const std::vector<std::string>& job_ids,
    std::string_view request_id, const std::vector<std::string>& secrets = {});

// Text from the network made safe for an error message: valid UTF-8, control characters
// replaced by spaces, at most `max_bytes` (cut on a character boundary, "..." appended).
std::string SafeText(std::string_view text, size_t max_bytes);

// `text` with every occurrence of each non-empty secret replaced by "[REDACTED]".
std::string Redact(std::string text, const std::vector<std::string>& secrets);

// The strings to scrub for an API key: the key itself and, for keys shaped like
// "tmcra_<id>.<secret>", the secret part (when at least 8 bytes long).
std::vector<std::string> SecretsOf(std::string_view api_key);

}  // namespace tmcra::api::wire
