// The network-free rules of the HTTP client: path segments and header values that may be sent
// (S5), the strict parse of an answer (H8, ≥ 40 invalid bodies), the error envelope (§1.3) and
// the scrubbing of secrets and hostile text (S1).
#include "src/api/http_wire.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "src/api/api_status.h"
#include "src/config/url.h"

using json = nlohmann::json;
using namespace std::string_literals;
using tmcra::Errc;
namespace wire = tmcra::api::wire;

namespace {

const std::string kKey =
    "tmcra_CANARYID.0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

}  // namespace

TEST_CASE("path segments: dot segments, CR/LF/NUL and huge values are refused by name", "[wire]") {
  for (const std::string& bad : std::vector<std::string>{
           std::string(""), std::string("."), std::string(".."), std::string("a\r\nX-Injected: 1"),
           std::string("a\nb"), std::string("a\rb"), std::string("a\0b", 3),
           std::string(1025, 'a')}) {
    auto status = wire::CheckPathSegment(bad, "scope");
    REQUIRE_FALSE(status);
    CHECK(status.error().code == Errc::kInvalidArgument);
    CHECK(status.error().message.rfind("scope: ", 0) == 0);
    if (bad.size() > 3) CHECK(status.error().message.find(bad) == std::string::npos);
  }
  for (const std::string& ok :
       std::vector<std::string>{"p", "../x", "a/b", "a?b", "a#b", "%2e%2e", "a b", "...",
                                "caf\xc3\xa9", std::string(1024, 'a')}) {
    CHECK(wire::CheckPathSegment(ok, "job_id"));
  }
  // What they become on the wire: never a '/', '?', '#', '%' or space of their own.
  CHECK(tmcra::config::QuoteSegment("../x") == "..%2Fx");
  CHECK(tmcra::config::QuoteSegment("%2e%2e") == "%252e%252e");
  CHECK(tmcra::config::QuoteSegment("a?b#c d") == "a%3Fb%23c%20d");
  CHECK(tmcra::config::QuoteSegment("...") == "...");
}

TEST_CASE("header values: no control characters, no edge spaces", "[wire]") {
  CHECK(wire::CheckHeaderValue("key-12345678", "idempotency_key"));
  CHECK(wire::CheckHeaderValue("", "x"));
  for (const std::string& bad : std::vector<std::string>{
           std::string("a\r\nX-Injected: 1"), std::string("a\nb"), std::string("a\0b", 3),
           std::string("a\tb"), std::string("a\x7f"), std::string(" a"), std::string("a ")}) {
    auto status = wire::CheckHeaderValue(bad, "idempotency_key");
    REQUIRE_FALSE(status);
    CHECK(status.error().message.rfind("idempotency_key: ", 0) == 0);
  }
}

