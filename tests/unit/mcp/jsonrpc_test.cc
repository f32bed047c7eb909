#include "src/mcp/jsonrpc.h"

#include <catch2/catch.hpp>
#include <string>

using namespace tmcra::mcp;

TEST_CASE("nesting depth counts brackets outside strings", "[mcp][jsonrpc]") {
  CHECK(NestingDepth("{}", 64) == 1);
  CHECK(NestingDepth(R"({"a":[{"b":[]}]})", 64) == 4);
  CHECK(NestingDepth(R"({"a":"[[[[{{{{"})", 64) == 1);
  CHECK(NestingDepth(R"({"a":"\"[[["})", 64) == 1);
  CHECK(NestingDepth(std::string(1000, '['), 64) == 65);
}

TEST_CASE("parse enforces depth and reports parse errors", "[mcp][jsonrpc]") {
  std::string deep64 = std::string(64, '[') + std::string(64, ']');
  CHECK(ParseLine(deep64).error_code == 0);
  std::string deep65 = std::string(65, '[') + std::string(65, ']');
  CHECK(ParseLine(deep65).error_code == rpc::kInvalidRequest);
  CHECK(ParseLine("{not json").error_code == rpc::kParseError);
  CHECK(ParseLine(R"({"jsonrpc":"2.0"})").error_code == 0);
  CHECK(ParseLine(std::string(kMaxLineBytes + 1, ' ')).error_code == rpc::kInvalidRequest);
}

TEST_CASE("a number no double holds is read past, so the message can still be answered",
          "[mcp][jsonrpc]") {
  ParsedLine parsed = ParseLine(R"({"jsonrpc":"2.0","id":4,"params":{"a":[1e400]}})");
  CHECK(parsed.error_code == 0);
  CHECK(parsed.number_out_of_range);
  CHECK(parsed.number_paths == std::vector<json>{json::array({"params", "a", 0})});
  CHECK(parsed.value == json::parse(R"({"jsonrpc":"2.0","id":4,"params":{"a":[null]}})"));
  // A repeated key keeps its last value (nlohmann's leniency); anything else wrong is -32700.
  parsed = ParseLine(R"({"id":1,"id":2})");
  CHECK(parsed.error_code == 0);
  CHECK_FALSE(parsed.number_out_of_range);
  CHECK(parsed.value["id"] == 2);
  parsed = ParseLine(R"({"id":4,"a":1e400,})");
  CHECK(parsed.error_code == rpc::kParseError);
  CHECK_FALSE(parsed.number_out_of_range);
  CHECK(parsed.value.is_null());
}

TEST_CASE("ids are strings or integers only", "[mcp][jsonrpc]") {
  CHECK(IsValidRequestId(json(1)));
  CHECK(IsValidRequestId(json("a")));
  CHECK_FALSE(IsValidRequestId(json(nullptr)));
  CHECK_FALSE(IsValidRequestId(json(1.5)));
  CHECK_FALSE(IsValidRequestId(json(true)));
  CHECK_FALSE(IsValidRequestId(json::object()));
}

TEST_CASE("serialize is one line and replaces invalid UTF-8", "[mcp][jsonrpc]") {
  json m = MakeResult(7, {{"text", std::string("a\nb\xff")}});
  const std::string line = Serialize(m);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line.find("\xef\xbf\xbd") != std::string::npos);
  CHECK(json::parse(line)["id"] == 7);
  CHECK(MakeError(nullptr, rpc::kParseError, "x")["id"].is_null());
}

TEST_CASE("a tool result line is the serialized result message, byte for byte", "[mcp][jsonrpc]") {
  const json structured_values[] = {
      json::object(),
      json{{"query_id", "q1"}, {"b", {1, 2.5, nullptr, true}}, {"a", "quote \" back \\ nl \n"}},
      json{{"text", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 and bad \xff bytes"},
           {"nested", {{"z", json::array()}, {"content", {{"sha", "x"}}}}}},
      json{{"structuredContent", "a key that sorts after content"}, {"id", 7}}};
  const json ids[] = {json(1), json(-9007199254740993LL), json("req-1"), json("\"odd\" \xff id")};
  for (const auto& structured : structured_values) {
    for (const auto& id : ids) {
      for (const bool with_structured : {true, false}) {
        json result{
            {"content", json::array({{{"type", "text"}, {"text", Serialize(structured)}}})}};
        if (with_structured) result["structuredContent"] = structured;
        INFO(Serialize(MakeResult(id, result)));
        CHECK(SerializeToolResult(id, structured, with_structured) ==
              Serialize(MakeResult(id, result)));
      }
    }
  }
}
