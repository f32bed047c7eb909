// HTTP/1.1 messages as tmcra-memd reads and writes them, with no socket: the request head
// parser (bounded: head size, header count, target length), the framing rules a head must meet
// before its body is read, the answer's status line and headers, and the escaping of request
// fields for logs. Pure functions, tested on their own (tests/unit/memd).
//
// Only what memd serves is accepted: HTTP/1.0 and 1.1, bodies framed by one Content-Length.
// Any Transfer-Encoding is refused unread (411), as is a body without a length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmcra::memd {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query, percent-escapes kept
  int minor_version = 1;
  HeaderList headers;  // names as sent, values without surrounding blanks
  std::string body;
  std::string remote_addr;  // the peer's numeric address

  // The first header of that name (case-insensitive), nullptr when absent.
  const std::string* Find(std::string_view name) const;
  std::string Get(std::string_view name) const;  // "" when absent
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  size_t Count(std::string_view name) const;
  // A query parameter's value, percent-decoded ('+' is a space); std::nullopt when absent.
  std::optional<std::string> Query(std::string_view name) const;
  // True when the client asks to close after this answer (Connection: close, or HTTP/1.0
  // without Connection: keep-alive).
  bool WantsClose() const;
};

struct HttpResponse {
  int status = 200;
  HeaderList headers;  // Content-Length and Connection are added when the answer is written
  std::string body;
  bool close = false;  // close the connection after this answer
  // For the access log: the request id, and what the log line adds after the time (" key=…").
  std::string request_id;
  std::string log_note;

  void Set(std::string name, std::string value);
  bool Has(std::string_view name) const;
};

// Limits of a request head.
inline constexpr size_t kMaxHeadBytes = 64 * 1024;
inline constexpr size_t kMaxHeaderCount = 100;
inline constexpr size_t kMaxTargetBytes = 16 * 1024;

enum class HeadState {
  kIncomplete,  // more bytes are needed (and fewer than kMaxHeadBytes have come)
  kComplete,    // `out` holds the head; `length` bytes of the buffer were it
  kRefused,     // `status` (400, 414, 431, 505) says why; the connection cannot go on
};
struct HeadParse {
  HeadState state = HeadState::kIncomplete;
  size_t length = 0;
  int status = 0;
  std::string reason;  // for the refusal's message
};
// Parses the request head at the start of `buffer` into `out` (method, target, version,
// headers). Empty lines before the request line are skipped; lines end in CRLF or LF; a
// header line folded onto the next (obs-fold), a control character in a value, or a name that
// is not a token is a 400.
HeadParse ParseRequestHead(std::string_view buffer, HttpRequest& out);

// What the framing headers of a complete head say about its body.
struct Framing {
  uint64_t body_bytes = 0;  // declared by Content-Length (0 without one)
  int refuse_status = 0;    // 0: read the body; else 400, 411 or 415, answered unread
  std::string refuse_code;
  std::string refuse_message;
  bool expect_continue = false;  // Expect: 100-continue with a body to come
};
// The rules, in order: any Transfer-Encoding 411; a Content-Encoding other than identity 415;
// more than one Content-Length, or one that is not a decimal number, 400; a body on a method
// other than POST, PUT, PATCH or DELETE 400 (its bytes would be read as the next request);
// POST, PUT or PATCH without Content-Length 411. The body limit is the caller's (413).
Framing CheckFraming(const HttpRequest& head);

// The status line and headers of `res` with Content-Length (the body's size, for HEAD too) and
// Connection, ending in the blank line.
std::string ResponseHead(const HttpResponse& res, bool keep_alive, int keep_alive_seconds);
std::string_view ReasonPhrase(int status);

// `text` for a log line: printable ASCII kept, every other byte as \xHH (CR, LF, ESC included),
// cut at `max_bytes` of input with "..." appended.
std::string LogSafe(std::string_view text, size_t max_bytes = 200);

}  // namespace tmcra::memd