TEST_CASE("an answer must be one strict JSON object", "[wire][h8]") {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "[";
  std::string deep65 = "{\"a\":";
  for (int i = 0; i < 64; ++i) deep65 += "[";
  for (int i = 0; i < 64; ++i) deep65 += "]";
  deep65 += "}";
  const std::vector<std::string> invalid{
      "",
      " ",
      "\r\n",
      "{",
      "}",
      "{\"a\":1",
      "{\"a\":1}}",
      "{\"a\":1} x",
      "{\"a\":1}{\"b\":2}",
      "{\"a\":1}\x00"s,
      "{\"a\":1}\x00garbage"s,
      "{\"a\":\"x\x00y\"}"s,
      "{'a':1}",
      "{a:1}",
      "{\"a\":1,}",
      "{\"a\":[1,]}",
      "{\"a\":01}",
      "{\"a\":NaN}",
      "{\"a\":Infinity}",
      "{\"a\":-Infinity}",
      "{\"a\":1e400}",
      "{\"a\":.5}",
      "{\"a\":+1}",
      "{\"a\":\"\x01\"}",
      "{\"a\":\"tab\there\"}",
      "{\"a\":\"\xff\"}",
      "{\"a\":\"\xc3\x28\"}",
      "{\"a\":\"\xed\xa0\x80\"}",  // an encoded surrogate
      "{\"a\":\"\xc0\xaf\"}",      // overlong
      "{\"a\":\"\\ud800\"}",       // lone surrogate escape
      "{\"a\":\"\\udc00x\"}",
      "{\"a\":\"\\x41\"}",
      "{\"a\":\"unterminated}",
      "\xef\xbb\xbf{\"a\":1}",      // BOM
      "{\"a\":1,\"a\":2}",          // duplicate key
      "{\"a\":{\"b\":1,\"b\":1}}",  // duplicate key, nested
      "[]",
      "[{\"a\":1}]",
      "\"text\"",
      "42",
      "null",
      "true",
      "false",
      "<html><body>OK</body></html>",
      "OK",
      deep,
      deep65,
      "{\"a\":1}\n\x1e",
      "\x1f\x8b\x08\x00\x00\x00\x00\x00"s,  // gzip magic, undecoded
  };
  CHECK(invalid.size() >= 40);
  for (const auto& body : invalid) {
    INFO(body.substr(0, 40));
    auto parsed = wire::ParseResponseObject(body, 202, "req_1");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == Errc::kProtocol);
    CHECK(parsed.error().api_code == "invalid_json_response");
    CHECK(parsed.error().message.find("HTTP 202") != std::string::npos);
    CHECK_FALSE(parsed.error().retryable);
    CHECK(parsed.error().message.find("req_1") != std::string::npos);
  }
  // The depth limit is 64: exactly 64 levels pass.
  std::string deep64 = "{\"a\":";
  for (int i = 0; i < 63; ++i) deep64 += "[";
  for (int i = 0; i < 63; ++i) deep64 += "]";
  deep64 += "}";
  CHECK(wire::ParseResponseObject(deep64, 200, ""));
  for (const auto& too_deep : {deep, deep65}) {
    auto refused = wire::ParseResponseObject(too_deep, 200, "");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("nested deeper than 64 levels") != std::string::npos);
  }
  auto ok = wire::ParseResponseObject(
      " {\"job_id\":\"j\",\"n\":[1,2.5,null,true],\"s\":\"caf\xc3\xa9 \\u00e9\"}\n", 202, "");
  REQUIRE(ok);
  CHECK((*ok)["job_id"] == "j");
  CHECK(wire::ParseResponseObject("{}", 200, ""));
  CHECK(
      wire::ParseResponseObject("{\"a\":{},\"b\":{\"a\":1}}", 200, ""));  // same key, other objects
  // The strict parser builds exactly the document nlohmann's own parser builds.
  const std::string doc =
      R"({"z":[{"a":1,"b":[true,false,null]},{"a":-2.5e-3,"b":{}}],)"
      R"("s":"\u00e9\n\"q\"","big":18446744073709551615,"neg":-9223372036854775808,)"
      R"("e":[],"o":{"x":{"y":{"z":"deep"}}},"f":1.0})";
  auto same = wire::ParseResponseObject(doc, 200, "");
  REQUIRE(same);
  CHECK(*same == nlohmann::json::parse(doc));
  CHECK(same->dump() == nlohmann::json::parse(doc).dump());
}

TEST_CASE("the error envelope maps as the contract's api_error", "[wire]") {
  auto e = wire::ApiError(
      422,
      R"({"error":{"code":"validation_error","message":"bad field","request_id":"req_9",)"
      R"("details":[{"loc":["body","x"]}]}})",
      "req_header");
  CHECK(e.code == tmcra::Errc::kInvalidArgument);
  CHECK(e.api_code == "validation_error");
  CHECK(e.code == Errc::kInvalidArgument);
  CHECK_FALSE(e.retryable);
  CHECK(e.message == "bad field (request id req_9)");
  CHECK(json::parse(e.details_json) == json::parse(R"([{"loc":["body","x"]}])"));

  e = wire::ApiError(503, R"({"error":{"code":"global_queue_full"}})", "req_h");
  CHECK(e.api_code == "global_queue_full");
  CHECK(e.retryable);
  CHECK(e.message == "TMCRA returned HTTP 503 (request id req_h)");
  CHECK(e.details_json.empty());

  // Not an envelope: code http_error, the status message.
  for (const std::string& body :
       std::vector<std::string>{"", "<html>502</html>", "{\"detail\":\"Not Found\"}",
                                "{\"error\":\"text\"}", "{\"error\":{\"code\":5}}", "[1]",
                                "\xef\xbb\xbf{}", "{\"error\":{\"code\":\"a\",\"code\":\"b\"}}"}) {
    INFO(body);
    e = wire::ApiError(404, body, "");
    CHECK(e.api_code == "http_error");  // a duplicate key makes the envelope unusable too
    CHECK(e.message == "TMCRA returned HTTP 404");
    CHECK(e.code == Errc::kNotFound);
  }
  // Deep nesting never reaches the parser's recursion.
  e = wire::ApiError(500, std::string(100000, '['), "");
  CHECK(e.api_code == "http_error");
  CHECK(e.retryable);

  e = wire::ApiError(301, "", "");
  CHECK(e.message.find("redirects are not followed") != std::string::npos);
  CHECK_FALSE(e.retryable);

  // Hostile text: control characters neutralised, length capped, huge details dropped.
  json hostile = {{"error",
                   {{"code", "x\r\ny"},
                    {"message", std::string("line1\nline2\x1b[31m") + std::string(5000, 'm')},
                    {"details", std::string(20000, 'd')}}}};
  e = wire::ApiError(400, hostile.dump(), "");
  CHECK(e.api_code == "x  y");
  CHECK(e.message.find('\n') == std::string::npos);
  CHECK(e.message.find('\x1b') == std::string::npos);
  // Capped, then " (HTTP 400)" added: 400 is not the status of its kind (api_status.h).
  CHECK(e.message.size() <= wire::kMaxErrorMessageBytes + 3 + 11);
  CHECK(e.details_json.empty());
}

