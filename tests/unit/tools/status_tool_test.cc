#include "src/tools/status_tool.h"

#include <catch2/catch.hpp>

#include "base/version.h"
#include "tests/support/pipe_session.h"

using json = nlohmann::json;

TEST_CASE("tmcra_status reports version, protocol and redacted memory target", "[tools][status]") {
  auto server = std::make_unique<tmcra::mcp::Server>(tmcra::mcp::ServerOptions{});
  tmcra::tools::RegisterStatusTool(server->tools(),
                                   {[](const char* name) -> std::optional<std::string> {
                                     if (std::string(name) == "HOME") return "/home/u";
                                     if (std::string(name) == "TMCRA_API_KEY")
                                       return "tmcra_k.secret-value";
                                     return std::nullopt;
                                   }});
  tmcra::testing::PipeSession s(std::move(server));
  s.Initialize("2025-06-18");
  json r = s.Call(1, "tools/call", {{"name", "tmcra_status"}, {"arguments", json::object()}});
  json status = r["result"]["structuredContent"];
  CHECK(status["version"] == tmcra::kVersion);
  CHECK(status["protocol_version"] == "2025-06-18");
  CHECK(status["memory_mode"] == "remote");
  CHECK(status["memory"]["endpoint"] == "https://api.tmcra.com");
  CHECK(r.dump().find("secret-value") == std::string::npos);
  json bad = s.Call(2, "tools/call", {{"name", "tmcra_status"}, {"arguments", {{"x", 1}}}});
  CHECK(bad["result"]["isError"] == true);
  CHECK(bad["result"]["content"][0]["text"].get<std::string>().find("arguments.x") !=
        std::string::npos);
}
