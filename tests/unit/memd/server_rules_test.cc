// tmcra-memd's request and response rules that need no socket.
#include "memd/server_rules.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "src/api/http_wire.h"

using namespace tmcra::memd;  // NOLINT: test file
using tmcra::IsValidAgentId;
using tmcra::IsValidIntegrationId;
using tmcra::IsValidRequestId;

namespace {

std::string Gunzip(const std::string& in) {
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
  std::string out(1 << 20, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_FINISH);
  out.resize(out.size() - zs.avail_out);
  inflateEnd(&zs);
  REQUIRE(rc == Z_STREAM_END);
  return out;
}

std::string DetailType(const tmcra::Error& e) {
  return json::parse(e.details_json)[0]["type"].get<std::string>();
}

}  // namespace

TEST_CASE("attribution headers follow the service's rules") {
  CHECK(ValidateAttribution({}));
  CHECK(ValidateAttribution({"mcp", "int.1:x", "agent@host/1"}));
  for (const Attribution& bad :
       {Attribution{"bogus", {}, {}}, Attribution{{}, "-x", {}}, Attribution{{}, "a b", {}},
        Attribution{{}, {}, "has space"}, Attribution{{}, {}, std::string(201, 'a')},
        Attribution{{}, {}, ""}, Attribution{"", {}, {}}}) {
    auto s = ValidateAttribution(bad);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == tmcra::Errc::kInvalidArgument);
    CHECK(s.error().api_code == "invalid_usage_attribution");
  }
  CHECK(IsValidAgentId(std::string(200, 'a')));
  CHECK(IsValidIntegrationId(std::string(128, 'a')));
  CHECK_FALSE(IsValidIntegrationId(std::string(129, 'a')));
  CHECK(IsKnownClientPlatform("zcode"));
}

TEST_CASE("bodies: only a JSON object passes, everything else is 422 with details") {
  CHECK(ParseBodyObject(R"({"query":"x"})", "application/json"));
  CHECK(ParseBodyObject(R"({"query":"x"})", ""));
  CHECK(ParseBodyObject(R"({"query":"x"})", "application/json; charset=utf-8"));
  CHECK(ParseBodyObject(R"({"query":"x"})", "application/merge-patch+json"));
  const std::pair<std::string, std::string> cases[] = {
      {"", "missing"},
      {"  ", "missing"},
      {"[1]", "model_attributes_type"},
      {"null", "model_attributes_type"},
      {"{\"a\":", "json_invalid"},
      {"{\"a\":1} x", "json_invalid"},
      {"{\"a\":NaN}", "json_invalid"},
      {"{\"a\":\"\xff\"}", "json_invalid"},
      {"{\"a\":" + std::string(65, '[') + std::string(65, ']') + "}", "json_invalid"},
  };
  for (const auto& [body, type] : cases) {
    auto parsed = ParseBodyObject(body, "application/json");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == tmcra::Errc::kInvalidArgument);
    CHECK(parsed.error().api_code == "validation_error");
    CHECK(DetailType(parsed.error()) == type);
  }
  auto form = ParseBodyObject("a=1", "application/x-www-form-urlencoded");
  REQUIRE_FALSE(form);
  CHECK(form.error().code == tmcra::Errc::kInvalidArgument);
  // 64 levels are fine, 65 are not; brackets inside strings do not count.
  CHECK(ParseBodyObject("{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}", ""));
  CHECK(NestingDepth("{\"a\":\"[[[[\"}", 64) == 1);
}

TEST_CASE("bodies: a number no double holds is 422 naming where it is") {
  const std::pair<std::string, json> cases[] = {
      {R"({"metadata":{"n":1e400}})", json::array({"body", "metadata", "n"})},
      {R"({"messages":[{"a":1},{"b":-1e999}]})", json::array({"body", "messages", 1, "b"})},
      {"{\"k\":1" + std::string(400, '0') + "}", json::array({"body", "k"})},
      // A repeated key (kept as Python keeps it) before the number: where is not known.
      {R"({"a":1,"a":1e400})", json::array({"body"})},
  };
  for (const auto& [body, loc] : cases) {
    INFO(body);
    auto parsed = ParseBodyObject(body, "application/json");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == tmcra::Errc::kInvalidArgument);
    CHECK(parsed.error().api_code == "validation_error");
    CHECK_FALSE(parsed.error().retryable);
    const json details = json::parse(parsed.error().details_json);
    CHECK(details[0]["type"] == "finite_number");
    CHECK(details[0]["loc"] == loc);
    CHECK(details[0]["msg"] == "Input should be a finite number");
  }
  CHECK(ParseBodyObject(R"({"a":1e-400,"b":1e308})", "application/json"));
}