TEST_CASE("an error envelope that echoes the key, escaped or where it is cut, keeps none of it",
          "[wire][s1]") {
  const auto secrets = wire::SecretsOf(kKey);
  // Every character of the key \u-escaped: the raw body holds no copy of it to scrub.
  std::string escaped;
  for (char c : kKey) {
    char unit[7];
    std::snprintf(unit, sizeof unit, "\\u%04x", static_cast<unsigned char>(c));
    escaped += unit;
  }
  // The key straddles the message's 1000-byte limit: cut first, it would lose its tail and no
  // longer match.
  const std::string pad(wire::kMaxErrorMessageBytes - 10, 'p');
  const std::string body = R"({"error":{"code":"bad_)" + escaped + R"(","message":")" + pad +
                           escaped + R"(","request_id":"req_)" + escaped +
                           R"(","details":{"echo":")" + escaped + R"("}}})";
  const tmcra::Error e = wire::ApiError(400, body, "", secrets);
  for (const std::string& text : {e.api_code, e.message, e.details_json}) {
    INFO(text);
    for (size_t at = 0; at + 8 <= kKey.size(); ++at) {
      CHECK(text.find(kKey.substr(at, 8)) == std::string::npos);
    }
  }
  CHECK(e.details_json.find("[REDACTED]") != std::string::npos);
}

TEST_CASE("secrets are scrubbed from any text", "[wire][s1]") {
  const auto secrets = wire::SecretsOf(kKey);
  REQUIRE(secrets.size() == 2);
  const std::string secret = kKey.substr(kKey.find('.') + 1);
  CHECK(wire::Redact("Bearer " + kKey + " and " + secret + " and " + kKey, secrets) ==
        "Bearer [REDACTED] and [REDACTED] and [REDACTED]");
  CHECK(wire::Redact("nothing here", secrets) == "nothing here");
  CHECK(wire::SecretsOf("").empty());
  CHECK(wire::SecretsOf("plainkey").size() == 1);
  CHECK(wire::SecretsOf("tmcra_x.short").size() ==
        1);  // a part under 8 bytes is not scrubbed alone
}

TEST_CASE("SafeText: valid UTF-8, no controls, capped on a character boundary", "[wire]") {
  CHECK(wire::SafeText("a\r\nb\x7f", 100) == "a  b ");
  CHECK(wire::SafeText("\xff", 100) == "\xef\xbf\xbd");
  CHECK(wire::SafeText("\xc3\xa9\xc3\xa9\xc3\xa9", 3) == "\xc3\xa9...");
  CHECK(wire::SafeText("abcdef", 3) == "abc...");
}

