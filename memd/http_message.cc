#include "memd/http_message.h"

#include <strings.h>

#include <algorithm>
#include <charconv>

namespace tmcra::memd {

namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A header value: visible characters, blanks and obs-text; no other control character.
bool IsFieldValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadParse Refused(int status, std::string reason) {
  return HeadParse{HeadState::kRefused, 0, status, std::move(reason)};
}

// The next line of `text` from `pos` without its LF (and CR); std::nullopt when no LF follows.
std::optional<std::string_view> NextLine(std::string_view text, size_t& pos) {
  const size_t lf = text.find('\n', pos);
  if (lf == std::string_view::npos) return std::nullopt;
  std::string_view line = text.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos = lf + 1;
  return line;
}

// "METHOD SP target SP HTTP/1.x"; 0 when it is one, else the status to refuse it with.
int ParseRequestLine(std::string_view line, HttpRequest& out) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return 400;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || target.empty()) return 400;
  if (target.size() > kMaxTargetBytes) return 414;
  const bool visible =
      std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (!visible) return 400;
  if (version == "HTTP/1.1") {
    out.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    out.minor_version = 0;
  } else {
    return version.rfind("HTTP/", 0) == 0 ? 505 : 400;
  }
  out.method = std::string(method);
  out.target = std::string(target);
  return 0;
}

// "name: value"; false when it is not a header line.
bool ParseHeaderLine(std::string_view line, HttpRequest& out) {
  if (line.front() == ' ' || line.front() == '\t') return false;  // obs-fold
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) return false;
  const std::string_view value = TrimBlanks(line.substr(colon + 1));
  if (!IsFieldValue(value)) return false;
  out.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string FormDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::optional<uint64_t> ParseDecimal(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

Framing RefuseFraming(int status, std::string code, std::string message) {
  Framing f;
  f.refuse_status = status;
  f.refuse_code = std::move(code);
  f.refuse_message = std::move(message);
  return f;
}

}  // namespace

const std::string* HttpRequest::Find(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsNoCase(key, name)) return &value;
  }
  return nullptr;
}

std::string HttpRequest::Get(std::string_view name) const {
  const std::string* value = Find(name);
  return value != nullptr ? *value : std::string();
}

size_t HttpRequest::Count(std::string_view name) const {
  return static_cast<size_t>(std::count_if(
      headers.begin(), headers.end(), [&](const auto& h) { return EqualsNoCase(h.first, name); }));
}

std::optional<std::string> HttpRequest::Query(std::string_view name) const {
  const size_t question = target.find('?');
  if (question == std::string::npos) return std::nullopt;
  std::string_view query = std::string_view(target).substr(question + 1);
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (FormDecode(pair.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : FormDecode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

bool HttpRequest::WantsClose() const {
  const std::string connection = Get("Connection");
  // A comma-separated list of options; "close" or "keep-alive" among them.
  auto has = [&](std::string_view option) {
    std::string_view rest = connection;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      if (EqualsNoCase(TrimBlanks(rest.substr(0, comma)), option)) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return false;
  };
  if (has("close")) return true;
  return minor_version == 0 && !has("keep-alive");
}

void HttpResponse::Set(std::string name, std::string value) {
  for (auto& [key, old] : headers) {
    if (EqualsNoCase(key, name)) {
      old = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

bool HttpResponse::Has(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return EqualsNoCase(h.first, name); });
}

HeadParse ParseRequestHead(std::string_view buffer, HttpRequest& out) {
  const std::string_view text = buffer.substr(0, kMaxHeadBytes);
  size_t pos = 0;
  std::optional<std::string_view> line;
  while ((line = NextLine(text, pos)) && line->empty()) {
  }  // empty lines before the request line (a client's stray CRLF after a body) are skipped
  if (!line) {
    if (buffer.size() >= kMaxHeadBytes) return Refused(431, "the request head is too large");
    return {};
  }
  out.headers.clear();
  if (const int status = ParseRequestLine(*line, out); status != 0) {
    return Refused(status, "malformed request line");
  }
  while ((line = NextLine(text, pos))) {
    if (line->empty()) return HeadParse{HeadState::kComplete, pos, 0, {}};
    if (out.headers.size() >= kMaxHeaderCount) return Refused(431, "too many header lines");
    if (!ParseHeaderLine(*line, out)) return Refused(400, "malformed header line");
  }
  if (buffer.size() >= kMaxHeadBytes) return Refused(431, "the request head is too large");
  return {};
}

Framing CheckFraming(const HttpRequest& head) {
  if (head.Has("Transfer-Encoding")) return RefuseFraming(411, "content_length_required", "");
  if (const std::string* coding = head.Find("Content-Encoding");
      coding != nullptr && !EqualsNoCase(*coding, "identity")) {
    return RefuseFraming(415, "unsupported_media_type", "Content-Encoding is not supported");
  }
  if (head.Count("Content-Length") > 1) {
    return RefuseFraming(400, "bad_request", "more than one Content-Length");
  }
  std::optional<uint64_t> length;
  if (const std::string* text = head.Find("Content-Length")) {
    length = ParseDecimal(*text);
    if (!length) return RefuseFraming(400, "bad_request", "invalid Content-Length");
  }
  const bool with_body = head.method == "POST" || head.method == "PUT" || head.method == "PATCH";
  if (!with_body && head.method != "DELETE" && length.value_or(0) > 0) {
    return RefuseFraming(400, "bad_request", "this method takes no body");
  }
  if (with_body && !length) return RefuseFraming(411, "content_length_required", "");
  Framing f;
  f.body_bytes = length.value_or(0);
  f.expect_continue = f.body_bytes > 0 && EqualsNoCase(head.Get("Expect"), "100-continue");
  return f;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string ResponseHead(const HttpResponse& res, bool keep_alive, int keep_alive_seconds) {
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " ";
  out += ReasonPhrase(res.status);
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  if (keep_alive) {
    out += "Connection: keep-alive\r\nKeep-Alive: timeout=" + std::to_string(keep_alive_seconds);
    out += "\r\n\r\n";
  } else {
    out += "Connection: close\r\n\r\n";
  }
  return out;
}

std::string LogSafe(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max_bytes) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace tmcra::memd