TEST_CASE("target paths are split and percent-decoded") {
  auto s = SplitTargetPath("/v1/scopes/team%2Da/recall?x=1");
  REQUIRE(s);
  CHECK(*s == std::vector<std::string>{"v1", "scopes", "team-a", "recall"});
  auto slash = SplitTargetPath("/v1/scopes/a%2Fb/recall");
  REQUIRE(slash);
  CHECK(slash->size() == 4);
  CHECK((*slash)[2] == "a/b");
  CHECK_FALSE(SplitTargetPath("/v1/%zz"));
  CHECK_FALSE(SplitTargetPath("/v1/%4"));
  CHECK_FALSE(SplitTargetPath("v1"));
  CHECK(*SplitTargetPath("/") == std::vector<std::string>{""});
}

TEST_CASE("the error envelope has the five fields of the service") {
  const json body = ErrorBody("validation_error", "bad", "rid", R"([{"loc":["body"]}])", -1);
  CHECK(body == json::parse(R"({"error":{"code":"validation_error","message":"bad",
      "request_id":"rid","details":[{"loc":["body"]}],"retry_after_seconds":null}})"));
  CHECK(ErrorBody("rate_limited", "m", "r", "", 1)["error"]["retry_after_seconds"] == 1);
  CHECK(EarlyErrorBody("request_too_large", "r") ==
        json::parse(R"({"error":{"code":"request_too_large","request_id":"r"}})"));
}

TEST_CASE("loopback peers: 127.0.0.0/8, ::1 and their IPv4-mapped form, nothing else") {
  for (const char* yes : {"127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "::ffff:127.0.0.1",
                          "::FFFF:127.9.9.9"}) {
    INFO(yes);
    CHECK(IsLoopbackPeer(yes));
  }
  for (const char* no :
       {"", "127", "127.0.0", "127.0.0.1.5", "127.0.0.256", "127.0.0.1x", "127..0.1", "127.0.0.",
        "1127.0.0.1", "128.0.0.1", "10.0.0.1", "192.168.1.1", "::2", "::", "::ffff:10.0.0.1",
        "::ffff:", "fe80::1", "localhost", "127.0.0.0001"}) {
    INFO(no);
    CHECK_FALSE(IsLoopbackPeer(no));
  }
}

TEST_CASE("gzip is offered only when accepted, and round-trips") {
  CHECK(AcceptsGzip("gzip"));
  CHECK(AcceptsGzip("gzip, deflate, br"));
  CHECK(AcceptsGzip("br;q=1.0, GZIP;q=0.5"));
  CHECK(AcceptsGzip("*"));
  CHECK_FALSE(AcceptsGzip(""));
  CHECK_FALSE(AcceptsGzip("br, deflate"));
  CHECK_FALSE(AcceptsGzip("gzip;q=0"));
  CHECK_FALSE(AcceptsGzip("gzip; q=0.000"));
  CHECK_FALSE(AcceptsGzip("x-gzip-not"));
  const std::string text(5000, 'x');
  auto gz = Gzip(text);
  REQUIRE(gz);
  CHECK(gz->size() < text.size());
  CHECK(Gunzip(*gz) == text);
  // The deflate state is reused between answers: each one is a whole gzip member of its own.
  for (int i = 0; i < 5; ++i) {
    const std::string other =
        std::to_string(i) +
        std::string(static_cast<size_t>(2000 + 100 * i), static_cast<char>('a' + i)) + "end";
    auto again = Gzip(other);
    REQUIRE(again);
    CHECK(Gunzip(*again) == other);
  }
  auto empty = Gzip("");
  REQUIRE(empty);
  CHECK(Gunzip(*empty).empty());
}