TEST_CASE("a jobs batch answer is read back per id, or refused whole", "[wire][h8]") {
  const std::vector<std::string> ids = {"job_a", "job_b", "job_c"};
  const json job_a = {{"job_id", "job_a"}, {"status", "succeeded"}};
  const json job_c = {{"job_id", "job_c"}, {"status", "running"}};
  const json answer = {
      {"jobs",
       {{{"job_id", "job_a"}, {"status_code", 200}, {"job", job_a}},
        {{"job_id", "job_b"},
         {"status_code", 404},
         {"error",
          {{"code", "not_found"}, {"message", "job not found " + kKey}, {"request_id", "req-1"}}}},
        {{"job_id", "job_c"}, {"status_code", 200}, {"job", job_c}}}}};
  auto read = wire::ReadJobsBatch(answer, ids, "", wire::SecretsOf(kKey));
  REQUIRE(read);
  REQUIRE(read->size() == 3);
  REQUIRE((*read)[0]);
  CHECK(*(*read)[0] == job_a);
  REQUIRE_FALSE((*read)[1]);
  const tmcra::Error& missing = (*read)[1].error();
  CHECK(missing.code == tmcra::Errc::kNotFound);
  CHECK(missing.code == Errc::kNotFound);
  CHECK_FALSE(missing.retryable);
  CHECK(missing.api_code == "not_found");
  CHECK(missing.message.find("req-1") != std::string::npos);
  CHECK(missing.message.find("0123456789abcdef") == std::string::npos);  // the key scrubbed
  REQUIRE((*read)[2]);
  CHECK(*(*read)[2] == job_c);

  // A retryable status in an entry is retryable, an entry without an envelope still an error.
  auto busy = wire::ReadJobsBatch({{"jobs", {{{"job_id", "job_a"}, {"status_code", 503}}}}},
                                  {"job_a"}, "req-9");
  REQUIRE(busy);
  REQUIRE_FALSE((*busy)[0]);
  CHECK((*busy)[0].error().retryable);
  CHECK((*busy)[0].error().api_code == "http_error");

  // Refused whole: nothing of such an answer is taken as a job.
  const std::vector<std::pair<std::string, json>> bad = {
      {"not an object", json::array()},
      {"no jobs", json::object()},
      {"jobs not an array", {{"jobs", json::object()}}},
      {"too few entries", {{"jobs", {answer["jobs"][0], answer["jobs"][1]}}}},
      {"too many entries",
       {{"jobs", {answer["jobs"][0], answer["jobs"][1], answer["jobs"][2], answer["jobs"][2]}}}},
      {"an entry not an object", {{"jobs", {answer["jobs"][0], "job_b", answer["jobs"][2]}}}},
      {"entries out of order",
       {{"jobs", {answer["jobs"][1], answer["jobs"][0], answer["jobs"][2]}}}},
      {"an entry without job_id",
       {{"jobs", {answer["jobs"][0], {{"status_code", 404}}, answer["jobs"][2]}}}},
      {"a job_id not a string",
       {{"jobs", {answer["jobs"][0], {{"job_id", 7}, {"status_code", 404}}, answer["jobs"][2]}}}},
      {"no status_code",
       {{"jobs", {{{"job_id", "job_a"}, {"job", job_a}}, answer["jobs"][1], answer["jobs"][2]}}}},
      {"status_code as text",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", "200"}, {"job", job_a}},
          answer["jobs"][1],
          answer["jobs"][2]}}}},
      {"status_code 200.0",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 200.0}, {"job", job_a}},
          answer["jobs"][1],
          answer["jobs"][2]}}}},
      {"status_code 202",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 202}, {"job", job_a}},
          answer["jobs"][1],
          answer["jobs"][2]}}}},
      {"status_code 302",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 302}}, answer["jobs"][1], answer["jobs"][2]}}}},
      {"status_code 600",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 600}}, answer["jobs"][1], answer["jobs"][2]}}}},
      {"200 without a job",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 200}}, answer["jobs"][1], answer["jobs"][2]}}}},
      {"200 with a job that is not an object",
       {{"jobs",
         {{{"job_id", "job_a"}, {"status_code", 200}, {"job", "succeeded"}},
          answer["jobs"][1],
          answer["jobs"][2]}}}},
  };
  for (const auto& [what, body] : bad) {
    INFO(what);
    auto refused = wire::ReadJobsBatch(body, ids, "req-2");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == Errc::kProtocol);
    CHECK(refused.error().api_code == "invalid_json_response");
    CHECK_FALSE(refused.error().retryable);
    CHECK(refused.error().message.find("req-2") != std::string::npos);
  }
}
