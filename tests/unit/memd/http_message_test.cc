// The request-head parser, the framing rules and the log escaping of tmcra-memd's HTTP layer.
#include "memd/http_message.h"

#include <catch2/catch.hpp>
#include <string>

using tmcra::memd::CheckFraming;
using tmcra::memd::HeadState;
using tmcra::memd::HttpRequest;
using tmcra::memd::HttpResponse;
using tmcra::memd::LogSafe;
using tmcra::memd::ParseRequestHead;

namespace {

HttpRequest Parsed(const std::string& text) {
  HttpRequest req;
  const auto head = ParseRequestHead(text, req);
  REQUIRE(head.state == HeadState::kComplete);
  return req;
}

int RefusedWith(const std::string& text) {
  HttpRequest req;
  const auto head = ParseRequestHead(text, req);
  REQUIRE(head.state == HeadState::kRefused);
  return head.status;
}

}  // namespace

TEST_CASE("a request head: method, target, version, headers, and the bytes it took",
          "[memd][http]") {
  const std::string text =
      "\r\nPOST /v1/scopes/a/recall?x=1 HTTP/1.1\r\nHost: h\r\nX-A:  spaced value \t\r\n"
      "content-length: 2\r\n\r\n{}GET /next";
  HttpRequest req;
  const auto head = ParseRequestHead(text, req);
  REQUIRE(head.state == HeadState::kComplete);
  CHECK(text.substr(head.length) == "{}GET /next");
  CHECK(req.method == "POST");
  CHECK(req.target == "/v1/scopes/a/recall?x=1");
  CHECK(req.minor_version == 1);
  CHECK(req.Get("x-a") == "spaced value");
  CHECK(req.Get("Content-Length") == "2");
  CHECK_FALSE(req.Has("Missing"));
  // LF alone ends lines too.
  CHECK(Parsed("GET / HTTP/1.0\nHost: h\n\n").minor_version == 0);
}

TEST_CASE("an incomplete head waits, and one past 64 KiB or 100 header lines is refused 431",
          "[memd][http]") {
  HttpRequest req;
  CHECK(ParseRequestHead("GET / HTTP/1.1\r\nHost: h\r\n", req).state == HeadState::kIncomplete);
  CHECK(ParseRequestHead("", req).state == HeadState::kIncomplete);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nX: " + std::string(70 * 1024, 'a')) == 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  CHECK(RefusedWith(many + "\r\n") == 431);
}

TEST_CASE("malformed heads are refused: request line, folded or control-character headers",
          "[memd][http]") {
  CHECK(RefusedWith("GET  / HTTP/1.1\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/1.1 x\r\n\r\n") == 400);
  CHECK(RefusedWith("G\x1b[31mT / HTTP/1.1\r\n\r\n") == 400);
  CHECK(RefusedWith("GET /a\x7f HTTP/1.1\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/2.0\r\n\r\n") == 505);
  CHECK(RefusedWith("GET / FTP/1.0\r\n\r\n") == 400);
  CHECK(RefusedWith("GET /" + std::string(17 * 1024, 'a') + " HTTP/1.1\r\n\r\n") == 414);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n") == 400);
  CHECK(RefusedWith("GET / HTTP/1.1\r\nNoColon\r\n\r\n") == 400);
}

TEST_CASE("framing: a body needs one decimal Content-Length, on a method that has a body",
          "[memd][http]") {
  auto framing = [](const std::string& head) { return CheckFraming(Parsed(head)); };
  CHECK(framing("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n").body_bytes == 12);
  CHECK(framing("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n").refuse_status == 0);
  CHECK(framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").refuse_status == 411);
  CHECK(framing("GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").refuse_status == 411);
  CHECK(framing("POST / HTTP/1.1\r\n\r\n").refuse_status == 411);
  CHECK(
      framing("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n").refuse_status ==
      400);
  CHECK(framing("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").refuse_status == 400);
  CHECK(framing("POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n").refuse_status == 400);
  CHECK(
      framing("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n").refuse_status ==
      400);
  CHECK(framing("GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\n").refuse_status == 400);
  CHECK(framing("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").refuse_status == 0);
  CHECK(framing("POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\n")
            .refuse_status == 415);
  CHECK(framing("POST / HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 3\r\n\r\n")
            .refuse_status == 0);
  CHECK(framing("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            .expect_continue);
}

TEST_CASE("Connection: close, HTTP/1.0 keep-alive, and query parameters", "[memd][http]") {
  CHECK(Parsed("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").WantsClose());
  CHECK_FALSE(Parsed("GET / HTTP/1.1\r\n\r\n").WantsClose());
  CHECK(Parsed("GET / HTTP/1.0\r\n\r\n").WantsClose());
  CHECK_FALSE(Parsed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").WantsClose());
  const HttpRequest req = Parsed("GET /e?limit=5&cursor=a%20b+c&flag HTTP/1.1\r\n\r\n");
  CHECK(req.Query("limit") == "5");
  CHECK(req.Query("cursor") == "a b c");
  CHECK(req.Query("flag") == "");
  CHECK_FALSE(req.Query("other"));
}

TEST_CASE("an answer's head: status line, headers, Content-Length, Connection", "[memd][http]") {
  HttpResponse res;
  res.status = 429;
  res.Set("Retry-After", "1");
  res.body = "{}";
  CHECK(tmcra::memd::ResponseHead(res, false, 5) ==
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\n");
  CHECK(tmcra::memd::ResponseHead(res, true, 5)
            .find("Connection: keep-alive\r\nKeep-Alive: "
                  "timeout=5\r\n\r\n") != std::string::npos);
}

TEST_CASE("log fields: printable ASCII kept, every other byte escaped, long text cut",
          "[memd][http]") {
  CHECK(LogSafe("GET") == "GET");
  CHECK(LogSafe("a\r\nb\x1b[2J\\") == "a\\x0d\\x0ab\\x1b[2J\\x5c");
  CHECK(LogSafe(std::string("\xc3\xa9\0", 3)) == "\\xc3\\xa9\\x00");
  CHECK(LogSafe(std::string(300, 'a'), 200) == std::string(200, 'a') + "...");
}