TEST_CASE("request ids and listen addresses") {
  CHECK(IsValidRequestId("abc-123.x:y_z"));
  CHECK_FALSE(IsValidRequestId(""));
  CHECK_FALSE(IsValidRequestId("a b"));
  CHECK_FALSE(IsValidRequestId("a\r\nx"));
  CHECK_FALSE(IsValidRequestId(std::string(129, 'a')));

  auto a = ParseListen("127.0.0.1:8443");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 8443);
  CHECK(a->Origin("https", 8443) == "https://127.0.0.1:8443");
  auto b = ParseListen("[::1]:0");
  REQUIRE(b);
  CHECK(b->host == "::1");
  CHECK(b->Origin("https", 9) == "https://[::1]:9");
  auto c = ParseListen(":9000");
  REQUIRE(c);
  CHECK(c->host == "127.0.0.1");
  auto d = ParseListen("9000");
  REQUIRE(d);
  CHECK(d->port == 9000);
  CHECK_FALSE(ParseListen("127.0.0.1:65536"));
  CHECK_FALSE(ParseListen("127.0.0.1:x"));
  CHECK_FALSE(ParseListen("[::1]"));
  CHECK_FALSE(ParseListen("host:"));
}

TEST_CASE("jobs batch: job_ids must be 1..100 distinct non-empty strings, nothing else") {
  auto ok = ParseJobIds(json{{"job_ids", {"job_a", "job_b"}}});
  REQUIRE(ok);
  CHECK(*ok == std::vector<std::string>{"job_a", "job_b"});
  json hundred = json::array();
  for (int i = 0; i < 100; ++i) hundred.push_back("job_" + std::to_string(i));
  CHECK(ParseJobIds(json{{"job_ids", hundred}}));
  CHECK(ParseJobIds(json{{"job_ids", {std::string(kMaxJobIdBytes, 'j')}}}));

  json too_many = hundred;
  too_many.push_back("job_100");
  const std::vector<std::tuple<json, std::string, std::string>> bad = {
      {json::object(), "job_ids: ", "missing"},
      {json{{"job_ids", "job_a"}}, "job_ids: ", "list_type"},
      {json{{"job_ids", json::array()}}, "job_ids: ", "too_short"},
      {json{{"job_ids", too_many}}, "job_ids: ", "too_long"},
      {json{{"job_ids", {"job_a", 7}}}, "job_ids.1: ", "string_type"},
      {json{{"job_ids", {"job_a", nullptr}}}, "job_ids.1: ", "string_type"},
      {json{{"job_ids", {""}}}, "job_ids.0: ", "string_length"},
      {json{{"job_ids", {std::string(kMaxJobIdBytes + 1, 'j')}}}, "job_ids.0: ", "string_length"},
      {json{{"job_ids", {"job_a", "job_b", "job_a"}}}, "job_ids.2: ", "value_error"},
      {json{{"job_ids", {"job_a"}}, {"wait", true}}, "wait: ", "extra_forbidden"},
  };
  for (const auto& [body, prefix, type] : bad) {
    INFO(body.dump());
    auto refused = ParseJobIds(body);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == tmcra::Errc::kInvalidArgument);
    CHECK(refused.error().api_code == "validation_error");
    CHECK(refused.error().message.rfind(prefix, 0) == 0);
    CHECK(DetailType(refused.error()) == type);
  }
}

TEST_CASE("jobs batch: the answer's entries are what the client reads back") {
  const json job = {{"job_id", "job_a"}, {"status", "succeeded"}};
  const json a = JobsBatchEntry("job_a", job, "req-7");
  CHECK(a == json{{"job_id", "job_a"}, {"status_code", 200}, {"job", job}});
  const json b = JobsBatchEntry(
      "job_b", tmcra::Error::Api(tmcra::Errc::kNotFound, "not_found", "job not found"), "req-7");
  CHECK(b["status_code"] == 404);
  CHECK(b["error"]["code"] == "not_found");
  CHECK(b["error"]["request_id"] == "req-7");
  auto read = tmcra::api::wire::ReadJobsBatch(json{{"jobs", {a, b}}}, {"job_a", "job_b"}, "");
  REQUIRE(read);
  REQUIRE((*read)[0]);
  CHECK(*(*read)[0] == job);
  REQUIRE_FALSE((*read)[1]);
  CHECK((*read)[1].error().code == tmcra::Errc::kNotFound);
  CHECK((*read)[1].error().api_code == "not_found");
  CHECK((*read)[1].error().message.find("job not found") != std::string::npos);
}
