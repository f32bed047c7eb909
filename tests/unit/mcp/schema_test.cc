#include "src/mcp/schema.h"

#include <catch2/catch.hpp>

using tmcra::mcp::ValidateSchema;
using json = nlohmann::json;

namespace {

const json kSchema = json::parse(R"({
  "type":"object",
  "properties":{
    "scope":{"type":"string","minLength":1,"maxLength":4},
    "limit":{"type":"integer","minimum":1,"maximum":8},
    "ratio":{"type":"number","exclusiveMinimum":0},
    "mode":{"type":"string","enum":["a","b"]},
    "id":{"type":"string","pattern":"^[a-z]+$"},
    "agent":{"anyOf":[{"type":"string"},{"type":"null"}]},
    "messages":{"type":"array","minItems":1,"maxItems":2,"items":{
      "type":"object","properties":{"role":{"type":"string","enum":["user","assistant"]}},
      "required":["role"],"additionalProperties":false}}
  },
  "required":["scope"],
  "additionalProperties":false
})");

std::string Problem(const char* args) {
  auto p = ValidateSchema(json::parse(args), kSchema);
  return p ? *p : std::string();
}

}  // namespace

TEST_CASE("valid arguments pass", "[mcp][schema]") {
  CHECK(Problem(R"({"scope":"ab"})").empty());
  CHECK(Problem(R"({"scope":"本番","limit":8,"ratio":0.5,"mode":"b","id":"abc","agent":null,
                    "messages":[{"role":"user"}]})")
            .empty());
  CHECK(Problem(R"({"scope":"a","limit":3.0})").empty());  // 3.0 is an integer
}

TEST_CASE("each failure names the field", "[mcp][schema]") {
  CHECK(Problem(R"({})") == "arguments.scope: is required");
  CHECK(Problem(R"({"scope":5})") == "arguments.scope: expected string, got integer");
  CHECK(Problem(R"({"scope":""})") == "arguments.scope: must be at least 1 characters long");
  CHECK(Problem(R"({"scope":"abcde"})") == "arguments.scope: must be at most 4 characters long");
  CHECK(Problem(R"({"scope":"a","limit":0})") == "arguments.limit: must be >= 1");
  CHECK(Problem(R"({"scope":"a","limit":9})") == "arguments.limit: must be <= 8");
  CHECK(Problem(R"({"scope":"a","limit":1.5})") == "arguments.limit: expected integer, got number");
  CHECK(Problem(R"({"scope":"a","limit":true})") ==
        "arguments.limit: expected integer, got boolean");
  CHECK(Problem(R"({"scope":"a","ratio":0})") == "arguments.ratio: must be > 0");
  CHECK(Problem(R"({"scope":"a","mode":"c"})") == R"(arguments.mode: must be one of "a", "b")");
  CHECK(Problem(R"({"scope":"a","id":"A1"})") ==
        "arguments.id: does not match the pattern ^[a-z]+$");
  CHECK(Problem(R"({"scope":"a","agent":3})") == "arguments.agent: expected string, got integer");
  CHECK(Problem(R"({"scope":"a","extra":1})") == "arguments.extra: is not a known field");
  CHECK(Problem(R"({"scope":"a","messages":[]})") ==
        "arguments.messages: must have at least 1 items");
  CHECK(Problem(R"({"scope":"a","messages":[{"role":"user"},{"role":"x"}]})") ==
        R"(arguments.messages[1].role: must be one of "user", "assistant")");
  CHECK(Problem(R"({"scope":"a","messages":[{}]})") == "arguments.messages[0].role: is required");
  CHECK(Problem(R"({"scope":"a","messages":[{"role":"user","x":1}]})") ==
        "arguments.messages[0].x: is not a known field");
}

TEST_CASE("count keywords work however the integer is spelled", "[mcp][schema]") {
  const json built{{"type", "array"},
                   {"minItems", 1},
                   {"maxItems", int64_t{2}},
                   {"items", {{"type", "string"}, {"minLength", 2}}}};
  CHECK(ValidateSchema(json::array(), built, "a").value_or("") == "a: must have at least 1 items");
  CHECK(ValidateSchema(json{"x"}, built, "a").value_or("") ==
        "a[0]: must be at least 2 characters long");
  CHECK(ValidateSchema(json{"xx", "yy", "zz"}, built, "a").value_or("") ==
        "a: must have at most 2 items");
}

TEST_CASE("a long string is not fed to the regex engine", "[mcp][schema][limits]") {
  const json args{{"scope", "a"}, {"id", std::string(100000, 'a')}};
  auto p = ValidateSchema(args, kSchema);
  REQUIRE(p);
  CHECK(*p == "arguments.id: is too long to match the pattern");
}
