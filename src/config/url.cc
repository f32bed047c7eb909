// libcurl is used here only for its URL parser (curl_url), so that what we accept is exactly
// what the transfer will connect to. No transfer happens in this file. libcurl is loaded at run
// time (src/config/libcurl.h), only when a base URL is checked, i.e. for a remote memory.
#include "src/config/url.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>
#include <optional>

#include "src/config/libcurl.h"

namespace tmcra::config {

namespace {

constexpr std::string_view kRule =
    " must be an HTTPS origin, or numeric loopback HTTP (http://127.0.0.1:<port> or "
    "http://[::1]:<port>) for an explicit local identity, without credentials, query, or "
    "fragment: ";

bool IsAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// A path character of RFC 3986 (pchar or '/'), '%' checked separately.
bool IsPathChar(char c) {
  return IsAlnum(c) || std::string_view("-._~!$&'()*+,;=:@/%").find(c) != std::string_view::npos;
}

// "0".."255" without leading zeros.
bool IsCanonicalOctet(std::string_view part) {
  if (part.empty() || part.size() > 3) return false;
  for (const char c : part) {
    if (!IsDigit(c)) return false;
  }
  if (part.size() > 1 && part.front() == '0') return false;
  int value = 0;
  for (const char c : part) value = value * 10 + (c - '0');
  return value <= 255;
}

bool IsCanonicalIpv4(std::string_view host) {
  int parts = 0;
  size_t start = 0;
  while (true) {
    const size_t dot = host.find('.', start);
    const std::string_view part =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!IsCanonicalOctet(part)) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts == 4;
}

// The reason a registered name or IPv4 host is unacceptable, or empty when it is fine.
std::string HostProblem(std::string_view host) {
  if (host.empty()) return "the host is empty";
  if (host.size() > 253) return "the host name is too long";
  std::string_view last_label;
  size_t start = 0;
  while (true) {
    const size_t dot = host.find('.', start);
    const std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty()) return "the host name has an empty label or a trailing dot";
    if (label.size() > 63) return "a label of the host name is longer than 63 characters";
    for (const char c : label) {
      if (!IsAlnum(c) && c != '-' && c != '_') {
        return "the host name may contain only letters, digits, '-', '_' and '.'";
      }
    }
    last_label = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  // WHATWG's "ends in a number" rule: such a host is an IPv4 address, and only the canonical
  // dotted quad is accepted (libcurl also reads 0x7f.1, 2130706433 and 0177.0.0.1 as 127.0.0.1).
  bool numeric = true;
  for (const char c : last_label) numeric = numeric && IsDigit(c);
  const bool hex = last_label.size() >= 2 && last_label[0] == '0' &&
                   (last_label[1] == 'x' || last_label[1] == 'X');
  if ((numeric || hex) && !IsCanonicalIpv4(host)) {
    return "the host is an unusual spelling of an IPv4 address; write a dotted quad such as "
           "192.0.2.1";
  }
  return {};
}

// The reason a path prefix is unacceptable, or empty when it is fine. `path` is "" or starts
// with '/', and has no trailing '/'.
std::string PathProblem(std::string_view path) {
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (!IsPathChar(c)) return "the path contains a character that is not allowed in a URL";
    if (c == '%' && (i + 2 >= path.size() || !IsHex(path[i + 1]) || !IsHex(path[i + 2]))) {
      return "the path has a '%' that does not start a percent-escape";
    }
  }
  size_t start = 1;
  while (start <= path.size() && !path.empty()) {
    const size_t slash = path.find('/', start);
    const std::string_view raw = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    std::string segment;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%') {
        segment.push_back(static_cast<char>(HexValue(raw[i + 1]) * 16 + HexValue(raw[i + 2])));
        i += 2;
      } else {
        segment.push_back(raw[i]);
      }
    }
    if (segment.empty()) return "the path has an empty segment (\"//\")";
    if (segment == "." || segment == "..") return "the path has a \".\" or \"..\" segment";
    for (const char c : segment) {
      const auto byte = static_cast<unsigned char>(c);
      if (c == '/' || c == '\\' || c == '?' || c == '#' || byte < 0x20 || byte == 0x7f) {
        return "the path has a percent-escape of '/', '\\', '?', '#' or a control character";
      }
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return {};
}

// The libcurl functions this file calls, resolved once (libcurl.h).
struct UrlFunctions {
  decltype(&::curl_url) url = nullptr;
  decltype(&::curl_url_set) url_set = nullptr;
  decltype(&::curl_url_get) url_get = nullptr;
  decltype(&::curl_url_cleanup) url_cleanup = nullptr;
  decltype(&::curl_free) free = nullptr;
};

Result<const UrlFunctions*> Curl() {
  static const Result<UrlFunctions> loaded = []() -> Result<UrlFunctions> {
    UrlFunctions f;
    for (Status s :
         {ResolveLibcurl(f.url, "curl_url"), ResolveLibcurl(f.url_set, "curl_url_set"),
          ResolveLibcurl(f.url_get, "curl_url_get"),
          ResolveLibcurl(f.url_cleanup, "curl_url_cleanup"), ResolveLibcurl(f.free, "curl_free")}) {
      if (!s) return s.error();
    }
    return f;
  }();
  if (!loaded) return loaded.error();
  return &*loaded;
}

struct CurlUrlDeleter {
  const UrlFunctions* curl;
  void operator()(CURLU* handle) const { curl->url_cleanup(handle); }
};

std::optional<std::string> CurlPart(const UrlFunctions& curl, CURLU* handle, CURLUPart part,
                                    unsigned int flags = 0) {
  char* value = nullptr;
  if (curl.url_get(handle, part, &value, flags) != CURLUE_OK || value == nullptr) {
    return std::nullopt;
  }
  std::string out(value);
  curl.free(value);
  return out;
}

// Why the characters of `url` are unacceptable, or empty when they are fine.
std::string CharacterProblem(std::string_view url) {
  for (const char c : url) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      return "it contains whitespace, a control character or a non-ASCII character (write an "
             "international domain name in punycode, xn--...)";
    }
    if (c == '?') return "it has a query ('?')";
    if (c == '#') return "it has a fragment ('#')";
    if (c == '\\') return "it contains a backslash";
  }
  return {};
}

