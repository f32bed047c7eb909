// The Memory API's base URL and the pieces of request URLs built from values (scopes, job ids).
//
// ValidateBaseUrl implements docs/contract.md §5.4 with the stricter rules of
// docs/reliability.md §4.4, and parses with libcurl's own URL parser (curl_url) so the
// validator and the transfer agree on scheme, host and port:
//   * service mode: `https://<host>[:<port>][/<path prefix>]`;
//   * local mode (an explicit local identity only): `http://127.0.0.1:<port>` or
//     `http://[::1]:<port>`, an explicit port and no path. `localhost`, other names and other
//     spellings of loopback (0x7f.1, 2130706433, 0177.0.0.1, [::ffff:7f00:1]) are refused;
//   * either mode: no userinfo, query, fragment, empty host, port 0 or > 65535, whitespace,
//     control or non-ASCII characters (write IDNs as punycode), no backslash, no "." or ".."
//     path segments, no zone id, no numeric host that is not a canonical dotted quad.
// Trailing '/' characters are removed first (the contract's `rstrip("/")`).
//
// The error names `setting` and the reason, never the URL (it may carry credentials).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tmcra::config {

inline constexpr std::string_view kDefaultBaseUrl = "https://api.tmcra.com";

struct BaseUrl {
  std::string url;     // the validated URL, trailing '/' removed: request URL = url + "/v1/..."
  std::string scheme;  // "https", or "http" (local mode)
  std::string host;    // lower case, as libcurl reports it; IPv6 in brackets ("[::1]")
  int port = 0;        // the explicit port, else 443 (https) or 80 (http)
  std::string path;    // "" or a path prefix without trailing '/' ("/memory"); "" in local mode
};

// `setting` names where the URL came from in the error ("TMCRA_BASE_URL", "baseUrl in <path>").
Result<BaseUrl> ValidateBaseUrl(std::string_view url, bool local_mode,
                                std::string_view setting = "TMCRA_BASE_URL");

// An embeddings endpoint (docs/recall.md, "Vectors"): Ollama's or an OpenAI-compatible one.
enum class EmbeddingsApi { kOllama, kOpenAi };

// Which API `url` is, or kInvalidArgument naming `setting` and the rule it breaks (never the
// URL): https:// to any host, or http:// to localhost, 127.0.0.1 or [::1]; no credentials,
// query or fragment; a path ending in /api/embed (Ollama) or /embeddings (OpenAI-compatible).
Result<EmbeddingsApi> CheckEmbeddingsUrl(std::string_view url, std::string_view setting);

// One path segment, percent-encoded as Python's `urllib.parse.quote(value, safe='')`: every byte
// except A-Z a-z 0-9 _ . - ~ becomes %XX (upper-case hex), so "/" is %2F, "%" is %25, NUL is %00.
// Callers still validate `value` against the service's grammar first (see identifiers.h).
std::string QuoteSegment(std::string_view value);

// `url` without userinfo, query or fragment ("https://u:p@h/x?k=v" -> "https://h/x"), for
// messages about URLs that were not validated.
std::string RedactUrl(std::string_view url);

}  // namespace tmcra::config
