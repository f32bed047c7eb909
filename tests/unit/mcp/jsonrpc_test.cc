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