// Why `scheme` (lower case) is unacceptable in the mode, or empty when it is fine.
std::string SchemeProblem(const std::string& scheme, bool local_mode) {
  if (local_mode && scheme != "http") {
    return "a local identity is reached over http:// on the loopback address";
  }
  if (!local_mode && scheme != "https") {
    return scheme == "http" ? "plain http is allowed only for an explicit local identity"
                            : "the scheme must be https";
  }
  return {};
}

// The host (IPv6 in brackets) and the port's text, if any, of a URL's authority.
struct HostAndPort {
  std::string_view host;
  std::optional<std::string_view> port_text;
};

// Splits `authority` into `parts`; the reason it is unacceptable, or empty when it is fine.
std::string SplitAuthority(std::string_view authority, HostAndPort& parts) {
  if (authority.empty()) return "the host is empty";
  if (authority.find('@') != std::string_view::npos) {
    return "it carries credentials (user information before '@')";
  }
  if (authority.front() != '[') {
    const size_t colon = authority.find(':');
    parts.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) parts.port_text = authority.substr(colon + 1);
    return {};
  }
  const size_t close = authority.find(']');
  if (close == std::string_view::npos) return "the IPv6 address has no closing ']'";
  parts.host = authority.substr(0, close + 1);
  const std::string_view after = authority.substr(close + 1);
  if (!after.empty()) {
    if (after.front() != ':') return "unexpected characters after the IPv6 address";
    parts.port_text = after.substr(1);
  }
  if (parts.host.find('%') != std::string_view::npos) return "an IPv6 zone id is not allowed";
  for (const char c : parts.host.substr(1, parts.host.size() - 2)) {
    if (!IsHex(c) && c != ':' && c != '.') return "the IPv6 address is malformed";
  }
  return {};
}

// Sets out.port from `port_text`, else the scheme's default; the reason the port is
// unacceptable, or empty when it is fine.
std::string ResolvePort(std::optional<std::string_view> port_text, BaseUrl& out) {
  if (!port_text) {
    out.port = out.scheme == "https" ? 443 : 80;
    return {};
  }
  bool ok = !port_text->empty() && port_text->size() <= 5 && port_text->front() != '0';
  int value = 0;
  for (const char c : *port_text) {
    ok = ok && IsDigit(c);
    if (ok) value = value * 10 + (c - '0');
  }
  if (!ok || value < 1 || value > 65535) {
    return "the port must be a number from 1 to 65535 without leading zeros";
  }
  out.port = value;
  return {};
}

// Why the host, port and path are unacceptable for the mode, or empty when they are fine.
std::string PlacementProblem(const BaseUrl& out, bool local_mode, bool explicit_port,
                             std::string_view path) {
  if (local_mode) {
    if (out.host != "127.0.0.1" && out.host != "[::1]") {
      return "a local identity must use the numeric loopback address 127.0.0.1 or [::1] (not "
             "localhost or another spelling)";
    }
    if (!explicit_port) return "a local identity needs an explicit port";
    if (!path.empty()) return "a local identity's URL has no path";
  } else if (out.host.front() != '[') {
    if (auto problem = HostProblem(out.host); !problem.empty()) return problem;
  }
  return PathProblem(path);
}

// The same URL through libcurl's parser must give the same scheme, host, port and path, with
// no user, query, fragment or zone id: no parser differential between check and transfer.
// Returns how libcurl reads `out.url` differently, or empty when it agrees.
Result<std::string> CurlDisagreement(const BaseUrl& out) {
  TMCRA_ASSIGN_OR_RETURN(const UrlFunctions* curl, Curl());
  std::unique_ptr<CURLU, CurlUrlDeleter> handle(curl->url(), CurlUrlDeleter{curl});
  if (!handle) return Error::Internal("out of memory parsing a URL");
  if (curl->url_set(handle.get(), CURLUPART_URL, out.url.c_str(), CURLU_DISALLOW_USER) !=
      CURLUE_OK) {
    return std::string("libcurl cannot parse it");
  }
  const auto curl_scheme = CurlPart(*curl, handle.get(), CURLUPART_SCHEME);
  const auto curl_host = CurlPart(*curl, handle.get(), CURLUPART_HOST);
  const auto curl_port = CurlPart(*curl, handle.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  const auto curl_path = CurlPart(*curl, handle.get(), CURLUPART_PATH);
  const bool extra = CurlPart(*curl, handle.get(), CURLUPART_USER) ||
                     CurlPart(*curl, handle.get(), CURLUPART_PASSWORD) ||
                     CurlPart(*curl, handle.get(), CURLUPART_OPTIONS) ||
                     CurlPart(*curl, handle.get(), CURLUPART_QUERY) ||
                     CurlPart(*curl, handle.get(), CURLUPART_FRAGMENT) ||
                     CurlPart(*curl, handle.get(), CURLUPART_ZONEID);
  if (!extra && curl_host && out.host.front() == '[' && Lower(*curl_host) != out.host) {
    // libcurl shortens an IPv6 address (RFC 5952); the URL must already be what it sends.
    return "write the IPv6 address in its shortest form, " + Lower(*curl_host);
  }
  if (extra || !curl_scheme || !curl_host || !curl_port || !curl_path ||
      Lower(*curl_scheme) != out.scheme || Lower(*curl_host) != out.host ||
      *curl_port != std::to_string(out.port) ||
      *curl_path != (out.path.empty() ? std::string("/") : out.path)) {
    return std::string("libcurl reads it differently (scheme, host, port or path)");
  }
  return std::string();
}

}  // namespace

Result<BaseUrl> ValidateBaseUrl(std::string_view url, bool local_mode, std::string_view setting) {
  const auto fail = [&](std::string_view reason) {
    return Error::Invalid(std::string(setting) + std::string(kRule) + std::string(reason));
  };
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  if (url.empty()) return fail("it is empty");
  if (auto problem = CharacterProblem(url); !problem.empty()) return fail(problem);

  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return fail("it does not start with scheme://host");
  BaseUrl out;
  out.scheme = Lower(url.substr(0, scheme_end));
  if (auto problem = SchemeProblem(out.scheme, local_mode); !problem.empty()) return fail(problem);

  const std::string_view rest = url.substr(scheme_end + 3);
  const size_t path_start = rest.find('/');
  const std::string_view path =
      path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  HostAndPort parts;
  if (auto problem = SplitAuthority(rest.substr(0, path_start), parts); !problem.empty()) {
    return fail(problem);
  }
  out.host = Lower(parts.host);
  if (auto problem = ResolvePort(parts.port_text, out); !problem.empty()) return fail(problem);
  if (auto problem = PlacementProblem(out, local_mode, parts.port_text.has_value(), path);
      !problem.empty()) {
    return fail(problem);
  }
  out.path = std::string(path);
  out.url = std::string(url);

  TMCRA_ASSIGN_OR_RETURN(const std::string problem, CurlDisagreement(out));
  if (!problem.empty()) return fail(problem);
  return out;
}

std::string QuoteSegment(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (IsAlnum(c) || c == '_' || c == '.' || c == '-' || c == '~') {
      out.push_back(c);
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0x0f]);
    }
  }
  return out;
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  if (auto cut = out.find_first_of("?#"); cut != std::string::npos) out.resize(cut);
  const auto scheme_end = out.find("://");
  const size_t authority = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = out.find('/', authority);
  const auto at = out.rfind('@', path_start == std::string::npos ? out.size() : path_start);
  if (at != std::string::npos && at >= authority) out.erase(authority, at - authority + 1);
  return out;
}

namespace {

bool EndsWith(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

Error UrlError(std::string_view setting, const std::string& rule) {
  return Error::Invalid(std::string(setting) + ": " + rule);
}

// Splits "scheme://authority/path" into the lower-case host and the path; the authority has
// no credentials. An error names the rule broken.
Result<std::pair<std::string, std::string>> HostAndPath(std::string_view url,
                                                        std::string_view setting) {
  const size_t scheme_end = url.find("://");
  const std::string_view rest = url.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string path =
      slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) {
    return UrlError(setting, "must not hold credentials (give the key as its own setting)");
  }
  if (authority.empty()) return UrlError(setting, "has no host");
  std::string host(authority.front() == '[' ? authority.substr(0, authority.find(']') + 1)
                                            : authority.substr(0, authority.find(':')));
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host.empty()) return UrlError(setting, "has no host");
  return std::make_pair(std::move(host), path);
}

}  // namespace

Result<EmbeddingsApi> CheckEmbeddingsUrl(std::string_view url, std::string_view setting) {
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f ||
        c == '\\') {
      return UrlError(setting, "must be plain ASCII without spaces or backslashes");
    }
  }
  if (url.find('?') != std::string_view::npos || url.find('#') != std::string_view::npos) {
    return UrlError(setting, "must have no query or fragment");
  }
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0)
    return UrlError(setting, "must be https:// or http://");
  TMCRA_ASSIGN_OR_RETURN(const auto parts, HostAndPath(url, setting));
  const auto& [host, path] = parts;
  if (!https && host != "localhost" && host != "127.0.0.1" && host != "[::1]") {
    return UrlError(setting, "may be plain http:// only to localhost, 127.0.0.1 or [::1]");
  }
  if (path.find("/../") != std::string::npos || path.find("/./") != std::string::npos) {
    return UrlError(setting, "must have no . or .. path segments");
  }
  if (EndsWith(path, "/api/embed")) return EmbeddingsApi::kOllama;
  if (EndsWith(path, "/embeddings")) return EmbeddingsApi::kOpenAi;
  return UrlError(setting,
                  "must be the endpoint itself: a path ending in /api/embed (Ollama) or "
                  "/embeddings (OpenAI-compatible, e.g. /v1/embeddings)");
}

}  // namespace tmcra::config
